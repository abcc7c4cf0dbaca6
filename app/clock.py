"""Time as a value: the service reads the clock through a `Clock`, so tests can fix it."""

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""


def utc_now() -> datetime:
    return datetime.now(UTC)
