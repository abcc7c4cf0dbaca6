"""A tenant's pending quota (INGEST_TENANT_MAX_PENDING): its pending jobs counted, and the
requeues held to it (`JobStore.retry`, `refresh` and their bulk forms).

A submit counts in a read before its insert (`JobStore.submit`). A requeue counts in the
transaction of its update: on SQLite, whose one writer runs them in turn, requeues never
pass the quota; on PostgreSQL, requeues and submits that race may pass it by what they add
together, as submits that race do (a soft limit, as a rate limit is). A scheduled refresh
(`app.store.refreshes.stage_due`) is the tenant's own schedule: not held to it.

Issues its statements on the caller's connection, in the caller's transaction.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.tables import jobs, status_is


class QuotaExceeded(Exception):
    """A submit, retry or refresh would give a tenant more pending jobs than
    INGEST_TENANT_MAX_PENDING."""

    def __init__(self, tenant: str, pending: int, adding: int, limit: int) -> None:
        super().__init__(
            f"tenant {tenant!r} has {pending} pending jobs; {adding} more would pass its "
            f"limit of {limit} (INGEST_TENANT_MAX_PENDING)"
        )


@dataclass(frozen=True)
class Requeue:
    """What a bulk retry or refresh did."""

    requeued: int
    """Jobs moved back to pending."""
    left_over_quota: int
    """Jobs it matched that stayed as they were: their tenant's pending jobs were at its
    quota."""


def pending_count(tenant: str, limit: int) -> sa.Select[Any]:
    """`tenant`'s pending jobs, counted up to `limit` + 1 through the index of pending jobs
    per tenant: a tenant with a million pending costs no more than one at the limit."""
    return sa.select(sa.func.count()).select_from(
        sa.select(jobs.c.id)
        .where(jobs.c.tenant == tenant, status_is(JobStatus.PENDING))
        .limit(limit + 1)
        .subquery()
    )


def check_room(conn: sa.Connection, tenant: str, adding: int, limit: int) -> None:
    """QuotaExceeded unless `tenant`'s pending jobs and `adding` more stay within `limit`."""
    pending = conn.execute(pending_count(tenant, limit)).scalar_one()
    if pending + adding > limit:
        raise QuotaExceeded(tenant, pending, adding, limit)


def requeue(
    conn: sa.Connection,
    matched: Sequence[sa.ColumnElement[bool]],
    values: dict[str, Any],
    first: Sequence[sa.ColumnElement[Any]],
    limit: int,
) -> Requeue:
    """Move the jobs `matched` selects back to pending with `values`: of each tenant, as
    many as its quota leaves room for, in the order `first`; the rest stay as they were."""
    per_tenant = conn.execute(
        sa.select(jobs.c.tenant, sa.func.count())
        .where(*matched)
        .group_by(jobs.c.tenant)
        .order_by(jobs.c.tenant)
    ).all()
    requeued = left = 0
    for tenant, matching in per_tenant:
        room = limit - conn.execute(pending_count(tenant, limit)).scalar_one()
        moved = 0
        if room > 0:
            chosen = (
                sa.select(jobs.c.id)
                .where(*matched, jobs.c.tenant == tenant)
                .order_by(*first)
                .limit(room)
            )
            # `matched` again: on PostgreSQL a row changed meanwhile is checked as it is now.
            stmt = sa.update(jobs).where(jobs.c.id.in_(chosen), *matched).values(**values)
            moved = conn.execute(stmt).rowcount
        requeued += moved
        left += matching - moved
    return Requeue(requeued, left)
