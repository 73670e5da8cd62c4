"""An agent with four tools of its own, guarded by replan's ReplanMiddleware.

The agent is a plain Microsoft Agent Framework ``Agent``: its tools (``read_config``,
``inspect_parser``, ``check_access``, ``commit_import``) know nothing about replan. The
middleware turns each of the model's tool calls into a proposal and an execution
through the executor, with a real SQLite journal in a temporary directory. The model
is SCRIPTED (``replan.verification.subjects.scripted.ScriptedChatClient``: a fixed script, not a
language model, no network), so every run shows the same four things:

1. a stale call is refused: ``commit_import`` was planned in the same response as
   ``inspect_parser``, whose result changed the evidence before it ran;
2. a failed prerequisite denies the commit: access is Failed;
3. a retried call (the same call id) gets its receipt, and the tool does not run
   again (its real invocations are counted);
4. once the owner confirms access, a fresh ``commit_import`` runs and completes the run;
5. (``run_budget``) a budget ends a run: the provider reports 100 tokens per response
   against ``max_tokens = 500``; past 80% every tool result tells the model so, and the
   call after the limit is refused ``Stopped: BudgetExhausted``.

Run it from the repository root: ``python examples/guarded_agent.py``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import tomllib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):  # run as a script: import this checkout's packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_framework import Agent, FunctionTool
from opentelemetry.trace import TracerProvider

from replan.controller import Controller, EvidenceState, Observation
from replan.controller.agent import FunctionInvokingChatClient, ReplanMiddleware, answer_of
from replan.controller.executor import Executor, Grant
from replan.controller.policy import policy_from_dict
from replan.controller.sqlite_journal import SqliteJournal
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

POLICY = """
[limits]
max_steps = 5

[evidence]
keys = ["parser", "access"]

[resources]
allowed = ["imports/input-A.csv", "imports/input-B.csv"]

[[steps]]
name = "read_config"
resource_argument = "path"

[[steps]]
name = "inspect_parser"
resource_argument = "path"

[[steps]]
name = "check_access"
resource_argument = "path"

