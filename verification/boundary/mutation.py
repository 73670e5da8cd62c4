"""Mutants of the effect boundary, made automatically, and their verdicts.

Owns the boundary's part of ``replan mutate``: every mutant of the functions that
decide at the boundary (``SCOPE``: the guard's call handling and charging, the
executor's checks, runs and wiring, the journal's folds and writes, the SQLite
journal's records and chain, the run log's reads, writes and checks, the restore),
built by the same operator kinds as the controller's mutants
(``verification.subjects.mutation``: a comparison flipped, an operand of and/or
dropped or negated, a negation dropped, a statement deleted, an integer +-1) and
three of the boundary's own:

- ``drop-digest-field``: one field left out of what a digest or chain covers;
- ``skip-write``: one journal, run-log or witness write not made;
- ``range-one-short``: a range read one short (``<=`` as ``<``, ``>`` as ``>=`` in a
  query; a slice or ``range`` ending one earlier).

A mutant is the real file with one function replaced; ``verification.boundary.
adequacy`` builds it (``subjects.build``) and judges it: **killed** when a rule breaks
(or the mutant does not load), **equivalent** when ``EQUIVALENT_RULES`` gives
the reason it cannot change what the rules observe, **survived** otherwise.

Functions outside ``SCOPE`` are checked elsewhere: a file's header and layout checks
(the journal tests, ``replan mutants``), the form a receipt keeps a rich tool result in
(``tests/test_middleware.py``), error texts and the benchmark's baseline.
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from replan.verification.boundary.subjects import source_of
from replan.verification.subjects.mutation import OPERATORS as CORE_OPERATORS
from replan.verification.subjects.mutation import (
    apply_site,
    function_sites,
    walk_outside_messages,
)

BOUNDARY_OPERATORS = ("drop-digest-field", "skip-write", "range-one-short")
OPERATORS: tuple[str, ...] = (
    tuple(
        op
        for op in CORE_OPERATORS
        if op not in ("swap-transitions", "policy-default", "field-initial")
    )
    + BOUNDARY_OPERATORS
)

#: The functions mutated, by file: what decides at the boundary.
SCOPE: dict[str, tuple[str, ...]] = {
    "controller/middleware.py": (
        "ReplanMiddleware._journal_knows",
        "ReplanMiddleware.awaiting",
        "ReplanMiddleware._guard",
        "ReplanMiddleware._charge_call",
        "ReplanMiddleware._rejected",
        "_tool_ms",
    ),
    "controller/executor.py": (
        "_beyond_rfc8785",
        "Grant.denial",
        "Operation.__init__",
        "Executor.run",
        "Executor.run_async",
        "Executor.replay",
        "Executor.check",
        "Executor.resolve",
        "Executor.abandon",
        "Executor._claim",
        "Executor._complete",
        "Executor._denied",
        "Executor._unbound",
        "Executor._answer_recorded",
        "perform",
        "perform_async",
        "_ran",
        "_decide",
    ),
    "controller/approval.py": ("approve_call",),
    "controller/journal.py": (
        "bound",
        "fold",
        "Journal.knows",
        "Journal.bound",
        "Journal.approved",
        "Journal.abandoned",
        "Journal._check_bound",
        "Journal.claim",
        "Journal.complete",
        "Journal.abandon",
        "Journal.approve",
    ),
    "controller/sqlite_journal.py": (
        "chain_after",
        "SqliteJournal.records",
        "SqliteJournal._append",
        "_check_contents",
    ),
    "controller/durable/log.py": (
        "RunLog.begin",
        "RunLog.append",
        "chain_after",
        "SqliteRunLog._write_header",
        "SqliteRunLog._read_entries",
        "SqliteRunLog._read_length",
        "SqliteRunLog._last",
        "SqliteRunLog._write_entry",
        "SqliteRunLog.verify",
        "SqliteRunLog.damage",
        "SqliteRunLog._chain",
    ),
    "controller/durable/logged.py": (
        "LoggedController._log_call",
        "replay",
        "restore",
    ),
}

#: The calls whose statement ``skip-write`` removes: every durable write.
WRITES = frozenset(
    {
        "_append",
        "complete",
        "approve",
        "abandon",
        "append",
        "_write_entry",
        "_write_header",
        "_write_witness",
        "_write_snapshot",
        "snapshot",
        "charge",
    }
)
#: The functions whose dict or list literals a digest or a chain covers.
DIGESTS = frozenset({"Operation.__init__", "chain_after"})

#: Mutants that cannot change anything the rules observe, as (file:function, a pattern
#: the change matches, why); a rule is only consulted for a mutant that survived the
#: campaign, so it never hides a kill. The change is ``BoundaryMutant.description`` (stable across
#: edits elsewhere in the file). Each reason says why the change is invisible to every
#: caller the boundary has: an assertion that holds, a text no rule reads, a defence
#: behind another check that refuses first, or a caller's misuse the boundary never
#: makes (pinned by the unit tests named).
_TEXT = "only the text of a message changes; no rule reads it"
_SECOND = (
    "a defence in depth: an earlier check refuses the same thing first (the executor's "
    "early check, or the journal's own rules), so no boundary caller reaches it; "
    "tests/test_executor.py and tests/test_journal.py pin it"
)
_JOURNAL = (
    "the journal's consistency check: only a damaged file (refused first by the chain "
    "at open) or a caller that breaks the journal's rules could make it fire, and no "
    "boundary caller does; tests/test_journal.py pins each"
)
_MISUSE = (
    "a host's misuse the boundary's callers never make (arguments that are not a "
    "mapping, another call's operation named); tests/test_executor.py pins the refusal"
)
_MIDDLEWARE = "controller/middleware.py"
_EXECUTOR = "controller/executor.py"
_JOURNAL_FILE = "controller/journal.py"
_LOG = "controller/durable/log.py"
EQUIVALENT_RULES: tuple[tuple[str, str, str], ...] = (
    (
        f"{_MIDDLEWARE}:ReplanMiddleware.awaiting",
        r"^`pending is None or run\.declared_state",
        "no pending plan means the run awaits no approval",
    ),
    (
        f"{_MIDDLEWARE}:ReplanMiddleware._guard",
        r"^deleted `context\.arguments = _as_given",
        "the context holds exactly the arguments digested: nothing runs between the "
        "digest and the tool but this copy",
    ),
    (f"{_MIDDLEWARE}:ReplanMiddleware._guard", r"^deleted `assert ", "an assertion that holds"),
    (
        f"{_MIDDLEWARE}:ReplanMiddleware._rejected",
        r"resource_not_allowed|is not allowed|the proposal was rejected",
        "the guard proposes only a call whose resource the policy allows (the policy's "
        "one resource, or the argument it names), with the next revision and a declared "
        "step: no other rejection reaches here",
    ),
    (
        f"{_MIDDLEWARE}:_tool_ms",
        r"not isinstance\(found, bool\)",
        "the guard's receipts hold a float tool time; a bool is only what a host could "
        "write by hand",
    ),
    (
        f"{_EXECUTOR}:_beyond_rfc8785",
        r"^(deleted|`isinstance\(value, int\) and|`not isinstance\(value, bool\))",
        "rfc8785 refuses the integer this walk misses, and canonical_content turns that "
        "into the same InvalidInput: only the path in the message is lost",
    ),
    (f"{_EXECUTOR}:Grant.denial", r"^deleted `return None`", "falling off the end returns None"),
    (
        f"{_EXECUTOR}:Operation.__init__",
        r"^deleted `(if arguments is None|arguments = \{\}|if not isinstance\(arguments, "
        r"Mapping\)|raise InvalidInput\(f'Operation\.arguments|arguments = dict\(arguments\))",
        _MISUSE,
    ),
    (
        f"{_EXECUTOR}:Operation.__init__",
        r"^deleted `(check_json|_beyond_rfc8785)\(arguments",
        "rfc8785 refuses what JSON and the integer walk would: the same InvalidInput, "
        "another message",
    ),
    (
        f"{_EXECUTOR}:Operation.__init__",
        r"^`'step'` left out",
        "a call id's step is the accepted plan's, compared with the operation's before its "
        "digest is read: no two operations of one call id differ in their step alone",
    ),
    (
        f"{_EXECUTOR}:Executor.run_async",
        r"^deleted `(if isinstance\(claimed, Execution\)|return claimed)",
        _SECOND,
    ),
    (f"{_EXECUTOR}:Executor.replay", r"denied", _SECOND),
    (
        f"{_EXECUTOR}:Executor.check",
        r"entry\.intent\.digest != operation\.digest\(\)|return self\._answer_recorded",
        _SECOND,
    ),
    (f"{_EXECUTOR}:Executor.resolve", r"^`entry is None or entry\.receipt", _SECOND),
    (f"{_EXECUTOR}:Executor.abandon", r"operation\.plan_id != plan_id|operation names", _MISUSE),
    (
        f"{_EXECUTOR}:Executor._claim",
        r"^deleted `return intent`",
        "the claimed intent is only told apart from a refusal",
    ),
    (f"{_EXECUTOR}:_ran", r".", _TEXT),
    (
        "controller/approval.py:approve_call",
        r"^deleted `(del executor\.awaiting|return Approved\(False, f'the controller refused)",
        "the memory of a call no longer awaiting approval is never read again, and after "
        "the checks before it the controller accepts the approval",
    ),
    (
        f"{_JOURNAL_FILE}:bound",
        r"^deleted `(for record in records\[1:\]|raise JournalError)|^`[01]` -> `",
        _JOURNAL,
    ),
    (
        f"{_JOURNAL_FILE}:fold",
        r"^deleted `(raise JournalError|if entry is not None:)"
        r"|^`entry is None or entry\.receipt is not None or entry\.intent\.digest",
        _JOURNAL,
    ),
    (
        f"{_JOURNAL_FILE}:Journal.complete",
        r"^deleted `raise JournalError|^`entry is None or entry\.receipt is not None or",
        _JOURNAL,
    ),
    (f"{_JOURNAL_FILE}:Journal.approve", r"too late to approve", _JOURNAL),
    (
        f"{_JOURNAL_FILE}:Journal.abandon",
        r"^`entry is None and \(not records\)",
        "no record means no live entry",
    ),
    (
        f"{_JOURNAL_FILE}:Journal._check_bound",
        r"^deleted `(if binding is not None and binding != digest|raise JournalError)",
        _SECOND,
    ),
    (f"{_JOURNAL_FILE}:Journal.claim", r"_check_bound", _SECOND),
    (
        f"{_JOURNAL_FILE}:Journal.approved",
        r"^`1` -> `0`",
        "every approval record of a call names the digest it is bound to: the first is the last",
    ),
    (
        f"{_JOURNAL_FILE}:Journal.abandoned",
        r"^deleted `return None`",
        "falling off the end returns None",
    ),
    (
        "controller/sqlite_journal.py:chain_after",
        r"^`(previous|record\.seq)` left out",
        "each record's seq is checked against its position and each hashes its own "
        "fields: no edit the claims cover (a record altered, lost or reordered) escapes "
        "without it; it matters only against an edit that recomputes chain values, which "
        "is not claimed",
    ),
    (
        f"{_EXECUTOR}:Operation.__init__",
        r"^`not isinstance\(value, str\) or not value` -> `not value`",
        _MISUSE,
    ),
    (
        f"{_JOURNAL_FILE}:Journal.abandoned",
        r"^`1` -> `0`",
        "a first record that is an abandon (a call settled with no record) is followed only "
        "by its rerun, which the executor answers from its receipt either way",
    ),
    (
        "controller/sqlite_journal.py:_check_contents",
        r"problems|application_id|columns|for records in by_plan|return count|wrong type"
        r"|^`0` -> `-1`|is missing \(the next is",
        "a file-level check another refuses first (the header's bytes at open, the chain) "
        "or one only another program's file could fail; "
        "tests/test_journal_fails_closed.py pins each",
    ),
    (
        f"{_LOG}:RunLog.begin",
        r"refuse_other_rules|self\.verify\(\)|self\._length = 0",
        "restore verifies the log and checks its rules before it begins logging (and "
        "begin again after): either alone refuses; a length not yet read is read",
    ),
    (
        f"{_LOG}:RunLog.append",
        r".",
        "appending at a written position is how a run re-executed from its start (a DBOS "
        "workflow's recovery) re-derives its log; the boundary's runs restore and append "
        "only new positions; tests/test_durable.py pins it",
    ),
    (
        f"{_LOG}:chain_after",
        r"^`previous` left out",
        "each entry hashes its own position: no edit the claims cover escapes without the "
        "link (it matters against an edit that recomputes chain values, which the witness "
        "refuses)",
    ),
    (
        f"{_LOG}:SqliteRunLog._write_header",
        r"self\._head = ",
        "the head not kept is read from the file: no entry yet, the same head",
    ),
    (f"{_LOG}:SqliteRunLog._read_entries", r"`62` -> `61`", "no position reaches 2**61"),
    (
        f"{_LOG}:SqliteRunLog.damage",
        r"^deleted `return None`$",
        "falling off the end returns None; and a log without a header, accepted here or "
        "not, is refused by restore as empty and by conform as empty",
    ),
    (
        f"{_LOG}:SqliteRunLog._chain",
        r"is missing \(the next is",
        "a gap breaks the next entry's chain value (each covers its predecessor's), so "
        "the log is refused either way; only the position named differs "
        "(tests/test_run_log_integrity.py pins it)",
    ),
    (
        f"{_LOG}:SqliteRunLog._write_entry",
        r"position \+ 1|written after|header or",
        "append writes only the next position, and a log with entries has a header",
    ),
    (
        "controller/durable/logged.py:LoggedController._log_call",
        r"snapshot|_snapshot_every|_trace\[-1\]\[5\] is None|^deleted `return`$|^`(5|1|0)` -> ",
        "snapshots only bound how much a restore replays (it replays and checks every "
        "entry without them), and a call logged that changed nothing replays as nothing",
    ),
    (
        "controller/durable/logged.py:replay",
        r"was answered",
        "a replayed answer can only differ in a log the chain and the witness refuse first",
    ),
    (
        "controller/durable/logged.py:restore",
        r"DEFAULT_POLICY|if written is None|is empty|refuse_other_rules|log\.verify\(\)"
        r"|check_all|len\(positions\)|p > start|^`[23]` -> |^`2` -> `1`",
        "every boundary restore names its policy, verifies the log and checks its rules "
        "(begin does both again); which snapshot it starts from changes only how much it "
        "replays",
    ),
    (
        "controller/sqlite_journal.py:SqliteJournal._append",
        r"_highest_seq|is gone",
        "records vanishing while the journal is open is not a situation the boundary can "
        "make; the check at open refuses a journal that lost records (drop-journal-record)",
    ),
)


def equivalence(mutant: BoundaryMutant) -> str | None:
    """Why ``mutant`` is equivalent (``EQUIVALENT_RULES``), or None."""
    target = f"{mutant.file}:{mutant.function}"
    for where, pattern, reason in EQUIVALENT_RULES:
        if where == target and re.search(pattern, mutant.description):
            return reason
    return None


@dataclass(frozen=True)
class BoundaryMutant:
    """One deliberately broken boundary: ``file``'s ``function`` with one change."""

    id: str
    operator: str
    file: str
    function: str
    description: str
    diff: str
    source: str  # the whole file, mutated


