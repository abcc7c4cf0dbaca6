"""A callback's content is cut to a number of UTF-8 bytes on a character boundary."""

import pytest

from app.worker.webhooks import cut


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ("abc", 3, ("abc", False)),
        ("abcd", 3, ("abc", True)),
        ("é" * 3, 6, ("ééé", False)),
        ("é" * 3, 5, ("éé", True)),  # the third é's first byte is dropped, not half shown
        ("a€", 3, ("a", True)),
        ("a€", 4, ("a€", False)),
        ("😀x", 3, ("", True)),
        ("", 1, ("", False)),
    ],
)
def test_cut_on_a_character_boundary(text, max_bytes, expected):
    """At most `max_bytes` of UTF-8, whole characters only, and whether anything was cut."""
    assert expected == cut(text, max_bytes)
