"""Review the machine in a browser: one self-contained HTML page (no network, no CDN,
scripts and styles inline) with the diagrams, verify's results and a step-through
player for the reference episode and every counterexample.

  replan review                                  the default policy's report -> out/review.html
                                                 (out/verify/default/ when `replan verify`
                                                 ran here, else the committed evidence/)
  replan review -o review.html                   elsewhere
  replan review --policy my.toml                 reads out/verify/my/verify.json, so run
                                                 `replan verify --policy my.toml` first
  replan review --against tests/policies/three-keys.toml
                                                 also the semantic diff and its witness
  replan review --trace cex.json                 also play this recording (repeatable)
  replan review --evidence out/verify/mutant-step-not-counted
                                                 the report and counterexamples of a
                                                 failed verify run
  replan review --json                           the records the page embeds, on stdout

The page holds:
  the machine     two views, switchable: overview (the transitions that change the
                  state, guards written over this policy's values, internal ones
                  folded; readable at 1200 px) and full (every transition)
  the player      the reference episode (DIR/replan-trace.json), every counterexample
                  in DIR/counterexamples/ and each --trace file, replayed on the
                  generated controller: each step highlights the fired transition in
                  the diagram and shows the call, its answer, the evidence revision,
                  the pending plan, the counters and the stop reason. Previous, next
                  and play buttons; keys: arrows, Space, Home, End
  verify          its table of checks and of properties, with their status, read
                  from DIR/verify.json (the report `replan verify` wrote)
  coverage        the campaign's fire counts on the full view, and as a table
  what changed    with --against OLD (a policy file or a git revision): the commit
                  decisions' z3 witness, the behaviours only one version reaches, the
                  diagram diff (verify's `against` check: reused from DIR/verify.json
                  when it compared with the same OLD, else run now, ~25 s)

Everything but the player works without JavaScript, and the page prints. It is built
from the same records the CLI prints (--json), so the two cannot disagree.

Exit 0 when the page is written and the report it shows holds, 1 when the report has
a failed check (the page is still written: it shows the failure), 2 on bad input
(one line).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from replan.common import (
    CliError,
    add_json_option,
    add_policy_option,
    check_writable,
    policy_from_args,
    print_json,
)
from replan.controller import input_limits
from replan.controller.policy import Policy, policy_to_dict
from replan.verification.runtime.files import announce, write_atomically


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)
    parser.add_argument(
        "--against",
        metavar="OLD",
        help="an older policy file or a git revision of the declaration: add the semantic diff",
    )
    parser.add_argument(
        "--evidence",
        metavar="DIR",
        help="where `replan verify` wrote its report (default: out/verify/<policy name>/, "
        "out/verify/default/ for the default policy, or the committed evidence/ when "
        "verify has not run here)",
    )
    parser.add_argument(
        "--trace",
        metavar="FILE",
        action="append",
        default=[],
        help="also play this recording (a counterexample or an episode record; repeatable)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default="out/review.html",
        help="the page to write (default: out/review.html)",
    )
    add_json_option(parser)


def _evidence_dir(args: argparse.Namespace) -> Path:
    from replan.verification.pipeline.options import default_report_dir
    from replan.verification.runtime.checkout import COMMITTED_EVIDENCE

    if args.evidence:
        return Path(args.evidence)
    fresh = default_report_dir(args.policy)
    if args.policy is None and not (fresh / "verify.json").is_file():
        return COMMITTED_EVIDENCE  # a fresh checkout: the committed report
    return fresh


def _verify_command(args: argparse.Namespace) -> str:
    command = "replan verify"
    if args.policy:
        command += f" --policy {args.policy}"
    if args.evidence:
        command += f" -o {args.evidence}"
    return command


def _report(args: argparse.Namespace, evidence: Path, policy: Policy) -> Any:
    from replan.verification.report.records import VerifyReport

    path = evidence / "verify.json"
    if not path.is_file():
        raise CliError(
            f"{path}: no verify report; run `{_verify_command(args)}` first "
            "(or name its directory with --evidence DIR)"
        )
    try:
        report = VerifyReport.from_json(
            input_limits.load_json(path, what="a verify report"), str(evidence)
        )
    except input_limits.InputLimitError as error:
        raise CliError(str(error)) from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CliError(f"{path}: {error}") from None
    if policy_to_dict(report.policy) != policy_to_dict(policy):
        raise CliError(
            f"{path} was written for another policy than {args.policy or 'the default'}; "
            f"run `{_verify_command(args)}` (or name the right directory with --evidence)"
        )
    return report


def _recordings(args: argparse.Namespace, evidence: Path, model: Any, policy: Policy) -> list[Any]:
    """The reference episode, the evidence directory's counterexamples, the --trace
    files, each played back. A file of the evidence directory that holds no steps (a
    proof's counterexample to induction is one symbolic step, not a run) is skipped
    with a note; a --trace file that cannot be played is bad input."""
    from replan.verification.engines.conform.playback import PlaybackError, load_playback

    found: list[Path] = []
    episode = evidence / "replan-trace.json"
    if episode.is_file():
        found.append(episode)
    found += sorted((evidence / "counterexamples").glob("*.json"))
    playbacks = []
    for path in found:
        try:
            playback = load_playback(path, model, policy)
        except PlaybackError as error:
            print(f"replan review: note: skipped {error}", file=sys.stderr)
            continue
        if not playback.steps:
            print(f"replan review: note: skipped {path}: no calls to play", file=sys.stderr)
            continue
        playbacks.append(playback)
    for name in args.trace:
        try:
            playbacks.append(load_playback(name, model, policy))
        except PlaybackError as error:
            raise CliError(f"--trace {error}") from None
    for playback in playbacks:
        if playback.differing:
            print(
                f"replan review: note: {playback.source}: steps "
                f"{', '.join(map(str, playback.differing))} answer differently on the "
                "generated controller than recorded; the page shows both",
                file=sys.stderr,
            )
    return playbacks


def _against(args: argparse.Namespace, report: Any, policy: Policy, model: Any) -> Any:
    """The older machine and verify's ``against`` check comparing with it: the one in
    the report when it compared with the same OLD, else the same check run now."""
    from replan.verification.report.diagram.overlays import OverlayError, load_old

    try:
        old = load_old(args.against, None, model, args.policy)
    except OverlayError as error:
        raise CliError(f"--against {args.against}: {error}") from None
    for check in report.checks:
        if check.name == "against" and check.details.get("old") == old.name:
            return old, check
    from replan.verification.core.subject import PROJECT
    from replan.verification.pipeline.checks.against import check_against
    from replan.verification.pipeline.options import VerifyOptions
    from replan.verification.pipeline.session import VerifySession

    print(
        f"replan review: comparing with {old.name} (verify's against check: z3 and the "
        "explorer on both versions) ...",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory() as scratch:
        options = VerifyOptions(profile=report.profile or "ci", against=args.against)
        session = VerifySession(policy, Path(scratch), options, PROJECT)
        check = check_against(session, args.against, args.policy)
    report.checks.append(check)
    report.against_lines = session.report.against_lines
    return old, check


def _command(args: argparse.Namespace) -> str:
    parts = ["replan review"]
    for option, value in (
        ("--policy", args.policy),
        ("--against", args.against),
        ("--evidence", args.evidence),
    ):
        if value:
            parts.append(f"{option} {value}")
    parts += [f"--trace {name}" for name in args.trace]
    parts.append(f"-o {args.output}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.report.review import build_review, to_html

    policy = policy_from_args(args)
    check_writable(args.output, "-o")  # before any work: a page that cannot be, is not
    evidence = _evidence_dir(args)
    model = extract(Replanning)
    report = _report(args, evidence, policy)
    playbacks = _recordings(args, evidence, model, policy)
    old, against = (None, None)
    if args.against:
        old, against = _against(args, report, policy, model)
    review = build_review(
        command=_command(args),
        policy=policy,
        policy_name=args.policy or "the default policy (spec/policy.toml)",
        model=model,
        report=report,
        verify_source=str(evidence / "verify.json"),
        playbacks=playbacks,
        old=old,
        against=against,
    )
    page = to_html(review).encode()
    target = Path(args.output)
    try:
        write_atomically(target, page)
    except OSError as error:
        raise CliError(f"{target}: cannot write ({error.__class__.__name__})") from None
    if args.json:
        print_json({"output": str(target), "bytes": len(page), **review.to_json()})
    else:
        print(f"verify ({evidence / 'verify.json'}): {report.verdict()}")
        for line in report.summary_lines()[:-1]:
            print(f"  {line}")
        for playback in playbacks:
            print(f"recording: {playback.title}, {len(playback.steps)} steps ({playback.source})")
        if not review.graphviz:
            print("note: Graphviz is not installed: the page shows the Mermaid source instead")
        views = ", ".join(review.views) or "none (Mermaid source)"
        announce(f"wrote {target} ({len(page):,} bytes; views: {views})")
    return 0 if report.ok else 1