# ---- finding and replacing one function in a module ------------------------------------


def _definitions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def _with(source: str, original: ast.AST, replacement: ast.AST) -> str:
    """``source`` with the function ``original`` (a node parsed from it) replaced by
    ``replacement``: the rest of the file stays as it is, byte for byte."""
    lines = source.splitlines(True)
    first = min([original.lineno, *(d.lineno for d in original.decorator_list)])  # type: ignore[attr-defined]
    last = original.end_lineno  # type: ignore[attr-defined]
    indent = " " * original.col_offset  # type: ignore[attr-defined]
    text = "".join(
        f"{indent}{line}\n" if line else "\n" for line in ast.unparse(replacement).split("\n")
    )
    return "".join(lines[: first - 1]) + text + "".join(lines[last:])


# ---- the boundary's own operators ---------------------------------------------------------


def _calls_write(statement: ast.stmt) -> bool:
    """A statement that is one call of a durable write on an object (``self._append``,
    ``self.journal.complete``; not ``a_list.append``)."""
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    if isinstance(value, ast.Await):
        value = value.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    receiver = value.func.value
    on_object = isinstance(receiver, ast.Attribute) or (
        isinstance(receiver, ast.Name) and receiver.id in ("self", "executor")
    )
    return on_object and value.func.attr in WRITES


