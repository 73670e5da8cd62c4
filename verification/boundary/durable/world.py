"""What a kill-and-restart worker's runs share: the grant, the harness's own table of
effects, and the store and crash point the worker sets before its run starts.

Both workloads read it (the scripted import, ``crash.py``; the guarded agent,
``agent.py``), so neither imports the other's globals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from replan.controller.durable.dbos import Store
from replan.controller.executor import Grant
from replan.controller.policy import DEFAULT_POLICY

GRANT = Grant(resources=["input-A"], steps=[step.name for step in DEFAULT_POLICY.steps])

HARNESS = sa.MetaData()
EFFECTS = sa.Table(
    "harness_effects",
    HARNESS,
    sa.Column("sequence", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String, nullable=False, index=True),
    sa.Column("digest", sa.String, nullable=False),
    sa.Column("step", sa.String, nullable=False),
)


@dataclass
class Worker:
    """Set in a worker before the run starts (a forked child: one run per process)."""

    store: Store | None = None
    boundary: Callable[[str], None] | None = None


WORKER = Worker()
