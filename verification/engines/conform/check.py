"""A recorded run checked after the fact against the proved model.

``replan conform LOG`` reads what a production run recorded (a run log of
``controller.durable``, in SQLite, or the trace a controller wrote, as JSON: a list of
``Controller.trace`` records, or an episode record with ``calls``), replays every call
through the reference model (``spec.reference``: the declaration run by
python-statemachine) and checks every contract property after each one. The first
call whose recorded answer differs from the model's, or after which a property
breaks, is the divergence: its position, the call, both answers. A run log is first
checked as the restore checks it (``SqliteRunLog.damage``: each entry's chain value,
the count and head its witness names): an entry altered or missing after it was
written is the divergence, at that entry.

A run log holds only the calls that changed the run, which is enough: a call that
changed nothing changes nothing when left out. It names its policy and the
declaration it ran under; a log of another declaration is refused (it cannot be
checked against this model). Each trace record names the digest of the policy it ran
under (``policy_of_trace``): the trace is checked under that policy (the default, the
one an episode record holds, or the one ``--policy`` gives, which must be that one),
and refused in one line when the policy it names is not at hand: checked under
another policy, a valid run would diverge.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from replan.controller import Controller, input_limits
from replan.controller._generated import DECLARATION_DIGEST
from replan.controller.call_encoding import canonical, decode_argument, encode_answer
from replan.controller.durable.log import (
    Damage,
    Entry,
    Header,
    RunLogError,
    SqliteRunLog,
)
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_from_dict
from replan.controller.records import RECORD_KINDS, PolicyError
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import Operation, observe_call, violated
from replan.verification.engines.conform.spans import SpansError, is_otlp, span_calls


class Loaded(NamedTuple):
    """A recorded run as read: what the file is, its calls, the policy to check them
    under, and the damage a run log's chain or witness shows (None: none)."""

    source: str  # "run log", "trace" or "OpenTelemetry export"
    entries: list[Entry]
    policy: Policy
    damage: Damage | None = None


class ConformError(ValueError):
    """The log cannot be read or checked (exit 2)."""


@dataclass(frozen=True)
class Divergence:
    """The first recorded call the model does not reproduce."""

    position: int
    call: str
    recorded: str
    model: str
    broken: tuple[str, ...]  # properties the model's call breaks (then: recorded is odd)
    #: why the log is not as written (its chain or its witness), when that is the divergence
    damage: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "call": self.call,
            "recorded": self.recorded,
            "model": self.model,
            "broken": list(self.broken),
            "damage": self.damage or None,
        }

    def line(self) -> str:
        if self.damage:
            return f"position {self.position}: {self.call}: {self.damage}"
        if self.recorded != self.model:
            return (
                f"position {self.position}: {self.call} was answered {self.recorded} in the "
                f"log, {self.model} by the model"
            )
        return f"position {self.position}: {self.call} breaks {', '.join(self.broken)}"


@dataclass(frozen=True)
class Conformance:
    source: str  # "run log" or "trace"
    calls: int
    divergence: Divergence | None

    @property
    def conforms(self) -> bool:
        return self.divergence is None

    def as_json(self) -> dict[str, Any]:
        divergence = None if self.divergence is None else self.divergence.as_json()
        return {
            "source": self.source,
            "calls": self.calls,
            "conforms": self.conforms,
            "divergence": divergence,
        }


#: A trace's answer for a call the input check refused (``InvalidInput``): the call
#: changed nothing, and its argument, rendered as JSON, may no longer say why (a
#: ``str`` and an ``EvidenceState`` read alike), so it is not replayed.
_REFUSED_INPUT = canonical({"error": "InvalidInput"})


def _answer(result: Any) -> str:
    if isinstance(result, type) and issubclass(result, BaseException):
        return canonical({"error": result.__name__})
    return encode_answer(result)


def damaged(damage: Damage | None, entries: list[Entry]) -> Divergence | None:
    """The log's own damage (``SqliteRunLog.damage``) as the divergence: at the first
    entry it concerns (the first entry when it names none, as a witness of another
    log does), that entry's call as the log holds it."""
    if damage is None:
        return None
    position = damage.position or 1
    held = next((entry for entry in entries if entry.position == position), None)
    call = "(no entry)" if held is None else f"{held.op}({held.argument})"
    answer = "" if held is None else held.answer
    return Divergence(position, call, answer, answer, (), damage=damage.why)


