"""app.text.wording: counts that read right in the singular, short durations."""

import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

from app.text.wording import counted, error_line, seconds


@pytest.mark.parametrize(
    ("number", "expected"),
    [(0, "0 in-flight jobs"), (1, "1 in-flight job"), (2, "2 in-flight jobs")],
)
def test_counted(number, expected):
    """One is singular; zero and more are plural."""
    assert expected == counted(number, "in-flight job")


@pytest.mark.parametrize(("value", "expected"), [(60.0, "60s"), (55.24, "55.2s"), (0.2, "0.2s")])
def test_seconds(value, expected):
    """A tenth of a second at most, no trailing zeros."""
    assert expected == seconds(value)


def test_an_error_is_one_line_with_its_type_and_the_drivers_message():
    wrapped = OperationalError(
        "INSERT INTO jobs ...", {}, sqlite3.OperationalError("disk full\nmore")
    )
    assert "OperationalError: disk full" == error_line(wrapped)
    assert "ValueError: first" == error_line(ValueError("first\nsecond"))
    assert "TimeoutError" == error_line(TimeoutError())