def _own_variants(
    name: str, definition: ast.FunctionDef | ast.AsyncFunctionDef
) -> Iterator[tuple[str, int, ast.AST, str]]:
    """(operator, position, mutated function, description) for the boundary operators."""
    nodes = list(walk_outside_messages(definition))
    for position, node in enumerate(nodes):
        if name in DIGESTS:
            if isinstance(node, ast.Dict) and len(node.keys) >= 2:
                for index in range(len(node.keys)):
                    yield (
                        "drop-digest-field",
                        position * 100 + index,
                        *_drop_item(definition, position, index, "dict"),
                    )
            elif isinstance(node, ast.List) and len(node.elts) >= 2:
                for index in range(len(node.elts)):
                    yield (
                        "drop-digest-field",
                        position * 100 + index,
                        *_drop_item(definition, position, index, "list"),
                    )
        for field_name in ("body", "orelse"):
            block = getattr(node, field_name, None)
            if not isinstance(block, list):
                continue
            for index, statement in enumerate(block):
                if isinstance(statement, ast.stmt) and _calls_write(statement):
                    yield (
                        "skip-write",
                        position * 100 + index,
                        *_skip(definition, position, field_name, index),
                    )
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for k, (old, new) in enumerate((("<= ?", "< ?"), ("> ?", ">= ?"))):
                if old in node.value:
                    yield (
                        "range-one-short",
                        position * 10 + k,
                        *_retext(definition, position, old, new),
                    )
        if isinstance(node, ast.Slice) and node.upper is not None:
            yield "range-one-short", position * 10 + 9, *_slice_short(definition, position)