def check(entries: list[Entry], policy: Policy) -> Divergence | None:
    """Replay ``entries`` on the reference model; the first divergence, if any."""
    reference = ReferenceController(policy)
    for entry in entries:
        if entry.answer == _REFUSED_INPUT:
            continue  # changed nothing; a trace cannot tell a str from an EvidenceState
        try:
            parameter_type = Controller.events[entry.op][1]
            argument = decode_argument(parameter_type, entry.argument)
        except (KeyError, TypeError, ValueError, RecursionError) as error:
            raise ConformError(
                f"position {entry.position}: {entry.op}({entry.argument[:80]}) is not a call "
                f"of this declaration's events ({type(error).__name__}: {str(error)[:120]})"
            ) from None
        call = observe_call(policy, reference, Operation(entry.op, argument))
        model = _answer(call.result)
        broken = tuple(violated(call))
        if model != entry.answer or broken:
            shown = "" if parameter_type is None else entry.argument
            return Divergence(entry.position, f"{entry.op}({shown})", entry.answer, model, broken)
    return None


def _trace_entries(records: list[Any]) -> list[Entry]:
    """Trace records (``Controller.trace``) as log entries, every call kept."""
    entries = []
    for index, record in enumerate(records, start=1):
        try:
            op = record["op"]
            parameter, parameter_type, _caller = Controller.events[op]
            value = None if parameter is None else record["args"][parameter]
            result = record["result"]
        except (KeyError, TypeError):
            raise ConformError(
                f"calls[{index - 1}]: not a trace record of this declaration's events "
                f"({', '.join(Controller.events)})"
            ) from None
        if parameter_type in RECORD_KINDS and not (
            isinstance(value, dict) and set(value) == set(RECORD_KINDS[parameter_type])
        ):
            value = {"malformed": value}
        entries.append(Entry(index, op, canonical(value), canonical(result)))
    return entries


def _is_durable_store(path: Path) -> bool:
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return "replan_durable_log" in tables


def _load_store(path: Path, run_id: str | None) -> Loaded:
    """One run's log from a DBOS database (``controller.durable.dbos``)."""
    try:
        import sqlalchemy

        from replan.controller.durable.dbos import Store
    except ImportError as error:
        raise ConformError(
            f"{path}: a DBOS database; reading it needs the dbos extra "
            f"(pip install 'replan[dbos]'): {error}"
        ) from None
    store = Store(f"sqlite:///{path}", read_only=True)
    try:
        return _store_run(store, path, run_id)
    except (RunLogError, sqlalchemy.exc.SQLAlchemyError) as error:
        raise ConformError(f"{path}: {' '.join(str(error).split())[:200]}") from None
    finally:
        store.close()


def _store_run(store: Any, path: Path, run_id: str | None) -> Loaded:
    from replan.controller.durable.dbos import SqlRunLog

    runs = store.run_ids()
    if run_id is None or run_id not in runs:
        listed = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        asked = "name one with --run" if run_id is None else f"no run {run_id!r} in it"
        raise ConformError(f"{path}: a DBOS store of {len(runs)} runs ({listed}): {asked}")
    log = SqlRunLog(store, run_id)
    return _checked("run log", log.header(), log.entries(), path)


def _checked(
    source: str,
    header: Header | None,
    entries: list[Entry],
    path: Path,
    damage: Damage | None = None,
) -> Loaded:
    if header is None:
        raise ConformError(f"{path}: the run log is empty (no header)")
    if header.declaration_digest != DECLARATION_DIGEST:
        raise ConformError(
            f"{path}: written under declaration {header.declaration_digest[:19]}, this "
            f"model is {DECLARATION_DIGEST[:19]}: it cannot be checked against it"
        )
    try:
        logged = policy_from_dict(header.policy)
    except PolicyError as error:
        raise ConformError(f"{path}: the log's policy: {error}") from None
    return Loaded(source, entries, logged, damage)


