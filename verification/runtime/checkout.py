"""The checkout this package was installed from, and what lives beside the code there.

In replan's own repository (an editable install) the README, the committed
``evidence/`` and the SPIN anchor in ``../shared/anchors/spin`` sit beside the
packages; in an installed wheel they do not, and every reader of these paths treats
a missing file as "not here", never as an error.
"""

from __future__ import annotations

from pathlib import Path


def checkout_root() -> Path:
    """The directory holding ``spec/`` (resolved through the ``replan/spec`` link)."""
    import replan.spec

    return Path(str(replan.spec.__file__)).resolve().parent.parent


#: The checkout's committed evidence: written by ``replan evidence`` only.
COMMITTED_EVIDENCE = checkout_root() / "evidence"
#: The hand-written SPIN model of the contract, beside the checkout.
SPIN_ANCHOR = checkout_root().parent / "shared" / "anchors" / "spin"
