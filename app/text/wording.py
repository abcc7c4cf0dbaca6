"""Pure: numbers, errors and job ids as the log lines, messages and pages say them.

A count reads right whatever it is ("1 in-flight job", "2 in-flight jobs"), and a duration
is short ("60s", "55.2s"). Every sentence that carries a number goes through here, every
log line that names an error (`error_line`), and every list that shows ids short (the CLI's
tables, the dashboard's: `distinct_prefix`).
"""

import itertools
from collections.abc import Sequence

SHORT_ID = 8
"""The fewest characters of a job id a list shows."""


def counted(number: int, noun: str) -> str:
    """`number` and `noun`, plural unless the number is one: `counted(1, "job")` is "1 job".

    Every noun the service counts makes its plural with an "s".
    """
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def seconds(value: float) -> str:
    """A duration to a tenth of a second, without trailing zeros: "60s", "55.2s"."""
    return f"{value:.1f}".rstrip("0").rstrip(".") + "s"


def error_line(exc: BaseException) -> str:
    """An error in one log line: its type and the first line of its message (a database
    error's driver message, without SQLAlchemy's statement and parameters)."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0][:300]}" if lines else type(cause).__name__


def distinct_prefix(ids: Sequence[str]) -> int:
    """How many leading characters (`SHORT_ID` at least) tell `ids` apart. Job ids begin
    with the time they were made (`app.store.tables.new_job_id`): jobs submitted within a
    minute share their first 8 characters, those made in one millisecond their first 15."""
    # Sorted, the longest start any two ids share is one that two neighbours share.
    shared = (_shared_start(a, b) for a, b in itertools.pairwise(sorted(set(ids))))
    return max([SHORT_ID, *(n + 1 for n in shared)])


def _shared_start(a: str, b: str) -> int:
    differ = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(differ, min(len(a), len(b)))
