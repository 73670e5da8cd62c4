"""``replan``: the command line. Dispatch only; each subcommand lives in
``replan/commands/<name>.py`` with ``add_arguments(parser)`` and ``run(args) -> int``.

Exit codes, for every subcommand: 0 everything held, 1 a property failed (its
counterexample is printed and saved), 2 bad input or usage (one line on stderr, no
traceback, nothing changed), 130 interrupted (Ctrl-C: one line on stderr within 2 s,
nothing written; verification/runtime/interrupt.py).

A command's files are written when it has finished, each atomically, all of them or
none (verification/runtime/files.py).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from replan.common import CliError
from replan.verification.runtime import files, interrupt
from replan.verification.runtime.interrupt import say

#: name -> (module under replan.commands, one-line summary). Add a subcommand here.
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("verify", "check a policy end to end and write the report (the main job)"),
    "evidence": (
        "evidence",
        "regenerate the committed evidence/ (default policy, deterministic: no timings)",
    ),
    "policy": ("policy", "validate a policy file and print it normalised"),
    "generate": (
        "generate",
        "write controller/_generated.py from the declaration (--check: drift)",
    ),
    "campaign": ("campaign", "Hypothesis model-based campaign against the contract's properties"),
    "replay": ("replay", "re-run a saved counterexample against both implementations"),
    "conform": ("conform", "check a recorded run log or trace against the proved model"),
    "check-trace": (
        "check_trace",
        "replay recorded agent runs (τ-bench) through the guard with the host's adapter",
    ),
    "explore": ("explore", "exhaustive breadth-first exploration of every reachable state"),
    "prove": ("prove", "z3 proofs: every property, commit equivalence, the generated code"),
    "diagram": ("diagram", "draw the declared machine (svg, png, dot, mermaid)"),
    "review": (
        "review",
        "one self-contained HTML page: the diagrams, verify's results, a trace player",
    ),
    "trace": ("trace", "run the reference episode through the agent SDK and record it"),
    "bench": ("bench", "measure the controller against python-statemachine and a hand-written one"),
    "mutate": ("mutate", "mutation adequacy: every broken controller must fail verification"),
    "mutants": ("mutants", "run the executor mutation matrix"),
    "boundary": (
        "boundary",
        "check the effect boundary (guard, executor, journal, run log) with crashes",
    ),
}


def _available() -> dict[str, tuple[str, str]]:
    found = {}
    for name, (module, summary) in COMMANDS.items():
        if importlib.util.find_spec(f"replan.commands.{module}") is not None:
            found[name] = (module, summary)
    return found


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("replan")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _declaration_digest() -> str:
    """The digest the generated controller carries (no python-statemachine import)."""
    from replan.controller._generated import DECLARATION_DIGEST

    return DECLARATION_DIGEST[: len("sha256:") + 12]


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``selected``'s module is imported (its options registered), so
    `replan prove` does not pay for importing Hypothesis, z3 and the agent SDK of the
    other subcommands. ``None`` registers every subcommand's options."""
    parser = argparse.ArgumentParser(
        prog="replan",
        description=(
            "A bounded, evidence-driven replanning controller, declared with "
            "python-statemachine, generated as plain Python, and model-checked."
        ),
        epilog="Exit codes: 0 all held, 1 a property failed (counterexample saved), 2 bad "
        "input, 130 interrupted (nothing written). Files go to out/ unless an option "
        "names another place; `replan evidence` regenerates the committed evidence/.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"replan {_version()} (declaration {_declaration_digest()})",
        help="print replan's version and the declaration's digest, then exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, summary) in _available().items():
        if selected is not None and name != selected:
            subparsers.add_parser(name, help=summary)
            continue
        module = importlib.import_module(f"replan.commands.{module_name}")
        sub = subparsers.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in arguments if not a.startswith("-")), None)
    name = selected if selected in COMMANDS else None
    label = "replan" if name is None else f"replan {name}"
    with interrupt.installed(f"{label}: interrupted", files.remove_temporary):
        try:
            return _main(arguments, name)
        except KeyboardInterrupt:
            return _interrupted(label)
        except Exception as error:
            # what a library made of the interrupt (ctypes: ArgumentError), or an
            # error it caused after an interrupt was swallowed: still the interrupt
            if interrupt.requested() or interrupt.caused_by_interrupt(error):
                return _interrupted(label)
            raise


def _interrupted(label: str) -> int:
    """Whatever the command held back is dropped (verification/runtime/files.py): an
    interrupted command writes nothing."""
    interrupt.finished()
    say(f"{label}: interrupted")
    return 130


def _main(arguments: list[str], name: str | None) -> int:
    parser = build_parser(name)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:
        # argparse prints its own one-line usage error; its code 2 is ours too.
        return int(exit_.code or 0)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    reader_left = False
    with files.held() as pending:
        try:
            code = int(args.handler(args))
        except CliError as error:
            interrupt.check()  # bad input found after Ctrl-C: still the interrupt
            print(f"replan {args.command}: error: {error}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `replan ... | head`: the reader left; not our error
            reader_left, code = True, 0  # and the files the command made are written
        # An interrupt swallowed where it landed (a __del__, a library's except
        # clause) still stops the command here, before anything is written.
        interrupt.check()
        try:
            pending.commit()
        except OSError as error:
            print(
                f"replan {args.command}: error: cannot write {error.filename} "
                f"({error.strerror or error})",
                file=sys.stderr,
            )
            return 2
        if not reader_left:
            for line in pending.announcements:  # each file it names now exists
                print(line)
    interrupt.check()
    if reader_left:
        sys.stderr.close()
    return code
