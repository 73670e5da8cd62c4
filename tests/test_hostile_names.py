"""Hostile names stay data. A name is one line of visible text (the schema, the loader
and the policy reference agree: no control, line-break, invisible or bidirectional
character, at most 200 characters), and every report escapes whatever it shows anyway:
the Markdown report (GitHub's job summary), Mermaid, DOT, the review page's HTML and
its embedded JSON, SARIF and JUnit. The last test is a Hypothesis campaign over names
made of each format's syntax."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from replan.cli import main
from replan.controller import DEFAULT_POLICY, Policy, PolicyError
from replan.controller.policy import policy_from_dict, policy_to_toml
from replan.controller.policy_schema import policy_schema
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.verification.report.diagram import render
from replan.verification.report.diagram.graph import Diagram, build
from replan.verification.report.diagram.mermaid import parse, to_mermaid
from replan.verification.report.records import (
    CheckResult,
    VerifyReport,
    write_junit,
    write_markdown,
)
from replan.verification.report.review import build as review_build
from replan.verification.report.review import build_review, to_html
from replan.verification.report.sarif import sarif_log
from replan.verification.report.text import mermaid_decoded, visible, visible_lines

MODEL = extract(Replanning)
PLACEHOLDER = "zqxplaceholder"


def policy_named(name: str) -> dict[str, Any]:
    """One key, one step and one resource, all called ``name``: every category of name
    the reports show, and no other name to sort it against."""
    return {
        "evidence": {"keys": [name]},
        "resources": {"allowed": [name]},
        "steps": [{"name": name, "requires": [name], "completes_run": True}],
    }


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ---- what a name may contain: the loader, the schema and the docs agree -------------------


@pytest.mark.parametrize(
    ("name", "character"),
    [
        ("parser\n## All checks hold", "U+000A (a line break)"),
        ("access\r", "U+000D (a carriage return)"),
        ("tab\there", "U+0009 (a tab)"),
        ("evil\u202egnp.exe", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("zero\u200bwidth", "U+200B (ZERO WIDTH SPACE)"),
        ("isolate\u2066x\u2069", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
        ("escape\x1b[31m", "U+001B (a control character)"),
        ("line\u2028separator", "U+2028 (LINE SEPARATOR)"),
    ],
    ids=["newline", "return", "tab", "rtl-override", "zero-width", "isolate", "esc", "u2028"],
)
def test_a_name_that_cannot_be_shown_as_one_line_of_text_is_a_policy_error_naming_the_character(
    name: str, character: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PolicyError, match=re.escape(character)) as raised:
        policy_from_dict(policy_named(name))
    assert str(raised.value).startswith("evidence.keys[0]: a name is one line of visible text")
    path = tmp_path / "policy.toml"
    path.write_text(
        policy_to_toml(DEFAULT_POLICY).replace('"inspect-parser"', json.dumps(name)),
        encoding="utf-8",
    )
    assert main(["policy", str(path)]) == 2
    assert "steps[0].name: a name is one line of visible text" in one_line(capsys)


def test_a_name_longer_than_200_characters_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="at most 200 characters, got 201"):
        policy_from_dict(policy_named("k" * 201))
    policy_from_dict(policy_named("k" * 200))


def test_the_schema_refuses_the_names_the_loader_refuses() -> None:
    validator = jsonschema.Draft202012Validator(policy_schema())
    for name in ("a\nb", "x\u202ey", "k" * 201, "\x7f"):
        assert not validator.is_valid(policy_named(name)), name
    for name in ("<!--<script>", "[x](y) | # `z` 😀", "k" * 200):
        assert validator.is_valid(policy_named(name)), name


def test_markup_characters_are_allowed_in_a_name() -> None:
    policy = policy_from_dict(policy_named("<!--<script> [all](x) | # `z` ; %% -->"))
    assert policy.keys == ("<!--<script> [all](x) | # `z` ; %% -->",)


# ---- each output escapes what it shows, wherever it comes from ----------------------------


def report_quoting(policy: Policy, name: str, evidence: Path) -> VerifyReport:
    """A failed verify report whose free text quotes ``name`` everywhere a check's
    text reaches the report (summaries, findings, failures, paths, what changed)."""
    report = VerifyReport(policy, "ci", str(evidence))
    report.checks = [
        CheckResult("policy", "passed", f"the policy declares {name}"),
        CheckResult(
            "explorer",
            "failed",
            f"step {name} broke",
            warnings=[f"key {name} is never required"],
            failure_text=f"the run of {name}\n  broke at step 2",
            counterexamples=[f"out/{name}.json"],
            replay=[f"replan replay out/{name}.json"],
            properties=[f"{name}-holds"],
        ),
    ]
    report.against_lines = [f"keys added: {name}"]
    report.gaps = [f"the transition of {name} never fired"]
    diagram = build(MODEL, policy)
    report.mermaid = to_mermaid(diagram)
    return report


def test_a_name_cannot_add_a_heading_a_row_a_link_or_html_to_the_markdown_report(
    tmp_path: Path,
) -> None:
    name = "x | y |\n## All checks hold\n[click](https://example.com) <!-- <b>raw</b>"
    report = report_quoting(DEFAULT_POLICY, name, tmp_path)
    page = write_markdown(report, tmp_path / "verify-report.md").read_text(encoding="utf-8")
    benign = write_markdown(
        report_quoting(DEFAULT_POLICY, PLACEHOLDER, tmp_path), tmp_path / "benign.md"
    ).read_text(encoding="utf-8")
    assert _markdown_structure(page) == _markdown_structure(benign)
    assert visible(name) in _markdown_text(page)


def test_a_line_break_in_a_label_cannot_add_a_mermaid_statement() -> None:
    hostile = "x\n    idle --> canceled : forged\n    click idle call alert()"
    diagram = _with_legend_value(build(MODEL, DEFAULT_POLICY), hostile)
    benign = _with_legend_value(build(MODEL, DEFAULT_POLICY), PLACEHOLDER)
    text, reference = to_mermaid(diagram), to_mermaid(benign)
    assert "click" not in [line.split()[0] for line in text.splitlines() if line.strip()]
    assert parse(text).transitions == parse(reference).transitions
    assert len(text.splitlines()) == len(reference.splitlines())
    assert mermaid_decoded(text) == mermaid_decoded(reference).replace(
        PLACEHOLDER, visible(hostile)
    )


def test_a_semicolon_or_html_in_a_name_is_shown_by_mermaid_not_dropped() -> None:
    name = "a;b <b>c</b> %% d"
    text = to_mermaid(build(MODEL, policy_from_dict(policy_named(name))))
    assert name not in text and mermaid_decoded(text).count(name) >= 1
    parse(text)


def test_a_name_holding_a_script_comment_does_not_stall_the_review_pages_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``<!--<script>`` in a script element's text makes the HTML parser skip the real
    ``</script>``: the player never ran. The records are JSON with ``<`` escaped."""
    monkeypatch.setattr(review_build, "dot_available", lambda: False)
    name = "<!--<script>"
    page = _page(policy_from_dict(policy_named(name)), name, tmp_path)
    data = _script_data(page)
    assert "<" not in data and json.loads(data)["policy"]["evidence"]["keys"] == [name]
    assert _tags(page) == _tags(
        _page(policy_from_dict(policy_named(PLACEHOLDER)), PLACEHOLDER, tmp_path)
    )


