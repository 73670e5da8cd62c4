"""`replan diagram --view overview`: the transitions that change the state, guards
written as what they test against the policy (their names as the SVG <title>), each
state's internal transitions folded into one counted line per event, and a width a
reviewer reads without zooming."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY, policy_from_dict, policy_to_dict
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.verification.core.liveness import liveness
from replan.verification.report.diagram import machine_diagram, render
from replan.verification.report.diagram.graph import build
from replan.verification.report.diagram.guard_policy import condition_expression, guard_expression
from replan.verification.report.diagram.overview import wrap_guard

#: Every test here draws with Graphviz (skipped, with the reason, without it).
pytestmark = pytest.mark.graphviz

MODEL = extract(Replanning)
#: label -> why, for what the default policy switches off (the overview leaves it out)
SWITCHED_OFF = liveness(Run, DEFAULT_POLICY, [t.label for t in MODEL.transitions]).switched_off
#: the states the default policy never enters
NOT_ENTERED = {"awaiting_approval", "approved", "budget_exhausted"}
APPROVAL = Path(__file__).resolve().parent / "policies" / "approval.toml"
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"


def groups(svg: str) -> dict[str, ET.Element]:
    return {g.get("id", ""): g for g in ET.fromstring(svg).iter(f"{SVG}g")}


def text_of(element: ET.Element) -> str:
    """The text drawn in ``element``: the pieces of one line joined as they are, the
    lines with one space (Graphviz writes one ``<text>`` per piece, per line)."""
    lines: dict[str, str] = {}
    for piece in element.iter(f"{SVG}text"):
        lines[piece.get("y", "")] = lines.get(piece.get("y", ""), "") + (piece.text or "")
    return " ".join(" ".join(lines.values()).split())


def title_of(element: ET.Element) -> str:
    title = element.find(f".//{SVG}title")
    return "" if title is None else title.text or ""


@pytest.fixture(scope="module")
def overview_svg() -> str:
    return render(machine_diagram(), "svg", view="overview").decode()


def test_every_transition_that_changes_the_state_is_a_row_with_its_arrow(
    overview_svg: str,
) -> None:
    found = groups(overview_svg)
    external = [
        t
        for t in MODEL.transitions
        if not (t.internal and t.source == t.target) and t.label not in SWITCHED_OFF
    ]
    assert external
    for t in external:
        row = found[f"a_t{t.index}-row"]
        assert row.find(f"{SVG}a").get(f"{XLINK}title") == t.label  # type: ignore[union-attr]
        assert text_of(row).endswith(f"→ {t.target}"), t.label
        assert f"t{t.index}" in found and found[f"t{t.index}"].get("class") == "edge", t.label
    # no internal transition has a row or an arrow of its own
    for t in MODEL.transitions:
        if t.internal and t.source == t.target:
            assert f"a_t{t.index}-row" not in found and f"t{t.index}" not in found


def test_what_the_policy_switches_off_is_left_out_and_named(overview_svg: str) -> None:
    """No step of the default policy needs approval and it sets no budget: the
    approval states, the budget stop and every row leading there are left out, and
    the caption says so and why; under the approval policy they are drawn."""
    found = groups(overview_svg)
    assert SWITCHED_OFF
    for t in MODEL.transitions:
        if t.label in SWITCHED_OFF:
            assert f"a_t{t.index}-row" not in found and f"t{t.index}" not in found, t.label
    for state in NOT_ENTERED:
        assert f"state-{state}" not in found
    caption = text_of(found["graph0"]) if "graph0" in found else overview_svg
    assert (
        f"Left out, as this policy switches them off (the full view draws them): "
        f"{len(SWITCHED_OFF)} transitions"
    ) in " ".join(caption.split())
    assert "the states awaiting_approval, approved, budget_exhausted" in caption
    assert "sets_a_budget is always False under this policy" in caption
    from replan.controller.policy import load_policy

    approval = render(build(MODEL, load_policy(APPROVAL)), "svg", view="overview").decode()
    shown = groups(approval)
    assert {"state-awaiting_approval", "state-approved"} <= set(shown)
    assert "state-budget_exhausted" not in shown  # the approval policy sets no budget


def test_internal_transitions_are_folded_into_one_counted_line_per_event(
    overview_svg: str,
) -> None:
    found = groups(overview_svg)
    folded = 0
    for state in MODEL.active_states:
        for event in MODEL.events:
            inside = [
                t
                for t in MODEL.leaving(state.id, event)
                if t.internal and t.source == t.target and t.label not in SWITCHED_OFF
            ]
            group = found.get(f"a_fold-{state.id}-{event}")
            if not inside:
                assert group is None
                continue
            assert group is not None, (state.id, event)
            noun = "rejection" if len(inside) == 1 else "rejections"
            assert text_of(group).startswith(f"{event}: {len(inside)} {noun} / bookkeeping"), (
                text_of(group)
            )
            # its title lists the folded transitions, in priority order
            # (an event's only transition in a state has no number: "approve / ...")
            listed = title_of(group).split("\n")
            expected = [
                f"{event} #{t.priority}" if len(MODEL.leaving(state.id, event)) > 1 else event
                for t in inside
            ]
            assert [line.split(" [")[0].split(" /")[0] for line in listed] == expected
            folded += len(inside)
    assert folded == sum(1 for t in MODEL.transitions if t.internal and t.label not in SWITCHED_OFF)
    # the uncounted duplicate row is switched off under count_duplicate_deliveries
    assert "observe: 4 rejections / bookkeeping" in text_of(found["a_fold-idle-observe"])


def test_guards_read_as_what_they_test_against_the_policy_named_in_their_title(
    overview_svg: str,
) -> None:
    found = groups(overview_svg)
    step_limit = next(t for t in MODEL.transitions if t.cond == "steps_exhausted")
    guard = found[f"a_t{step_limit.index}-guard"]
    assert text_of(guard) == "[steps >= max_steps (4)]"
    assert title_of(guard) == "steps_exhausted"
    for t in MODEL.transitions:
        if t.cond and not (t.internal and t.source == t.target) and t.label not in SWITCHED_OFF:
            cell = found[f"a_t{t.index}-guard"]
            assert title_of(cell) == t.cond
            assert (
                text_of(cell)
                == "["
                + " ".join(wrap_guard(condition_expression(Run, t.cond, DEFAULT_POLICY)))
                + "]"
            )
    # another policy, other values: the same guard reads its limit
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["max_steps"] = 6
    other = render(build(MODEL, policy_from_dict(document)), "svg", view="overview").decode()
    assert text_of(groups(other)[f"a_t{step_limit.index}-guard"]) == "[steps >= max_steps (6)]"


def test_a_guard_is_read_from_its_body_not_restated() -> None:
    class Stricter(Run):
        def steps_exhausted(self) -> bool:
            return self._steps + 1 > self.policy.max_steps

        def completes_run(self) -> bool:
            step = self._pending.step  # type: ignore[union-attr]
            return step in self.policy.terminal_steps  # not one `return`: shown by its name

    assert guard_expression(Stricter, "steps_exhausted", DEFAULT_POLICY) == (
        "steps + 1 > max_steps (4)"
    )
    assert guard_expression(Stricter, "completes_run", DEFAULT_POLICY) == "completes_run"
    assert condition_expression(Run, "not prerequisites_passed", DEFAULT_POLICY) == (
        "not (passed.issuperset(requirements[pending.step] (commit-import: parser, access)) "
        "and passed.issuperset(resource_requirements[pending.step] (none)[pending.resource]))"
    )
    assert condition_expression(Run, "not is_pending_id and was_accepted", DEFAULT_POLICY) == (
        "not (type(plan_id) is str and pending is not None and pending.id == plan_id) "
        "and type(plan_id) is str and plan_id in accepted"
    )


def test_the_overview_is_readable_at_1200_px(tmp_path: Path) -> None:
    output = tmp_path / "overview.png"
    assert main(["diagram", "--view", "overview", "-o", str(output)]) == 0
    data = output.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width <= 1200, width  # shown 1:1 in a 1200 px window: no zoom, no scaling down
    full = render(machine_diagram(), "png")
    assert int.from_bytes(full[16:20], "big") > 2 * width  # what the overview saves
    svg = render(machine_diagram(), "svg", view="overview").decode()
    sizes = {float(size) for size in re.findall(r'font-size="([\d.]+)"', svg)}
    assert min(sizes) >= 11, sizes
    assert height > 0  # a reviewer scrolls down the states; never sideways


def test_the_overview_has_no_mermaid_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--view", "overview", "--format", "mermaid"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Graphviz" in err[0]
