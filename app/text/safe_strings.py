"""Pure: which strings the databases can store, and JSON values made safe to send. No I/O.

Two kinds of Python string are not text outside Python:

- a lone surrogate (U+D800..U+DFFF), which JSON's `"\\ud800"` escape produces: no UTF-8
  encoder takes it (the database drivers, the API's responses), yet a JSON column keeps the
  escape, so a row can hold one;
- NUL, which PostgreSQL's text type cannot hold (SQLite's can).

The API refuses both at its edge (`app/api/bodies.py`). `storable` lets a store answer "no
such row" for a value no row can hold, without asking a database that would fail on it;
`storable_text` makes a string from the remote side (a fetched page's text, a header, an
error's message) one that both can hold; `shown` makes whatever a JSON column already holds
safe to serialize.
"""

import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
SHOWN_DEPTH = 32
"""Containers nested deeper than this are shown as null (pydantic refuses to serialize
values nested a few hundred deep, and nothing this service accepts is deeper than 17)."""


def is_text(value: str) -> bool:
    """False if `value` holds a lone surrogate."""
    return _SURROGATE.search(value) is None


def storable(value: str) -> bool:
    """True if a text column of either database can hold `value` (so a row can match it)."""
    return "\x00" not in value and is_text(value)


def storable_text(value: str) -> str:
    """`value` with each lone surrogate and each NUL replaced by U+FFFD, so that a text column
    of either database holds it (a decoder can yield a lone surrogate: UTF-7's does, even
    with `errors="replace"`). The length stays the same."""
    if not value.isascii():
        # Encoding is the quick test (docs/design/extraction.md: quicker than the regex),
        # and ASCII, the common case, needs none: it holds no surrogate.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = _SURROGATE.sub(REPLACEMENT, value)
    return value.replace("\x00", REPLACEMENT) if "\x00" in value else value


def shown(value: Any, depth: int = SHOWN_DEPTH) -> Any:
    """A copy of decoded JSON `value` that serializes whatever it holds: lone surrogates
    become U+FFFD, NaN and infinities null, containers nested deeper than `depth` null.
    Other objects are left as they are."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        if depth <= 0:
            return None
        return {shown(key, 0): shown(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return None if depth <= 0 else [shown(item, depth - 1) for item in value]
    return value
