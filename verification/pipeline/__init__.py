"""``replan verify`` as a library: the ordered checks, the report they fill, and the
checks a user's own test suite runs on a policy.

    from replan.verification.pipeline import VerifyOptions, verify
    report = verify(policy, Path("out/verify/my"), VerifyOptions(profile="ci"))
    report.ok, report.checks, report.broken_properties()

Commands parse arguments and print; everything between is here.
"""

from replan.verification.pipeline.options import PROFILES, VerifyOptions
from replan.verification.pipeline.run import verify

__all__ = ["PROFILES", "VerifyOptions", "verify"]
