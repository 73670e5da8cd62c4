"""Running a campaign: the budget as Hypothesis engines, the failure shrunk and then
replayed through the harness (the code ``replan replay`` runs), the result, and the
transitions the rules missed seeded from the explorer's witnesses.

What a run checks is the machine's (``engines/campaign/machine.py``).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import (
    RuleBasedStateMachine,
    run_state_machine_as_test,
)

from replan.controller.policy import DEFAULT_POLICY, Policy, policy_to_dict
from replan.spec.contract import Contract
from replan.spec.reference import ReferenceController
from replan.verification.core.coverage import Coverage, declared_model, targets_for
from replan.verification.core.harness import (
    Factory,
    Finding,
    Operation,
    pytest_source,
    run_sequence,
)
from replan.verification.core.subject import DEFAULT_IMPLEMENTATION, resolve_implementation
from replan.verification.core.visited import Visited
from replan.verification.engines.campaign.database import example_database
from replan.verification.engines.campaign.machine import (
    DEFAULT_DATABASE,
    DEFAULT_OUT_DIR,
    PROFILES,
    _slug,
    build_machine,
)
from replan.verification.engines.campaign.memory import (
    EXAMPLES_PER_ENGINE,
    engine_budgets,
    engine_seed,
)
from replan.verification.engines.campaign.recorder import Progress, PropertyFailure, Recorder
from replan.verification.runtime.files import write_atomically


@dataclass
class CampaignResult:
    """What a campaign did and found. ``visited`` (its distinct states and (state,
    declared transition) pairs, see ``verification.core.visited``) is what the explorer
    compares against."""

    policy: Policy
    profile: str
    seed: int
    implementation: str
    examples: int
    runs: int
    operations: int
    seconds: float
    coverage: Coverage
    finding: Finding | None = None
    replayed: bool = True  # the finding reproduced when replayed by the harness
    saved: list[Path] = field(default_factory=list)
    visited: Visited = field(default_factory=Visited)
    budget: tuple[int, int] = (0, 0)  # (examples, steps per example)
    #: the example (1-based, in the order Hypothesis ran them) that first failed: 1
    #: when the example database handed back a failure found before
    found_at_example: int | None = None

    #: transitions whose explorer witness seeded extra examples (``seed_missed``)
    seeded: list[str] = field(default_factory=list)
    #: missed transitions whose source state the campaign's own runs revisited
    revisited: list[str] = field(default_factory=list)
    #: the names of the properties checked after every operation
    properties: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.finding is None

    def absorb(self, other: CampaignResult) -> None:
        """Count ``other``'s examples as this campaign's own (same policy)."""
        self.examples += other.examples
        self.runs += other.runs
        self.operations += other.operations
        self.seconds += other.seconds
        self.properties_checked += other.properties_checked
        self.properties = self.properties or other.properties
        for mine, theirs in (
            (self.coverage.transitions, other.coverage.transitions),
            (self.coverage.execute_results, other.coverage.execute_results),
            (self.coverage.stop_reasons, other.coverage.stop_reasons),
            (self.coverage.absorbed, other.coverage.absorbed),
        ):
            mine.update(theirs)
        self.coverage.refused += other.coverage.refused
        self.visited.merge(other.visited)
        if self.finding is None and other.finding is not None:
            self.finding, self.saved, self.replayed = other.finding, other.saved, other.replayed

    @property
    def operations_per_second(self) -> float:
        return round(self.operations / self.seconds, 1) if self.seconds > 0 else 0.0

    properties_checked: int = 0

    @property
    def invariants_checked(self) -> int:
        """Operations checked against the properties (every one of them, each
        against every property of its event and every state invariant)."""
        return self.properties_checked

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "passed": self.passed,
            "profile": self.profile,
            "seed": self.seed,
            "implementation": self.implementation,
            "budget": {"examples": self.budget[0], "steps_per_example": self.budget[1]},
            "examples": self.examples,
            "runs": self.runs,
            "operations": self.operations,
            "seconds": round(self.seconds, 2),
            "operations_per_second": self.operations_per_second,
            "properties": list(self.properties),
            "operations_checked": self.invariants_checked,
            "distinct_states_visited": len(self.visited),
            "distinct_state_transitions_visited": self.visited.transition_count,
            "coverage": self.coverage.to_json(),
            "revisited": self.revisited,
            "seeded_from_explorer": self.seeded,
            "policy": policy_to_dict(self.policy),
            "finding": None,
        }
        if self.finding is not None:
            document["finding"] = {
                **self.finding.to_json(),
                "reproduced_by_replay": self.replayed,
                "found_at_example": self.found_at_example,
                "saved": [str(path) for path in self.saved],
            }
        return document

    def summary_lines(self) -> list[str]:
        lines = [
            f"campaign: {'PASSED' if self.passed else 'FAILED'} - {self.implementation} "
            f"against the reference model, profile {self.profile}, seed {self.seed}",
            f"examples: {self.examples} (budget {self.budget[0]} x {self.budget[1]} steps; "
            f"{self.runs} runs), operations: {self.operations}, "
            f"{self.seconds:.1f} s, {self.operations_per_second:.0f} operations/s",
            f"operations checked: {self.invariants_checked} (the {len(self.properties)} "
            "properties of the contract after every operation, plus lockstep with the "
            "reference model)",
        ]
        if self.revisited:
            lines.append(
                f"revisited: {len(self.revisited)} transitions the rules missed, "
                f"{REVISITS} examples each from the shortest run that entered their state"
            )
        if self.seeded:
            lines.append(
                f"seeded: {len(self.seeded)} transitions the rules missed, "
                f"{SEEDED_EXAMPLES} examples each from the explorer's witness"
            )
        if len(self.visited):
            lines.append(f"distinct states visited: {len(self.visited)}")
        lines += self.coverage.lines()
        return lines


#: Examples run from each explorer witness of a transition the campaign missed.
SEEDED_EXAMPLES = 3


def seed_missed(
    result: CampaignResult,
    reached: Sequence[str],
    witness: Callable[[str], Sequence[Operation] | None],
    **campaign: Any,
) -> list[str]:
    """Close the campaign's gaps against the explorer. Random rules reach a rare
    state (one entered by a single argument of a single event, say) too seldom to
    fire all of its transitions, and the explorer has a shortest run to each. For
    every transition of ``reached`` that ``result`` never fired, run a few campaign
    examples that start with the explorer's ``witness`` of it and continue with the
    rules: the same lockstep and properties check every operation, the prefix
    included. Their counts are merged into ``result``; the first failure becomes its
    finding. Returns the labels seeded (``campaign``: ``run_campaign``'s options)."""
    seeded: list[str] = []
    for label in reached:
        if result.coverage.transitions[label] or not result.passed:
            continue
        prefix = witness(label)
        if prefix is None:
            continue
        extra = run_campaign(result.policy, examples=SEEDED_EXAMPLES, prefix=prefix, **campaign)
        result.absorb(extra)
        seeded.append(label)
    result.seeded = seeded
    return seeded


@contextmanager
def hypothesis_home(directory: str | Path) -> Iterator[None]:
    """Hypothesis' own directory (its example database when none is named, and its
    ``constants`` cache, which it writes even without a database) in ``directory``
    rather than ``.hypothesis/`` wherever the process runs; restored afterwards."""
    from hypothesis import configuration

    previous = getattr(configuration, "__hypothesis_home_directory", None)
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


def _settings(examples: int, steps: int, database: str | Path | None) -> settings:
    """One engine's Hypothesis settings: its share of the examples, the campaign's steps."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=example_database(database),
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
        derandomize=False,
    )


def _run_engine(machine: type[RuleBasedStateMachine], chosen: settings) -> PropertyFailure | None:
    """Run one Hypothesis engine; the failure it shrank and replayed, if any."""
    try:
        with _seed_alone():
            run_state_machine_as_test(machine, settings=chosen)
    except PropertyFailure as caught:  # Hypothesis replayed its minimal example
        return caught
    return None


_SEED_ALONE = threading.Lock()
#: (engines running under ``_seed_alone``, the function it replaced)
_seed_alone_state: list[Any] = [0, None]


@contextmanager
def _seed_alone() -> Iterator[None]:
    """The engine's draws depend on its seed alone, not on which modules this process
    happened to import. Why: Hypothesis mixes into its draws the literals of every
    *local* module loaded (for an editable install or a checkout, every replan module
    imported so far), so the same seed gave other examples in ``replan verify``, in
    ``replan campaign`` and in a worker process that imported less (a Ray task of
    ``verification.engines.campaign.workers``, whose share must be the same share when it runs
    again). Here the local pool is empty; Hypothesis's global constants stay. (A
    module-level function of ``hypothesis.internal.conjecture.providers``, of the
    version pyproject.toml pins; ``tests/test_campaign.py`` checks the independence.)"""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    with _SEED_ALONE:  # engines in several threads: the first in installs, the last out restores
        if _seed_alone_state[0] == 0:
            empty = Constants()
            _seed_alone_state[1] = providers._get_local_constants
            providers._get_local_constants = lambda: empty
            providers.CONSTANTS_CACHE.cache.clear()
        _seed_alone_state[0] += 1
    try:
        yield
    finally:
        with _SEED_ALONE:
            _seed_alone_state[0] -= 1
            if _seed_alone_state[0] == 0:
                providers._get_local_constants = _seed_alone_state[1]
                providers.CONSTANTS_CACHE.cache.clear()


def run_campaign(
    policy: Policy | None = None,
    profile: str = "ci",
    *,
    seed: int | None = None,
    examples: int | None = None,
    steps: int | None = None,
    implementation: str | type[Any] | None = None,
    reference: Factory | None = ReferenceController,
    out_dir: str | Path | None = DEFAULT_OUT_DIR,
    database: str | Path | None = DEFAULT_DATABASE,
    progress: Callable[[Progress], None] | None = None,
    collect_visited: bool = True,
    prefix: Sequence[Operation] = (),
    examples_per_engine: int | None = EXAMPLES_PER_ENGINE,
    contract: Contract | None = None,
    revisit: bool = True,
    entered: dict[str, dict[tuple[Any, ...], tuple[Operation, ...]]] | None = None,
) -> CampaignResult:
    """Run the campaign: ``implementation`` ("module:Class", a class, or None for the
    generated controller) against ``reference`` under ``policy`` with the profile's
    budget (``examples``/``steps`` override it). Deterministic for a ``seed``
    (a random one is chosen and reported when None). On a failure, the shrunk
    counterexample is replayed through the harness and, when ``out_dir`` is given,
    saved there as JSON and as a pytest file. Every example starts with ``prefix``.
    The budget runs as consecutive Hypothesis engines of at most
    ``examples_per_engine`` examples (``verification.engines.campaign.memory``: memory stays
    bounded; None: one engine). ``contract``: the properties checked after every
    operation (default: ``spec.properties.CONTRACT``). ``revisit``: then close the
    gaps from the campaign's own runs (``revisit_missed``); ``entered``: where the
    runs record the shortest operations entering each declared state (shared by a
    campaign and its revisits).

    Long: the budget, the engines and the follow-ups live in helpers; what is left is
    the campaign's public options, documented together, and the one result they fill."""
    policy = policy or DEFAULT_POLICY
    if contract is None:
        from replan.spec.properties import CONTRACT

        contract = CONTRACT
    examples, steps = _budget(profile, examples, steps)
    if seed is None:
        seed = random.SystemRandom().randrange(1_000_000)
    if implementation is None:
        implementation = DEFAULT_IMPLEMENTATION
    path, implementation_class = _implementation(implementation)
    recorder = Recorder(
        Coverage(targets_for(policy)), examples, collect_visited=collect_visited, progress=progress
    )
    if entered is not None:
        recorder.entered = entered
    identity = json.dumps([path, policy_to_dict(policy), *map(str, prefix)], sort_keys=True)

    def machine() -> type[RuleBasedStateMachine]:
        return build_machine(
            policy,
            implementation_class,
            recorder,
            identity=identity,
            reference=reference,
            prefix=prefix,
            contract=contract,
        )

    failure = _run_engines(
        machine, seed, engine_budgets(examples, examples_per_engine), steps, database
    )
    seconds = time.perf_counter() - recorder.started

    result = CampaignResult(
        policy=policy,
        profile=profile,
        seed=seed,
        implementation=path,
        examples=recorder.examples,
        runs=recorder.runs,
        operations=recorder.operations,
        seconds=seconds,
        coverage=recorder.coverage,
        visited=recorder.visited,
        budget=(examples, steps),
        found_at_example=recorder.first_failure_at,
        properties_checked=recorder.properties_checked,
        properties=contract.names,
    )
    if failure is not None:
        _record_failure(result, failure, implementation_class, reference, out_dir, contract)
    elif revisit:
        _revisit_and_judge(
            result,
            recorder.entered,
            seed=seed,
            steps=steps,
            implementation=implementation,  # as given: a finding names it so
            reference=reference,
            out_dir=out_dir,
            database=database,
            collect_visited=collect_visited,
            examples_per_engine=examples_per_engine,
            contract=contract,
        )
    return result


