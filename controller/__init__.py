"""replan's controller: the generated implementation and the records it works on.

This package is what applications import. It never imports python-statemachine: the
dispatch in ``_generated.py`` was generated from ``spec/declaration.py``.
"""

from replan.controller._generated import Controller
from replan.controller.handoff import handoff
from replan.controller.policy import DEFAULT_POLICY, Policy, Step, load_policy
from replan.controller.records import (
    LARGEST_INT,
    Approval,
    Decision,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    PolicyError,
    StopReason,
    Usage,
    plan_digest,
)
from replan.controller.workflow import decide

__all__ = [
    "DEFAULT_POLICY",
    "LARGEST_INT",
    "Approval",
    "Controller",
    "Decision",
    "EvidenceState",
    "ExecuteResult",
    "InvalidInput",
    "Observation",
    "ObservationConflict",
    "Plan",
    "Policy",
    "PolicyError",
    "Step",
    "StopReason",
    "Usage",
    "decide",
    "handoff",
    "load_policy",
    "plan_digest",
]
