"""The documentation's embedded diagram: the Mermaid source of the default machine
between ``<!-- diagram:start -->`` and ``<!-- diagram:end -->`` in the machine page
(``PAGE``), kept equal to a fresh render.

The docs site (MkDocs Material), GitHub and GitLab all draw a ```` ```mermaid ````
block, so the page shows the machine that runs; ``replan diagram --check-readme``
fails when it is stale and ``--update-readme`` rewrites only the text between the
markers. Any Markdown file with the markers can be checked (``--readme FILE``).
"""

from __future__ import annotations

from pathlib import Path

from replan.controller import input_limits

#: The page that embeds the default machine, relative to the checkout's root.
PAGE = Path("docs") / "contract" / "machine.md"

START = "<!-- diagram:start -->"
END = "<!-- diagram:end -->"


class ReadmeError(ValueError):
    """The page cannot be checked or updated (no markers, unreadable)."""


def block(mermaid: str) -> str:
    """What goes between the markers."""
    return f"\n```mermaid\n{mermaid.rstrip()}\n```\n"


def _split(path: Path) -> tuple[str, str, str]:
    try:
        text = input_limits.read_text(path, input_limits.PAGE_BYTES, "a Markdown page")
    except FileNotFoundError:
        raise ReadmeError(f"{path}: no such file") from None
    except input_limits.InputLimitError as error:
        raise ReadmeError(str(error)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ReadmeError(f"{path}: cannot read ({error.__class__.__name__})") from None
    start = text.find(START)
    end = text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ReadmeError(f"{path}: no {START} ... {END} markers around the diagram block")
    if text.find(START, start + 1) >= 0 or text.find(END, end + 1) >= 0:
        raise ReadmeError(f"{path}: the diagram markers appear more than once")
    inner_start = start + len(START)
    return text[:inner_start], text[inner_start:end], text[end:]


def is_fresh(path: Path, mermaid: str) -> bool:
    """Whether the page's block equals ``mermaid`` (ignoring blank lines around it)."""
    _, inner, _ = _split(path)
    return inner.strip() == block(mermaid).strip()


def update(path: Path, mermaid: str) -> bool:
    """Rewrite the block; ``True`` when the file changed."""
    head, inner, tail = _split(path)
    fresh = block(mermaid)
    if inner.strip() == fresh.strip():
        return False
    from replan.verification.runtime.files import write_atomically

    write_atomically(path, head + fresh + tail)
    return True