def test_a_name_cannot_forge_a_link_in_a_sarif_message(tmp_path: Path) -> None:
    name = "see [the fix](1)"
    log = _sarif(policy_from_dict(policy_named(name)), name, tmp_path)
    texts = _sarif_texts(log)
    assert texts and all(not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(\d+\)", t) for t in texts)
    assert any(_sarif_unescaped(t).count(name) for t in texts)


def test_a_control_character_in_a_summary_keeps_the_junit_report_xml(tmp_path: Path) -> None:
    report = report_quoting(DEFAULT_POLICY, "bell\x07 escape\x1b[0m", tmp_path)
    junit = write_junit(report, tmp_path / "junit.xml").read_bytes()
    tree = ET.fromstring(junit)
    messages = [failure.get("message") for failure in tree.iter("failure")]
    assert messages == ["step bell\\x07 escape\\x1b[0m broke"]


def test_a_control_character_in_a_dot_label_is_written_visibly() -> None:
    diagram = _with_legend_value(build(MODEL, DEFAULT_POLICY), "a\x00b\nc\u202ed")
    source = render(diagram, "dot").decode()
    assert "a\\x00b\\nc\\u202ed" in source and "\x00" not in source and "\u202e" not in source


# ---- the campaign: names made of every format's syntax ----------------------------------------

FRAGMENTS = [
    "\n", "\r\n", "\t", "\x00", "\x1b[31m", "\u202e", "\u2066", "\u200b", "\ufeff", "\u2028",
    "<!--", "-->", "<script>", "</script>", "<b>", "&lt;", "&", "[x](https://e.example)",
    "[x](0)", "](1)",
    "# All checks hold", "## ", "| a | b |", "|", "`", "```", "~~~", "*", "_", "$x$", "\\",
    '"', "'", "click idle call alert()", "end note", "note left of idle", "idle --> canceled",
    ";", "%%", "#59;", "#lt;", "classDef x fill:red", "[*]", "{", "}", ":", "-", "1.", "+",
    "=", "!", "@here", "é", "😀", "x", "parser", " ",
]  # fmt: skip
names = (
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), min_size=1, max_size=6)
    .map("".join)
    .filter(lambda name: 0 < len(name) <= 200)
)


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, Any]]:
    """Every output for the placeholder name: in a policy (True) or only quoted by the
    report's text (False, the default policy)."""
    return {
        True: _outputs(
            policy_from_dict(policy_named(PLACEHOLDER)),
            PLACEHOLDER,
            tmp_path_factory.mktemp("reference"),
        ),
        False: _outputs(None, PLACEHOLDER, tmp_path_factory.mktemp("reference")),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=names)
