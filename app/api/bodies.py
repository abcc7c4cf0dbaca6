"""What a submitted job may hold beyond each field's type; `app/api/schemas.py` applies it.

- Every string of the body, key or value, is Unicode text: JSON's `"\\ud800"` escape makes
  a lone surrogate, which a JSON column would keep and no response could then carry (see
  `app.strings`). NUL cannot reach a text column: URLs refuse it, tenants have a pattern.
- `metadata` is at most METADATA_MAX_BYTES of compact JSON, nested at most
  METADATA_MAX_DEPTH deep, with finite numbers only: SQLite stores NaN and Infinity (and
  `1e400`, which Python reads as Infinity) but PostgreSQL's json type refuses them, and
  neither is JSON.

The request as a whole is bounded by INGEST_MAX_REQUEST_BYTES (`app/api/body_limit.py`).
"""

import json
import math
from typing import Any

from app.strings import is_text, strings_in

METADATA_MAX_BYTES = 16 * 1024
METADATA_MAX_DEPTH = 16


def text_only(body: Any) -> Any:
    """`body` unchanged; ValueError if any of its strings holds a lone surrogate."""
    if not all(is_text(s) for s in strings_in(body)):
        raise ValueError(
            "every string must be Unicode text: a \\ud800-\\udfff escape must be half of a "
            "surrogate pair"
        )
    return body


def bounded_metadata(metadata: Any) -> Any:
    """`metadata` unchanged; ValueError if it is too deep, too large or not finite."""
    stack = [(metadata, 1)]
    while stack:  # no recursion: the body may be nested as deep as the JSON parser allows
        item, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("metadata numbers must be finite (no NaN or Infinity)")
        if isinstance(item, dict | list):
            if depth > METADATA_MAX_DEPTH:
                raise ValueError(f"metadata is nested deeper than {METADATA_MAX_DEPTH} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > METADATA_MAX_BYTES:
        raise ValueError(f"metadata is {size} bytes of JSON; at most {METADATA_MAX_BYTES}")
    return metadata
