"""A z3 counterexample made concrete: the state a real controller can be put in and
the argument it can be called with, so ``replan replay`` runs a proof's
counterexample on the controller instead of only printing it.

A proof's counterexample is a model of one step: the values of the abstract state
before it (``verification.translate.symbolic``'s fields), of the event's argument and of the
step's free inputs (the argument's type tests). This module reads those values back
into Python, field kind by field kind of ``controller/fields.py``:

- plan ids and sources are integers in the abstraction (one per distinct string,
  compared only for equality): they become ``id<n>`` and ``source<n>``, or the string
  the universe interned for that integer;
- the policy's names stay names; a name the policy does not declare becomes
  ``undeclared-<kind>``;
- the id sets and the contents map are arrays over every id and every (key, version)
  in the abstraction; the step reads only the ids and entries it is given or holds
  pending, so those are the ones made concrete (the others cannot change its answer);
- a type test the model sets False (``type(plan.id) is str``) is realised by a value of
  another type in that place.

Symbolic limits (the inductive proofs leave ``max_steps`` and the others free) become
the policy's at the model's values. Leaves to others: finding the counterexample
(``verification.engines.prove.engine``), running it (``verification.core.harness.run_sequence``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.fields import DECLARED_STATE, STATE_FIELDS, state_of_snapshot
from replan.controller.policy import BUDGETS, Policy, policy_from_dict, policy_to_dict
from replan.controller.records import EvidenceState
from replan.verification.core.harness import Operation
from replan.verification.translate.symbolic import (
    CONTENT,
    RECORD_FIELDS,
    RECORD_TYPES,
    UNDECLARED,
    Opt,
    Record,
    State,
    StepEncoding,
    Universe,
)


def _evaluate(model: z3.ModelRef, term: z3.ExprRef) -> z3.ExprRef:
    return model.eval(term, model_completion=True)


class Concretizer:
    """Reads one z3 model back into Python values for one universe."""

    def __init__(self, model: z3.ModelRef, universe: Universe) -> None:
        self.model = model
        self.universe = universe
        #: integer -> the string interned for it (tokens are (type name, value))
        self._strings: dict[int, object] = {}
        for token, number in universe._interned.items():
            self._strings[number] = token[1] if isinstance(token, tuple) else token

    # ---- values ---------------------------------------------------------------------

    def integer(self, term: z3.ExprRef) -> int:
        return int(_evaluate(self.model, term).as_long())

    def boolean(self, term: z3.ExprRef) -> bool:
        return bool(z3.is_true(_evaluate(self.model, term)))

    def name(self, term: z3.ExprRef, stem: str) -> str:
        """A plan id or source: the interned string, else ``<stem><n>``."""
        number = self.integer(term)
        found = self._strings.get(number)
        return found if isinstance(found, str) else f"{stem}{number}"

    def member(self, term: z3.ExprRef, kind: str) -> str:
        """A policy name (a key, step or resource) or an evidence state's value."""
        u = self.universe
        domain = {"key": u.key, "step": u.step, "resource": u.resource, "evidence": u.evidence}
        value = domain[kind].name_of(_evaluate(self.model, term))
        return f"undeclared-{kind}" if value == UNDECLARED else value

    def field(self, kind: str, term: z3.ExprRef, stem: str) -> Any:
        if kind == "int":
            return self.integer(term)
        if kind == "name":
            return self.name(term, stem)
        value = self.member(term, kind)
        return EvidenceState(value) if kind == "evidence" else value

    def record(self, record: Record) -> Any:
        """An Observation, Plan, Approval or Usage with the model's field values."""
        shapes = RECORD_FIELDS[record.kind]
        values = {
            name: self.field(shapes[name], term, "source" if name == "source" else "id")
            for name, term in record.fields.items()
        }
        return RECORD_TYPES[record.kind](**values)

    # ---- the state ------------------------------------------------------------------

    def snapshot(
        self,
        state: State,
        ids: Iterable[z3.ExprRef] = (),
        entries: Iterable[tuple[str, z3.ExprRef]] = (),
    ) -> dict[str, Any]:
        """The state as ``snapshot()`` writes it (so ``state_of_snapshot`` reads it):
        the id sets at ``ids`` and the pending plan's id, the contents at ``entries``
        and at each key's latest version."""
        u = self.universe
        document: dict[str, Any] = {}
        pending = state["_pending"]
        in_play = list(ids)
        if self.boolean(pending.some):
            in_play.append(pending.value.fields["id"])
        latest: dict[str, int] = {}
        known: dict[str, str] = {}
        for field in STATE_FIELDS:
            value = state[field.attribute]
            shape = field.kind.abstraction
            if shape == "mode":
                name = u.mode.name_of(_evaluate(self.model, value))
                if field.attribute == DECLARED_STATE:  # the top-level state and stop reason
                    document["state"] = name
                    stops = {s.value for s in u.model.final_states}
                    document["stop_reason"] = name if name in stops else None
                else:
                    document[field.component] = name
            elif shape == "int":
                document[field.component] = self.integer(value)
            elif shape == "plan?":
                plan = self.record(value.value) if self.boolean(value.some) else None
                document[field.component] = field.kind.to_json(plan)
            elif shape == "key->int":
                latest = {
                    k: self.integer(e.value) for k, e in self._entries(value) if self._some(e)
                }
            elif shape == "key->evidence":
                known = {
                    k: self.member(e.value, "evidence")
                    for k, e in self._entries(value)
                    if self._some(e)
                }
            elif shape == "id set":
                members = {self.name(i, "id") for i in in_play if self._holds(value.array, i)}
                document[field.component] = field.kind.to_json(members)
        document["contents"], document["evidence"] = self._contents_and_evidence(
            state, latest, known, entries
        )
        return document

    def _contents_and_evidence(
        self,
        state: State,
        latest: dict[str, int],
        known: dict[str, str],
        entries: Iterable[tuple[str, z3.ExprRef]],
    ) -> tuple[list[list[Any]], dict[str, dict[str, Any]]]:
        """The contents at ``entries`` and at each key's latest version, and each key's
        evidence, made to agree with each other."""
        pairs = set(latest.items()) | {(key, self.integer(version)) for key, version in entries}
        contents = state["_contents"].array
        found = (self._content(contents, key, version) for key, version in sorted(pairs))
        contents_found = sorted(entry for entry in found if entry is not None)
        # The proof's premises constrain the contents only where a step reads them, so
        # an entry may disagree with the key's latest version and state, which decide:
        # the entry at the latest version holds the key's state, and an entry beyond
        # the latest version makes it the latest (what a run would hold).
        for entry in contents_found:
            key, version, evidence, _source = entry
            if version > latest.get(key, 0):
                latest[key] = version
                known[key] = evidence
            elif version == latest[key]:
                entry[2] = known.get(key, "Unknown")
        by_key = {
            key: {"version": latest.get(key, 0), "state": known.get(key, "Unknown")}
            for key in self.universe.policy.keys
            if key in latest or key in known
        }
        return contents_found, by_key

    def _entries(self, value: Any) -> Iterable[tuple[str, Opt]]:
        return ((key, value.entries[key]) for key in self.universe.policy.keys)

    def _some(self, entry: Opt) -> bool:
        return self.boolean(entry.some)

    def _holds(self, array: z3.ArrayRef, index: z3.ExprRef) -> bool:
        return self.boolean(z3.Select(array, index))

    def _declared(self, key: str) -> bool:
        return key in self.universe.policy.keys

    def _content(self, array: z3.ArrayRef, key: str, version: int) -> list[Any] | None:
        member = self.universe.key.members[key]
        entry = _evaluate(self.model, z3.Select(array, member, z3.IntVal(version)))
        if not z3.is_true(_evaluate(self.model, CONTENT.is_some(entry))):
            return None
        state = self.member(CONTENT.content_state(entry), "evidence")
        return [key, version, state, self.name(CONTENT.content_source(entry), "source")]

    # ---- one step -------------------------------------------------------------------

    def argument(self, step: StepEncoding) -> Any:
        """The event's argument, each type test the model sets False realised."""
        argument = step.argument
        if isinstance(argument, Record):
            value: Any = self.record(argument)
        elif isinstance(argument, z3.ExprRef):
            value = self.name(argument, "id")
        else:
            return None
        failed = [text for text, term in step.inputs.items() if not self.boolean(term)]
        return _with_failed_type_tests(value, step.parameter or "", failed)

    def operation(self, step: StepEncoding) -> Operation:
        return Operation(step.event, self.argument(step))

    def step_ids(self, step: StepEncoding) -> list[z3.ExprRef]:
        """The plan ids the step's argument names."""
        argument = step.argument
        if isinstance(argument, Record):
            return [term for name, term in argument.fields.items() if name in ("id", "plan_id")]
        return [argument] if isinstance(argument, z3.ExprRef) else []

    def step_entries(self, step: StepEncoding) -> list[tuple[str, z3.ExprRef]]:
        """The (key, version) an observation argument names, when its key is declared."""
        argument = step.argument
        if not (isinstance(argument, Record) and argument.kind == "Observation"):
            return []
        key = self.member(argument.fields["key"], "key")
        return [(key, argument.fields["version"])] if self._declared(key) else []

    def policy(self, policy: Policy) -> Policy:
        """``policy`` with each symbolic limit at the model's value."""
        document = policy_to_dict(policy)
        limits = document["limits"]
        for name, term in self.universe.limits.items():
            if z3.is_bool(term):
                if not (z3.is_true(term) or z3.is_false(term)):
                    limits[name] = self.boolean(term)
            elif not z3.is_int_value(term):
                limits[name] = self.integer(term)
            if name in BUDGETS and limits.get(name) == 0:
                del limits[name]  # a budget of 0 is no budget: the file leaves it out
        if limits.get("max_cost") and not limits.get("currency"):
            limits["currency"] = "XTS"  # the ISO 4217 code reserved for testing
        return policy_from_dict(document)


def _with_failed_type_tests(value: Any, parameter: str, failed: Iterable[str]) -> Any:
    """``value`` with a value of another type wherever a failed ``type(x) is T`` test
    points: the whole argument, or one of its fields."""
    for text in failed:
        parsed = ast.parse(text, mode="eval").body
        if not (
            isinstance(parsed, ast.Compare)
            and isinstance(parsed.left, ast.Call)
            and isinstance(parsed.left.func, ast.Name)
            and parsed.left.func.id == "type"
        ):
            continue
        target = parsed.left.args[0]
        expected = ast.unparse(parsed.comparators[0])
        wrong = 0 if expected == "str" else "not-an-int"
        if isinstance(target, ast.Name) and target.id == parameter:
            fields = value._asdict() if hasattr(value, "_asdict") else {"value": value}
            return dict(fields)  # a mapping of the fields, not the record
        if isinstance(target, ast.Attribute) and hasattr(value, "_replace"):
            value = value._replace(**{target.attr: wrong})
    return value


def start_state(document: Mapping[str, Any]) -> tuple[Any, ...]:
    """A saved start (``Concretizer.snapshot``) as the state tuple a run imports."""
    return state_of_snapshot(document)


__all__ = ["Concretizer", "start_state"]
