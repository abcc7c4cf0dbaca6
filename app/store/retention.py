"""Retention: delete finished jobs older than INGEST_RETENTION_DAYS, a batch per transaction,
and the rows of domains that no job names any more.

Succeeded and cancelled jobs go, with their attempts and stored content (the foreign keys
cascade), unless they refresh on a schedule (`refresh_every`). Dead jobs stay until an
operator retries or deletes them; pending and running jobs are never touched. The
maintenance service calls this now and then (`app.store.maintenance`).

A domain's row goes once no job names it and it holds nothing a fresh row would not (no
pause or interval still running, no failure streak, no fetch in flight), all checked in the
one statement that deletes. The one race left (PostgreSQL only), and why nothing fails for
it, is in docs/operating/retention.md.
"""

from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.tables import domains, jobs

PRUNE_BATCH = 500
"""Jobs deleted per transaction, so pruning never holds SQLite's write lock for long."""

DOMAIN_BATCH = 1000
"""Domain rows read per batch (without the write lock) and at most deleted per transaction."""

DOMAIN_SWEEP = 50_000
"""Domain rows looked at per prune, the next prune going on where it stopped: the worker
claims nothing while it prunes, and a large table walked whole held it up
(docs/design/store.md)."""

PRUNABLE = (JobStatus.SUCCEEDED.value, JobStatus.CANCELLED.value)


def _prunable(older_than: datetime) -> sa.ColumnElement[bool]:
    # A job that refreshes on a schedule is never finished for good: it stays.
    return sa.and_(
        jobs.c.status.in_(PRUNABLE),
        jobs.c.finished_at < older_than,
        jobs.c.refresh_every.is_(None),
    )


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


def _unused(now: datetime) -> sa.ColumnElement[bool]:
    """A domain row that no job names and that says nothing a fresh row would not at `now`.

    Whether a job names it is one lookup in `ix_jobs_domain_created` per row, written as a
    scalar subquery: PostgreSQL would hash every job's domain for an EXISTS instead."""
    named = sa.select(jobs.c.id).where(jobs.c.domain == domains.c.domain).limit(1)
    return sa.and_(
        domains.c.in_flight == 0,
        domains.c.consecutive_failures == 0,
        sa.or_(domains.c.paused_until.is_(None), domains.c.paused_until <= now),
        sa.or_(domains.c.next_start_at.is_(None), domains.c.next_start_at <= now),
        named.scalar_subquery().is_(None),
    )


def _rows_deleted(stmt: sa.Delete, conn: sa.Connection) -> int:
    return conn.execute(stmt).rowcount


async def prune_domains(
    database: Database,
    now: datetime,
    after: str = "",
    rows: int = DOMAIN_SWEEP,
    batch: int = DOMAIN_BATCH,
) -> tuple[int, str]:
    """Delete the rows of domains that no job names and that hold no state at `now` (no
    pause or interval running, no failure streak, nothing in flight), among the first
    `rows` rows named after `after`. Returns how many went, and where the next call goes
    on ("" once this one reached the end: the next starts again from the first name).

    Walks the table in name order, `batch` rows at a time: each batch is read without the
    write lock (are any of them unused?), and if so, the unused rows of that range of names
    are deleted in a transaction of their own by a statement that checks each row again, so
    a row that took a job or a pause since it was read stays.
    """
    deleted = 0
    for _ in range(0, rows, batch):
        window = (
            sa.select(domains.c.domain, _unused(now).label("unused"))
            .where(domains.c.domain > after)
            .order_by(domains.c.domain)
            .limit(batch)
        )
        async with database.read() as conn:
            found = (await conn.execute(window)).all()
        if any(row.unused for row in found):
            in_range = sa.and_(domains.c.domain > after, domains.c.domain <= found[-1].domain)
            stmt = sa.delete(domains).where(in_range, _unused(now))
            deleted += await database.transact(partial(_rows_deleted, stmt))
        if len(found) < batch:
            return deleted, ""
        after = found[-1].domain
    return deleted, after
