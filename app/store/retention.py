"""Retention: delete finished jobs older than INGEST_RETENTION_DAYS, a batch per transaction.

Succeeded and cancelled jobs go, with their attempts and stored content (the foreign keys
cascade). Dead jobs stay until an operator retries or deletes them; pending and running
jobs are never touched. The worker calls this now and then (`Queue.prune`).
"""

from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.tables import jobs

PRUNE_BATCH = 500
"""Jobs deleted per transaction, so pruning never holds SQLite's write lock for long."""

PRUNABLE = (JobStatus.SUCCEEDED.value, JobStatus.CANCELLED.value)


def _prunable(older_than: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(jobs.c.status.in_(PRUNABLE), jobs.c.finished_at < older_than)


def _prune_batch(
    oldest: sa.Select[Any], older_than: datetime, conn: sa.Connection
) -> tuple[list[Any], int]:
    rows = list(conn.execute(oldest))
    if not rows:
        return rows, 0
    # Checked again: on PostgreSQL a cancelled job may have been retried since.
    stmt = sa.delete(jobs).where(jobs.c.id.in_([row.id for row in rows]), _prunable(older_than))
    return rows, conn.execute(stmt).rowcount


async def prune_jobs(database: Database, older_than: datetime, batch: int = PRUNE_BATCH) -> int:
    """Delete succeeded and cancelled jobs that finished before `older_than`; how many went.

    Cheap without an index of its own: it walks `ix_jobs_created` oldest first, and as a job
    finishes after it was created, only rows created before `older_than` can qualify, so the
    walk stops there. Each batch resumes after the last row the one before it saw, so all
    batches together read each old row once; what they read and keep is the old dead jobs
    (an operator's backlog) and the rare old job still pending or running.
    """
    deleted = 0
    after: tuple[datetime, str] | None = None
    while True:
        oldest = (
            sa.select(jobs.c.created_at, jobs.c.id)
            .where(jobs.c.created_at < older_than, _prunable(older_than))
            .order_by(jobs.c.created_at, jobs.c.id)
            .limit(batch)
        )
        if after is not None:
            oldest = oldest.where(sa.tuple_(jobs.c.created_at, jobs.c.id) > after)
        rows, count = await database.transact(partial(_prune_batch, oldest, older_than))
        deleted += count
        if len(rows) < batch:
            return deleted
        after = (rows[-1].created_at, rows[-1].id)
