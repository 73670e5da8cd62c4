"""The reference model: the declaration itself, run by python-statemachine.

``ReferenceController`` has the same API as ``controller.Controller`` and shares its
data, input checks, guard and action bodies (``controller.run.Run``), but every
dispatch decision is python-statemachine's: the strict ``StateMachine`` semantics pick
the first enabled transition of the current state in declaration order. The campaign
runs both in lockstep, so a generator bug shows up as a divergence. It is slow by
design (one machine instance per run); applications use ``Controller``.
"""

from __future__ import annotations

from typing import Any

from statemachine.transition import Transition

from controller.records import ExecuteResult, Observation, Plan, StopReason
from controller.run import Run
from spec.declaration import Replanning
from spec.model import MachineModel, extract

MODEL: MachineModel = extract(Replanning)


def _label(transition: Transition, event: str) -> tuple[str, str, str, str]:
    """A transition's identity in python-statemachine's terms (source, event, target,
    guard and action specs), matched to the model's index below."""
    assert transition.target is not None
    specs = [str(s.func) for s in transition.cond if not s.is_convention]
    specs += ["|"] + [str(s.func) for s in transition.on if not s.is_convention]
    return (transition.source.id, event, transition.target.id, ",".join(specs))


class ReferenceController(Run):
    """One run, dispatched by an instance of the declaration."""

    __slots__ = ("_fired", "_machine")

    transitions = tuple(t.label for t in MODEL.transitions)

    def __init__(self, policy: Any = None) -> None:
        super().__init__(policy)
        self._fired: int | None = None
        # The model is this object: guards and actions resolve on it by name, and the
        # library writes the declared state's value into ``_declared_state``.
        self._machine = Replanning(model=self, state_field="_declared_state")

    def before_transition(self, transition: Transition, event: Any) -> None:
        """python-statemachine calls this on the model before the chosen transition's
        action, so the trace can name the transition even when the action raises."""
        self._fired = _INDEX[_label(transition, str(event))]

    def _send(self, event: str, argument: Any) -> Any:
        interface = MODEL.interface[event]
        self._fired = None
        try:
            if interface.check is not None:
                getattr(self, interface.check)(argument)
            if isinstance(self._declared_state, StopReason):
                stopped = getattr(self, interface.when_stopped)
                answer = (
                    stopped(argument)
                    if interface.parameter and _takes_argument(stopped)
                    else stopped()
                )
            else:
                kwargs = {interface.parameter: argument} if interface.parameter else {}
                # The library returns the results of the `before` and `on` callbacks of
                # the transition: ours are [before_transition's None, the answer].
                _, answer = self._machine.send(event, **kwargs)
        except Exception as error:
            self._trace.append(
                (
                    event,
                    argument,
                    type(error),
                    self._evidence_revision,
                    self._declared_state,
                    self._fired,
                )
            )
            raise
        self._trace.append(
            (event, argument, answer, self._evidence_revision, self._declared_state, self._fired)
        )
        return answer

    def observe(self, obs: Observation) -> bool:
        answer: bool = self._send("observe", obs)
        return answer

    def propose(self, plan: Plan) -> bool:
        answer: bool = self._send("propose", plan)
        return answer

    def execute(self, plan_id: str) -> ExecuteResult:
        result: ExecuteResult = self._send("execute", plan_id)
        return result

    def cancel(self) -> None:
        self._send("cancel", None)


def _takes_argument(method: Any) -> bool:
    count: int = method.__code__.co_argcount
    return count > 1


_INDEX: dict[tuple[str, str, str, str], int] = {}
for _state in Replanning.states:
    for _transition in _state.transitions:
        for _event in _transition.events:
            _INDEX[_label(_transition, _event.id)] = len(_INDEX)
assert len(_INDEX) == len(MODEL.transitions), "transition labels must be unique"
