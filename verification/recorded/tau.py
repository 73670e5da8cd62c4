"""The τ-bench trajectory reader: a JSON list of runs, each with ``task_id``, ``trial``,
``reward``, ``info.task.actions`` (the ground-truth actions) and ``traj`` (the
conversation: system, user, assistant messages with ``tool_calls``, tool results).

Bounded: the file is at most ``MAX_BYTES``, at most ``MAX_RUNS`` runs of at most
``MAX_MESSAGES`` messages each. Anything else is a ``RecordError``: one line naming the
run and the message, e.g. ``run 3 (task 1, trial 1), message 7: tool_calls[0].function
.arguments: not JSON``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_BYTES = 256 * 1024 * 1024
MAX_RUNS = 100_000
MAX_MESSAGES = 10_000


class RecordError(ValueError):
    """A trajectory file that cannot be read as τ-bench runs (one line)."""


@dataclass(frozen=True)
class Call:
    """One recorded tool call: its id, tool and arguments."""

    id: str
    tool: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Message:
    """One message of a run: ``role`` (system, user, assistant, tool), its text, the
    calls an assistant message carries, and for a tool result the call it answers."""

    role: str
    text: str
    calls: tuple[Call, ...] = ()
    call_id: str | None = None


@dataclass(frozen=True)
class RecordedRun:
    task_id: int
    trial: int
    reward: float
    messages: tuple[Message, ...]
    #: the task's ground-truth actions, (tool, arguments)
    actions: tuple[tuple[str, Mapping[str, Any]], ...]

    @property
    def label(self) -> str:
        return f"task {self.task_id}, trial {self.trial}"


def read_runs(path: str | Path) -> list[RecordedRun]:
    """The runs of a τ-bench trajectory file (``RecordError`` for anything else)."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_BYTES:
            raise RecordError(
                f"{file}: {size} bytes, more than the {MAX_BYTES} a trajectory file may have"
            )
        document = json.loads(file.read_bytes())
    except OSError as error:
        raise RecordError(f"{file}: cannot read ({error.strerror or error})") from None
    except (ValueError, RecursionError) as error:
        raise RecordError(f"{file}: not JSON ({str(error)[:120]})") from None
    if not isinstance(document, list):
        raise RecordError(f"{file}: expected a JSON list of runs, got {type(document).__name__}")
    if len(document) > MAX_RUNS:
        raise RecordError(f"{file}: {len(document)} runs, more than {MAX_RUNS}")
    return [_run(file, index, item) for index, item in enumerate(document)]


def _run(file: Path, index: int, item: object) -> RecordedRun:
    where = f"{file}: run {index}"
    if not isinstance(item, dict):
        raise RecordError(f"{where}: expected an object, got {type(item).__name__}")
    task_id, trial, reward = item.get("task_id"), item.get("trial"), item.get("reward")
    if type(task_id) is not int or type(trial) is not int:
        raise RecordError(
            f"{where}: task_id and trial must be integers, got {task_id!r:.40}, {trial!r:.40}"
        )
    where = f"{file}: run {index} (task {task_id}, trial {trial})"
    if type(reward) not in (int, float):
        raise RecordError(f"{where}: reward must be a number, got {reward!r:.40}")
    traj = item.get("traj")
    if not isinstance(traj, list):
        raise RecordError(f"{where}: traj must be a list of messages")
    if len(traj) > MAX_MESSAGES:
        raise RecordError(f"{where}: {len(traj)} messages, more than {MAX_MESSAGES}")
    messages = tuple(
        _message(f"{where}, message {position}", raw) for position, raw in enumerate(traj)
    )
    return RecordedRun(task_id, trial, float(reward), messages, _actions(where, item.get("info")))


def _actions(where: str, info: object) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    task = info.get("task") if isinstance(info, dict) else None
    actions = task.get("actions", []) if isinstance(task, dict) else []
    if not isinstance(actions, list):
        raise RecordError(f"{where}: info.task.actions must be a list")
    found = []
    for position, action in enumerate(actions):
        if not (
            isinstance(action, dict)
            and isinstance(action.get("name"), str)
            and isinstance(action.get("kwargs", {}), dict)
        ):
            raise RecordError(f"{where}: info.task.actions[{position}]: expected name and kwargs")
        found.append((action["name"], action.get("kwargs", {})))
    return tuple(found)


def _text(where: str, raw: Mapping[str, Any]) -> str:
    content = raw.get("content")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise RecordError(
            f"{where}: content must be a string or null, got {type(content).__name__}"
        )
    return content


def _message(where: str, raw: object) -> Message:
    if not isinstance(raw, dict):
        raise RecordError(f"{where}: expected an object, got {type(raw).__name__}")
    role = raw.get("role")
    if role in ("system", "user"):
        return Message(role, _text(where, raw))
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise RecordError(f"{where}: a tool result needs a tool_call_id")
        return Message("tool", _text(where, raw), call_id=call_id)
    if role != "assistant":
        raise RecordError(f"{where}: unknown role {role!r:.40}")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RecordError(f"{where}: tool_calls must be a list")
    return Message(
        "assistant",
        _text(where, raw),
        tuple(_call(f"{where}: tool_calls[{k}]", c) for k, c in enumerate(calls)),
    )


def _call(where: str, raw: object) -> Call:
    function = raw.get("function") if isinstance(raw, dict) else None
    call_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(call_id, str) or not call_id:
        raise RecordError(f"{where}.id: expected a non-empty string")
    if (
        not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not function["name"]
    ):
        raise RecordError(f"{where}.function.name: expected a non-empty string")
    text = function.get("arguments") or "{}"
    if not isinstance(text, str):
        raise RecordError(f"{where}.function.arguments: expected a JSON string")
    try:
        arguments = json.loads(text)
    except (ValueError, RecursionError):
        raise RecordError(f"{where}.function.arguments: not JSON: {text[:60]!r}") from None
    if not isinstance(arguments, dict):
        raise RecordError(f"{where}.function.arguments: expected a JSON object")
    return Call(call_id, function["name"], arguments)
