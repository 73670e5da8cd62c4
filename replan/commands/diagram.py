"""Draw the declared machine for review: every transition (internal ones included)
with its event, priority and guard, the final states with their stop reasons, and the
policy in the legend. Drawn from spec/declaration.py, so it is the machine that runs.

  replan diagram                                  Mermaid on stdout
  replan diagram -o machine.svg                   SVG (format from the suffix; needs Graphviz)
  replan diagram --format png -o machine.png      PNG through Graphviz `dot`
  replan diagram --format dot                     DOT source, nothing installed needed
  replan diagram --policy my.toml -o m.svg        another policy in the legend
  replan diagram --view overview -o overview.png  the overview (readable at 1200 px)

Views (--view):
  full       every transition as a row of its state (the default; today's diagram)
  overview   the transitions that change the state, each with its guard written as
             what it tests against this policy ([steps >= max_steps (4)]; the guard's
             name is the SVG <title> of that text), and each state's internal
             transitions folded into one line per event that counts them
             ("observe: 6 rejections / bookkeeping"). Graphviz only (svg, png, dot).

Overlays (combine freely; in Mermaid they appear as words in the labels):
  --coverage result.json   lines and arrows weighted by how often each transition
                           fired (a bar beside each line); never fired: dashed and
                           red; cannot fire under the policy: dotted grey. Accepts
                           `replan campaign --json` output
                           ({"coverage": {"transitions": {"fired": {label: count},
                           "dead_under_policy": {label: why}}}}), {"transitions_fired":
                           {label: count}} or {"coverage": {"transitions": {label:
                           count}}} (labels as in the trace, e.g. "idle --cancel-->
                           canceled").
  --trace cex.json         a counterexample (the shared JSON format), replayed under its
                           own policy on the generated controller: its path in bold
                           blue, steps numbered (a step a final state absorbed or the
                           input check refused is noted on that state).
  --diff OLD               OLD is a policy file or a git revision (e.g. HEAD~1, main):
                           added green, removed red, changed guards/limits orange,
                           unchanged grey; a guard whose policy-given meaning changed
                           says how, e.g. prerequisites_passed (commit-import: parser,
                           access -> parser, access, schema).

The docs' machine page: --check-readme exits 1 when the ```mermaid block of
docs/contract/machine.md (between <!-- diagram:start --> and <!-- diagram:end -->)
differs from a fresh render of the default machine; --update-readme rewrites it.
--readme FILE checks or updates another Markdown file with the same markers.

Internal transitions (rejections and bookkeeping that leave the state as it was) are
drawn the UML way: as lines of their state's box, marked with a loop sign, in priority
order; every other transition is an arrow from its line to its target. In Mermaid,
transitions between the same two states share one arrow, one line each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replan.common import (
    CliError,
    add_json_option,
    add_policy_option,
    check_writable,
    policy_from_args,
    print_json,
)

if TYPE_CHECKING:
    from replan.verification.report.diagram.graph import Diagram
from replan.verification.runtime.files import announce, write_atomically


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from replan.verification.report.diagram import FORMATS, VIEWS

    add_policy_option(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: from the -o suffix .svg/.png/.dot/.gv/.mmd, else mermaid)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument(
        "--view",
        choices=VIEWS,
        default="full",
        help="full: every transition (default); overview: what changes the state, "
        "guards over the policy's values, internal transitions folded",
    )
    parser.add_argument(
        "--coverage", metavar="FILE", help="campaign/explorer --json result: fire counts"
    )
    parser.add_argument("--trace", metavar="FILE", help="counterexample JSON: highlight its path")
    parser.add_argument(
        "--diff", metavar="OLD", help="older policy file or git revision to compare with"
    )
    parser.add_argument(
        "--check-readme",
        action="store_true",
        help="exit 1 if the Mermaid diagram embedded in the docs' machine page is stale",
    )
    parser.add_argument(
        "--update-readme",
        action="store_true",
        help="rewrite the Mermaid diagram embedded in the docs' machine page",
    )
    parser.add_argument(
        "--readme",
        metavar="FILE",
        help="the Markdown file to check or update (default: this checkout's "
        "docs/contract/machine.md)",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    if args.check_readme or args.update_readme:
        return _readme(args)
    output_format = _output_format(args)
    check_writable(args.output, "-o")  # before any work: a file that cannot be, is not
    diagram = _diagram(args)
    if output_format == "png" and args.output is None and sys.stdout.isatty():
        raise CliError("png is binary: write it to a file with -o FILE")
    _write(args, _render(diagram, output_format, args.view))
    summary = _summary(args, diagram, output_format)
    if args.json:
        print_json(summary)
    elif args.output:
        overlays = f", overlays: {', '.join(summary['overlays'])}" if diagram.overlays else ""
        announce(
            f"wrote {args.output} ({output_format}: {summary['states']} states, "
            f"{summary['transitions']} transitions, {summary['internal']} internal{overlays})"
        )
    return 0


def _output_format(args: argparse.Namespace) -> str:
    """--format, else the one -o's suffix names (Mermaid when there is none)."""
    from replan.verification.report.diagram import SUFFIXES

    if args.format is not None:
        return str(args.format)
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if suffix and suffix not in SUFFIXES:
        raise CliError(
            f"-o {args.output}: no format for {suffix} (suffixes: "
            f"{', '.join(sorted(SUFFIXES))}); give --format to write it anyway"
        )
    return SUFFIXES.get(suffix, "mermaid")


