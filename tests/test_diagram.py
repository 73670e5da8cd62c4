"""`replan diagram`: every declared transition is drawn with its guard, in every
format; the overlays mark what they claim; the checks here fail on a diagram that
omits a transition."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import (
    DEFAULT_POLICY,
    policy_from_dict,
    policy_to_dict,
    policy_to_toml,
)
from replan.controller.records import EvidenceState, ExecuteResult, Observation, Plan
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.model import MachineModel, TransitionInfo, extract
from replan.verification.core.harness import Finding, Operation, apply
from replan.verification.report.diagram import machine_diagram, render
from replan.verification.report.diagram.dot import to_dot
from replan.verification.report.diagram.graph import Change, build, diff, final_answers
from replan.verification.report.diagram.mermaid import MermaidError, parse, to_mermaid
from replan.verification.subjects.mutants import without

MODEL = extract(Replanning)
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"


def expected_text(model: MachineModel, t: TransitionInfo) -> str:
    """How a transition reads in a diagram: ``event #priority [guard] / action``
    (the priority where several leave the state on the event; ``[else]`` for the
    unguarded last one among several)."""
    ranked = len(model.leaving(t.source, t.event)) > 1
    trigger = f"{t.event} #{t.priority}" if ranked else t.event
    guard = f"[{t.cond}]" if t.cond else ("[else]" if ranked else "")
    return f"{trigger} {guard}".strip() + f" / {t.action}"


def svg_rows(svg: str) -> dict[str, str]:
    """transition label -> the text drawn for it in its state's box: the overlay
    marks (``step 3``, ``fired 12x``) then ``event #priority [guard] / action →
    target``."""
    root = ET.fromstring(svg)
    rows: dict[str, str] = {}
    marks: dict[str, str] = {}
    for group in root.iter(f"{SVG}g"):
        kind = re.fullmatch(r"a_(?:removed-)?t\d+-(row|mark)", group.get("id", ""))
        if kind is None:
            continue
        anchor = group.find(f"{SVG}a")
        assert anchor is not None
        text = " ".join("".join(t.text or "" for t in group.iter(f"{SVG}text")).split())
        (rows if kind[1] == "row" else marks)[anchor.get(f"{XLINK}title", "")] = text
    return {
        label: f"{marks[label]} {text}" if label in marks else text for label, text in rows.items()
    }


def svg_group(svg: str, group_id: str) -> ET.Element:
    root = ET.fromstring(svg)
    return next(g for g in root.iter(f"{SVG}g") if g.get("id") == group_id)


def dashed(element: ET.Element) -> bool:
    return any(e.get("stroke-dasharray") for e in element.iter())


def missing_from_svg(model: MachineModel, svg: str) -> list[str]:
    """Declared transitions the SVG does not show with their guard text and target."""
    rows = svg_rows(svg)
    root = ET.fromstring(svg)
    edges = {
        g.get("id"): g
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "edge" and re.fullmatch(r"t\d+", g.get("id", ""))
    }
    missing = []
    for t in model.transitions:
        shown = rows.get(t.label, "")
        target = "↺" if t.internal and t.source == t.target else f"→ {t.target}"
        if expected_text(model, t) not in shown or not shown.endswith(target):
            missing.append(t.label)
        elif not (t.internal and t.source == t.target) and f"t{t.index}" not in edges:
            missing.append(t.label)  # a transition to another state needs its arrow
    return missing


def mermaid_transitions(text: str) -> list[tuple[str, str, str]]:
    return parse(text).transitions


def expected_mermaid(model: MachineModel) -> list[tuple[str, str, str]]:
    return [(t.source, t.target, expected_text(model, t)) for t in model.transitions]


# ---- the machine, complete -----------------------------------------------------------


@pytest.mark.graphviz
def test_svg_shows_every_declared_transition_with_its_guard(tmp_path: Path) -> None:
    output = tmp_path / "m.svg"
    assert main(["diagram", "--format", "svg", "-o", str(output)]) == 0
    svg = output.read_text(encoding="utf-8")
    assert missing_from_svg(MODEL, svg) == []
    rows = svg_rows(svg)
    assert sorted(rows) == sorted(t.label for t in MODEL.transitions)
    assert len(rows) == len(MODEL.transitions)
    assert (
        "observe #3 [duplicate_delivery] / ignore_duplicate ↺"
        in rows["idle --observe[duplicate_delivery]--> idle"]
    )


@pytest.mark.graphviz
def test_the_completeness_check_catches_a_diagram_missing_a_transition() -> None:
    for dropped in (MODEL.transitions[5], MODEL.transitions[-1]):  # internal, and not
        broken = without(MODEL, lambda t, label=dropped.label: t.label == label)
        svg = render(build(broken, DEFAULT_POLICY), "svg").decode()
        assert dropped.label in missing_from_svg(MODEL, svg)
    # Dropping the last transition renumbers nothing else: exactly it is missing.
    assert missing_from_svg(MODEL, svg) == [MODEL.transitions[-1].label]


@pytest.mark.graphviz
def test_final_states_show_their_stop_reason_and_what_they_answer() -> None:
    svg = render(machine_diagram(), "svg").decode()
    for state in MODEL.final_states:
        node = svg_group(svg, f"state-{state.id}")
        text = " ".join("".join(t.text or "" for t in node.iter(f"{SVG}text")).split())
        assert f"stop reason: {state.value}" in text
    note = svg_group(svg, "final-answers")
    text = " ".join(" ".join(t.text or "" for t in note.iter(f"{SVG}text")).split())
    assert "observe(obs) → False" in text
    assert "propose(plan) → False" in text
    assert "execute(plan_id) → Replayed (completed id) | Stopped (other id)" in text
    assert "cancel() → no-op" in text


def test_final_answers_are_read_from_the_actions_not_restated() -> None:
    class NeverReplays(Run):
        __slots__ = ()

        def answer_stopped(self, plan_id: str) -> ExecuteResult:
            return ExecuteResult.STOPPED

    answers = dict(final_answers(MODEL, DEFAULT_POLICY, NeverReplays))
    assert answers["execute(plan_id)"] == "Stopped"
    assert dict(final_answers(MODEL, DEFAULT_POLICY))["execute(plan_id)"].startswith("Replayed")


def test_legend_shows_the_policy() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["evidence"]["keys"].append("schema")
    document["steps"].append({"name": "deploy", "requires": ["schema"], "completes_run": False})
    document["resources"]["allowed"].append("input-B")
    document["limits"]["max_steps"] = 7
    policy = policy_from_dict(document)
    legend = {(r.section, r.name): r.value for r in build(MODEL, policy).legend}
    assert legend[("evidence", "keys")] == "parser, access, schema"
    assert legend[("steps", "commit-import")] == "requires parser, access · completes_run"
    assert legend[("steps", "deploy")] == "requires schema"
    assert legend[("resources", "allowed")] == "input-A, input-B"
    assert legend[("limits", "max_steps")] == "7"
    assert legend[("guards reading the policy", "steps_exhausted")] == "max_steps = 7"
    assert legend[("guards reading the policy", "prerequisites_passed")] == (
        "requirements = commit-import: parser, access · deploy: schema · "
        "resource_requirements = none"
    )
    source = to_dot(build(MODEL, policy)) + to_mermaid(build(MODEL, policy))
    assert source.count("requires schema") == 2


# ---- Mermaid ---------------------------------------------------------------------------


def test_mermaid_lists_the_same_transitions(tmp_path: Path) -> None:
    output = tmp_path / "m.mmd"
    assert main(["diagram", "--format", "mermaid", "-o", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert "stateDiagram-v2" in text.splitlines()[:2]
    parsed = parse(text)
    assert len(parsed.transitions) == len(MODEL.transitions)
    assert sorted(parsed.transitions) == sorted(expected_mermaid(MODEL))
    assert parsed.initial == ["idle"]
    assert sorted(parsed.final) == sorted(s.id for s in MODEL.final_states)
    assert parsed.descriptions["completed"][0] == "stop reason Completed"


def test_mermaid_reader_rejects_text_outside_the_subset() -> None:
    good = to_mermaid(machine_diagram())
    parse(good)
    broken = {
        "no header": good.replace("stateDiagram-v2", "flowchart TD"),
        "unclosed note": good[: good.rindex("    end note")],
        "statement end in a label": good.replace("/ ignore_duplicate", "/ ignore; duplicate", 1),
        "unknown statement": good + "    idle -> pending\n",
        "entity": good.replace("/ reject_plan", "/ #reject;", 1),
    }
    for name, text in broken.items():
        with pytest.raises(MermaidError):
            parse(text)
            pytest.fail(f"{name}: accepted")


def test_mermaid_of_a_machine_missing_a_transition_is_caught() -> None:
    broken = without(MODEL, lambda t: t.index == 40)
    listed = mermaid_transitions(to_mermaid(build(broken, DEFAULT_POLICY)))
    assert sorted(listed) != sorted(expected_mermaid(MODEL))
    missing = set(expected_mermaid(MODEL)) - set(listed)
    assert ("pending", "pending", expected_text(MODEL, MODEL.transitions[40])) in missing


# ---- overlays ----------------------------------------------------------------------------

NEVER_INTERNAL = "idle --propose[plan_completed]--> idle"
NEVER_EXTERNAL = "pending --execute[steps_exhausted]--> step_limit"


def coverage_counts() -> dict[str, int]:
    counts = {t.label: 3 + t.index for t in MODEL.transitions}
    del counts[NEVER_INTERNAL], counts[NEVER_EXTERNAL]
    return counts


@pytest.mark.graphviz
@pytest.mark.parametrize(
    "shape",
    [
        "campaign",
        "transitions_fired",
        "coverage.transitions",
        "fired_on_distinct_edges",  # `replan explore --json`, the Python explorer
        "fired_on_expanded_states",  # ... and the kernel
    ],
)
def test_coverage_draws_a_missed_transition_dashed(tmp_path: Path, shape: str) -> None:
    counts = coverage_counts()
    if shape == "campaign":  # what `replan campaign --json` writes
        fired = {t.label: counts.get(t.label, 0) for t in MODEL.transitions}
        document: dict[str, object] = {
            "coverage": {
                "transitions": {"declared": len(MODEL.transitions), "fired": fired, "missed": []}
            }
        }
    elif shape == "transitions_fired":
        document = {"transitions_fired": counts, "examples": 10}
    elif shape.startswith("fired_on_"):
        document = {shape: counts, "disabled_by_policy": {}, "states": 10}
    else:
        document = {"coverage": {"transitions": {**counts, "Canceled absorbs observe": 4}}}
    result = tmp_path / "campaign.json"
    result.write_text(json.dumps(document), encoding="utf-8")
    output = tmp_path / "c.svg"
    assert main(["diagram", "--coverage", str(result), "-o", str(output)]) == 0
    svg = output.read_text(encoding="utf-8")
    index = {t.label: t.index for t in MODEL.transitions}
    assert dashed(svg_group(svg, f"a_t{index[NEVER_INTERNAL]}-row"))
    assert dashed(svg_group(svg, f"t{index[NEVER_EXTERNAL]}"))
    assert "never fired" in svg_rows(svg)[NEVER_EXTERNAL]
    fired = [t for t in MODEL.transitions if t.label in counts]
    for t in fired:
        assert not dashed(svg_group(svg, f"a_t{t.index}-row")), t.label
        assert f"fired {3 + t.index}x" in svg_rows(svg)[t.label]
    widths = {
        t.index: float(svg_group(svg, f"t{t.index}").find(f".//{SVG}path").get("stroke-width"))  # type: ignore[union-attr]
        for t in fired
        if not t.internal
    }
    # the most fired line (3 + its index times) against the least (3 times): thicker
    assert widths[max(widths)] > widths[min(widths)] and min(widths) == 0
    assert missing_from_svg(MODEL, svg) == []


@pytest.mark.graphviz
def test_coverage_tells_cannot_fire_from_never_fired(tmp_path: Path) -> None:
    never = next(
        t.index
        for t in MODEL.transitions
        if t.label.startswith("pending --execute[steps_exhausted]")
    )
    fired = {t.label: 0 if t.index in (2, never) else 5 for t in MODEL.transitions}
    dead = {MODEL.transitions[2].label: "an earlier transition always fires first"}
    document = {"coverage": {"transitions": {"fired": fired, "dead_under_policy": dead}}}
    result = tmp_path / "campaign.json"
    result.write_text(json.dumps(document), encoding="utf-8")
    output = tmp_path / "c.svg"
    assert main(["diagram", "--coverage", str(result), "-o", str(output), "--json"]) == 0
    svg = output.read_text(encoding="utf-8")
    dead_row = svg_group(svg, "a_t2-row")
    assert {e.get("stroke-dasharray") for e in dead_row.iter()} - {None} == {"1,5"}  # dotted
    assert "cannot fire under this policy" in svg_rows(svg)[MODEL.transitions[2].label]
    assert (
        dashed(svg_group(svg, f"t{never}"))
        and "never fired" in svg_rows(svg)[MODEL.transitions[never].label]
    )


def test_coverage_in_mermaid_says_never_fired(tmp_path: Path) -> None:
    result = tmp_path / "explore.json"
    result.write_text(json.dumps({"transitions_fired": coverage_counts()}), encoding="utf-8")
    output = tmp_path / "c.mmd"
    assert main(["diagram", "--coverage", str(result), "-o", str(output)]) == 0
    labels = [label for *_, label in mermaid_transitions(output.read_text(encoding="utf-8"))]
    never = [label for label in labels if label.startswith("NEVER FIRED")]
    assert len(never) == 2


def counterexample(tmp_path: Path) -> tuple[Path, list[Operation]]:
    operations = [
        Operation("observe", Observation("parser", 1, EvidenceState.PASSED, "ci")),
        Operation("propose", Plan("p1", 1, 2, "commit-import", "input-A")),
        Operation("execute", "p1"),
        Operation("observe", Observation("access", 1, EvidenceState.PASSED, "ci")),
        Operation("cancel"),
        Operation("execute", "p1"),
    ]
    from replan.controller import Controller

    controller = Controller()
    results = [apply(controller, op) for op in operations]
    path = Finding("commit-grounded", DEFAULT_POLICY, operations, results, "", "campaign").save(
        tmp_path / "cex.json"
    )
    return path, operations


@pytest.mark.graphviz
def test_trace_highlights_the_path_with_numbered_steps(tmp_path: Path) -> None:
    path, _ = counterexample(tmp_path)
    output = tmp_path / "t.svg"
    assert main(["diagram", "--trace", str(path), "-o", str(output)]) == 0
    svg = output.read_text(encoding="utf-8")
    rows = svg_rows(svg)
    assert rows["idle --observe[changes_state]--> idle"].startswith("step 1 ")
    assert rows["idle --propose--> pending"].startswith("step 2 ")
    assert rows["pending --execute[not prerequisites_passed]--> pending"].startswith("step 3 ")
    assert rows["pending --observe[changes_state]--> idle"].startswith("step 4 ")
    assert rows["idle --cancel--> canceled"].startswith("step 5 ")
    canceled = svg_group(svg, "state-canceled")
    assert "step 6: execute absorbed, answered Stopped" in "".join(
        t.text or "" for t in canceled.iter(f"{SVG}text")
    )
    cancel = next(t for t in MODEL.transitions if t.label == "idle --cancel--> canceled")
    edge = svg_group(svg, f"t{cancel.index}")
    assert float(edge.find(f".//{SVG}path").get("stroke-width")) >= 3  # type: ignore[union-attr]
    on_path = [label for label, text in rows.items() if text.startswith("step")]
    assert len(on_path) == 5  # the other rows carry no step number


def test_trace_path_follows_the_generated_controller(tmp_path: Path) -> None:
    from replan.verification.report.diagram.overlays import load_trace

    path, operations = counterexample(tmp_path)
    trace = load_trace(path, MODEL)
    assert [s.number for s in trace.steps] == list(range(1, len(operations) + 1))
    assert trace.steps[-1].transition is None and trace.steps[-1].state == "canceled"
    assert trace.differing == []


@pytest.mark.graphviz
def test_diff_against_a_policy_with_one_more_prerequisite_marks_the_changed_guard(
    tmp_path: Path,
) -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["evidence"]["keys"].append("schema")
    document["steps"][2]["requires"].append("schema")
    stricter = tmp_path / "stricter.toml"
    stricter.write_text(policy_to_toml(policy_from_dict(document)), encoding="utf-8")
    default = tmp_path / "default.toml"
    default.write_text(policy_to_toml(DEFAULT_POLICY), encoding="utf-8")
    output = tmp_path / "d.svg"
    arguments = ["diagram", "--policy", str(stricter), "--diff", str(default), "-o", str(output)]
    assert main(arguments) == 0
    svg = output.read_text(encoding="utf-8")
    gate = "pending --execute[not prerequisites_passed]--> pending"
    index = next(t.index for t in MODEL.transitions if t.label == gate)
    row = svg_group(svg, f"a_t{index}-row")
    text = " ".join("".join(t.text or "" for t in row.iter(f"{SVG}text")).split())
    assert "prerequisites_passed (commit-import: parser, access → parser, access, schema)" in text
    assert {t.get("fill") for t in row.iter(f"{SVG}text")} == {"#d4730b"}  # orange
    others = [t for t in MODEL.transitions if t.label != gate]
    for t in others:
        fills = {x.get("fill") for x in svg_group(svg, f"a_t{t.index}-row").iter(f"{SVG}text")}
        assert fills == {"#8c959f"}, t.label  # grey: unchanged
    changed = diff(MODEL, DEFAULT_POLICY, MODEL, policy_from_dict(document), "default")
    legend = {(r.section, r.name): r for r in changed.legend}
    assert legend[("steps", "commit-import")].change is Change.CHANGED
    assert legend[("evidence", "keys")].old == "parser, access"
    assert legend[("limits", "max_steps")].change is Change.UNCHANGED
    # The step names did not change, so the guard that only asks about them did not.
    assert legend[("guards reading the policy", "step_unknown")].change is Change.UNCHANGED


@pytest.mark.graphviz
def test_diff_against_an_older_declaration_colours_added_removed_changed(
    tmp_path: Path,
) -> None:
    import subprocess

    from replan.verification.report.diagram.overlays import OverlayError, load_old

    source = Path("spec/declaration.py").read_text(encoding="utf-8")
    gate = next(line for line in source.splitlines(True) if '"not prerequisites_passed"' in line)
    older = source.replace(gate, "")  # added since
    older = older.replace('cond="steps_exhausted"', 'cond="steps_exhausted and completes_run"')
    active = "(idle, pending, awaiting_approval, approved)"
    cancel = f'    cancel = every({active}, (canceled, "", "cancel_run"))'
    assert cancel in older
    removed = 'every((idle,), (canceled, "plan_completed", "cancel_run")) | every('
    older = older.replace(cancel, cancel.replace("every(", removed, 1))
    repository = tmp_path / "repo"
    (repository / "spec").mkdir(parents=True)
    (repository / "spec" / "declaration.py").write_text(older, encoding="utf-8")
    (repository / "spec" / "policy.toml").write_text(policy_to_toml(DEFAULT_POLICY))
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "older"], check=True)
    old = load_old("HEAD", repository, MODEL)
    assert len(old.model.transitions) == len(MODEL.transitions)
    marked = diff(old.model, old.policy, MODEL, DEFAULT_POLICY, old.name)
    changes = {e.key: (e.change, e.change_note) for e in marked.edges}
    assert changes["pending --execute[not prerequisites_passed]--> pending"][0] is Change.ADDED
    assert changes["idle --cancel[plan_completed]--> canceled"][0] is Change.REMOVED
    step_limit = changes["pending --execute[steps_exhausted]--> step_limit"]
    assert step_limit == (Change.CHANGED, "guard was [steps_exhausted and completes_run]")
    # Its priority number moved (#2 -> #1) only because the one before it went away.
    assert changes["idle --cancel--> canceled"] == (Change.UNCHANGED, "")
    unchanged = [k for k, (c, _) in changes.items() if c is Change.UNCHANGED]
    assert len(unchanged) == len(MODEL.transitions) - 2  # one added, one changed
    svg = render(marked, "svg").decode()
    gone = next(
        t for t in old.model.transitions if t.label == "idle --cancel[plan_completed]--> canceled"
    )
    removed = svg_group(svg, f"a_removed-t{gone.index}-row")
    assert dashed(removed)
    assert {t.get("fill") for t in removed.iter(f"{SVG}text")} == {"#cf222e"}
    with pytest.raises(OverlayError, match="neither a policy file nor a git revision"):
        load_old("no-such-revision", repository, MODEL)


def test_a_revision_is_read_in_the_repository_holding_the_policy(tmp_path: Path) -> None:
    """--against/--diff REVISION names the user's repository (the one holding the
    policy file, else the current directory's), not replan's own checkout: the old
    policy is that file at that revision, under today's declaration."""
    import subprocess

    from replan.verification.report.diagram.overlays import OverlayError, load_old, repository_for

    repository = tmp_path / "agent-app"
    (repository / "config").mkdir(parents=True)
    mine = repository / "config" / "replan.toml"
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["max_steps"] = 6
    mine.write_text(policy_to_toml(policy_from_dict(document)), encoding="utf-8")
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "mine"], check=True)
    document["limits"]["max_steps"] = 9
    mine.write_text(policy_to_toml(policy_from_dict(document)), encoding="utf-8")

    assert repository_for(mine) == repository.resolve()
    old = load_old("HEAD", None, MODEL, mine)
    assert old.policy.max_steps == 6  # the committed file, not today's nor the default
    assert old.model is MODEL  # the user's repository holds no declaration
    assert str(repository.resolve()) in old.name and "config/replan.toml" in old.name
    with pytest.raises(OverlayError, match="does not exist at that revision"):
        load_old("HEAD", None, MODEL, repository / "new.toml")
    outside = tmp_path / "not-a-repository" / "p.toml"
    outside.parent.mkdir()
    outside.write_text(policy_to_toml(DEFAULT_POLICY), encoding="utf-8")
    with pytest.raises(OverlayError, match="not inside a git repository"):
        load_old("HEAD", None, MODEL, outside)
