"""Refreshes: a finished job goes back to pending to fetch its page again, keeping its id,
its history and its content.

A refresh is asked for by an operator (`JobStore.refresh`, `refresh_all`), or comes due on
the job's own schedule: each success of a job with `refresh_every` stores `refresh_at`, and
workers move the succeeded jobs whose `refresh_at` has passed back to pending (`stage_due`,
as Oban's stager moves scheduled jobs to available). The claim never looks at jobs waiting
for a refresh, so however many wait they cost it nothing, and the index on `refresh_at`
serves the stager.

Back in pending a refresh is a job like any other (domain rules, fair share, priority,
retries, a fresh budget). What makes it a refresh is that it succeeded before: its claim
hands the worker what that success stored (`app.model.Previous`), for a conditional GET,
and the content stays readable whatever the refresh ends in.
"""

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.backends import Backend
from app.store.dialect import lock_skipping
from app.store.tables import jobs, status_is

REFRESHABLE = (JobStatus.SUCCEEDED.value, JobStatus.DEAD.value)
"""Statuses a refresh moves back to pending: a job pending or running fetches already, and
a cancelled one was stopped by an operator (a retry sends it again)."""

STAGE_BATCH = 500
"""Due refreshes moved to pending per transaction."""


def refreshed(now: datetime) -> dict[str, Any]:
    """The values of a job going back to pending as a refresh: due now, a fresh budget. Its
    result, validators, content and `refresh_every` stay; its next `refresh_at` comes with
    its next success."""
    return {
        "status": JobStatus.PENDING.value,
        "attempts": 0,
        "deferrals": 0,
        "retry_after": None,
        "dead_reason": None,
        "finished_at": None,
        "refresh_at": None,
        # Another job may hold its URL key by now (`JobFields.unique_key`): it holds none.
        "unique_key": None,
        "updated_at": now,
    }


def _due(now: datetime) -> sa.Select[Any]:
    return (
        sa.select(jobs.c.id)
        .where(
            status_is(JobStatus.SUCCEEDED),
            jobs.c.refresh_at.is_not(None),
            jobs.c.refresh_at <= now,
        )
        .order_by(jobs.c.refresh_at)
        .limit(STAGE_BATCH)
    )


def any_due(conn: sa.Connection, now: datetime) -> bool:
    """Is a scheduled refresh due at `now`? A read of the index's first entry."""
    return conn.execute(_due(now).limit(1)).first() is not None


def stage_due(conn: sa.Connection, backend: Backend, now: datetime) -> int:
    """In a write transaction: move up to STAGE_BATCH succeeded jobs whose `refresh_at` has
    passed back to pending, and wake every process's workers; how many moved. On
    PostgreSQL rows another worker's stager holds are skipped, not waited for."""
    ids = [row.id for row in conn.execute(lock_skipping(_due(now)))]
    if not ids:
        return 0
    stmt = (
        sa.update(jobs)
        .where(jobs.c.id.in_(ids), status_is(JobStatus.SUCCEEDED))
        .values(**refreshed(now))
    )
    moved = conn.execute(stmt).rowcount
    if moved:
        backend.notify(conn)
    return moved