def _diagram(args: argparse.Namespace) -> Diagram:
    """The declared machine under the policy (a trace's own unless --policy is
    given), or its diff against --diff, with the coverage and trace overlays."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.report.diagram.graph import build, diff, with_coverage, with_trace
    from replan.verification.report.diagram.overlays import (
        OverlayError,
        load_coverage,
        load_old,
        load_trace,
    )

    model = extract(Replanning)
    try:
        given = policy_from_args(args) if args.policy else None
        trace = load_trace(args.trace, model, given) if args.trace else None
        policy = (
            trace.policy if trace is not None and args.policy is None else policy_from_args(args)
        )
        if args.diff:
            old = load_old(args.diff, None, model, args.policy)
            diagram = diff(old.model, old.policy, model, policy, old.name, old.model_class)
        else:
            diagram = build(model, policy)
        if args.coverage:
            coverage = load_coverage(args.coverage, model)
            diagram = with_coverage(diagram, coverage.counts, coverage.dead)
        if trace is not None:
            title = f"the counterexample to {trace.property!r}" if trace.property else ""
            diagram = with_trace(diagram, trace.steps, title)
            if trace.differing:
                print(
                    f"replan diagram: note: steps {', '.join(map(str, trace.differing))} answer "
                    "differently on the generated controller than recorded; drawing its path",
                    file=sys.stderr,
                )
    except (OverlayError, ValueError) as error:  # ValueError: a trace of another machine
        raise CliError(str(error)) from None
    return diagram


def _render(diagram: Diagram, output_format: str, view: str) -> bytes:
    """The diagram's bytes, each way rendering can fail said in one line."""
    from replan.verification.report.diagram import render
    from replan.verification.report.diagram.dot import GraphvizFailed, GraphvizMissing

    try:
        data: bytes = render(diagram, output_format, view)
    except ValueError as error:  # the overview in Mermaid
        raise CliError(f"--view {view}: {error}") from None
    except GraphvizMissing as error:
        raise CliError(str(error)) from None
    except GraphvizFailed as error:  # our DOT was refused: a bug, still one line
        raise CliError(str(error)) from None
    return data


def _write(args: argparse.Namespace, data: bytes) -> None:
    """To -o (atomically), else to stdout unless --json is on it."""
    if args.output:
        target = Path(args.output)
        try:
            write_atomically(target, data)
        except OSError as error:
            raise CliError(f"{target}: cannot write ({error.__class__.__name__})") from None
    elif not args.json:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


def _summary(args: argparse.Namespace, diagram: Diagram, output_format: str) -> dict[str, Any]:
    """What was drawn: counts, overlays, and what the coverage and diff overlays say."""
    summary: dict[str, Any] = {
        "format": output_format,
        "view": args.view,
        "output": args.output,
        "states": len(diagram.nodes),
        "transitions": len(diagram.edges),
        "internal": sum(1 for e in diagram.edges if e.internal),
        "overlays": [name for name, _ in diagram.overlays],
    }
    if args.coverage:
        summary["never_fired"] = [e.key for e in diagram.edges if e.fired == 0 and not e.dead]
        summary["cannot_fire"] = [e.key for e in diagram.edges if e.dead]
    if args.diff:
        summary["changes"] = {
            e.key: str(e.change) + (f": {e.change_note}" if e.change_note else "")
            for e in diagram.edges
            if e.change is not None and str(e.change) != "unchanged"
        }
    return summary


def _readme(args: argparse.Namespace) -> int:
    from replan.verification.report.diagram import readme_mermaid
    from replan.verification.report.diagram.readme import PAGE, ReadmeError, is_fresh, update
    from replan.verification.runtime.checkout import checkout_root

    if args.view != "full":
        raise CliError("--view: --check-readme/--update-readme draw the full view only")
    for option in ("coverage", "trace", "diff", "policy", "output", "format"):
        if getattr(args, option, None):
            raise CliError(
                f"--{option}: --check-readme/--update-readme draw the default machine only"
            )
    path = Path(args.readme) if args.readme else checkout_root() / PAGE
    fresh = readme_mermaid()
    try:
        if args.update_readme:
            changed = update(path, fresh)
            print(f"{'updated' if changed else 'unchanged'} the diagram in {path}")
            return 0
        if is_fresh(path, fresh):
            print(f"{path}: the embedded diagram is up to date")
            return 0
    except ReadmeError as error:
        raise CliError(str(error)) from None
    print(
        f"{path}: the embedded Mermaid diagram is stale (run `replan diagram --update-readme`)",
        file=sys.stderr,
    )
    return 1
