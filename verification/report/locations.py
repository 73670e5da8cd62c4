"""Where in the sources a verify finding is: the line a person would change.

Owns finding lines, nothing else: a policy TOML key's line (a small line-based
locator: ``[table]`` and ``[[array]]`` headers, ``key =`` lines, multi-line arrays and
strings skipped), a declared transition's line in the declaration class (read with
``inspect`` and ``ast``, so it follows the file as it is edited), an event's or a
state's line there, and a function's first line. Every locator answers ``None``
rather than raise: a finding without a line is still a finding (``verification/
sarif.py`` falls back to the policy file's first line).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from replan.spec import bodies

#: A path into a policy document: ("limits", "max_steps"), ("steps", 2, "requires").
TomlPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Location:
    """One line of one file, and what it is (shown beside the line)."""

    path: Path
    line: int
    what: str = ""


# ---- the policy file ---------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*(\]\]?)\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


def _name(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _depth_change(text: str) -> tuple[int, bool]:
    """How much ``text`` (a value, after ``=``) opens brackets, ignoring strings and
    comments, and whether it opens a multi-line string it does not close."""
    depth = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "#":
            break
        if text.startswith(('"""', "'''"), index):
            quote = text[index : index + 3]
            end = text.find(quote, index + 3)
            if end < 0:
                return depth, True
            index = end + 3
            continue
        if char in "\"'":
            end = index + 1
            while end < len(text) and text[end] != char:
                end += 2 if char == '"' and text[end] == "\\" else 1
            index = end + 1
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        index += 1
    return depth, False


def toml_lines(text: str) -> dict[TomlPath, int]:
    """Each table, array entry and key of a TOML document, by its path, and the
    (1-based) line it is written on. Top-level keys and inline tables are known by
    their own line only; dotted keys by their first part."""
    found: dict[TomlPath, int] = {}
    counts: dict[tuple[str, ...], int] = {}
    table: TomlPath = ()
    depth = 0
    in_string: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if in_string in line:
                in_string = None
            continue
        if depth > 0:
            change, _ = _depth_change(line)
            depth = max(0, depth + change)
            continue
        header = _HEADER.match(line)
        if header and len(header.group(1)) == len(header.group(3)):
            names = tuple(_name(part) for part in header.group(2).split("."))
            if header.group(1) == "[[":
                index = counts.get(names, 0)
                counts[names] = index + 1
                table = (*names, index)
                found.setdefault(names, number)
            else:
                table = names
            found.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            name = _name(key.group(1).split(".")[0])
            found.setdefault((*table, name), number)
            change, opens_string = _depth_change(line[key.end() :])
            depth = max(0, change)
            if opens_string:
                quote = '"""' if '"""' in line[key.end() :] else "'''"
                in_string = quote
    return found


def policy_location(path: Path, *wanted: TomlPath) -> Location | None:
    """The line of the first of ``wanted`` the policy file writes; failing all of
    them, the nearest enclosing table or entry of the first (None: unreadable)."""
    lines = _policy_lines(path)
    if lines is None:
        return None
    for target in wanted:
        if target in lines:
            return Location(path, lines[target], _path_text(target))
    for target in wanted:
        for size in range(len(target) - 1, 0, -1):
            prefix = target[:size]
            if prefix in lines:
                return Location(path, lines[prefix], _path_text(prefix))
    return None


def _path_text(path: TomlPath) -> str:
    parts: list[str] = []
    for part in path:
        if isinstance(part, int):
            parts[-1] += f"[{part}]"
        else:
            parts.append(part)
    return ".".join(parts)


