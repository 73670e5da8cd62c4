"""`replan trace --otel FILE`: the reference episode's spans as OTLP/JSON. One
invoke_agent span and, under it, one span per controller call named by the fired
transition's diagram label, encoded per the OTLP JSON mapping (hex ids, integer enums,
64-bit integers as strings)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY

#: The episode's controller calls, in order (verification/subjects/episode.py).
CALL_SPANS = [
    "observe #9 [else] / record_renumbered",  # host: parser Unknown
    "propose #8 [else] / accept_plan",  # sdk: p1
    "execute #8 [else] / execute_step",  # sdk: p1
    "observe #7 [changes_state] / record_meaningful",  # host: parser Passed
    "observe #7 [changes_state] / record_meaningful",  # host: access Failed
    "propose #4 [evidence_stale] / reject_plan",  # direct: citing revision 1
    "propose #8 [else] / accept_plan",  # direct: p2
    "execute #5 [not prerequisites_passed] / deny_precondition",
    "observe #7 [changes_state] / record_meaningful",  # owner: access Passed
    "execute #2 [was_accepted] / answer_stale",  # p2 again
    "propose #8 [else] / accept_plan",  # p3
    "execute #7 [completes_run] / execute_step",
]


def _attributes(span: dict[str, object]) -> dict[str, object]:
    found: dict[str, object] = {}
    for item in span["attributes"]:  # type: ignore[attr-defined]
        ((_, value),) = item["value"].items()
        found[item["key"]] = value
    return found


def test_otel_writes_the_episodes_spans_as_otlp_json(tmp_path: Path) -> None:
    spans_file = tmp_path / "spans.json"
    assert main(["trace", "-o", str(tmp_path / "t.json"), "--otel", str(spans_file)]) == 0
    document = json.loads(spans_file.read_text(encoding="utf-8"))
    (resource,) = document["resourceSpans"]
    resource_attributes = {
        item["key"]: item["value"] for item in resource["resource"]["attributes"]
    }
    assert resource_attributes["service.name"] == {"stringValue": "replan"}
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "replan"
    spans = scope["spans"]
    (root,) = [span for span in spans if "parentSpanId" not in span]
    assert root["name"] == "invoke_agent replan"
    assert _attributes(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "replan",
    }
    calls = sorted(
        (span for span in spans if span is not root), key=lambda s: int(s["startTimeUnixNano"])
    )
    assert [span["name"] for span in calls] == CALL_SPANS
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and span["traceId"] == root["traceId"]
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
        assert span["kind"] == 1  # SPAN_KIND_INTERNAL
        assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])
    assert {span["parentSpanId"] for span in calls} == {root["spanId"]}
    last = _attributes(calls[-1])
    assert last == {
        "replan.transition": "pending --execute[completes_run]--> completed",
        "replan.operation": "execute",
        "replan.argument": '"p3"',  # as the run log encodes it: what conform replays
        "replan.seq": "12",  # an OTLP intValue is a decimal string
        "replan.policy": DEFAULT_POLICY.digest,
        "replan.result": "Executed",
        "replan.evidence_revision": "4",
        "replan.state": "Completed",
        "replan.stop_reason": "Completed",
        "replan.plan_id": "p3",
    }
    assert _attributes(calls[5])["replan.result"] == "false"


def test_otel_without_the_sdk_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "replan.verification.report.otlp", raising=False)
    for name in [n for n in sys.modules if n.startswith("opentelemetry.sdk")] + [
        "opentelemetry.sdk"
    ]:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    code = main(["trace", "-o", str(tmp_path / "t.json"), "--otel", str(tmp_path / "s.json")])
    assert code == 2
    assert "--otel needs opentelemetry-sdk" in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()
