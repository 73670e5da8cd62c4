"""replan: a bounded, evidence-driven replanning controller for AI agents.

The one import an application writes::

    from replan import Controller, Observation, Plan, EvidenceState, load_policy

It is the public surface of ``controller`` (the generated implementation and its
records), under the project's name. The command line lives in ``replan.cli`` and one
module per subcommand in ``replan.commands``; ``replan.pytest_plugin`` is the pytest
plugin. Importing this package never imports python-statemachine, Hypothesis or z3.
"""

import replan.controller as _controller
from replan.controller import *  # noqa: F403  (the public surface, under the project's name)

__all__ = list(_controller.__all__)
