"""What the workers did lately, for the dashboard's chart: attempts finished per minute, by
how they ended, and how long their jobs had been due when they started (the queue lag).

One GROUP BY over the attempts that finished since a time, which `ix_attempts_finished`
finds without reading older ones. How an attempt ended is read from its row alone: a
refresh that found the content unchanged (a 304, or the same body or text); any other
outcome but a failure's, a success; retried (the job went back to pending: `next_retry_at`
is set, now for a job due again at once); else dead. Reads only.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import sqlalchemy as sa

from app.model import AttemptOutcome, ErrorKind
from app.store.database import Database
from app.store.tables import UTCDateTime, attempts


class Ended(StrEnum):
    """The chart's series, in the order its bars stack."""

    SUCCEEDED = "succeeded"
    UNCHANGED = "unchanged"
    """A refresh confirmed the content (AttemptOutcome.NOT_MODIFIED or UNCHANGED)."""
    RETRIED = "retried"
    DEAD = "dead"


UNCHANGED = (AttemptOutcome.NOT_MODIFIED.value, AttemptOutcome.UNCHANGED.value)
FAILED = (*(kind.value for kind in ErrorKind), AttemptOutcome.INTERRUPTED.value)
"""The outcomes of an attempt that failed (each `ErrorKind`) or was cut short: retried or
dead. Any other is a fetch that ended well, so one added later counts as succeeded."""


@dataclass(frozen=True)
class Minute:
    start: datetime
    finished: dict[Ended, int]
    lag_max_ms: int | None
    """The longest queue lag of the attempts that finished in this minute; None if none
    finished, or none says (attempts from before migration 0007)."""
    lag_mean_ms: float | None


async def finished_per_minute(database: Database, now: datetime, minutes: int) -> list[Minute]:
    """The last `minutes` minutes of the clock (the current one last, partly run), each with
    its attempts finished by how they ended and their queue lag."""
    since = now.replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)
    ended = sa.case(
        (attempts.c.outcome.in_(UNCHANGED), Ended.UNCHANGED.value),
        (attempts.c.outcome.not_in(FAILED), Ended.SUCCEEDED.value),
        (attempts.c.next_retry_at.is_not(None), Ended.RETRIED.value),
        else_=Ended.DEAD.value,
    )
    minute = database.backend.minutes_between(
        sa.literal(since, UTCDateTime), attempts.c.finished_at
    )
    # Grouped outside: PostgreSQL would not match two copies of an expression with bound
    # parameters in SELECT and GROUP BY.
    each = (
        sa.select(
            minute.label("minute"), ended.label("ended"), attempts.c.queue_lag_ms.label("lag")
        )
        .where(attempts.c.finished_at >= since)
        .subquery()
    )
    stmt = sa.select(
        each.c.minute,
        each.c.ended,
        sa.func.count(),
        sa.func.max(each.c.lag),
        sa.func.sum(each.c.lag),
        sa.func.count(each.c.lag),
    ).group_by(each.c.minute, each.c.ended)
    async with database.read() as conn:
        rows = (await conn.execute(stmt)).all()
    finished = [dict.fromkeys(Ended, 0) for _ in range(minutes)]
    lag_max: list[int | None] = [None] * minutes
    lag_sum, lag_count = [0] * minutes, [0] * minutes
    for index, how, count, most, total, lagged in rows:
        if not 0 <= index < minutes:
            continue  # finished "later" by a clock ahead of this one
        finished[index][Ended(how)] += count
        if lagged:
            lag_max[index] = max(lag_max[index] or 0, int(most))
            lag_sum[index] += int(total)
            lag_count[index] += lagged
    return [
        Minute(
            since + timedelta(minutes=i),
            finished[i],
            lag_max[i],
            lag_sum[i] / lag_count[i] if lag_count[i] else None,
        )
        for i in range(minutes)
    ]
