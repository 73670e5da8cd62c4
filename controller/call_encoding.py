"""A controller call's exact JSON form: its argument and its answer, field by field.

Why one module: the run log stores each call so (``controller.durable.log``), the
spans carry it (``controller.telemetry``'s ``replan.argument``), and ``replan conform``
replays either; all three must write and read the same text, exactly, for every value
a call may carry (a plan's revision of any size, an evidence state, a malformed
argument).
"""

from __future__ import annotations

import json
import typing
from typing import Any

import replan.controller.records as _records_module
from replan.controller.records import RECORD_KINDS, EvidenceState
from replan.controller.run import shown

#: An int with more bits than this is stored as hex text (``json`` refuses to print
#: an int of more than ~4,300 digits, and a plan's revision may be any int).
_LARGEST_PLAIN_BITS = 4_000


def canonical(value: object) -> str:
    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plain(value: object) -> object:
    """``value`` with every int too long for ``json`` as ``{"int": hex}`` (a snapshot
    holds a plan's revision, which may be any int)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if type(value) is int and int.bit_length(value) > _LARGEST_PLAIN_BITS:
        return {"int": hex(value)}
    return value


def unplain(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"int"} and isinstance(value["int"], str):
            return int(value["int"], 16)
        return {key: unplain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unplain(item) for item in value]
    return value


#: An entry's argument: its record's fields in the record's order (fixed by the
#: record type, so the text is canonical without sorting: this runs on every call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
#: The answers an event gives, encoded once.
_ANSWERS: dict[object, str] = {None: "null", True: "true", False: "false"}


# ---- exact values -------------------------------------------------------------------

_RECORDS: dict[str, type] = {name: getattr(_records_module, name) for name in RECORD_KINDS}


#: Each record's fields' exact types, read from the records' own annotations: a value
#: of any other type (a subclass included) makes the record malformed.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    name: tuple(typing.get_type_hints(record).values()) for name, record in _RECORDS.items()
}


def _encode_field(value: object) -> object:
    if isinstance(value, EvidenceState):
        return str.__str__(value)
    if isinstance(value, int) and int.bit_length(value) > _LARGEST_PLAIN_BITS:
        return {"int": hex(value)}
    return value


def _decode_field(kind: str, value: object) -> object:
    if isinstance(value, dict):
        return int(value["int"], 16)
    return EvidenceState(str(value)) if kind == "evidence" else value


def encode_argument(parameter_type: str | None, argument: object) -> str:
    """The argument of a call whose parameter has ``parameter_type`` (the
    declaration's interface: a record name, ``str``, or None), exactly: a record
    field by field, with its types. An argument that is not exactly of its type (a
    malformed plan, a plan id that is no string) is logged as ``{"malformed": ...}``
    and replayed as ``None``: the guards answer every malformed value alike, and the
    logged answer checks that they did."""
    if parameter_type is None:
        return "null"
    if parameter_type == "str":
        return _COMPACT(argument if type(argument) is str else {"malformed": shown(argument)})
    record = _RECORDS[parameter_type]
    if type(argument) is record:
        values: tuple[object, ...] = tuple(tuple.__iter__(argument))  # type: ignore[arg-type]
        exact = _FIELD_TYPES[parameter_type]
        if all(type(value) is kind for value, kind in zip(values, exact, strict=True)):
            names: tuple[str, ...] = record._fields  # type: ignore[attr-defined]
            return _COMPACT(
                {name: _encode_field(value) for name, value in zip(names, values, strict=True)}
            )
    return _COMPACT({"malformed": shown(argument)})


def decode_argument(parameter_type: str | None, text: str) -> object:
    """The value ``encode_argument`` wrote (``None`` for a malformed one)."""
    value = json.loads(text)
    if parameter_type is None or (isinstance(value, dict) and "malformed" in value):
        return None
    if parameter_type == "str":
        return value
    kinds = RECORD_KINDS[parameter_type]
    return _RECORDS[parameter_type](
        *(_decode_field(kind, value[name]) for name, kind in kinds.items())
    )


def encode_answer(answer: object) -> str:
    """An event's answer (a bool, an ``ExecuteResult``, or None) as canonical JSON."""
    if answer is None or type(answer) is bool:
        return _ANSWERS[answer]
    return _COMPACT(str(answer))


__all__ = ["canonical", "decode_argument", "encode_answer", "encode_argument", "plain", "unplain"]
