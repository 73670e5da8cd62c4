"""The run's guard and action bodies, translated to z3: one step of the controller as a
formula, derived from the declaration, the policy and the Python source.

The package, by part: ``universe`` (the abstraction: the sorts for one policy and
declaration, which z3 shape each field takes), ``values`` (the symbolic values the
evaluator passes around), ``terms`` (small term builders), ``helpers`` (the
vocabulary's helpers in z3), ``translator`` (the evaluator of the Python the bodies
are written in: ``operations``, ``expressions``, ``statements``), ``states``,
``step`` (``encode_event``: one event's declared transitions as a functional
transition relation), ``runs`` (concrete runs as abstract states) and
``conformance`` (does a concrete step satisfy the relation?). Its public names are
re-exported here. Leaves to ``verification/engines/prove`` what is proved with it.

Nothing about the controller's behaviour is written here a second time: structure
comes from ``spec.model.extract``, guard bodies from ``spec.generator``'s inliner,
action bodies from their Python source (``spec.bodies``), executed symbolically. What
is hand-written is only the abstraction (the z3 shape of each field and record field),
checked against ``Run.__slots__`` and kept honest by the conformance test. A body the
evaluator does not understand fails loudly with ``TranslationError``.
"""

from __future__ import annotations

from replan.verification.translate.symbolic.conformance import RelationChecker, input_values
from replan.verification.translate.symbolic.helpers import HELPERS
from replan.verification.translate.symbolic.runs import (
    FormulaOnRuns,
    abstract_argument,
    abstract_run,
    abstract_value,
    concrete_key,
    free_constants,
    mentioned_fields,
    pairs,
    stop_reason_mode,
)
from replan.verification.translate.symbolic.states import fresh_record, fresh_state, initial_state
from replan.verification.translate.symbolic.step import (
    Branch,
    StepEncoding,
    encode_event,
    fresh_argument,
)
from replan.verification.translate.symbolic.terms import all_of, any_of, same_state, same_value
from replan.verification.translate.symbolic.translator import Translator
from replan.verification.translate.symbolic.universe import (
    ANSWER,
    CONTENT,
    ENUM_KINDS,
    EVIDENCE,
    FIELD_KINDS,
    LIMITS,
    RECORD_FIELDS,
    RECORD_TYPES,
    UNDECLARED,
    UNMODELLED_FIELDS,
    Domain,
    TranslationError,
    Universe,
    answer_key,
    check_abstraction,
)
from replan.verification.translate.symbolic.values import (
    POLICY,
    SELF,
    Choice,
    Const,
    ContentEntry,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    LazyEntries,
    Obligation,
    Opt,
    Record,
    State,
    StateRef,
    TraceLog,
    Tup,
    empty_field,
)

__all__ = [
    "ANSWER",
    "CONTENT",
    "ENUM_KINDS",
    "EVIDENCE",
    "FIELD_KINDS",
    "HELPERS",
    "LIMITS",
    "POLICY",
    "RECORD_FIELDS",
    "RECORD_TYPES",
    "SELF",
    "UNDECLARED",
    "UNMODELLED_FIELDS",
    "Branch",
    "Choice",
    "Const",
    "ContentEntry",
    "ContentMap",
    "Domain",
    "FMap",
    "FSet",
    "FormulaOnRuns",
    "Frame",
    "IdSet",
    "LazyEntries",
    "Obligation",
    "Opt",
    "Record",
    "RelationChecker",
    "State",
    "StateRef",
    "StepEncoding",
    "TraceLog",
    "TranslationError",
    "Translator",
    "Tup",
    "Universe",
    "abstract_argument",
    "abstract_run",
    "abstract_value",
    "all_of",
    "answer_key",
    "any_of",
    "check_abstraction",
    "concrete_key",
    "empty_field",
    "encode_event",
    "free_constants",
    "fresh_argument",
    "fresh_record",
    "fresh_state",
    "initial_state",
    "input_values",
    "mentioned_fields",
    "pairs",
    "same_state",
    "same_value",
    "stop_reason_mode",
]
