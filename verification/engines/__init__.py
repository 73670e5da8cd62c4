"""The engines that check a subject against its contract.

Searches of the reachable states share one interface (``verification.core.search``):
``engine(name).search(subject, policy, domains, options) -> SearchResult``. The
Python explorer (``python``), the generated kernel (``kernel``) and SPIN (``spin``)
are looked up by the name ``--engine`` takes; each is imported only when asked for
(SPIN's and the kernel's translation need z3). The campaign, the proofs and the
conformance check of a recorded run live beside them, one package or module each.
"""

from __future__ import annotations

import importlib

from replan.verification.core.search import Engine

#: ``--engine`` names and where each engine lives ("module:class").
ENGINES: dict[str, str] = {
    "python": "replan.verification.engines.explore.engine:PythonExplorer",
    "kernel": "replan.verification.engines.kernel:KernelEngine",
    "spin": "replan.verification.engines.spin.engine:SpinEngine",
}


def engine(name: str) -> Engine:
    """The search engine ``name`` (one of ``ENGINES``)."""
    try:
        module_name, _, class_name = ENGINES[name].partition(":")
    except KeyError:
        raise ValueError(f"{name!r} is not an engine (known: {', '.join(ENGINES)})") from None
    found: Engine = getattr(importlib.import_module(module_name), class_name)()
    return found
