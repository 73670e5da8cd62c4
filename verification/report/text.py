"""Text from outside (a policy's names, a file's path, a recorded argument, a check's
summary that quotes them) as each report format shows it: as text, never as markup of
the format.

Owns one escaping function per output and nothing else; the renderers call them on
every string they did not write themselves. The policy loader already refuses names
that cannot be shown (``controller.policy_schema.NOT_IN_NAMES``: control, invisible
and bidirectional characters, line breaks), but a report also shows what did not come
through the loader (a trace, a path, an error message), so each format escapes
regardless:

- ``visible``: every such character as a printable escape (``\\n``, ``\\u202e``), so the
  text is one line and reads in the order it is stored; ``visible_lines`` keeps the
  line breaks of a multi-line block;
- ``markdown``: inline Markdown (GitHub's job summary reads it): the characters that
  start emphasis, code, links, raw HTML, tables, headings or math are backslash-escaped;
  ``markdown_code`` a code span and ``markdown_fence`` a fenced block whose fence no
  content can close;
- ``mermaid``: a label of a Mermaid statement: the characters Mermaid reads as the end
  of a statement, a comment, HTML or markup are written as its ``#code;`` entities;
- ``sarif``: a SARIF message, whose ``[text](id)`` is a link to a related location;
- ``xml``: an attribute or text of an XML document (JUnit), which cannot hold most
  control characters even as references.

Stdlib only.
"""

from __future__ import annotations

import re

from replan.controller.policy_schema import unshowable

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(character: str) -> str:
    named = _NAMED_ESCAPES.get(character)
    if named is not None:
        return named
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` as one line of visible characters: each character a name may not hold
    (``unshowable``: controls, line breaks, invisible and bidirectional format
    characters, lone surrogates) written as its Python escape (``\\n``, ``\\u202e``)."""
    if unshowable(text) is None:
        return text
    return "".join(_escaped(c) if unshowable(c) is not None else c for c in text)


def visible_lines(text: str) -> str:
    """``visible`` line by line: the line breaks of a multi-line block stay."""
    return "\n".join(visible(line) for line in text.split("\n"))


# ---- Markdown ----------------------------------------------------------------------------

#: Characters that start markup in inline Markdown (CommonMark and GitHub's extensions:
#: emphasis, code, links and images, raw HTML and entities, tables, strikethrough,
#: math), each written with a backslash, which CommonMark reads as the character.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|!~$&])")
#: What makes a line a list item, a heading underline or a numbered item when it
#: starts one (a table cell and a list item start with the text).
_MARKDOWN_LEADING = re.compile(r"^(\s*)([-+=]|\d+[.)])")


def markdown(text: str) -> str:
    """``text`` as inline Markdown that renders as exactly this text (on one line)."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text))
    return _MARKDOWN_LEADING.sub(lambda m: m[1] + "\\" + m[2], escaped, count=1)


def _longest_run(text: str, character: str) -> int:
    runs = re.findall(f"{re.escape(character)}+", text)
    return max((len(run) for run in runs), default=0)


def markdown_code(text: str, *, in_table: bool = False) -> str:
    """``text`` as a code span: delimited by more backticks than it holds in a row
    (padded with a space when it starts or ends with one), one line; in a table cell,
    ``|`` escaped too (GitHub splits cells before it reads code spans)."""
    shown = visible(text)
    fence = "`" * (_longest_run(shown, "`") + 1)
    padded = f" {shown} " if shown.startswith("`") or shown.endswith("`") else shown
    span = f"{fence}{padded}{fence}"
    return span.replace("|", "\\|") if in_table else span


def markdown_fence(text: str, info: str = "") -> list[str]:
    """``text`` as the lines of a fenced code block: its fence longer than any run of
    backticks inside (so no line of it can close the block), its lines kept."""
    shown = visible_lines(text.rstrip("\n"))
    fence = "`" * max(3, _longest_run(shown, "`") + 1)
    return [f"{fence}{info}", *shown.split("\n"), fence]


# ---- Mermaid -----------------------------------------------------------------------------

#: What Mermaid reads as syntax inside a label: ``;`` ends a statement, ``%%`` starts
#: a comment, ``<``/``>``/``&`` are HTML (Mermaid renders labels as HTML), a quote or a
#: backtick starts a string or Markdown text, braces a directive. Each is written as
#: ``#<code>;``, the entity Mermaid decodes after it has split the statements.
_MERMAID_SPECIAL = re.compile(r"[;%<>&\"`{}]")


def mermaid(text: str) -> str:
    """``text`` as the label of one Mermaid statement (shown as exactly this text)."""
    return _MERMAID_SPECIAL.sub(lambda m: f"#{ord(m.group())};", visible(text))


#: Mermaid's numeric entities, as ``mermaid`` writes them.
MERMAID_ENTITY = re.compile(r"#(\d+);")


def mermaid_decoded(label: str) -> str:
    """A label as Mermaid shows it (its numeric entities decoded)."""
    return MERMAID_ENTITY.sub(lambda m: chr(int(m[1])), label)


# ---- SARIF and XML -----------------------------------------------------------------------


def sarif(text: str) -> str:
    """``text`` as a SARIF message's ``text``: its lines kept, ``[``, ``]`` and ``\\``
    escaped (SARIF reads ``[text](id)`` as a link to a related location)."""
    return re.sub(r"([\\\[\]])", r"\\\1", visible_lines(text))


def xml(text: str, *, lines: bool = True) -> str:
    """``text`` as XML 1.0 character data (an element's text, or with ``lines=False``
    an attribute: one line), which ElementTree then escapes: every character XML
    cannot hold (controls, U+FFFE and U+FFFF, lone surrogates) written visibly."""
    return visible_lines(text) if lines else visible(text)
