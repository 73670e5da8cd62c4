"""replan's pytest plugin: check your own policy in your own test suite.

Installed with the package (a ``pytest11`` entry point, as Hypothesis ships its own),
so a project that depends on replan gets it with no configuration. A five-line test:

    import pytest

    @pytest.mark.replan(policy="policy.toml")
    def test_our_policy_keeps_the_contract(replan_campaign):
        replan_campaign()

Fixtures:

  replan_policy      the policy under test: the ``replan`` marker's ``policy=``, else
                     ``--replan-policy FILE``, else the ini option ``replan_policy``,
                     else replan's default policy
  replan_controller  a fresh ``Controller`` under that policy
  replan_campaign    a callable: runs the lockstep campaign (every property of the
                     contract after every operation) and the commit equivalence with
                     the fixed workflow on that policy, and fails the test with the
                     counterexample and the command that shows it again

A relative policy path, in the marker as on the command line or in the ini file, is
read from pytest's rootdir, as pytest reads the paths of its own options (a marker's
path that is not there but is next to the test file is read from there: projects
that wrote it so keep working). The marker takes ``policy``, ``profile`` (ci, default,
thorough), ``seed``,
``examples`` and ``steps``. The Hypothesis profiles ``replan-ci``, ``replan-default``
and ``replan-thorough`` are registered on load: ``pytest --hypothesis-profile
replan-thorough`` also sets the campaign's budget. A failure's counterexample is
attached to the test with ``record_property``, so it reaches the JUnit XML.

Why a plugin and not a helper function: the policy is project configuration (an ini
option, a command-line flag), the budget follows the project's Hypothesis profile, and
the counterexample belongs in the project's own test report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from replan.controller.policy import Policy

#: The campaign's budgets (verification.engines.campaign.machine.PROFILES) as Hypothesis profiles.
#: Stated here, not imported, so loading the plugin does not load the campaign.
HYPOTHESIS_PROFILES = {"ci": (200, 60), "default": (600, 80), "thorough": (3000, 100)}
PREFIX = "replan-"


def _register_hypothesis_profiles() -> None:
    for name, (examples, steps) in HYPOTHESIS_PROFILES.items():
        settings.register_profile(
            PREFIX + name, max_examples=examples, stateful_step_count=steps, deadline=None
        )


_register_hypothesis_profiles()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replan", "replan: check a policy against the contract")
    group.addoption(
        "--replan-policy",
        metavar="FILE",
        help="the policy the replan fixtures use (default: the ini option replan_policy, "
        "else replan's default policy)",
    )
    group.addoption(
        "--replan-out",
        metavar="DIR",
        help="where replan_campaign saves a counterexample (default: the test's tmp_path)",
    )
    parser.addini("replan_policy", "the policy file the replan fixtures use", default="")
    parser.addini("replan_profile", "the campaign budget: ci, default or thorough", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replan(policy=None, profile=None, seed=None, examples=None, steps=None): the "
        "policy and budget of replan's fixtures for this test",
    )


@dataclass(frozen=True)
class Settings:
    """What one test asked for, from its marker, the command line and the ini file."""

    policy_path: Path | None
    profile: str
    seed: int
    examples: int | None
    steps: int | None


def _settings(request: pytest.FixtureRequest) -> Settings:
    marker = request.node.get_closest_marker("replan")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    unknown = set(options) - {"policy", "profile", "seed", "examples", "steps"}
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.replan: unknown argument(s) {sorted(unknown)}")
    config = request.config
    policy = (
        options.get("policy")
        or config.getoption("--replan-policy")
        or config.getini("replan_policy")
    )
    policy_path = None
    if policy:
        policy_path = Path(policy)
        if not policy_path.is_absolute():
            policy_path = config.rootpath / policy_path
            beside = request.path.parent / policy
            if options.get("policy") and not policy_path.exists() and beside.exists():
                policy_path = beside  # written relative to the test file: still found
    profile = options.get("profile") or config.getini("replan_profile") or _hypothesis_profile()
    if profile not in HYPOTHESIS_PROFILES:
        raise pytest.UsageError(
            f"replan profile {profile!r}: expected one of {', '.join(HYPOTHESIS_PROFILES)}"
        )
    return Settings(
        policy_path=policy_path,
        profile=profile,
        seed=int(options.get("seed", 0)),
        examples=options.get("examples"),
        steps=options.get("steps"),
    )


def _hypothesis_profile() -> str:
    """The campaign budget that follows ``--hypothesis-profile replan-NAME``."""
    current = settings._current_profile  # Hypothesis' own record of the loaded profile
    if isinstance(current, str) and current.startswith(PREFIX):
        return current.removeprefix(PREFIX)
    return "ci"


@pytest.fixture
def replan_policy(request: pytest.FixtureRequest) -> Policy:
    """The policy under test (see the module docstring for where it comes from)."""
    from replan.controller.policy import DEFAULT_POLICY, load_policy
    from replan.controller.records import PolicyError

    path = _settings(request).policy_path
    if path is None:
        return DEFAULT_POLICY
    if not path.exists():
        pytest.fail(
            f"replan policy {path}: no such policy file (relative to the rootdir "
            f"{request.config.rootpath}, as pytest reads its own options)",
            pytrace=False,
        )
    try:
        return load_policy(path)
    except PolicyError as error:
        pytest.fail(f"replan policy {path}: {error}", pytrace=False)


@pytest.fixture
def replan_controller(replan_policy: Policy) -> Iterator[Any]:
    """A fresh generated controller under ``replan_policy``."""
    from replan.controller import Controller

    yield Controller(replan_policy)


@pytest.fixture
def replan_campaign(
    request: pytest.FixtureRequest,
    replan_policy: Policy,
    record_property: Callable[[str, object], None],
    tmp_path: Path,
) -> Callable[..., Any]:
    """Run the contract's checks on ``replan_policy``; fail the test on a violation.

    Returns a callable (keyword overrides: ``profile``, ``seed``, ``examples``,
    ``steps``) so the test decides when the campaign runs and can read its result
    (a ``verification.engines.campaign.run.CampaignResult``) when it passes. The commit
    equivalence runs first: it takes milliseconds, the campaign seconds."""
    chosen = _settings(request)
    out = request.config.getoption("--replan-out")

    def run(**overrides: Any) -> Any:
        from replan.verification.pipeline.policy_check import check_policy

        failure, result = check_policy(
            replan_policy,
            policy_path=chosen.policy_path,
            profile=overrides.get("profile", chosen.profile),
            seed=overrides.get("seed", chosen.seed),
            examples=overrides.get("examples", chosen.examples),
            steps=overrides.get("steps", chosen.steps),
            out_dir=Path(out) if out else tmp_path,
        )
        if result is not None:
            record_property("replan_profile", result.profile)
            record_property("replan_operations", result.operations)
        if failure is not None:
            record_property("replan_property", failure.property)
            record_property("replan_counterexample", failure.counterexample)
            record_property("replan_command", failure.command)
            pytest.fail(failure.text(), pytrace=False)
        return result

    return run