def _copy_at(definition: ast.AST, position: int) -> tuple[ast.AST, ast.AST]:
    mutated = copy.deepcopy(definition)
    return mutated, list(walk_outside_messages(mutated))[position]


def _drop_item(definition: ast.AST, position: int, index: int, kind: str) -> tuple[ast.AST, str]:
    mutated, node = _copy_at(definition, position)
    if kind == "dict":
        assert isinstance(node, ast.Dict)
        key = node.keys[index]
        shown = ast.unparse(key) if key is not None else "**"
        del node.keys[index], node.values[index]
    else:
        assert isinstance(node, ast.List)
        shown = ast.unparse(node.elts[index])
        del node.elts[index]
    return mutated, f"`{shown}` left out of what the digest covers"


def _skip(definition: ast.AST, position: int, field_name: str, index: int) -> tuple[ast.AST, str]:
    mutated, node = _copy_at(definition, position)
    block = getattr(node, field_name)
    shown = ast.unparse(block[index]).splitlines()[0]
    block[index] = ast.Pass()
    return mutated, f"write skipped: `{shown}`"


def _retext(definition: ast.AST, position: int, old: str, new: str) -> tuple[ast.AST, str]:
    mutated, node = _copy_at(definition, position)
    assert isinstance(node, ast.Constant)
    node.value = node.value.replace(old, new)
    return mutated, f"query `{old}` -> `{new}`"


