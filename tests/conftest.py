"""Shared test fixtures: both implementations, and small record builders.

Every contract test takes the ``implementation`` fixture, so it runs once against the
generated ``controller.Controller`` and once against ``spec.reference.
ReferenceController`` (the declaration run by python-statemachine). Keep this file
generic: other test modules import the builders (``from conftest import obs, plan``).
"""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replan.controller import Controller, EvidenceState, Observation, Plan
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.run import Run
from replan.spec.properties import CONTRACT
from replan.spec.reference import ReferenceController
from replan.spec.vocabulary import Property
from replan.verification.core import harness
from replan.verification.core.domains import Domains
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.translate.kernel_cache import ENVIRONMENT

IMPLEMENTATIONS: dict[str, type[Run]] = {
    "generated": Controller,
    "reference": ReferenceController,
}

PASSED = EvidenceState.PASSED
FAILED = EvidenceState.FAILED
UNKNOWN = EvidenceState.UNKNOWN


@pytest.fixture(params=list(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> type[Run]:
    """The controller class under test: called with an optional policy, it is one run."""
    chosen: type[Run] = IMPLEMENTATIONS[request.param]
    return chosen


def obs(key: str, version: int, state: EvidenceState, source: str = "fixture") -> Observation:
    """An observation (positional order of the record, with a default source)."""
    return Observation(key, version, state, source)


def plan(
    id: str,
    revision: int,
    evidence_revision: int,
    step: str = "inspect-parser",
    resource: str = "input-A",
) -> Plan:
    """A plan for the default policy's step and resource unless told otherwise."""
    return Plan(id, revision, evidence_revision, step, resource)


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """The snapshot fields that differ between two snapshots."""
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


@pytest.fixture(scope="session", autouse=True)
def kernel_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The kernels the commands generate are kept for the session (shared by its
    workers), never in the checkout's out/."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ.setdefault(ENVIRONMENT, str(shared / "kernel-cache"))


def session_kernel_cache() -> Any:
    """The session's kernel cache (``kernel_cache_of_the_session``): a test about what
    a kernel finds, not about generating it, takes its kernel from there."""
    from replan.verification.translate.kernel_cache import KernelCache

    return KernelCache(Path(os.environ[ENVIRONMENT]))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "graphviz: the test draws with Graphviz `dot` (skipped when it is absent)"
    )


#: The files that take half a minute or more (each runs whole engines: verify, the
#: mutation matrix, the kill-and-restart matrix, a Ray cluster), longest first.
#: pytest-xdist (`--dist loadfile --no-loadscope-reorder`: pyproject.toml's addopts)
#: hands out files in collection order, so starting these first keeps the last
#: minutes from running one long file on one core. (Its default order, the files with
#: the most tests first, would start them last.) The kill-and-restart matrices come
#: first of all: they fork a worker per kill from the test process, and forking a
#: process that earlier tests have grown costs more.
LONG_FILES = (
    "test_durable_crash.py",
    "test_mutate.py",
    "test_durable_crash_postgres.py",
    "test_spin_engine.py",
    "test_kernel_engine.py",
    "test_first_policy.py",
    "test_bench.py",
    "test_wheel_and_action.py",
    "test_scale.py",
    "test_verify_boundary.py",
    "test_campaign.py",
    "test_explore_cli.py",
    "test_campaign_mutants.py",
    "test_verify.py",
    "test_campaign_coverage.py",
    "test_docs.py",
    "test_verify_catches_mutants.py",
    "test_kernel_cache.py",
    "test_approval.py",
    "test_sarif.py",
    "test_boundary_mutation.py",
    "test_explore.py",
    "test_campaign_memory.py",
    "test_budgets.py",
    "test_prove.py",
    "test_mutation_matrix.py",
    "test_pytest_plugin.py",
    "test_review_browser.py",
    "test_boundary_check.py",
)


#: The tests the quick lane (``python -m pytest -m "not slow"``) leaves out: each took
#: two seconds or more in a measured run of the whole suite (``--durations``), by node
#: id without parameters. Each file keeps at least one test in the quick lane (its
#: cheapest), so every module still runs there, but test_durable_crash_postgres.py, whose
#: every test needs its database server; CI runs everything. A name here that
#: its file no longer has is an error, so the list cannot rot unseen.
SLOW_TESTS = frozenset(
    {
        # test_approval.py
        "tests/test_approval.py::test_verify_strict_holds_on_the_approval_policy",
        # test_bench.py
        "tests/test_bench.py::test_an_episode_that_does_not_complete_is_caught",
        "tests/test_bench.py::test_json_flag_prints_the_document",
        "tests/test_bench.py::test_memory_pass_counts_what_an_episode_allocates",
        "tests/test_bench.py::test_one_and_two_workers_are_measured_side_by_side_without_spin",
        "tests/test_bench.py::test_quick_run_writes_json_with_all_three_implementations",
        "tests/test_bench.py::test_samples_are_interleaved_round_by_round",
        "tests/test_bench.py::test_the_campaign_is_measured_against_a_bare_lockstep_machine",
        "tests/test_bench.py::test_the_kernel_is_measured_beside_the_explorer_with_the_same_counts",
        "tests/test_bench.py::test_generating_apart_is_measured_against_in_turn_on_the_same_domains",
        "tests/test_bench.py::test_the_table_shows_every_implementation_ratio_and_goal",
        "tests/test_bench.py::test_tool_measures_only_the_named_tools",
        # test_boundary_bad_input.py
        "tests/test_boundary_bad_input.py::test_replan_boundary_replays_no_file_that_is_not_a_counterexample",
        # test_boundary_check.py
        "tests/test_boundary_check.py::test_a_counterexample_is_json_and_says_what_it_shows",
        "tests/test_boundary_check.py::test_each_seeded_bug_is_caught_and_named",
        "tests/test_boundary_check.py::test_the_explorer_catches_a_model_that_reruns_an_in_doubt_call",
        "tests/test_boundary_check.py::test_the_real_boundary_holds_every_rule",
        # test_boundary_mutation.py
        "tests/test_boundary_mutation.py::test_the_boundarys_own_operators_are_killed_naming_the_rule",
        "tests/test_boundary_mutation.py::test_the_command_judges_a_boundary_mutant_and_counts_it_per_file",
        # test_budgets.py
        "tests/test_budgets.py::test_verify_strict_holds_on_the_budget_policy",
        # test_campaign.py
        "tests/test_campaign.py::test_ci_campaign_holds_with_three_prerequisites_and_two_steps",
        "tests/test_campaign.py::test_ci_campaign_holds_without_counting_duplicates_and_with_two_resources",
        "tests/test_campaign.py::test_ci_campaign_on_the_default_policy_holds_and_reaches_every_live_target",
        "tests/test_campaign.py::test_the_same_seed_gives_the_same_campaign_whatever_else_is_imported",
        "tests/test_campaign.py::test_the_same_seed_gives_the_same_operations_and_coverage",
        # test_campaign_memory.py
        "tests/test_campaign_memory.py::test_a_campaign_of_several_engines_counts_all_and_is_deterministic_for_a_seed",
        "tests/test_campaign_memory.py::test_fingerprinted_visits_give_the_explorer_comparison_the_same_figures",
        # test_campaign_mutants.py
        "tests/test_campaign_mutants.py::test_a_failure_found_once_is_retried_first",
        "tests/test_campaign_mutants.py::test_the_campaign_catches_the_broken_controller",
        "tests/test_campaign_mutants.py::test_the_generated_pytest_files_fail_on_the_broken_controllers",
        # test_check_compiler.py
        "tests/test_check_compiler.py::test_compiled_checks_name_the_failures_each_property_names_alone",
        # test_cli_edges.py
        "tests/test_cli_edges.py::test_every_output_is_dash_o_and_the_old_spellings_still_work_for_a_release",
        # test_concurrent_campaign.py
        "tests/test_concurrent_campaign.py::test_threads_sharing_a_serialized_run_keep_every_property_on_its_history",
        # test_conform.py
        "tests/test_conform.py::test_a_controller_trace_conforms_and_an_edited_one_does_not",
        "tests/test_conform.py::test_a_log_edited_by_hand_diverges_at_its_position",
        "tests/test_conform.py::test_a_recorded_run_log_conforms",
        "tests/test_conform.py::test_a_trace_with_an_unknown_call_or_a_refused_observation_reads_right",
        "tests/test_conform.py::test_one_run_of_a_dbos_database_conforms_and_an_edited_one_diverges",
        "tests/test_conform.py::test_what_is_no_run_log_is_a_one_line_error",
        # test_crash.py
        "tests/test_crash.py::test_every_fault_after_a_kill_is_refused_or_recovered_never_rerun",
        # test_diagram.py
        "tests/test_diagram.py::test_coverage_draws_a_missed_transition_dashed",
        # test_diagram_cli.py
        "tests/test_diagram_cli.py::test_without_graphviz_svg_exits_2_with_one_line_and_mermaid_still_works",
        # test_docs.py
        "tests/test_docs.py::test_a_runnable_example_runs_as_written",
        "tests/test_docs.py::test_the_site_builds_strictly",
        # test_durable.py
        "tests/test_durable.py::test_threads_sharing_a_logged_run_log_it_in_the_order_it_ran",
        # test_durable_crash.py
        "tests/test_durable_crash.py::test_a_provider_reply_read_again_after_a_restart_is_caught",
        "tests/test_durable_crash.py::test_an_effect_outside_its_transaction_is_caught_running_twice",
        "tests/test_durable_crash.py::test_every_kill_of_a_guarded_agent_on_sqlite_ends_as_the_uninterrupted_run",
        "tests/test_durable_crash.py::test_every_kill_on_sqlite_ends_as_the_uninterrupted_run",
        # test_durable_crash_postgres.py
        "tests/test_durable_crash_postgres.py::test_every_kill_on_postgres_ends_as_the_uninterrupted_run",
        # test_executor_campaign.py
        "tests/test_executor_campaign.py::test_a_failure_comes_with_a_shrunk_program_to_paste",
        "tests/test_executor_campaign.py::test_real_executor_holds_every_invariant",
        # test_executor_workloads.py
        "tests/test_executor_workloads.py::test_each_workload_episode_completes",
        # test_explore.py
        "tests/test_explore.py::test_a_sharded_search_finds_a_state_invariant_broken_on_another_shard",
        "tests/test_explore.py::test_a_sharded_search_keeps_the_serial_graph_and_depths",
        "tests/test_explore.py::test_campaign_comparison_gives_coverage_and_the_shortest_equivalent_trace",
        "tests/test_explore.py::test_export_state_holds_exactly_what_the_snapshot_holds",
        "tests/test_explore.py::test_fast_successors_are_the_controllers_own",
        "tests/test_explore.py::test_progress_names_the_frontier_and_the_rates",
        "tests/test_explore.py::test_several_workers_find_the_same_states_and_counterexamples",
        "tests/test_explore.py::test_shortest_path_to_violation_offers_the_shortest_equivalent_trace",
        "tests/test_explore.py::test_symmetry_stores_fewer_states_for_the_same_verdict",
        # test_explore_cli.py
        "tests/test_explore_cli.py::test_default_report_reaches_every_declared_transition_and_stop_reason",
        "tests/test_explore_cli.py::test_spin_domains_give_spins_state_count",
        # test_first_policy.py
        "tests/test_first_policy.py::test_a_new_users_first_policy_verifies_as_written",
        # test_generate.py
        "tests/test_generate.py::test_generate_check_fails_for_a_hand_edited_file",
        "tests/test_generate.py::test_generate_check_in_a_copy_of_the_repository_after_editing_a_guard",
        # test_handwritten.py
        "tests/test_handwritten.py::test_handwritten_agrees_with_the_generated_controller_in_lockstep",
        # test_hooks.py
        "tests/test_hooks.py::test_drift_hooks_pass_this_repository_and_fail_a_stale_copy",
        "tests/test_hooks.py::test_policy_hook_passes_good_policies_and_names_a_broken_one",
        # test_interrupt.py
        "tests/test_interrupt.py::test_ctrl_c_right_after_the_proofs_leaves_no_counterexample_without_its_report",
        "tests/test_interrupt.py::test_ctrl_c_stops_the_campaign",
        "tests/test_interrupt.py::test_ctrl_c_stops_the_explorer_and_its_workers",
        "tests/test_interrupt.py::test_ctrl_c_stops_the_kernels_shards",
        "tests/test_interrupt.py::test_ctrl_c_stops_the_proofs_inside_z3",
        # test_journal.py
        "tests/test_journal.py::test_two_processes_creating_one_journal_one_creates_it_and_the_other_is_told",
        # test_kernel_engine.py
        "tests/test_kernel_engine.py::test_a_changed_property_is_what_the_kernel_enforces",
        "tests/test_kernel_engine.py::test_a_changed_state_invariant_is_what_the_kernel_enforces",
        "tests/test_kernel_engine.py::test_a_bounded_search_leaves_the_same_depth_unexpanded_as_the_explorer",
        "tests/test_kernel_engine.py::test_a_run_that_can_never_stop_is_a_trap_in_the_kernel_too",
        "tests/test_kernel_engine.py::test_a_search_stopped_by_max_states_says_incomplete",
        "tests/test_kernel_engine.py::test_kernel_counts_equal_the_python_explorers",
        "tests/test_kernel_engine.py::test_the_cli_saves_a_replayable_counterexample_and_the_kernel",
        "tests/test_kernel_engine.py::test_the_kernel_finds_a_broken_body_and_the_controller_reproduces_it",
        "tests/test_kernel_engine.py::test_the_kernel_names_its_source_and_accounts_for_every_call",
        "tests/test_kernel_engine.py::test_the_kernel_steps_in_lockstep_with_the_generated_controller",
        # test_kernel_derived.py
        "tests/test_kernel_derived.py::test_the_kernel_stores_states_under_the_symmetry_asked_for_as_the_python_explorer",
        # test_kernel_apart.py
        "tests/test_kernel_apart.py::test_a_kernel_generated_apart_searches_as_the_one_generated_here",
        "tests/test_kernel_apart.py::test_the_kernel_engine_searches_kernels_generated_apart_with_the_same_counts",
        # test_kernel_sharded.py
        "tests/test_kernel_sharded.py::test_a_sharded_search_keeps_the_serial_searchs_states_parents_and_successors",
        "tests/test_kernel_sharded.py::test_a_violation_met_by_shards_gives_the_serial_counterexample",
        # test_kernel_cache.py
        "tests/test_kernel_cache.py::test_a_cache_that_cannot_be_written_only_costs_time",
        "tests/test_kernel_cache.py::test_a_kept_kernel_is_reused_and_gives_what_generating_it_gives",
        "tests/test_kernel_cache.py::test_a_mutants_kernel_is_never_kept",
        "tests/test_kernel_cache.py::test_an_unsound_entry_is_generated_again_never_trusted",
        "tests/test_kernel_cache.py::test_another_policy_or_domain_finds_no_kept_kernel",
        "tests/test_kernel_cache.py::test_only_the_most_recently_used_entries_are_kept",
        "tests/test_kernel_cache.py::test_the_command_keeps_its_kernels_where_the_environment_says",
        # test_mutate.py
        "tests/test_mutate.py::test_a_flipped_comparison_is_killed_naming_the_rule",
        "tests/test_mutate.py::test_an_untouched_copy_of_a_body_is_equivalent",
        "tests/test_mutate.py::test_every_operator_makes_mutants_with_unique_ids",
        "tests/test_mutate.py::test_policy_defaults_are_mutated_and_killed_by_the_policy_check",
        "tests/test_mutate.py::test_swapped_transitions_are_killed_or_proved_equivalent",
        "tests/test_mutate.py::test_without_the_rule_a_mutant_survives_with_its_diff_and_witness",
        # test_mutation_matrix.py
        "tests/test_mutation_matrix.py::test_each_recorded_killer_still_kills_its_mutant",
        "tests/test_mutation_matrix.py::test_every_check_passes_on_the_real_executor",
        "tests/test_mutation_matrix.py::test_reverting_a_mutants_killing_checks_makes_the_command_fail",
        # test_policy.py
        "tests/test_policy.py::test_replan_policy_warns_in_one_line_and_the_proof_names_the_fix",
        # test_policy_schema.py
        "tests/test_policy_schema.py::test_a_schema_from_a_changed_declaration_is_caught_disagreeing",
        # test_prove.py
        "tests/test_prove.py::test_default_policy_proves_the_equivalence_and_every_invariant",
        "tests/test_prove.py::test_every_mutant_is_refuted_by_a_proof",
        "tests/test_prove.py::test_replan_prove_exits_1_with_a_readable_and_saved_counterexample",
        "tests/test_prove.py::test_replan_prove_json_exits_0_listing_each_property_with_its_time",
        "tests/test_prove.py::test_step_limit_off_by_one_is_caught_with_a_counterexample_to_induction",
        "tests/test_prove.py::test_unknown_treated_as_passed_gate_is_caught_by_equivalence_and_commit_grounded",
        # test_prove_bridge.py
        "tests/test_prove_bridge.py::test_every_case_of_a_policy_of_three_to_the_eighth",
        # test_prove_conformance.py
        "tests/test_prove_conformance.py::test_every_random_step_of_the_generated_controller_satisfies_the_relation",
        "tests/test_prove_conformance.py::test_the_relation_follows_the_bodies_it_is_translated_from",
        # test_pytest_plugin.py
        "tests/test_pytest_plugin.py::test_a_markers_policy_is_found_from_the_rootdir_as_pytest_finds_its_options",
        "tests/test_pytest_plugin.py::test_a_markers_policy_missing_from_the_rootdir_names_where_it_was_looked_for",
        "tests/test_pytest_plugin.py::test_marker_rejects_an_unknown_argument",
        "tests/test_pytest_plugin.py::test_plugin_fails_a_broken_controller_with_a_replayable_counterexample",
        "tests/test_pytest_plugin.py::test_plugin_fails_a_weakened_gate_with_the_counterexample",
        "tests/test_pytest_plugin.py::test_plugin_passes_a_users_good_policy",
        # test_replay_proofs.py
        "tests/test_replay_proofs.py::test_a_proof_counterexample_still_fails_on_its_mutant_and_passes_on_the_fix",
        "tests/test_replay_proofs.py::test_an_equivalence_counterexample_starts_where_a_step_limit_bug_can_show",
        # test_review.py
        "tests/test_review.py::test_against_a_policy_with_another_key_shows_the_diff_and_its_witness",
        # test_review_browser.py
        "tests/test_review_browser.py::test_each_view_is_shown_and_saved_as_a_screenshot",
        "tests/test_review_browser.py::test_the_page_makes_no_network_request",
        "tests/test_review_browser.py::test_the_player_steps_through_the_reference_episode",
        "tests/test_review_browser.py::test_without_javascript_everything_but_the_player_is_there",
        # test_sarif.py
        "tests/test_sarif.py::test_a_run_where_everything_holds_writes_a_valid_log_with_no_results",
        "tests/test_sarif.py::test_a_seeded_mutant_points_at_the_declared_transition_and_the_broken_body",
        "tests/test_sarif.py::test_a_weakened_commit_gate_is_an_error_on_the_requires_line_to_change",
        # test_scale.py
        "tests/test_scale.py::test_a_counterexample_is_replayed_from_redis_alone",
        "tests/test_scale.py::test_a_dead_local_process_has_its_share_run_again",
        "tests/test_scale.py::test_a_ray_campaign_stops_at_the_first_failure",
        "tests/test_scale.py::test_a_ray_campaign_survives_a_killed_worker",
        "tests/test_scale.py::test_local_shares_are_not_forked_from_a_ray_driver",
        "tests/test_scale.py::test_local_shares_merge_into_one_campaign",
        "tests/test_scale.py::test_ray_shards_find_the_same_states_as_one_process",
        "tests/test_scale.py::test_the_first_failure_stops_the_others_and_is_saved",
        # test_spin_engine.py
        "tests/test_spin_engine.py::test_a_changed_property_is_what_spin_enforces",
        "tests/test_spin_engine.py::test_a_changed_state_invariant_is_what_spin_enforces",
        "tests/test_spin_engine.py::test_a_memory_limit_falls_back_to_a_smaller_storage",
        "tests/test_spin_engine.py::test_a_trail_the_controller_does_not_reproduce_is_a_translation_bug",
        "tests/test_spin_engine.py::test_every_storage_gives_the_same_count_on_a_small_domain",
        "tests/test_spin_engine.py::test_spin_counts_equal_the_python_explorers_on_spins_domains",
        "tests/test_spin_engine.py::test_spin_finds_a_broken_body_and_the_controller_reproduces_it",
        "tests/test_spin_engine.py::test_the_cli_saves_a_replayable_counterexample",
        "tests/test_spin_engine.py::test_the_model_names_its_source_and_every_property",
        # test_termination.py
        "tests/test_termination.py::test_no_explored_run_makes_more_counted_calls_than_the_bound",
        "tests/test_termination.py::test_replan_prove_prints_the_bound_once_both_properties_are_proved",
        # test_translation.py
        "tests/test_translation.py::test_an_unchanged_regeneration_is_proved_equal",
        "tests/test_translation.py::test_any_generated_event_with_a_transition_swapped_is_told_apart",
        # test_verify.py
        "tests/test_verify.py::test_a_proof_counterexample_from_an_unreached_state_is_labelled",
        "tests/test_verify.py::test_against_a_policy_with_other_keys_reports_them_and_witnesses_over_the_shared",
        "tests/test_verify.py::test_against_an_older_policy_shows_the_witness_and_the_diagram_diff",
        "tests/test_verify.py::test_default_policy_passes_the_fast_checks",
        "tests/test_verify.py::test_readme_verify_in_a_clone_leaves_it_clean_and_reproduces_the_evidence",
        "tests/test_verify.py::test_weakened_commit_gate_fails_the_proofs_with_a_readable_counterexample",
        "tests/test_verify.py::test_what_no_engine_exercised_is_a_gap",
        # test_verify_beside.py
        "tests/test_verify_beside.py::test_checks_run_beside_the_explorer_write_the_report_one_process_writes",
        # test_verify_boundary.py
        "tests/test_verify_boundary.py::test_a_seeded_bug_fails_the_check_with_its_rule_counterexample_and_sarif",
        "tests/test_verify_boundary.py::test_the_boundary_check_holds_on_a_policy_with_two_resources",
        # test_verify_catches_mutants.py
        "tests/test_verify_catches_mutants.py::test_every_engine_names_the_rule_in_a_whole_run",
        "tests/test_verify_catches_mutants.py::test_verify_fails_on_the_broken_controller_naming_its_rule",
        # test_verify_kernel.py
        "tests/test_verify_kernel.py::test_each_witness_is_as_short_as_the_python_explorers",
        "tests/test_verify_kernel.py::test_verify_on_two_workers_makes_the_graph_by_abstract_state_beside",
        # test_wheel_and_action.py
        "tests/test_wheel_and_action.py::test_action_validates_against_the_github_action_schema",
        "tests/test_wheel_and_action.py::test_installed_wheel_verifies_outside_the_repository",
    }
)
#: Module fixtures that run a whole engine (a mutation matrix, a wheel build, a verify
#: run, a Ray cluster, a database server), by the file that defines them: every test
#: using one is slow too, or the quick lane would pay the fixture for the first of them.
SLOW_FIXTURES: dict[str, frozenset[str]] = {
    "tests/test_campaign_mutants.py": frozenset({"caught"}),
    "tests/test_durable_crash_postgres.py": frozenset({"postgres_url"}),
    "tests/test_mutate.py": frozenset({"full_matrix"}),
    "tests/test_review.py": frozenset({"against_page"}),
    "tests/test_sarif.py": frozenset({"holds", "weak_gate", "mutant"}),
    "tests/test_scale.py": frozenset({"ray_local", "redis_url"}),
    "tests/test_verify_catches_mutants.py": frozenset({"verified"}),
    "tests/test_wheel_and_action.py": frozenset({"installed_wheel"}),
}


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tests marked (``SLOW_TESTS``, ``SLOW_FIXTURES``); the long files first
    (``LONG_FILES``; the order within a file is kept). Graphviz is optional
    (docs/getting-started.md): without `dot` its tests are skipped, each with the
    reason, and everything else runs."""
    collected = {item.nodeid.split("[")[0] for item in items}
    files = {name.split("::")[0] for name in collected}
    stale = sorted(name for name in SLOW_TESTS - collected if name.split("::")[0] in files)
    if stale and not any("::" in argument for argument in config.args):  # whole files run
        raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS names no test: {', '.join(stale)}")
    for item in items:
        name = item.nodeid.split("[")[0]
        expensive = SLOW_FIXTURES.get(name.split("::")[0], frozenset())
        if name in SLOW_TESTS or expensive & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {name: number for number, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))
    if shutil.which("dot") is not None:
        return
    missing = pytest.mark.skip(
        reason="Graphviz `dot` is not installed (apt-get install graphviz): SVG/PNG skipped"
    )
    for item in items:
        if item.get_closest_marker("graphviz") is not None:
            item.add_marker(missing)


@pytest.fixture
def execute_never_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Subject:
    """The project checked against a contract whose ``execute-counts-one-step`` is
    tightened in a module of its own (no execute may answer Executed): what a user's
    edit of one property in its source gives every engine that reads the properties.
    The contract travels with the subject; nothing global is patched (the module is
    put on the path only so that it can be imported and its source read)."""
    module = tmp_path / "tightened_property.py"
    module.write_text(
        textwrap.dedent(
            """
            from typing import Any

            from replan.controller import ExecuteResult


            def execute_never_executes(answer: Any) -> bool:
                return answer is not ExecuteResult.EXECUTED
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    tightened = __import__("tightened_property").execute_never_executes
    original = CONTRACT["execute-counts-one-step"]
    replaced = Property(original.name, "call", original.rule, ("execute",), tightened, ("answer",))
    return PROJECT.with_contract(CONTRACT.replacing(replaced))


def never_stopping_model() -> Any:
    """The declaration with its cancel and plan-limit transitions staying where they
    are, and a policy under which uncounted duplicates cannot stop a run either: in a
    domain of one id and one key observed, no state can reach a stopped one."""
    import dataclasses

    from replan.controller.policy import policy_from_dict, policy_to_dict
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    model = extract(Replanning)
    stuck = tuple(
        dataclasses.replace(t, target=t.source)
        if t.event == "cancel" or t.cond == "proposals_exhausted"
        else t
        for t in model.transitions
    )
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["count_duplicate_deliveries"] = False
    return dataclasses.replace(model, transitions=stuck), policy_from_dict(document)


def small_domains() -> Domains:
    """15 calls per state (one source, one id, current evidence, declared steps): the
    translated engines' small shared domain (pan compiles in a few seconds)."""
    return Domains(
        "small",
        versions=1,
        ids=1,
        evidence_offsets=(0,),
        undeclared_steps=0,
        disallowed_resources=0,
        malformed_plan=False,
        malformed_observation=False,
        one_id_per_kind=False,
        derived_events=False,
    )


@pytest.fixture
def at_most_one_proposal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Subject:
    """The project checked against a contract whose state invariant ``proposal-bound``
    is tightened in a module of its own (at most one proposal): what a user's edit of
    one invariant gives the translated engines."""
    module = tmp_path / "tightened_invariant.py"
    module.write_text("def at_most_one_proposal(run):\n    return run.proposals <= 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tightened = __import__("tightened_invariant").at_most_one_proposal
    original = CONTRACT["proposal-bound"]
    replaced = Property(original.name, "invariant", original.rule, None, tightened, ("run",))
    return PROJECT.with_contract(CONTRACT.replacing(replaced))


#: Broken bodies each translated engine (SPIN, the kernel) must find, with the
#: property it must name.
TRANSLATED_ENGINE_MUTANTS = [
    ("stopped-run-revived", "stopped-is-inert"),
    ("invalidation-keeps-pending", "observe-change-is-progress"),
    ("duplicates-not-counted", "duplicate-is-no-progress"),
]


def assert_reproduced_on_mutant(result: Any, mutant: str, broken: str) -> None:
    """A translated engine's search names ``broken`` in its one finding (reproduced,
    so no translation bug), and the finding's operations break that property on a
    fresh controller of ``mutant``."""
    from replan.verification.subjects.mutants import MUTANTS

    assert not result.translation_bugs, result.translation_bugs
    [finding] = result.findings
    assert broken in finding.property
    controller = MUTANTS[mutant].controller(DEFAULT_POLICY)
    failures: list[str] = []
    for operation in finding.operations:
        failures = harness.violated(harness.observe_call(DEFAULT_POLICY, controller, operation))
    assert finding.property in failures


def model_and_controller_disagree() -> Any:
    """A subject whose model is a broken mutant's and whose controller is the
    project's: a translated engine's violation on it must be a translation bug."""
    from replan.verification.subjects.mutants import MUTANTS

    broken = MUTANTS["stopped-run-revived"]
    return Subject(
        "model-and-controller-disagree",
        build_model=broken.build_model,
        bodies=broken.bodies,
        build_controller=lambda: PROJECT.controller,
    )