def is_guarded_record(path: str | Path) -> bool:
    """Whether ``path`` looks like a record replan wrote of a run it guarded: a SQLite
    file (a run log) or OTLP/JSON (its spans), by the first bytes (a file that cannot
    be read is for the reader to report)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.startswith(b"SQLite format 3") or (
        head.lstrip().startswith(b"{") and b'"resourceSpans"' in head
    )


def load(path: Path, policy: Policy | None, run_id: str | None = None) -> Loaded:
    """What the file is, its calls, the policy to check them under, and for a run log
    any damage its chain or witness shows."""
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
        size = path.stat().st_size
    except OSError as error:
        raise ConformError(f"{path}: cannot read ({error.strerror})") from None
    if head.startswith(b"SQLite format 3") and size > input_limits.RUN_LOG_BYTES:
        raise ConformError(
            f"{path}: more than {input_limits.RUN_LOG_BYTES // 2**20} MiB, the most a run log "
            "may hold to be checked"
        )
    if head.startswith(b"SQLite format 3") and _is_durable_store(path):
        return _load_store(path, run_id)
    if head.startswith(b"SQLite format 3"):
        try:
            log = SqliteRunLog(path, read_only=True)
        except RunLogError:
            raise ConformError(f"{path}: an SQLite file without a replan run log") from None
        try:
            header = log.header()
            entries = log.entries()
            damage = log.damage()
        except (RunLogError, sqlite3.Error) as error:
            raise ConformError(f"{path}: {error}") from None
        except RecursionError:  # an entry nested past what Python reads
            raise ConformError(f"{path}: nested more than {input_limits.MAX_DEPTH} deep") from None
        finally:
            log.close()
        if header is not None and not log.witness.exists():
            raise ConformError(
                f"{path}: its witness {log.witness.name} is missing, so a shortened copy "
                "cannot be told from the log: copy the witness beside it to check it"
            )
        return _checked("run log", header, entries, path, damage)
    try:
        document = input_limits.load_json(path, what="a trace")
    except input_limits.InputLimitError as error:
        raise ConformError(str(error)) from None
    except OSError as error:
        raise ConformError(f"{path}: cannot read ({error.strerror or error})") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise ConformError(f"{path}: neither a run log nor JSON ({error})") from None
    if is_otlp(document):
        try:
            entries, named = span_calls(document)
            return Loaded("OpenTelemetry export", entries, policy_of_trace(None, named, policy))
        except (SpansError, TracePolicyError) as error:
            raise ConformError(f"{path}: {error}") from None
    records = document.get("calls") if isinstance(document, dict) else document
    if not isinstance(records, list):
        raise ConformError(f"{path}: JSON without a trace (a list of records, or 'calls')")
    try:
        used = policy_of_trace(document, records, policy)
    except TracePolicyError as error:
        raise ConformError(f"{path}: {error}") from None
    return Loaded("trace", _trace_entries(records), used)


class TracePolicyError(ValueError):
    """The policy a trace ran under is not at hand, or is not the one given."""


def _digest(digest: str) -> str:
    return digest[: len("sha256:") + 12]


def policy_of_trace(
    document: Any,
    records: list[Any],
    given: Policy | None,
    known: tuple[Policy, ...] = (DEFAULT_POLICY,),
    fallback: Policy | None = None,
) -> Policy:
    """The policy the trace ``records`` (of ``document``: a list, or an episode record
    with ``calls``) ran under: the normal form an episode record holds, else the
    policy whose digest its records name, taken from ``given`` (the one the user
    named: it must be that one) or ``known`` (the default, say). A trace that names
    no policy is checked under ``given``, else ``fallback``. ``TracePolicyError``
    (one line, without the file's name) when none of them is the one it ran under."""
    digests = sorted(
        {r["policy"] for r in records if isinstance(r, dict) and isinstance(r.get("policy"), str)}
    )
    if len(digests) > 1:
        named = ", ".join(_digest(d) for d in digests[:3])
        raise TracePolicyError(f"its records name {len(digests)} policies ({named}): one run's")
    digest = digests[0] if digests else None
    stored = None
    if isinstance(document, dict) and isinstance(document.get("policy"), dict):
        try:
            stored = policy_from_dict(document["policy"])
        except PolicyError as error:
            raise TracePolicyError(f"its policy: {error}") from None
        digest = digest or stored.digest
        if stored.digest != digest:
            raise TracePolicyError(
                f"its policy ({_digest(stored.digest)}) is not the one its records name "
                f"({_digest(digest)})"
            )
    if given is not None:
        if digest is not None and given.digest != digest:
            raise TracePolicyError(
                f"it ran under policy {_digest(digest)}, and --policy names another "
                f"({_digest(given.digest)}): give the policy it ran under"
            )
        return given
    if stored is not None:
        return stored
    if digest is None:
        if fallback is not None:
            return fallback
        raise TracePolicyError("it names no policy: give the one it ran under with --policy FILE")
    for candidate in known:
        if candidate.digest == digest:
            return candidate
    raise TracePolicyError(
        f"it ran under policy {_digest(digest)}, not the default: give that policy with "
        "--policy FILE"
    )


def conform(path: Path, policy: Policy | None = None, run_id: str | None = None) -> Conformance:
    """Check the recorded run at ``path`` (``ConformError`` if it cannot be read);
    ``run_id``: which run of a DBOS database."""
    loaded = load(path, policy, run_id)
    divergence = damaged(loaded.damage, loaded.entries) or check(loaded.entries, loaded.policy)
    return Conformance(loaded.source, len(loaded.entries), divergence)
