"""What a submitted job may hold beyond each field's type; `app/api/schemas.py` applies it.

- Every string of the body, key or value, is Unicode text: JSON's `"\\ud800"` escape makes
  a lone surrogate, which a JSON column would keep and no response could then carry (see
  `app.text.safe_strings`). NUL cannot reach a text column: URLs refuse it, tenants have a pattern.
- `metadata` is at most METADATA_MAX_BYTES of compact JSON, nested at most METADATA_MAX_DEPTH
  deep, with finite numbers only: SQLite stores NaN and Infinity (and `1e400`, which Python
  reads as Infinity) but PostgreSQL's json type refuses them, and neither is JSON.
- A job (and a batch's outer object) has at most OBJECT_MAX_KEYS keys, unknown ones included:
  pydantic builds an error for each unknown key, and many held the event loop (docs/design/api.md).

The request as a whole is bounded by INGEST_MAX_REQUEST_BYTES (`app/api/middleware/body_limit.py`);
a refused one must cost no more than the largest accepted one, so no check here walks further
into a value than an accepted value could reach (`text_only`, `bounded_metadata`).
"""

import json
import math
from typing import Any

from app.text.safe_strings import is_text

METADATA_MAX_BYTES = 16 * 1024
METADATA_MAX_DEPTH = 16
OBJECT_MAX_KEYS = 32
NOT_TEXT = (
    "every string must be Unicode text: a \\ud800-\\udfff escape must be half of a surrogate pair"
)


def few_keys(body: Any) -> Any:
    """`body` unchanged; ValueError if it is an object of more than OBJECT_MAX_KEYS keys."""
    if isinstance(body, dict) and len(body) > OBJECT_MAX_KEYS:
        raise ValueError(f"the object has {len(body)} keys; at most {OBJECT_MAX_KEYS}")
    return body


def text_only(body: Any) -> Any:
    """`body` unchanged; ValueError if one of its keys, or a string value, holds a lone
    surrogate. Only the top level: `bounded_metadata` looks into `metadata`, and a value of
    any other field that is not a string is refused by the field's type."""
    if isinstance(body, dict):
        strings = [*body, *(value for value in body.values() if isinstance(value, str))]
        if not all(is_text(s) for s in strings):
            raise ValueError(NOT_TEXT)
    return body


def bounded_metadata(metadata: Any) -> Any:
    """`metadata` unchanged; ValueError if it is too large, too deep, not finite or holds a
    string that is not text. Anything but an object is left to the field's type to refuse.

    Each value (keys included) takes a byte of JSON at least, so the walk stops once it has
    met more than METADATA_MAX_BYTES of them: a refused value costs no more than the
    largest accepted one.
    """
    if not isinstance(metadata, dict):
        return metadata
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    met = 1
    while stack:  # no recursion: the body may be nested as deep as the JSON parser allows
        item, depth = stack.pop()
        if isinstance(item, str) and not is_text(item):
            raise ValueError(NOT_TEXT)
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("metadata numbers must be finite (no NaN or Infinity)")
        if isinstance(item, dict | list):
            if depth > METADATA_MAX_DEPTH:
                raise ValueError(f"metadata is nested deeper than {METADATA_MAX_DEPTH} levels")
            met += 2 * len(item) if isinstance(item, dict) else len(item)
            if met > METADATA_MAX_BYTES:
                raise ValueError(
                    f"metadata holds more than {METADATA_MAX_BYTES} values, so more than "
                    f"{METADATA_MAX_BYTES} bytes of JSON; at most {METADATA_MAX_BYTES}"
                )
            children = [*item, *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > METADATA_MAX_BYTES:
        raise ValueError(f"metadata is {size} bytes of JSON; at most {METADATA_MAX_BYTES}")
    return metadata
