"""A provider's tool-call arguments that no JSON parser can read become a malformed
call, never an exception.

Why: the SDK parses a function call's argument text with ``json.loads`` and catches
only ``JSONDecodeError`` (``Content.parse_arguments`` answers ``{"raw": text}``). Two
kinds of text a misbehaving provider can send get past that: an integer literal
longer than the interpreter's limit (``ValueError``, 4,300 digits by default) and
nesting deeper than the recursion limit (``RecursionError``). Either one escapes the
whole request before any middleware runs, so the call reaches no controller and uses
no proposal slot: a provider could spend unlimited free proposals that way
(CONTRACT.md: a malformed proposal is a rejected proposal that used its slot).

``unparseable_as_raw`` gives such a call the SDK's own answer for unparseable text,
``{"raw": text}``, before the function-invocation layer reads it; the call then
travels the malformed-argument path every other malformed call takes
(``agent.MalformedArgumentsGate``, ``middleware.ReplanMiddleware``).

Leaves to others: parsing itself (the SDK still parses every call), and what a
malformed call means (the controller).
"""

from __future__ import annotations

import json
from typing import Any


def _parsed(text: str) -> dict[str, Any] | None:
    """The arguments the SDK would make of ``text``, parsed here once; None for text
    that is no JSON at all (``JSONDecodeError``), which the SDK answers itself."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError):  # past the digit limit, past the recursion limit
        return {"raw": text}
    # Content.parse_arguments: a JSON object is the arguments, anything else is "raw".
    return loaded if isinstance(loaded, dict) else {"raw": loaded}


def unparseable_as_raw(response: Any) -> Any:
    """``response`` (a ``ChatResponse``) with every function call's argument text
    replaced by what the SDK makes of it, parsed once here: a call whose text no parser
    can read holds ``{"raw": text}``. The SDK then never parses the text again, at
    another depth of the stack. Anything else is returned as it is; the calls are
    changed in place, since the SDK reads these very objects next. A streamed response
    is not read here (``agent.ControllerAgent`` never streams)."""
    for message in getattr(response, "messages", None) or ():
        for content in getattr(message, "contents", None) or ():
            arguments = getattr(content, "arguments", None)
            if getattr(content, "type", None) == "function_call" and isinstance(arguments, str):
                parsed = _parsed(arguments)
                if parsed is not None:
                    content.arguments = parsed
    return response


__all__ = ["unparseable_as_raw"]
