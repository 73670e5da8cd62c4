"""The reference episode's spans, and spans as OTLP/JSON (``replan trace --otel FILE``).

Why OTLP/JSON: it is what an OpenTelemetry Collector's ``otlpjson`` receiver and file
exporter read, and what ``POST /v1/traces`` takes with ``Content-Type:
application/json``, so the episode's spans can be loaded into any trace backend
without running replan there.

The document is built here from the SDK's ``ReadableSpan`` following the OTLP JSON
mapping (opentelemetry-proto's ``docs/specification.md`` "JSON Protobuf Encoding"):
lowerCamelCase field names, trace and span ids as lowercase hex (not base64, unlike
proto3's generic JSON mapping), enumerations as integers, 64-bit integers as decimal
strings. ``opentelemetry-exporter-otlp-proto-common`` encodes protobuf only, and its
JSON would need protobuf plus the id re-encoding anyway, so it is not used.

Needs ``opentelemetry-sdk`` (the ``otel`` extra): the spans are collected in memory
by a ``TracerProvider`` built here; the global provider is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from replan.controller.policy import Policy
from replan.controller.telemetry import TracedController, agent_run

SERVICE_NAME = "replan"
#: OTLP's ``Span.SpanKind`` numbering: the API's enumeration starts at INTERNAL = 0,
#: OTLP's at SPAN_KIND_UNSPECIFIED = 0.
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}


def _value(value: object) -> dict[str, Any]:
    """An ``AnyValue``: one of stringValue, boolValue, intValue (a decimal string),
    doubleValue, arrayValue."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": str(value)}


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in (attributes or {}).items()]


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    encoded: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
    }
    if span.parent is not None:
        encoded["parentSpanId"] = f"{span.parent.span_id:016x}"
    encoded |= {
        "name": span.name,
        "kind": _KIND[span.kind],
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": _attributes(span.attributes),
    }
    if span.events:
        encoded["events"] = [
            {
                "timeUnixNano": str(event.timestamp),
                "name": event.name,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ]
    status: dict[str, Any] = {}
    if span.status.status_code is not StatusCode.UNSET:
        status["code"] = span.status.status_code.value  # OTLP: UNSET 0, OK 1, ERROR 2
    if span.status.description:
        status["message"] = span.status.description
    encoded["status"] = status
    return encoded


def otlp_json(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest``: spans grouped by resource, then by
    instrumentation scope, each group in the order its first span ended."""
    resources: dict[int, tuple[Resource, dict[tuple[str, str | None], list[ReadableSpan]]]] = {}
    for span in spans:
        _, scopes = resources.setdefault(id(span.resource), (span.resource, {}))
        scope = span.instrumentation_scope
        key = ("", None) if scope is None else (scope.name, scope.version)
        scopes.setdefault(key, []).append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {
                        "scope": {"name": name, **({"version": version} if version else {})},
                        "spans": [_span(span) for span in members],
                    }
                    for (name, version), members in scopes.items()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


def in_memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A provider whose spans are kept in memory (exported as each one ends)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def reference_episode_spans(controller_class: Callable[[Policy], Any]) -> list[ReadableSpan]:
    """The reference episode run once more, its controller traced: one
    ``invoke_agent replan`` span, and under it a span per controller call (the SDK
    request's two, the host's observations, the direct calls), named by the fired
    transition's diagram label. The episode's lockstep replay on fresh controllers
    afterwards is not traced: it is the check, not the episode."""
    from replan.verification.subjects.episode import run_reference_episode

    provider, exporter = in_memory_provider()
    traced: list[Any] = []

    def first_traced(policy: Policy) -> Any:
        controller = controller_class(policy)
        if traced:
            return controller
        traced.append(TracedController(controller, tracer_provider=provider))
        return traced[0]

    with agent_run("replan", tracer_provider=provider):
        run_reference_episode(first_traced)
    provider.shutdown()
    return list(exporter.get_finished_spans())