@cache
def _cached_lines(path: Path, stamp: tuple[int, int]) -> dict[TomlPath, int] | None:
    try:
        return toml_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _policy_lines(path: Path) -> dict[TomlPath, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return _cached_lines(path, (status.st_mtime_ns, status.st_size))


# ---- the declaration -------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredRow:
    """A transition as the declaration's source writes it (one row of ``every`` or
    one ``state.to(...)`` call): the states it leaves, where it goes, its guard and
    action, and its line."""

    event: str
    sources: tuple[str, ...]
    target: str | None  # None: stays (an internal self-transition)
    cond: str
    action: str
    line: int


@dataclass(frozen=True)
class Declaration:
    """The declaration class's source read for lines: its rows, each event's and
    each state's line."""

    path: Path
    rows: tuple[DeclaredRow, ...]
    events: dict[str, int]
    states: dict[str, int]
    line: int

    def transition(self, label: str, transitions: Iterable[Any] = ()) -> Location | None:
        """The line of the declared transition ``label`` (``source --event[cond]-->
        target``); ``transitions`` (a model's ``TransitionInfo``s) give its action,
        which tells apart rows that differ only by it. The event's line when no row
        matches (a transformed declaration)."""
        parsed = parse_label(label)
        if parsed is None:
            return None
        source, event, cond, target = parsed
        action = next((t.action for t in transitions if t.label == label), None)
        best: tuple[int, DeclaredRow] | None = None
        for row in self.rows:
            if row.event != event or source not in row.sources:
                continue
            score = (
                4 * (row.cond == cond)
                + 2 * ((row.target or source) == target)
                + (action is not None and row.action == action)
            )
            if score >= 4 and (best is None or score > best[0]):
                best = (score, row)
        if best is not None:
            return Location(self.path, best[1].line, label)
        return self.event(event)

    def event(self, event: str) -> Location | None:
        line = self.events.get(event)
        return None if line is None else Location(self.path, line, f"the {event} transitions")

    def state(self, state: str) -> Location | None:
        line = self.states.get(state)
        return None if line is None else Location(self.path, line, f"state {state}")

    def entering(self, state: str) -> Location | None:
        """The first row that moves to ``state`` (a final state: what stops a run so)."""
        row = next((r for r in self.rows if r.target == state), None)
        if row is None:
            return self.state(state)
        return Location(self.path, row.line, f"{row.event} to {state}")


_LABEL = re.compile(r"^(\w+) --(\w+)(?:\[(.*)\])?--> (\w+)$")


def parse_label(label: str) -> tuple[str, str, str, str] | None:
    """(source, event, cond, target) of a transition label."""
    found = _LABEL.match(label.strip())
    if found is None:
        return None
    source, event, cond, target = found.groups()
    return source, event, _normal_guard(cond or ""), target


def _normal_guard(text: str) -> str:
    """A guard as ``spec.model`` writes it in a label."""
    if not text:
        return ""
    try:
        from replan.spec.model import parse_guard

        return ast.unparse(parse_guard(text))
    except Exception:
        return text


def _string(node: ast.expr | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _state_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _alternatives(node: ast.expr) -> list[ast.expr]:
    """The operands of a chain of ``|``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _alternatives(node.left) + _alternatives(node.right)
    return [node]


def _rows(event: str, node: ast.expr, stay: str) -> list[DeclaredRow]:
    rows: list[DeclaredRow] = []
    for part in _alternatives(node):
        if not isinstance(part, ast.Call):
            continue
        function = part.func
        if isinstance(function, ast.Name) and function.id == "every" and part.args:
            states = part.args[0]
            named = (_state_name(e) for e in getattr(states, "elts", []))
            sources = tuple(name for name in named if name is not None)
            for row in part.args[1:]:
                if not isinstance(row, ast.Tuple) or len(row.elts) != 3:
                    continue
                target_node, cond_node, action_node = row.elts
                target = _state_name(target_node)
                rows.append(
                    DeclaredRow(
                        event,
                        sources,
                        None if target == stay else target,
                        _normal_guard(_string(cond_node)),
                        _string(action_node),
                        row.lineno,
                    )
                )
            continue
        keywords = {k.arg: k.value for k in part.keywords if k.arg}
        cond = _normal_guard(_string(keywords.get("cond")))
        action = _string(keywords.get("on"))
        # state.to.itself(...) or state.to(target, ...)
        if (
            isinstance(function, ast.Attribute)
            and function.attr == "itself"
            and isinstance(function.value, ast.Attribute)
            and function.value.attr == "to"
        ):
            source = _state_name(function.value.value)
            if source is not None:
                rows.append(DeclaredRow(event, (source,), None, cond, action, part.lineno))
        elif isinstance(function, ast.Attribute) and function.attr == "to" and part.args:
            source = _state_name(function.value)
            target = _state_name(part.args[0])
            if source is not None:
                rows.append(DeclaredRow(event, (source,), target, cond, action, part.lineno))
    return rows


def declaration(machine_class: type) -> Declaration | None:
    """The declaration class's rows and lines (None: its source cannot be read)."""
    try:
        return _declaration(machine_class)
    except (OSError, TypeError, SyntaxError):
        return None


@cache
def _declaration(machine_class: type) -> Declaration:
    found = bodies.class_tree(machine_class)
    assert found is not None, f"{machine_class.__qualname__}: its source cannot be read"
    source_file, first, body = found
    path = Path(source_file)
    offset = first - 1
    stay = "STAY"
    rows: list[DeclaredRow] = []
    events: dict[str, int] = {}
    states: dict[str, int] = {}
    for statement in body.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        target = statement.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = statement.value
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "State"
        ):
            states[target.id] = statement.lineno + offset
            continue
        found = _rows(target.id, value, stay)
        if found:
            events[target.id] = statement.lineno + offset
            rows += [
                DeclaredRow(r.event, r.sources, r.target, r.cond, r.action, r.line + offset)
                for r in found
            ]
    return Declaration(path, tuple(rows), events, states, first)


def machine_class(model: Any) -> type | None:
    """The declaration class a ``MachineModel`` was read from (its module and name)."""
    module = sys.modules.get(getattr(model, "module", ""))
    found = getattr(module, getattr(model, "name", ""), None)
    return found if isinstance(found, type) else None


# ---- code --------------------------------------------------------------------------


def function_location(owner: Any, name: str, what: str = "") -> Location | None:
    """The ``def`` line of ``owner.name`` (a guard or an action of a run class)."""
    member = getattr(owner, name, None)
    function = getattr(member, "__func__", member)
    found = bodies.location(function) if callable(function) else None
    if found is None:
        return None
    path, line = found
    return Location(Path(path), max(line, 1), what or name)


def assignment_location(module: Any, name: str, what: str = "") -> Location | None:
    """The line where ``module`` assigns ``name`` at its top level."""
    found = bodies.module_tree(module)
    if found is None:
        return None
    path, tree = Path(found[0]), found[1]
    for statement in tree.body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = list(statement.targets)
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return Location(path, statement.lineno, what or name)
    return None


def text_location(path: Path, needle: str, what: str = "") -> Location | None:
    """The first line of ``path`` containing ``needle``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(lines, start=1):
        if needle in line:
            return Location(path, number, what or needle)
    return None


# ---- drift -------------------------------------------------------------------------


def generated_drift(path: Path, fresh: str) -> dict[str, Any]:
    """How the generated file on disk differs from a fresh render (``fresh``): the
    transitions only the declaration has (added or changed since the file was
    generated), those only the file has, and the first line that differs."""
    try:
        on_disk = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {"path": str(path), "missing": True}
    old, new = _transitions_table(on_disk), _transitions_table(fresh)
    first = next(
        (
            number
            for number, (a, b) in enumerate(
                zip(on_disk.splitlines(), fresh.splitlines(), strict=False), start=1
            )
            if a != b
        ),
        min(len(on_disk.splitlines()), len(fresh.splitlines())) + 1,
    )
    return {
        "path": str(path),
        "declared_only": [label for label in new if label not in old],
        "generated_only": [label for label in old if label not in new],
        "first_difference": first,
    }


def _transitions_table(source: str) -> list[str]:
    """The ``TRANSITIONS`` labels a generated module lists (empty: none readable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    for statement in tree.body:
        target = getattr(statement, "target", None)
        targets = getattr(statement, "targets", [target])
        if any(isinstance(t, ast.Name) and t.id == "TRANSITIONS" for t in targets):
            try:
                value = ast.literal_eval(statement.value)  # type: ignore[attr-defined]
            except (ValueError, TypeError, SyntaxError):
                return []
            return [str(label) for label in value]
    return []
