"""Jobs per tenant and status without counting the jobs: the sums of `job_counts`, whose
rows triggers on `jobs` add in the transaction of every change (migration 0012: a row per
statement and tenant and status on PostgreSQL, per job changed on SQLite). Bytes kept per
tenant likewise: the sums of `bytes_kept`, whose rows triggers on `job_contents` add
(migration 0017: a row per statement and tenant on PostgreSQL, per version on SQLite).

The rows pile up between folds, a few per claim or record; `fold` replaces them with one
row per tenant and status, or per tenant (the maintenance service calls it now and then:
`app.store.maintenance`). A count is exact whenever read: the rows not folded yet are summed too.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.tables import bytes_kept, job_counts

TENANTS_SHOWN = 1000
"""The most tenants `tenant_loads` returns: the busiest (most pending)."""

FOLD_AT = 1000
"""Rows of changes worth folding: fewer are summed as cheaply as the folded ones."""


def per_status(tenant: str | None = None) -> sa.Select[Any]:
    """(status, jobs) for every status that has or had jobs (of `tenant`, when given)."""
    stmt = sa.select(job_counts.c.status, sa.func.sum(job_counts.c.jobs)).group_by(
        job_counts.c.status
    )
    return stmt if tenant is None else stmt.where(job_counts.c.tenant == tenant)


@dataclass(frozen=True)
class TenantLoad:
    """A tenant's jobs waiting and running: what its quotas are held to."""

    tenant: str
    pending: int
    running: int


async def tenant_loads(database: Database, tenant: str | None = None) -> list[TenantLoad]:
    """Each tenant with jobs pending or running (or `tenant` alone), the most pending first;
    at most TENANTS_SHOWN of them."""
    total = sa.func.sum(job_counts.c.jobs)
    pending = sa.func.sum(
        sa.case((job_counts.c.status == JobStatus.PENDING.value, job_counts.c.jobs), else_=0)
    )
    stmt = (
        sa.select(
            job_counts.c.tenant,
            pending,
            sa.func.sum(
                sa.case(
                    (job_counts.c.status == JobStatus.RUNNING.value, job_counts.c.jobs), else_=0
                )
            ),
        )
        .where(job_counts.c.status.in_([JobStatus.PENDING.value, JobStatus.RUNNING.value]))
        .group_by(job_counts.c.tenant)
        .having(total > 0)
        .order_by(pending.desc(), job_counts.c.tenant)
        .limit(TENANTS_SHOWN)
    )
    if tenant is not None:
        stmt = stmt.where(job_counts.c.tenant == tenant)
    async with database.read() as conn:
        rows = (await conn.execute(stmt)).all()
    return [TenantLoad(name, int(waiting), int(running)) for name, waiting, running in rows]


@dataclass(frozen=True)
class _Changes:
    """A table of changes that triggers append to: a count per `keys` is the sum of its
    rows' `change`."""

    table: sa.Table
    keys: tuple[str, ...]
    change: str


_JOBS = _Changes(job_counts, ("tenant", "status"), "jobs")
_BYTES = _Changes(bytes_kept, ("tenant",), "bytes")


def _rows_of(table: sa.Table) -> sa.ScalarSelect[Any]:
    return sa.select(sa.func.count()).select_from(table).scalar_subquery()


async def fold(database: Database, at: int = FOLD_AT) -> int:
    """Fold the rows of changes of the job counts and of the bytes kept, of each table that
    has more than `at` (a read, without SQLite's write lock, says which), each the way its
    backend folds (`backend.counts.fold`); how many rows were folded."""
    async with database.read() as conn:
        rows = (await conn.execute(sa.select(_rows_of(job_counts), _rows_of(bytes_kept)))).one()
    due = [changes for changes, n in zip((_JOBS, _BYTES), rows, strict=True) if n and n > at]
    if not due:
        return 0
    statements = database.backend.counts
    return await database.transact(
        lambda conn: sum(statements.fold(conn, c.table, c.keys, c.change) for c in due)
    )


async def bytes_kept_by(database: Database, tenants: Sequence[str] | None = None) -> dict[str, int]:
    """The bytes each tenant keeps (of `tenants`, when given; else the TENANTS_SHOWN that
    keep the most), the most first; a tenant that keeps none is not named."""
    total = sa.func.sum(bytes_kept.c.bytes)
    stmt = (
        sa.select(bytes_kept.c.tenant, total)
        .group_by(bytes_kept.c.tenant)
        .having(total > 0)
        .order_by(total.desc(), bytes_kept.c.tenant)
    )
    if tenants is None:
        stmt = stmt.limit(TENANTS_SHOWN)
    else:
        stmt = stmt.where(bytes_kept.c.tenant.in_(tenants))
    async with database.read() as conn:
        rows = (await conn.execute(stmt)).all()
    return {tenant: int(kept) for tenant, kept in rows}
