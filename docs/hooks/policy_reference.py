"""MkDocs hook: the policy file's fields, rendered from the declaration the loader
checks against (``controller/policy_schema.py``).

Why: the loader, ``replan policy --schema`` and this reference read one declaration,
so the reference cannot list a field the loader refuses or miss one it accepts, nor
state another default. A page asks for the tables with a marker on a line of its own:

    <!-- policy: fields -->          one table per [table] of the file
    <!-- policy: loader-checks -->   what the loader checks beyond the schema
    <!-- policy: names -->           what a name may not contain

The docs describe the checkout they are built from: the checkout's root goes first on
``sys.path`` before ``replan`` is imported.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- policy: ([a-z-]+) -->$", re.MULTILINE)

KINDS = {
    "positive": "integer from 1 to 9007199254740991 (2<sup>53</sup> &minus; 1)",
    "boolean": "`true` / `false`",
    "name": "a [name](#names)",
    "names": "list of unique [names](#names)",
}


def on_config(config: Any) -> Any:
    root = str(Path(config["config_file_path"]).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from replan.controller import policy_schema

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "fields":
            return _fields(policy_schema)
        if name == "loader-checks":
            return _loader_checks(policy_schema)
        if name == "names":
            return _names(policy_schema)
        raise PluginError(f"{page.file.src_path}: unknown policy marker {name!r}")

    return MARKER.sub(render, markdown)


def _default(field: Any) -> str:
    if field.required:
        return "required"
    if field.default is None:
        return "\u2013"  # an en dash: no default
    if isinstance(field.default, bool):
        return f"`{str(field.default).lower()}`"
    if isinstance(field.default, tuple):
        return f"`{list(field.default)}`"
    return f"`{field.default}`"


def _fields(policy_schema: Any) -> str:
    parts = []
    for table in policy_schema.DOCUMENT.tables:
        heading = f"[[{table.name}]]" if table.array else f"[{table.name}]"
        required = "required" if table.required else "optional"
        parts.append(f"#### `{heading}`\n\n{table.description} ({required})")
        rows = [
            f"| `{field.name}` | {KINDS[field.kind]} | {_default(field)} | "
            f"{_cell(field.description)} |"
            for field in table.fields
        ]
        header = "| field | value | default | meaning |\n| --- | --- | --- | --- |\n"
        parts.append(header + "\n".join(rows))
    return "\n\n".join(parts)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _loader_checks(policy_schema: Any) -> str:
    rows = [f"| `{path}` | {check} |" for path, check in policy_schema.LOADER_CHECKS]
    return "| path | must be |\n| --- | --- |\n" + "\n".join(rows)


#: Ranges of control characters, which have no Unicode names to show.
_CONTROLS = {
    0x0000: "control characters (C0): line feed, carriage return and tab among them",
    0x007F: "delete and the C1 control characters",
    0xFFFE: "the noncharacters U+FFFE and U+FFFF (XML cannot hold them)",
}


def _names(policy_schema: Any) -> str:
    """The code points no name may hold, one row per range, named."""
    import unicodedata

    rows = []
    for low, high in policy_schema.NOT_IN_NAMES:
        span = f"U+{low:04X}" if low == high else f"U+{low:04X}&ndash;U+{high:04X}"
        if low in _CONTROLS:
            what = _CONTROLS[low]
        elif low == high:
            what = unicodedata.name(chr(low)).lower()
        else:
            first, last = unicodedata.name(chr(low)), unicodedata.name(chr(high))
            what = f"{first.lower()} … {last.lower()}"
        rows.append(f"| {span} | {what} |")
    return (
        f"A name is 1 to {policy_schema.NAME_LENGTH} characters, none of them in these "
        "ranges:\n\n| code points | characters |\n| --- | --- |\n" + "\n".join(rows)
    )