[[steps]]
name = "commit_import"
requires = ["parser", "access"]
completes_run = true
resource_argument = "path"
"""

INPUT = "imports/input-A.csv"


class Tools:
    """The agent's own tools. Each counts its real invocations: a replayed call must
    not add to them."""

    def __init__(self) -> None:
        self.invocations: Counter[str] = Counter()
        #: What the access check finds (the owner changes it between the requests).
        self.access = "Failed"
        self.access_version = 0

    def read_config(self, path: str) -> dict[str, Any]:
        self.invocations["read_config"] += 1
        return {"path": path, "delimiter": ",", "table": "imports"}

    def inspect_parser(self, path: str) -> dict[str, Any]:
        self.invocations["inspect_parser"] += 1
        return {"key": "parser", "version": 1, "state": "Passed"}

    def check_access(self, path: str) -> dict[str, Any]:
        self.invocations["check_access"] += 1
        self.access_version += 1
        return {"key": "access", "version": self.access_version, "state": self.access}

    def commit_import(self, path: str, rows: int) -> dict[str, Any]:
        self.invocations["commit_import"] += 1
        return {"imported": rows, "into": "imports"}

    def function_tools(self) -> list[FunctionTool]:
        described = {
            "read_config": "Read the import configuration of a file.",
            "inspect_parser": "Check that the parser reads the file.",
            "check_access": "Check that the import may write the target table.",
            "commit_import": "Import the file's rows into the table.",
        }
        return [
            FunctionTool(name=name, description=text, func=getattr(self, name))
            for name, text in described.items()
        ]


def observe_result(tool: str, arguments: Mapping[str, Any], result: str) -> list[Observation]:
    """The host's adapter: the two inspection tools report evidence in their result
    (the host wrote and ran them, so their result is trusted); the others report none."""
    if tool not in ("inspect_parser", "check_access"):
        return []
    found = json.loads(result)
    return [Observation(found["key"], found["version"], EvidenceState(found["state"]), tool)]


def scripted_model() -> tuple[ScriptedChatClient, list[str]]:
    """The provider: a fixed sequence of replies (each a list of calls, or the final
    text), one per provider call, across both requests."""
    replies: list[Reply] = [
        # request 1
        [FunctionCallRequest("read_config", {"path": INPUT}, call_id="cfg-1")],
        [
            FunctionCallRequest("inspect_parser", {"path": INPUT}, call_id="parser-1"),
            # planned with inspect_parser, before its result: stale when it runs
            FunctionCallRequest("commit_import", {"path": INPUT, "rows": 3}, call_id="commit-1"),
        ],
        [FunctionCallRequest("check_access", {"path": INPUT}, call_id="access-1")],
        [FunctionCallRequest("commit_import", {"path": INPUT, "rows": 3}, call_id="commit-2")],
        "Access is Failed: the import needs its owner.",
        # request 2, after the owner's answer
        # the provider repeats a call it did not see answered: the same call id
        [FunctionCallRequest("read_config", {"path": INPUT}, call_id="cfg-1")],
        [FunctionCallRequest("commit_import", {"path": INPUT, "rows": 3}, call_id="commit-3")],
        "Imported 3 rows.",
    ]
    queue: Iterator[Reply] = iter(replies)
    read: list[str] = []

    def script(results: Sequence[FunctionResult]) -> Reply:
        read.extend(f"{seen.name} -> {seen.result}" for seen in results[len(read) :])
        return next(queue)

    return ScriptedChatClient(script), read


class GuardedAgent(NamedTuple):
    """One run's pieces: the controller, the agent's tools, the guard and the agent
    (a NamedTuple: the tests load this file as a module of no package)."""

    controller: Controller
    tools: Tools
    guard: ReplanMiddleware
    agent: Agent
    journal: SqliteJournal


def guarded_agent(
    policy: str,
    journal_path: Path,
    provider: ScriptedChatClient,
    max_iterations: int,
    tracer_provider: TracerProvider | None = None,
) -> GuardedAgent:
    """A fresh run under ``policy``: the agent's own tools, guarded by the middleware
    with a real SQLite journal at ``journal_path``, answered by ``provider``."""
    controller = Controller(policy_from_dict(tomllib.loads(policy)))
    tools = Tools()
    journal = SqliteJournal.create(journal_path)
    guard = ReplanMiddleware(
        controller,
        executor=Executor(journal),
        grant=Grant(resources=[INPUT], steps=[tool.name for tool in tools.function_tools()]),
        observe_result=observe_result,
        tracer_provider=tracer_provider,
    )
    agent = Agent(
        client=FunctionInvokingChatClient(
            provider, configuration={"max_iterations": max_iterations}
        ),
        name="importer",
        tools=tools.function_tools(),
        middleware=guard.middleware,
    )
    return GuardedAgent(controller, tools, guard, agent, journal)


def _stop_reason(controller: Controller) -> str | None:
    return None if controller.stop_reason is None else str(controller.stop_reason)


async def run(directory: Path, tracer_provider: TracerProvider | None = None) -> dict[str, Any]:
    """Both requests on a fresh run; returns what happened."""
    provider, read = scripted_model()
    setup = guarded_agent(POLICY, directory / "run.journal", provider, 6, tracer_provider)
    try:
        first = await setup.agent.run("Import imports/input-A.csv.")
        # Between the requests the owner grants access; the host records it.
        setup.tools.access = "Passed"
        setup.controller.observe(Observation("access", 2, EvidenceState.PASSED, "owner"))
        second = await setup.agent.run("The owner granted access. Go on.")
    finally:
        setup.journal.close()
    return {
        "calls": [
            (call.tool, call.call_id, call.outcome, call.result) for call in setup.guard.calls
        ],
        "invocations": dict(setup.tools.invocations),
        "answers": [answer_of(first), answer_of(second)],
        "model_read": read,
        "stop_reason": _stop_reason(setup.controller),
        "steps": setup.controller.steps,
        "proposals": setup.controller.proposals,
    }


#: The same agent under a token budget (and enough steps that the budget stops it).
BUDGET_POLICY = POLICY.replace("max_steps = 5", "max_steps = 20\nmax_tokens = 500")


async def run_budget(directory: Path) -> dict[str, Any]:
    """A model that keeps reading the configuration, each response reporting 100
    tokens: the guard charges them (and the wall time it measures) until the run
    stops BudgetExhausted."""
    read: list[str] = []

    def script(results: Sequence[FunctionResult]) -> Reply:
        read.extend(f"{seen.name} -> {seen.result}" for seen in results[len(read) :])
        if read and "BudgetExhausted" in read[-1] and read[-1].startswith("read_config -> Stopped"):
            return "The token budget is spent; stopping here."
        return [FunctionCallRequest("read_config", {"path": INPUT}, call_id=f"cfg-{len(read)}")]

    provider = ScriptedChatClient(script, usage={"total_token_count": 100})
    setup = guarded_agent(BUDGET_POLICY, directory / "budget.journal", provider, 10)
    try:
        answer = await setup.agent.run("Read the configuration.")
    finally:
        setup.journal.close()
    return {
        "model_read": read,
        "answer": answer_of(answer),
        "invocations": dict(setup.tools.invocations),
        "tokens": setup.controller.tokens,
        "stop_reason": _stop_reason(setup.controller),
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="guarded-agent-") as scratch:
        outcome = asyncio.run(run(Path(scratch)))
    for tool, call_id, answer, result in outcome["calls"]:
        print(f"{call_id:<10} {tool:<15} {answer:<19} {result}")
    print(f"real tool invocations: {outcome['invocations']}")
    print(f"stop reason: {outcome['stop_reason']}, steps {outcome['steps']}")
    return 0 if outcome["stop_reason"] == "Completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