def _slice_short(definition: ast.AST, position: int) -> tuple[ast.AST, str]:
    mutated, node = _copy_at(definition, position)
    assert isinstance(node, ast.Slice) and node.upper is not None
    before = ast.unparse(node)
    node.upper = ast.BinOp(node.upper, ast.Sub(), ast.Constant(1))
    return mutated, f"`{before}` -> `{ast.unparse(node)}`"


# ---- every mutant ----------------------------------------------------------------------------


def boundary_mutants(operators: Sequence[str] | None = None) -> list[BoundaryMutant]:
    """Every mutant of ``SCOPE`` (of ``operators`` when given), with unique ids, in a
    fixed order."""
    wanted = set(OPERATORS if operators is None else operators)
    found: dict[str, BoundaryMutant] = {}
    for path, names in SCOPE.items():
        source = source_of(path)
        tree = ast.parse(source)
        definitions = dict(_definitions(tree))
        for name in names:
            definition = definitions[name]
            original = ast.unparse(definition) + "\n"
            for operator, position, mutated, description in _variants(name, definition):
                if operator not in wanted:
                    continue
                text = ast.unparse(mutated) + "\n"
                if text == original:
                    continue
                mutant_id = f"{path}:{name}:{operator}:{position}"
                found.setdefault(
                    mutant_id,
                    BoundaryMutant(
                        mutant_id,
                        operator,
                        path,
                        name,
                        description,
                        _diff(path, original, text),
                        _with(source, definition, mutated),
                    ),
                )
    return list(found.values())


def _variants(
    name: str, definition: ast.FunctionDef | ast.AsyncFunctionDef
) -> Iterator[tuple[str, int, ast.AST, str]]:
    for site in function_sites(definition, statements=True):
        applied = apply_site(definition, site)
        if applied is not None:
            mutated, description = applied
            yield site.operator, site.node * 10_000 + site.detail, mutated, description
    yield from _own_variants(name, definition)


def _diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=1
        )
    ).rstrip()


__all__ = [
    "BOUNDARY_OPERATORS",
    "EQUIVALENT_RULES",
    "OPERATORS",
    "SCOPE",
    "BoundaryMutant",
    "boundary_mutants",
    "equivalence",
]
