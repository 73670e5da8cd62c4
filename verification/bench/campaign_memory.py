"""How a campaign's memory grows, measured in a fresh process: ``replan bench``'s
campaign-memory figure (the bound itself is ``engines/campaign/memory.py``'s)."""

from __future__ import annotations


def campaign_growth(per_engine: int | None, examples: int, seed: int) -> dict[str, float | int]:
    """Run one ``thorough`` campaign on the default policy in this process with at
    most ``per_engine`` examples per engine (None: one engine): its operations, and the
    resident high-water mark before and after it (``ru_maxrss``, so run it in a fresh
    process: the bench does)."""
    import resource

    from replan.controller.policy import DEFAULT_POLICY
    from replan.verification.engines.campaign import run as campaign

    def high_water() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    campaign.run_campaign(DEFAULT_POLICY, "ci", seed=seed, examples=1, steps=5, database=None)
    before = high_water()
    result = campaign.run_campaign(
        DEFAULT_POLICY,
        "thorough",
        seed=seed,
        examples=examples,
        database=None,
        out_dir=None,
        examples_per_engine=per_engine,
    )
    after = high_water()
    return {
        "operations": result.operations,
        "rss_before_bytes": before,
        "rss_after_bytes": after,
        "growth_bytes_per_operation": round((after - before) / max(1, result.operations), 1),
    }
