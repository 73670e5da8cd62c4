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


def _unparseable(text: str) -> bool:
    """Whether ``text`` makes ``json.loads`` raise anything but the ``JSONDecodeError``
    the SDK answers itself."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    except (ValueError, RecursionError):
        return True
    return False


def unparseable_as_raw(response: Any) -> Any:
    """``response`` (a ``ChatResponse``) with every function call whose argument text
    cannot be parsed holding ``{"raw": text}`` instead; anything else is returned as
    it is. The calls are changed in place: the SDK reads these very objects next."""
    for message in getattr(response, "messages", None) or ():
        for content in getattr(message, "contents", None) or ():
            arguments = getattr(content, "arguments", None)
            if (
                getattr(content, "type", None) == "function_call"
                and isinstance(arguments, str)
                and _unparseable(arguments)
            ):
                content.arguments = {"raw": arguments}
    return response


__all__ = ["unparseable_as_raw"]
