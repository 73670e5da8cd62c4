"""What every subcommand shares: the ``--policy`` and ``--json`` options, turning bad
input into one line and exit 2, and writing JSON results."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy, load_policy
from replan.controller.records import PolicyError
from replan.verification.runtime.files import OUT as OUT  # the commands' default root
from replan.verification.runtime.files import write_json as write_json
from replan.verification.runtime.forking import usable_cores as usable_cores


class CliError(Exception):
    """Bad input or usage: printed as one line, exit code 2."""


def _integer_at_least(minimum: int, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= {minimum}, got {text!r}"
        ) from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a bad value is argparse's one-line exit 2)."""
    return _integer_at_least(1, text)


def workers_or_auto(text: str) -> int | None:
    """argparse type: ``auto`` (None: the command decides from the machine and the
    work) or an integer >= 1."""
    if text == "auto":
        return None
    try:
        return _integer_at_least(1, text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected auto or an integer >= 1, got {text!r}"
        ) from None


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _integer_at_least(0, text)


def check_writable(path: str | None, option: str) -> None:
    """Fail before any work when ``path`` (an output file) cannot be written: a
    directory, or a place no file can be created in (probed with a temporary file, so
    that a permission, a read-only file system or ``/proc`` all say so up front)."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise CliError(f"{option} {path}: is a directory, expected a file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".replan-probe-"):
            pass
    except (FileExistsError, NotADirectoryError):
        file = next(p for p in target.parents if p.exists() or p.is_symlink())
        raise CliError(f"{option} {path}: cannot write there ({file} is not a directory)") from None
    except OSError as error:
        raise CliError(f"{option} {path}: cannot write there ({error.strerror})") from None


def check_directory(path: str | Path, option: str) -> None:
    """Fail before any work when no file can be written in the directory ``path``
    (created if missing, probed with a temporary file)."""
    target = Path(path)
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".replan-probe-"):
            pass
    except OSError as error:
        raise CliError(f"{option} {path}: cannot write ({error.strerror or error})") from None


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="policy TOML file (default: the built-in default policy, spec/policy.toml)",
    )


class _DeprecatedSpelling(argparse.Action):
    """An output flag's old spelling: still works for one release, and says so."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"{parser.prog}: {option_string} is deprecated and goes in the next release: "
            "use -o/--output",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_output_option(
    parser: argparse.ArgumentParser,
    *,
    metavar: str,
    help: str,
    default: str | None = None,
    deprecated: tuple[str, ...] = (),
) -> None:
    """``-o/--output``: the one spelling of every command's output (a file or a
    directory, as the command writes); ``deprecated``: old spellings kept as aliases
    for one release (hidden from --help, a one-line notice on stderr when used)."""
    parser.add_argument(
        "-o", "--output", dest="output", metavar=metavar, default=default, help=help
    )
    for old in deprecated:
        parser.add_argument(
            old, dest="output", metavar=metavar, action=_DeprecatedSpelling, help=argparse.SUPPRESS
        )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print a machine-readable JSON summary on stdout"
    )


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The policy named by ``--policy`` (or the default); bad files exit 2."""
    path = getattr(args, "policy", None)
    if path is None:
        return DEFAULT_POLICY
    try:
        return load_policy(path)
    except PolicyError as error:
        raise CliError(str(error)) from None


def print_json(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