def test_a_hostile_name_is_refused_in_one_line_or_shown_as_text_by_every_output(
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    references: dict[bool, dict[str, Any]],
) -> None:
    tmp_path = tmp_path_factory.mktemp("names")
    try:
        policy = policy_from_dict(policy_named(name))
    except PolicyError as error:  # refused: one line naming where
        message = str(error)
        assert "\n" not in message and message.startswith("evidence.keys[0]: ")
        policy = None
    # Whatever the loader says, a report shows it when a check's text quotes it.
    outputs = _outputs(policy, name, tmp_path)
    reference = references[policy is not None]
    shown = visible(name)
    # Markdown: the same blocks, tables and inline markup; the name as text.
    assert _markdown_structure(outputs["markdown"]) == _markdown_structure(reference["markdown"])
    assert shown in _markdown_text(outputs["markdown"])
    # Mermaid and DOT: the name only ever in its escaped form, where the placeholder is.
    for kind in ("mermaid", "dot", "overview"):
        if policy is not None:
            assert outputs[kind] == reference[kind].replace(PLACEHOLDER, _escaped(kind, name))
    parse(outputs["mermaid"])
    # HTML: the same elements; the records' JSON holds the name exactly.
    assert _tags(outputs["html"]) == _tags(reference["html"])
    data = json.loads(_script_data(outputs["html"]))
    assert "<" not in _script_data(outputs["html"])
    assert data["command"] == f"replan review --policy {name}"  # exactly, whatever it holds
    # SARIF: no link beyond the reference's; the name as text.
    texts, reference_texts = _sarif_texts(outputs["sarif"]), _sarif_texts(reference["sarif"])
    assert [_links(t) for t in texts] == [_links(t) for t in reference_texts]
    assert any(_sarif_escaped(name) in t for t in texts)
    # JUnit: well-formed XML, the name as text.
    tree = ET.fromstring(outputs["junit"])
    assert [f.get("message") for f in tree.iter("failure")] == [f"step {shown} broke"]


# ---- helpers ---------------------------------------------------------------------------


#: What Mermaid reads as syntax inside a label: a statement's end, a comment, HTML and
#: entities, quotes, code and directive braces, a line break.
MERMAID_SYNTAX = re.compile(r"[;%<>&\"`{}\n\r]")


