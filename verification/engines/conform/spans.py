"""A run's OpenTelemetry spans, exported as OTLP/JSON, read as the calls it made.

Why: a host that exports replan's spans (``controller.telemetry``) to a trace backend
has the run's every controller call there, with the argument as the run log encodes
it (``replan.argument``), the answer (``replan.result``), its number in the run
(``replan.seq``) and the policy's digest (``replan.policy``): enough for ``replan
conform`` to replay it, with no run log kept. Only the spans of one run are read: a
file holding several runs' spans (two trace ids) is refused, naming them.
"""

from __future__ import annotations

import json
from typing import Any

from replan.controller.call_encoding import canonical, encode_answer
from replan.controller.durable.log import Entry
from replan.controller.records import ExecuteResult, StopReason
from replan.controller.telemetry import ARGUMENT, OPERATION, POLICY, RESULT, SEQUENCE

#: The answers ``controller.telemetry`` writes as a word, and what they were.
_WORDS: dict[str, object] = {"true": True, "false": False, "None": None}
_NAMED = frozenset({*ExecuteResult, *StopReason})


class SpansError(ValueError):
    """The document is not one run's spans as replan exports them (one line)."""


def is_otlp(document: Any) -> bool:
    return isinstance(document, dict) and "resourceSpans" in document


def _value(wrapped: Any) -> object:
    """An OTLP/JSON ``AnyValue``'s value (integers are decimal strings there)."""
    if not isinstance(wrapped, dict) or len(wrapped) != 1:
        raise SpansError(f"an attribute value that is not an OTLP AnyValue ({str(wrapped)[:60]})")
    ((kind, value),) = wrapped.items()
    return int(value) if kind == "intValue" else value


def _attributes(span: Any) -> dict[str, object]:
    if not isinstance(span, dict) or not isinstance(span.get("attributes", []), list):
        raise SpansError(f"a span that is not an OTLP span ({str(span)[:60]})")
    found: dict[str, object] = {}
    for item in span.get("attributes", []):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise SpansError(f"an attribute that is not an OTLP KeyValue ({str(item)[:60]})")
        found[item["key"]] = _value(item.get("value"))
    return found


def _spans(document: dict[str, Any]) -> list[Any]:
    spans: list[Any] = []
    try:
        for resource in document["resourceSpans"]:
            for scope in resource.get("scopeSpans", []):
                spans.extend(scope.get("spans", []))
    except (TypeError, AttributeError):
        raise SpansError(
            "resourceSpans is not OTLP/JSON (resource, scope and span lists)"
        ) from None
    return spans


def _answer(text: object) -> str:
    """The run log's encoding of an answer ``controller.telemetry`` wrote as text."""
    if not isinstance(text, str):
        raise SpansError(f"{RESULT} {text!r} is not text")
    if text in _WORDS:
        return encode_answer(_WORDS[text])
    if text in _NAMED:
        return json.dumps(text)
    return canonical({"error": text})  # the class of the error the call raised


def span_calls(document: dict[str, Any]) -> tuple[list[Entry], list[dict[str, Any]]]:
    """The calls of the one run whose spans ``document`` holds, in order, and one
    record per call naming its policy (as ``policy_of_trace`` reads trace records)."""
    calls: dict[str, list[tuple[int, Entry, object]]] = {}
    for span in _spans(document):
        attributes = _attributes(span)
        if OPERATION not in attributes:
            continue  # an agent's or a tool's span, not a controller call's
        seq, op, argument = (attributes.get(k) for k in (SEQUENCE, OPERATION, ARGUMENT))
        if type(seq) is not int or not isinstance(op, str) or not isinstance(argument, str):
            raise SpansError(
                f"a {op} span without an integer {SEQUENCE} and a text {ARGUMENT} (spans "
                "of replan before the argument was exported cannot be replayed)"
            )
        entry = Entry(seq, op, argument, _answer(attributes.get(RESULT)))
        calls.setdefault(str(span.get("traceId")), []).append((seq, entry, attributes.get(POLICY)))
    if len(calls) > 1:
        named = ", ".join(sorted(calls)[:3])
        raise SpansError(f"the spans of {len(calls)} traces ({named}): export one run's")
    ordered = sorted(next(iter(calls.values()), []), key=lambda call: call[0])
    if [seq for seq, _, _ in ordered] != list(range(1, len(ordered) + 1)):
        raise SpansError(
            f"{SEQUENCE} is not 1, 2, ... without gaps: some of the run's spans are missing"
        )
    records = [{"policy": policy} for _, _, policy in ordered if isinstance(policy, str)]
    return [entry for _, entry, _ in ordered], records


__all__ = ["SpansError", "is_otlp", "span_calls"]
