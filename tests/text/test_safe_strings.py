"""app.text.safe_strings and app.api.bodies: which strings can be stored, what a job's body
may hold, and how stored JSON is made safe to send."""

import json

import pytest

from app.api.bodies import METADATA_MAX_BYTES, bounded_metadata, text_only
from app.text.safe_strings import is_text, shown, storable, storable_text


@pytest.mark.parametrize(
    ("value", "text", "stored"),
    [
        ("plain", True, True),
        ("😀 ü \ufffd", True, True),
        ("a\x00b", True, False),
        ("\ud800", False, False),
        ("a\udfffb", False, False),
        ("\ud83d\ude00", False, False),  # a pair of code points is two lone surrogates in Python
    ],
)
def test_is_text_and_storable(value: str, text: bool, stored: bool) -> None:
    """Lone surrogates are not text; NUL is text that PostgreSQL cannot store."""
    assert (text, stored) == (is_text(value), storable(value))


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("plain", "plain"),
        ("😀 ü \ufffd", "😀 ü \ufffd"),
        ("a\x00b\x00", "a\ufffdb\ufffd"),
        ("\ud800", "\ufffd"),
        ("é\udfffb\x00", "é\ufffdb\ufffd"),
        ("\ud83d\ude00", "\ufffd\ufffd"),
        ("", ""),
    ],
)
def test_storable_text_replaces_what_no_database_holds(value: str, stored: str) -> None:
    """Lone surrogates and NUL become U+FFFD, the rest stays; the result is storable."""
    assert (stored, True) == (storable_text(value), storable(storable_text(value)))


def test_shown_replaces_what_json_cannot_carry() -> None:
    """Lone surrogates become U+FFFD, NaN and infinities null, too deep null; a copy."""
    value = {"k\ud800": ["a\udc80b", float("nan"), float("inf"), 1.5, 7, True, None]}
    expected = {"k\ufffd": ["a\ufffdb", None, None, 1.5, 7, True, None]}
    assert expected == shown(value)
    assert [[None]] == shown([[[1]]], depth=2)
    assert ["loc", 0] == shown(("loc", 0))
    json.dumps(shown(value), allow_nan=False).encode()


def test_a_lone_surrogate_is_refused_in_a_key_a_value_or_metadata() -> None:
    """A body with a lone surrogate in a key or a string value is refused, and metadata with
    one anywhere inside; a valid one passes."""
    assert {"a": "😀", "b": ["x"]} == text_only({"a": "😀", "b": ["x"]})
    for body in ({"\ud800": 1}, {"a": "x\udfff"}):
        with pytest.raises(ValueError, match="Unicode text"):
            text_only(body)
    assert {"😀": ["😀"]} == bounded_metadata({"😀": ["😀"]})
    for metadata in ({"\ud800": 1}, {"a": ["\udfff"]}, {"a": {"b": "x\ud800"}}):
        with pytest.raises(ValueError, match="Unicode text"):
            bounded_metadata(metadata)


def test_metadata_bounds() -> None:
    """Exactly 16 KiB of compact JSON and 16 levels pass; one byte or level more does not;
    numbers must be finite; a value of more than 16 Ki values is refused unread."""
    filler = "x" * (METADATA_MAX_BYTES - len('{"k":""}'))
    assert {"k": filler} == bounded_metadata({"k": filler})
    nested: object = 1
    for _ in range(15):
        nested = [nested]
    assert {"a": nested} == bounded_metadata({"a": nested})
    for bad, message in [
        ({"k": filler + "x"}, "at most 16384"),
        ({"a": [nested]}, "deeper than 16"),
        ({"a": [1, {"b": float("nan")}]}, "finite"),
        ({"a": float("-inf")}, "finite"),
        ({"a": [0] * METADATA_MAX_BYTES}, "holds more than 16384 values"),
        ({str(n): 0 for n in range(METADATA_MAX_BYTES // 2)}, "holds more than 16384 values"),
    ]:
        with pytest.raises(ValueError, match=message):
            bounded_metadata(bad)