def _escaped(kind: str, name: str) -> str:
    """The name as each format must show it. Mermaid's form is the report's own, held
    to what Mermaid reads: no syntax left once its numeric entities are taken out, and
    those entities decode to the name shown visibly."""
    if kind != "mermaid":
        return html.escape(visible(name), quote=True)
    from replan.verification.report.text import mermaid

    label = mermaid(name)
    assert not MERMAID_SYNTAX.search(re.sub(r"#\d+;", "", label)), label
    assert re.sub(r"#(\d+);", lambda m: chr(int(m[1])), label) == visible(name), label
    return label


def _sarif_escaped(name: str) -> str:
    """SARIF 2.1.0's message text: ``[``, ``]`` and ``\\`` each after a backslash, so
    the name cannot open a link to a related location."""
    return re.sub(r"([\\\[\]])", r"\\\1", visible_lines(name))


def _outputs(policy: Policy | None, name: str, tmp_path: Path) -> dict[str, Any]:
    shown_policy = DEFAULT_POLICY if policy is None else policy
    report = report_quoting(shown_policy, name, tmp_path)
    diagram = build(MODEL, shown_policy)
    with pytest.MonkeyPatch.context() as patch:  # the page without SVG: Graphviz is slow
        patch.setattr(review_build, "dot_available", lambda: False)
        page = _page(shown_policy, name, tmp_path, report)
    return {
        "markdown": write_markdown(report, tmp_path / "r.md").read_text(encoding="utf-8"),
        "junit": write_junit(report, tmp_path / "j.xml").read_bytes(),
        "mermaid": to_mermaid(diagram),
        "dot": render(diagram, "dot").decode(),
        "overview": render(diagram, "dot", "overview").decode(),
        "html": page,
        "sarif": _sarif(shown_policy, name, tmp_path, report),
    }


def _page(policy: Policy, name: str, tmp_path: Path, report: VerifyReport | None = None) -> str:
    report = report or report_quoting(policy, name, tmp_path)
    review = build_review(
        command=f"replan review --policy {name}",
        policy=policy,
        policy_name=name,
        model=MODEL,
        report=report,
        verify_source=str(tmp_path / "verify.json"),
        playbacks=[],
    )
    return to_html(review)


def _sarif(
    policy: Policy, name: str, tmp_path: Path, report: VerifyReport | None = None
) -> dict[str, Any]:
    report = report or report_quoting(policy, name, tmp_path)
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(policy_to_toml(policy), encoding="utf-8")
    return sarif_log(report, policy_file, root=tmp_path)


def _sarif_texts(log: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            message = node.get("message")
            if isinstance(message, dict) and isinstance(message.get("text"), str):
                found.append(message["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(log["runs"][0]["results"])
    return found


def _sarif_unescaped(text: str) -> str:
    return re.sub(r"\\([\\\[\]])", r"\1", text)


def _links(text: str) -> int:
    return len(re.findall(r"(?<!\\)\[[^\]]*(?<!\\)\]\(\d+\)", text))


_MARKDOWN = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _markdown_structure(page: str) -> list[str]:
    """The page's block and inline token types (adjacent text merged): what a reader
    sees as structure, whatever the text in it."""
    structure = []
    for token in _MARKDOWN.parse(page):
        structure.append(token.type)
        children = [child.type for child in token.children or []]
        merged = [
            t for i, t in enumerate(children) if t != "text" or i == 0 or children[i - 1] != "text"
        ]
        structure += merged
    return structure


def _markdown_text(page: str) -> str:
    rendered = _MARKDOWN.render(page)
    return html.unescape(re.sub(r"<[^>]+>", "", rendered))


def _with_legend_value(diagram: Diagram, value: str) -> Diagram:
    legend = tuple(
        dataclasses.replace(row, value=value) if index == 0 else row
        for index, row in enumerate(diagram.legend)
    )
    return dataclasses.replace(diagram, legend=legend)


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.tags.append("/" + tag)

    def handle_comment(self, data: str) -> None:
        self.tags.append("<!---->")


def _tags(page: str) -> list[str]:
    collector = _TagCollector()
    collector.feed(page)
    collector.close()
    return collector.tags


def _script_data(page: str) -> str:
    start = page.index('<script type="application/json" id="review-data">')
    start = page.index(">", start) + 1
    return page[start : page.index("</script>", start)]
