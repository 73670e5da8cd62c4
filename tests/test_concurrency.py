"""One run shared by threads: SerializedController and the agent tools apply calls
one after another, so an id executes once and the step limit holds; a plain
Controller makes no such promise (one caller at a time, CONTRACT.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from replan.controller import Controller, EvidenceState, ExecuteResult, Observation, Plan
from replan.controller.agent import ControllerTools
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.serialized import SerializedController
from replan.verification.engines.campaign.concurrent import switching_often

#: Every step may run at once: nothing waits for evidence.
OPEN = replace(DEFAULT_POLICY, max_steps=2, max_proposals=10**6, no_progress_limit=10**6)


def _together(work: Callable[[int], None], threads: int = 8) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def run(index: int) -> None:
        start.wait()
        try:
            work(index)
        except Exception as error:  # a thread's failure is the test's
            errors.append(error)

    workers = [threading.Thread(target=run, args=(index,)) for index in range(threads)]
    with switching_often():
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return errors


def _race(controller: Controller) -> list[ExecuteResult]:
    """8 threads propose and execute their own plans, then all execute one id."""
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
    answers: list[ExecuteResult] = []

    def work(index: int) -> None:
        for round_ in range(40):
            plan_id = f"p{index}-{round_}"
            plan = Plan(plan_id, controller.plan_revision + 1, 2, "inspect-parser", "input-A")
            controller.propose(plan)
            answers.append(controller.execute(plan_id))

    assert _together(work) == []
    return answers


def test_threads_sharing_a_serialized_run_never_exceed_the_step_limit() -> None:
    for _trial in range(40):
        run = SerializedController(OPEN)
        answers = _race(run)
        assert answers.count(ExecuteResult.EXECUTED) == run.steps <= OPEN.max_steps
        assert len(run._completed) == run.steps


def test_the_agent_tools_serialize_their_calls() -> None:
    for _trial in range(40):
        run = Controller(OPEN)
        tools = ControllerTools(run)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
        executed: list[str] = []

        def work(index: int, run: Controller = run, tools: ControllerTools = tools) -> None:
            for round_ in range(40):
                plan_id = f"p{index}-{round_}"
                tools._propose_plan(plan_id, run.plan_revision + 1, 2, "inspect-parser", "input-A")
                executed.append(tools._execute_step(plan_id))  # noqa: B023 (one list per trial)

        assert _together(work) == []
        assert executed.count("Executed") == run.steps <= OPEN.max_steps


def test_every_declared_event_is_serialized() -> None:
    for op in Controller.events:
        assert getattr(SerializedController, op) is not getattr(Controller, op), op