def _budget(profile: str, examples: int | None, steps: int | None) -> tuple[int, int]:
    """(examples, steps): the profile's budget, each overridden where given."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: expected one of {', '.join(PROFILES)}")
    budget = PROFILES[profile]
    examples = budget.examples if examples is None else examples
    steps = budget.steps if steps is None else steps
    if examples < 1 or steps < 1:
        raise ValueError("examples and steps must be at least 1")
    return examples, steps


def _implementation(implementation: str | type[Any]) -> tuple[str, type[Any]]:
    """("module:Class", the class) for an implementation given either way."""
    if isinstance(implementation, str):
        return implementation, resolve_implementation(implementation)
    return f"{implementation.__module__}:{implementation.__qualname__}", implementation


def _run_engines(
    machine: Callable[[], type[RuleBasedStateMachine]],
    seed: int,
    shares: Iterable[int],
    steps: int,
    database: str | Path | None,
) -> PropertyFailure | None:
    """The budget as consecutive Hypothesis engines, each on a fresh ``machine()``
    with its own seed derived from ``seed``: the first failure ends the campaign."""
    for number, share in enumerate(shares):
        failure = _run_engine(
            hypothesis_seed(engine_seed(seed, number))(machine()),
            _settings(share, steps, database),
        )
        if failure is not None:
            return failure
    return None


def _revisit_and_judge(
    result: CampaignResult,
    entered: Mapping[str, Mapping[tuple[Any, ...], Sequence[Operation]]],
    **campaign: Any,
) -> None:
    """Revisit what the rules missed; then ask z3 which of the transitions still
    missed cannot fire at all under this policy (a guard-by-guard reading calls them
    live: an approval step that always completes the run never leaves ``approved``
    for ``idle``). Those are no target of any engine, and the coverage says why."""
    revisit_missed(result, entered, **campaign)
    missed = result.coverage.missed_transitions
    if missed and result.passed:
        from replan.verification.engines.prove.engine import cannot_fire

        contract = campaign.get("contract")
        result.coverage.not_live(cannot_fire(result.policy, missed, contract=contract))


#: Examples run from each rare state a missed transition leaves (``revisit_missed``),
#: and how many rounds of them (a state first entered in a revisit is revisited next).
REVISITS = 3
REVISIT_ROUNDS = 3


def revisit_missed(
    result: CampaignResult,
    entered: Mapping[str, Mapping[tuple[Any, ...], Sequence[Operation]]],
    *,
    seed: int,
    **campaign: Any,
) -> list[str]:
    """Close the campaign's gaps from its own runs: a transition it never fired leaves
    a declared state some run did enter (an approved plan: reached when the evidence,
    the proposal, its execution and the owner's approval line up). Run a few examples
    that start with the shortest operations that entered that state and go on with
    the rules, every operation checked as always; their counts join ``result``, the
    first failure becomes its finding. Derived from the declaration and the campaign's
    own history (no explorer): ``replan campaign`` alone reaches every live
    transition. Returns the transitions revisited."""
    sources = {t.label: t.source for t in declared_model().transitions}
    revisited: list[str] = []
    shared = {state: dict(kinds) for state, kinds in entered.items()}  # revisits add to it
    for _ in range(REVISIT_ROUNDS):
        before = len(revisited)
        for label in list(result.coverage.missed_transitions):
            if not result.passed:
                break
            source = sources.get(label)
            if source not in shared or result.coverage.transitions[label]:
                continue  # no run entered its state yet, or an earlier revisit fired it
            for prefix in list(shared[source].values()):
                extra = run_campaign(
                    result.policy,
                    result.profile,
                    seed=engine_seed(seed, 1_000 + len(revisited)),  # each its own examples
                    examples=REVISITS,
                    prefix=prefix,
                    revisit=False,
                    entered=shared,
                    **campaign,
                )
                result.absorb(extra)
                revisited.append(label)
                if result.coverage.transitions[label] or not result.passed:
                    break
        if len(revisited) == before:
            break
    result.revisited = revisited
    return revisited


def _record_failure(
    result: CampaignResult,
    failure: PropertyFailure,
    implementation: Factory,
    reference: Factory | None,
    out_dir: str | Path | None,
    contract: Contract,
) -> None:
    """Confirm the shrunk failure through the harness (the same code ``replan replay``
    runs), then keep it as a Finding and, with ``out_dir``, as JSON and pytest."""
    report = run_sequence(
        result.policy, failure.operations, implementation, reference, checker=contract.checker
    )
    result.replayed = report.failure is not None
    if report.failure is not None:
        failed_at = report.failed_at if report.failed_at is not None else len(report.results) - 1
        operations = _shorten(
            list(failure.operations[: failed_at + 1]),
            report.failure,
            lambda ops: run_sequence(
                result.policy, ops, implementation, reference, checker=contract.checker
            ),
        )
        report = run_sequence(
            result.policy, operations, implementation, reference, checker=contract.checker
        )
        results, property_name, detail = report.results, report.failure, report.detail
    else:  # kept as found; the report says it did not reproduce
        operations, results = failure.operations, failure.results
        property_name, detail = failure.property, failure.detail
    result.finding = Finding(
        property=property_name,
        policy=result.policy,
        operations=operations,
        results=results,
        message=detail,
        source="campaign",
        extra={"implementation": result.implementation, "seed": result.seed},
    )
    if out_dir is not None:
        save_finding(result, out_dir)


#: The longest run of consecutive operations ``_shorten`` tries to leave out at once.
SHORTEN_WINDOW = 4


def _shorten(
    operations: list[Operation],
    property_name: str,
    replay: Callable[[list[Operation]], Any],
) -> list[Operation]:
    """Leave out runs of consecutive operations while the replay still breaks the same
    property, until none can go. Why after Hypothesis' shrinking: one rule may make
    several operations (``untried`` tries each fresh event of a state in turn), and
    the shrinker removes rules, never an operation inside one; a person reads the
    operations."""
    shortened = True
    while shortened:
        shortened = False
        for width in range(min(SHORTEN_WINDOW, len(operations) - 1), 0, -1):
            start = 0
            while start + width <= len(operations) and len(operations) > 1:
                candidate = operations[:start] + operations[start + width :]
                report = replay(candidate)
                if report.failure == property_name:
                    failed_at = report.failed_at
                    operations = candidate if failed_at is None else candidate[: failed_at + 1]
                    shortened = True
                else:
                    start += 1
    return operations


def save_finding(result: CampaignResult, out_dir: str | Path) -> None:
    """Keep ``result``'s finding in ``out_dir`` as counterexample JSON and a pytest file
    (``replan replay FILE`` runs either)."""
    finding = result.finding
    assert finding is not None
    directory = Path(out_dir)
    stem = f"{_slug(result.implementation.rpartition(':')[2]).lower()}_{_slug(finding.property)}"
    json_path = finding.save(directory / f"campaign_{stem}.json")
    test_path = write_atomically(
        directory / f"test_campaign_{stem}.py",
        pytest_source(
            result.policy,
            finding.property,
            finding.operations,
            name=f"campaign_{stem}",
            implementation=result.implementation,
        ),
    )
    result.saved = [json_path, test_path]
