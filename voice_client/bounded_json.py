"""JSON from a server, parsed with a bound on its size and its nesting depth.

Python's ``json.loads`` recurses once per nesting level, so a message of 2,000 nested ``[`` (2 KB)
raises ``RecursionError`` (CPython's default recursion limit is 1,000) instead of
``JSONDecodeError``, and it accepts a text of any length. :func:`loads_bounded` checks both bounds
before decoding: the size with ``len``, the depth with one regular-expression scan that skips string
literals (their brackets do not nest) and counts only the brackets outside them, so a message of
realtime events (a few brackets, one long base64 or text string) costs one C-level pass. The
standard library's decoder then parses what passed, unchanged.

Why not a library: the well-known streaming parsers (ijson, simdjson bindings) add a compiled
dependency for a check the standard library's ``re`` does in a few lines; orjson and ujson have
fixed depth limits (orjson: 1024) but their own error types and no size bound.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_MAX_DEPTH = 32
"""Nesting depth accepted by default: the realtime and Sonic events nest 3 levels at most (an
``error`` event's ``error`` object, a ``transcription.done``'s ``usage``), so 32 leaves room for any
server's extra fields while staying far below the 1,000 levels at which ``json.loads`` raises
``RecursionError``."""

_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
"""A JSON string literal (skipped whole, escapes included) or one bracket. A literal left open runs
to the end of the text (the decoder then rejects the text): were an open literal no match,
``finditer`` would retry at every later quote, each retry scanning to the end, so a server's ``"``
followed by many ``\\"`` would cost time quadratic in its length (a 1 MiB event: hours of CPU,
measured 116 s for 160 KB before this bound)."""


class JsonBoundError(ValueError):
    """The text is larger or nests deeper than allowed; the message names the bound and what was
    found."""


def check_depth(text: str | bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Raise :class:`JsonBoundError` when ``text`` nests objects and arrays deeper than
    ``max_depth``.

    Brackets inside string literals do not count; an unbalanced text is left to the decoder to
    reject.
    """
    matches = _TOKENS.finditer(text) if isinstance(text, str) else _BYTE_TOKENS.finditer(text)
    opening = ("[", "{") if isinstance(text, str) else (b"[", b"{")
    depth = 0
    for match in matches:
        token = match.group()
        if len(token) != 1:
            continue  # a string literal
        if token in opening:
            depth += 1
            if depth > max_depth:
                raise JsonBoundError(
                    f"the JSON nests deeper than {max_depth} levels (the most accepted)"
                )
        else:
            depth -= 1


_BYTE_TOKENS = re.compile(_TOKENS.pattern.encode(), re.DOTALL)


def loads_bounded(text: str | bytes, *, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """``json.loads(text)`` after checking that ``text`` is at most ``max_bytes`` long (characters
    for ``str``, which is at most its UTF-8 size) and nests at most ``max_depth`` levels.

    Raises:
        JsonBoundError: a bound is exceeded (checked before any decoding).
        json.JSONDecodeError / UnicodeDecodeError: the text is not JSON (as ``json.loads`` raises
            them).
    """
    if len(text) > max_bytes:
        raise JsonBoundError(
            f"the message is {len(text):,} bytes, more than the {max_bytes:,} accepted"
        )
    check_depth(text, max_depth)
    return json.loads(text)


def one_line(value: Any, limit: int = 300) -> str:
    """``value`` (a server's message: text, or any JSON value) as one line of at most ``limit``
    characters, control characters escaped, for an error message a user reads on a terminal."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text[: limit * 2])
    return text if len(text) <= limit else text[: limit - 1] + "…"
