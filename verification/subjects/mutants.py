"""Deliberately broken controllers, built the way the real one is.

Every verification feature must be shown to catch a broken controller. A mutant here
is the project with one realistic defect in the shared source, as a
``verification.core.subject.Subject``: the declaration transformed (a transition dropped,
an action changed), a ``Run`` subclass whose guard or action body is wrong (the
generator copies bodies from the class it is given, so the broken body is what runs,
and z3 reads it too), a policy default changed, or a generated controller the
generator got wrong (a priority swapped, a negation dropped, a raise left untraced).
``replan verify --mutant NAME`` runs every engine on one; ``replan mutate`` makes
hundreds of such mutants automatically. Nothing here is imported by the controller.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from functools import cache

from replan.controller.policy import DEFAULTS
from replan.controller.records import ExecuteResult, Observation, Plan
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.generator import load_source, render_controller
from replan.spec.model import MachineModel, extract
from replan.verification.core.subject import ImplementationError, Subject
from replan.verification.subjects.mutation import renumbered

Mutant = Subject


def without(model: MachineModel, predicate: Callable[[object], bool]) -> MachineModel:
    """The model with every transition matching ``predicate`` removed (indices and
    priorities renumbered as the extractor would)."""
    return renumbered(model, [t for t in model.transitions if not predicate(t)])


def _declaration() -> MachineModel:
    return extract(Replanning)


def _with_action(condition: str, action: str) -> MachineModel:
    model = _declaration()
    return renumbered(
        model,
        [
            dataclasses.replace(t, action=action) if t.cond == condition else t
            for t in model.transitions
        ],
    )


def _swapped(first: str, second: str) -> MachineModel:
    """The declaration with two adjacent transitions of ``pending --execute-->`` in
    the other order (what a generator with a priority bug would emit)."""
    model = _declaration()
    transitions = list(model.transitions)
    i = next(k for k, t in enumerate(transitions) if t.source == "pending" and t.cond == first)
    j = next(k for k, t in enumerate(transitions) if t.source == "pending" and t.cond == second)
    transitions[i], transitions[j] = transitions[j], transitions[i]
    return renumbered(model, transitions)


def _edited_controller(name: str, edit: Callable[[str], str]) -> type[Run]:
    """The generated controller for the real declaration with its source edited:
    what a generator bug (or a hand edit) leaves in ``controller/_generated.py``."""
    source = render_controller(_declaration())
    edited = edit(source)
    if edited == source:
        raise RuntimeError(f"{name}: the edit no longer applies to the generated source")
    return load_source(edited, name)


def _priority_swapped_controller() -> type[Run]:
    from replan.spec.generator import Generator

    source = Generator(_swapped("steps_exhausted", "not prerequisites_passed"), Run).render()
    return _edited_controller("generator-priority-swapped", lambda _: source + "\n")


def _drop_negation(source: str) -> str:
    return source.replace("elif not (passed.issuperset", "elif (passed.issuperset")


def _raise_untraced(source: str) -> str:
    return re.sub(
        r"(        except Exception as error:\n)            self\._trace\.append\(.*\n",
        r"\1",
        source,
    )


# ---- broken guard and action bodies ------------------------------------------------


class StepLimitOffByOne(Run):
    __slots__ = ()

    def steps_exhausted(self) -> bool:
        """BROKEN: one step too many is allowed."""
        return self._steps > self.policy.max_steps


class ProposalLimitOffByOne(Run):
    __slots__ = ()

    def proposals_exhausted(self) -> bool:
        """BROKEN: one proposal too many is considered."""
        return self._proposals > self.policy.max_proposals


class OlderOverwritesNewer(Run):
    __slots__ = ()

    def older_than_latest(self, obs: Observation) -> bool:
        """BROKEN: never notices an older version, so it overwrites the newer one."""
        return False


class RenumberedIsProgress(Run):
    __slots__ = ()

    def record_renumbered(self, obs: Observation) -> bool:
        """BROKEN: a renumbered same-state observation counts as progress."""
        return self.record_meaningful(obs)


class ReplayCountsStep(Run):
    __slots__ = ()

    def answer_replayed(self) -> ExecuteResult:
        """BROKEN: a replay counts a step."""
        self._steps += 1
        return ExecuteResult.REPLAYED

    def answer_stopped(self, plan_id: str) -> ExecuteResult:
        """BROKEN: a replay on a stopped run counts a step too."""
        if self.id_completed(plan_id):
            self._steps += 1
            return ExecuteResult.REPLAYED
        return ExecuteResult.STOPPED


class StoppedRunRevived(Run):
    __slots__ = ()

    def refuse_stopped(self) -> bool:
        """BROKEN: a call on a stopped run brings it back to life."""
        self._declared_state = "idle"
        self._pending = None
        return False


class UnknownTreatedAsPassed(Run):
    __slots__ = ()

    def prerequisites_passed(self) -> bool:
        """BROKEN: only Failed blocks a commit; Unknown is taken as Passed."""
        return not any(
            self._known.get(key) == "Failed"
            for key in self.policy.requirements[self._pending.step]  # type: ignore[union-attr]
        )


class EqualRevisionAccepted(Run):
    __slots__ = ()

    def plan_outdated(self, plan: Plan) -> bool:
        """BROKEN: a plan whose revision equals plan_revision is accepted."""
        return plan.revision < self._plan_revision


class StepNotCounted(Run):
    __slots__ = ()

    def execute_step(self, plan_id: str) -> ExecuteResult:
        """BROKEN: the step runs but is not counted."""
        self._completed.add(plan_id)
        self._pending = None
        return ExecuteResult.EXECUTED


class ConflictAccepted(Run):
    __slots__ = ()

    def conflicting_content(self, obs: Observation) -> bool:
        """BROKEN: other content under a seen (key, version) is taken as new."""
        return False


class NoProgressLimitLate(Run):
    __slots__ = ()

    def exhausts_no_progress(self) -> bool:
        """BROKEN: the no-progress limit fires one observation late."""
        return self._no_progress + 1 > self.policy.no_progress_limit


class InvalidatedIdNeverReproposed(Run):
    __slots__ = ()

    def plan_completed(self, plan: Plan) -> bool:
        """BROKEN: an id once accepted (invalidated since) is rejected as completed."""
        return plan.id in self._accepted or plan.id in self._completed


class StaleCheckRelaxed(Run):
    __slots__ = ()

    def evidence_stale(self, plan: Plan) -> bool:
        """BROKEN: only an older evidence revision is stale; a future one passes."""
        return plan.evidence_revision < self._evidence_revision


class DuplicatesNotCounted(Run):
    __slots__ = ()

    def counts_duplicates(self) -> bool:
        """BROKEN: duplicate deliveries are never counted, whatever the policy says."""
        return False


class StoppedRunForgetsReplays(Run):
    __slots__ = ()

    def answer_stopped(self, plan_id: str) -> ExecuteResult:
        """BROKEN: on a stopped run a completed id answers Stopped, not Replayed."""
        return ExecuteResult.STOPPED


class SupersededIdForgotten(Run):
    __slots__ = ()

    def accept_plan(self, plan: Plan) -> bool:
        """BROKEN: a superseded plan's id is forgotten (it answers UnknownPlan, not
        StalePlan)."""
        self._proposals += 1
        self._pending = plan
        self._plan_revision = plan.revision
        self._accepted = set()
        self._accepted.add(plan.id)
        return True


class InvalidationKeepsPending(Run):
    __slots__ = ()

    def record_meaningful(self, obs: Observation) -> bool:
        """BROKEN: new evidence leaves the pending plan in place."""
        key = obs.key
        self._contents[(key, obs.version)] = (obs.state, obs.source)
        self._latest_version[key] = obs.version
        self._known[key] = obs.state
        if obs.state == "Passed":
            self._passed.add(key)
        else:
            self._passed.discard(key)
        self._evidence_revision += 1
        self._no_progress = 0
        return True


def _body_mutant(name: str, description: str, broken: type[Run]) -> Subject:
    """The real declaration generated over a ``Run`` subclass with one broken body."""
    return Subject(name, description, bodies=broken)


_BODY_MUTANTS = (
    (
        "renumbered-unknown-is-progress",
        "a same-state observation under a higher version raises the evidence revision",
        RenumberedIsProgress,
    ),
    ("step-limit-off-by-one", "execute allows max_steps + 1 steps", StepLimitOffByOne),
    ("replay-counts-a-step", "a Replayed execution still counts a step", ReplayCountsStep),
    (
        "stopped-run-revived",
        "an observation or proposal on a stopped run revives it",
        StoppedRunRevived,
    ),
    (
        "older-overwrites-newer",
        "an older version overwrites the newer record of a key",
        OlderOverwritesNewer,
    ),
    (
        "unknown-treated-as-passed",
        "the commit gate lets Unknown prerequisites through (only Failed blocks)",
        UnknownTreatedAsPassed,
    ),
    (
        "equal-revision-accepted",
        "a proposal whose revision equals plan_revision is accepted",
        EqualRevisionAccepted,
    ),
    ("step-not-counted", "an executed step is not counted", StepNotCounted),
    (
        "conflict-accepted-silently",
        "a conflicting observation is silently accepted",
        ConflictAccepted,
    ),
    (
        "no-progress-limit-one-late",
        "the no-progress limit fires one observation late",
        NoProgressLimitLate,
    ),
    (
        "invalidated-id-never-reproposed",
        "an invalidated id can no longer be re-proposed",
        InvalidatedIdNeverReproposed,
    ),
    (
        "stale-check-relaxed",
        "a plan citing a future evidence revision is accepted",
        StaleCheckRelaxed,
    ),
    (
        "proposal-limit-off-by-one",
        "propose considers max_proposals + 1 proposals",
        ProposalLimitOffByOne,
    ),
    (
        "duplicates-not-counted",
        "duplicate deliveries are not counted although the policy counts them",
        DuplicatesNotCounted,
    ),
    (
        "stopped-run-forgets-replays",
        "a completed id on a stopped run answers Stopped instead of Replayed",
        StoppedRunForgetsReplays,
    ),
    (
        "superseded-id-forgotten",
        "a superseded plan's id is forgotten, so executing it is UnknownPlan, not StalePlan",
        SupersededIdForgotten,
    ),
    (
        "invalidation-keeps-pending",
        "new evidence does not invalidate the pending plan",
        InvalidationKeepsPending,
    ),
)

MUTANTS: dict[str, Subject] = {
    m.name: dataclasses.replace(m, importable=f"{__name__}:{m.name.replace('-', '_')}")
    for m in (
        Subject(
            "stale-plan-check-removed",
            "propose accepts a plan citing an old evidence revision",
            build_model=lambda: without(_declaration(), lambda t: t.cond == "evidence_stale"),  # type: ignore[attr-defined]
            reference_kind=None,
        ),
        *(_body_mutant(*entry) for entry in _BODY_MUTANTS),
        Subject(
            "malformed-proposal-uses-no-slot",
            "a malformed proposal is refused without using a slot",
            build_model=lambda: _with_action("plan_malformed", "refuse_plan"),
            reference_kind=None,
        ),
        Subject(
            "max-proposals-defaults-to-max-steps",
            "a policy without max_proposals gets max_steps proposals, not 2 * max_steps",
            defaults={**DEFAULTS, "proposals_per_step": 1},
        ),
        Subject(
            "generator-priority-swapped",
            "the generated execute checks the prerequisites before the step limit",
            build_controller=_priority_swapped_controller,
        ),
        Subject(
            "generator-negation-dropped",
            "the generated execute dropped the negation of prerequisites_passed",
            build_controller=lambda: _edited_controller(
                "generator-negation-dropped", _drop_negation
            ),
        ),
        Subject(
            "raise-leaves-no-trace",
            "a call that raises leaves no trace record",
            build_controller=lambda: _edited_controller("raise-leaves-no-trace", _raise_untraced),
        ),
    )
}


@cache
def mutant_controller(name: str) -> type[Run]:
    """The broken controller class named ``name`` (see ``MUTANTS``)."""
    return MUTANTS[name].controller


def importable_name(name: str) -> str:
    """The attribute of this module that is the mutant ``name``'s controller class, so
    a mutant can be named as ``verification.subjects.mutants:<attribute>`` wherever an
    implementation is given as "module:Class" (a saved counterexample, its pytest
    file, ``replan replay --implementation``)."""
    return name.replace("-", "_")


def __getattr__(attribute: str) -> type[Run]:
    """``from replan.verification.subjects.mutants import step_limit_off_by_one`` builds
    that mutant."""
    name = attribute.replace("_", "-")
    if name in MUTANTS:
        return mutant_controller(name)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def mutant_implementation(name: str) -> str:
    """The "module:Class" path of the broken controller ``name`` (see ``MUTANTS``)."""
    if name not in MUTANTS:
        raise ImplementationError(f"{name!r} is not a mutant (known: {', '.join(sorted(MUTANTS))})")
    return f"replan.verification.subjects.mutants:{importable_name(name)}"
