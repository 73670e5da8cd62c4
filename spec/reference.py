"""The reference model: the declaration itself, run by python-statemachine.

``ReferenceController`` has the same API as ``controller.Controller`` and shares its
data, input checks, guard and action bodies (``controller.run.Run``), but every
dispatch decision is python-statemachine's: the strict ``StateMachine`` semantics pick
the first enabled transition of the current state in declaration order. The campaign
runs both in lockstep, so a generator bug shows up as a divergence. It is slow by
design (python-statemachine dispatches every event, and building its machine costs
more than a whole run: the campaign builds one per engine and ``reset``s it for every
run); applications use ``Controller``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from statemachine.engines.sync import SyncEngine
from statemachine.transition import Transition

from replan.controller.records import StopReason
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.model import MachineModel, extract

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
    events: ClassVar[Mapping[str, tuple[str | None, str | None, str]]] = {
        e: (i.parameter, i.parameter_type, i.caller) for e, i in MODEL.interface.items()
    }

    def __init__(self, policy: Any = None) -> None:
        super().__init__(policy)
        self._fired: int | None = None
        # The model is this object: guards and actions resolve on it by name, and the
        # library writes the declared state's value into ``_declared_state``.
        self._machine = Replanning(model=self, state_field="_declared_state")

    def reset(self) -> None:
        """Make this instance a fresh run under the same policy, as
        ``ReferenceController(policy)`` would be, without building a new machine.

        Why: building one resolves every guard and action of the declaration on the
        model (python-statemachine's callback registry, about 8 ms), which cost the
        campaign more than all its operations did when it built one per run. The
        registry holds this object's own bound methods, so it stays valid: the run's
        fields are re-initialised (the declared state back to the initial value,
        which python-statemachine reads from the model on every event), and the
        machine gets a new engine, as its own ``__setstate__`` gives a restored one
        (entering a final state stops an engine for good, and an action that raised
        leaves its queues cleared; a new one has neither). ``start`` then activates
        nothing: the model's state is already set. (The engine is python-statemachine's
        own attribute, of the version pyproject.toml pins; tests/test_campaign_throughput.py
        checks a reset instance against a fresh one.)"""
        super().__init__(self.policy)  # the bodies' class's (a subject's own, if any)
        self._fired = None
        machine = self._machine
        machine._engine = SyncEngine(machine)  # what ``_get_engine`` gives a sync machine
        machine._engine.start()

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


def _event_method(event: str, parameter: str | None) -> Any:
    """``Controller.<event>``'s counterpart: one call of the declaration's event."""
    if parameter is None:

        def call(self: ReferenceController) -> Any:
            return self._send(event, None)

    else:

        def call(self: ReferenceController, argument: Any) -> Any:  # type: ignore[misc]
            return self._send(event, argument)

    call.__name__ = call.__qualname__ = event
    call.__doc__ = f"The declaration's ``{event}``, dispatched by python-statemachine."
    return call


# One method per declared event, read from the declaration's interface (a new event
# needs no edit here).
for _event, _interface in MODEL.interface.items():
    setattr(ReferenceController, _event, _event_method(_event, _interface.parameter))


def _takes_argument(method: Any) -> bool:
    count: int = method.__code__.co_argcount
    return count > 1


_INDEX: dict[tuple[str, str, str, str], int] = {}
for _state in Replanning.states:
    for _transition in _state.transitions:
        for _event in _transition.events:
            _INDEX[_label(_transition, _event.id)] = len(_INDEX)
assert len(_INDEX) == len(MODEL.transitions), "transition labels must be unique"
