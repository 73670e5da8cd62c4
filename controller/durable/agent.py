"""The guarded agent loop as a DBOS workflow: ``ReplanMiddleware`` on any Agent
Framework agent, inside an async ``@DBOS.workflow()``, so that a crash or a redeploy
in the middle of an agent's run loses no call and runs no tool twice.

DBOS recovers a workflow by running it again from its start, reading each step's
recorded result instead of running it again. Everything else must then come out the
same, so ``DurableGuard`` makes each thing the guard reads from the world a step:

- **the provider's reply** (``_round_trip``): one step per provider call, holding the
  response as the SDK serialises it and its wall time. A recovered run hands the
  agent the recorded reply; the model is not asked again, so it cannot answer
  differently the second time;
- **whether a call id is a retry** (``_journal_knows``): a step, because the journal
  of a recovered run already holds the calls the first attempt executed later on;
- **the tool** (``_perform``): the effect step of ``controller.durable.dbos``, named by
  the operation digest, with the intent, the tool and the receipt in one transaction.
  The model reads the receipt's result on the first run and on a recovered one alike.
  A tool that writes in the run's database through ``effect_step().connection``
  writes in that transaction, so it happens exactly once; a tool with an effect
  elsewhere runs again if the process dies after it and before the commit (give it
  an idempotency key: ``effect_step().operation.digest()``).

The controller calls between them are workflow code: ``DurableRun``'s
``LoggedController`` checks each against the run log, so a recovered run that did
not re-derive its log stops with ``RunLogError`` instead of going on differently.

Streaming requests are not recorded (a stream's updates would need a step each);
run the agent with ``stream=False``, the SDK's default.

Leaves to others: the guard's decisions (``controller.middleware``), the effect step
and the tables (``controller.durable.dbos``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent_framework import ChatContext, ChatResponse, FunctionInvocationContext
from dbos import DBOS
from opentelemetry.trace import TracerProvider

from replan.controller.durable.dbos import AsyncStepExecutor, DurableRun
from replan.controller.executor import AsyncEffect, Operation, Outcome, Performed, perform_async
from replan.controller.middleware import (
    ObserveResult,
    ReplanMiddleware,
    ResponseUsage,
    ToolUsage,
    _amount,
    _restored,
    reported_tokens,
)


class DurableGuard(ReplanMiddleware):
    """``ReplanMiddleware`` for a ``DurableRun``: the run's logged controller, its
    journal and grant, and every read of the world a DBOS step (see the module
    docstring). Install ``guard.middleware`` on the agent, as for the plain guard."""

    def __init__(
        self,
        run: DurableRun,
        *,
        observe_result: ObserveResult | None = None,
        tracer_provider: TracerProvider | None = None,
        tool_usage: ToolUsage | None = None,
        response_usage: ResponseUsage = reported_tokens,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``clock`` is read inside the provider and effect steps only, so the wall
        times charged are recorded with them."""
        super().__init__(
            run.controller,
            executor=run.executor,
            grant=run.grant,
            observe_result=observe_result,
            tracer_provider=tracer_provider,
            tool_usage=tool_usage,
            response_usage=response_usage,
            clock=clock,
        )
        self.durable = run
        self._provider_calls = 0

    async def _round_trip(
        self, context: ChatContext, call_next: Callable[[], Awaitable[None]]
    ) -> int:
        self._provider_calls += 1
        name = f"provider call {self._provider_calls}"
        self.durable._boundary(f"before {name}")
        recorded: dict[str, Any] = await DBOS.run_step_async(
            {"name": name}, self._ask_provider, context, call_next
        )
        self.durable._boundary(f"after {name}")
        context.result = ChatResponse.from_dict(recorded["response"])
        return int(recorded["elapsed_ms"])

    async def _ask_provider(
        self, context: ChatContext, call_next: Callable[[], Awaitable[None]]
    ) -> dict[str, Any]:
        """The body of a provider step: the reply as the SDK serialises it, and the
        round trip's wall time (both recorded)."""
        started = self.clock()
        await call_next()
        elapsed = _amount((self.clock() - started) * 1000)
        response = context.result
        if not isinstance(response, ChatResponse):
            raise TypeError(
                "a durable guard records non-streaming replies only: run the agent "
                "with stream=False"
            )
        return {"response": response.to_dict(), "elapsed_ms": elapsed}

    async def _journal_knows(self, call_id: str) -> bool:
        self.durable._boundary("before journal lookup")
        known: bool = await DBOS.run_step_async(
            {"name": f"journal knows {call_id}"}, self._journal_holds, call_id
        )
        self.durable._boundary("after journal lookup")
        return known

    def _journal_holds(self, call_id: str) -> bool:
        return self.executor.journal.knows(call_id)

    async def _perform(
        self, operation: Operation, context: FunctionInvocationContext, effect: AsyncEffect
    ) -> Performed:
        self.durable._boundary("before execute")
        performed = await perform_async(
            self.controller, AsyncStepExecutor(self.durable), operation, self.grant, effect
        )
        self.durable._boundary("after execute")
        execution = performed.execution
        if (
            execution is not None
            and execution.outcome is Outcome.EXECUTED
            and execution.receipt is not None
        ):
            # what the model reads is the receipt's, whether the tool ran in this
            # attempt or in one before a crash
            context.result = _restored(execution.receipt.result)
        return performed


__all__ = ["DurableGuard"]
