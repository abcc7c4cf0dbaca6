"""Jobs per tenant and status without counting the jobs: the sums of `job_counts`, whose
rows triggers on `jobs` add in the transaction of every change (migration 0012: a row per
statement and tenant and status on PostgreSQL, per job changed on SQLite).

The rows pile up between folds, a few per claim or record; `fold` replaces them with one
row per tenant and status (the worker calls it as it looks back for expired leases). A
count is exact whenever read: the rows not folded yet are summed too.
"""

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.dialect import binds_lists
from app.store.tables import job_counts

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


def _fold_in_one_statement() -> sa.Select[Any]:
    """`_fold` as one statement on PostgreSQL (a data-modifying CTE: `binds_lists`): the rows
    of changes never leave the server: 92-108 ms for 60,000-68,000 of them at 10 M jobs,
    where reading them into Python and summing them there took 283-293 ms, in the worker's
    event loop, between two claims."""
    gone = (
        sa.delete(job_counts)
        .returning(job_counts.c.tenant, job_counts.c.status, job_counts.c.jobs)
        .cte("gone")
    )
    total = sa.func.sum(gone.c.jobs)
    sums = (
        sa.select(gone.c.tenant, gone.c.status, total)
        .group_by(gone.c.tenant, gone.c.status)
        .having(total != 0)
    )
    written = sa.insert(job_counts).from_select(["tenant", "status", "jobs"], sums).cte("written")
    return sa.select(sa.func.count()).select_from(gone).add_cte(written)


_FOLD_IN_ONE_STATEMENT = _fold_in_one_statement()


def _fold(conn: sa.Connection) -> int:
    """Delete every row of changes and write back their sums, one row per tenant and
    status (none for a sum of 0); how many rows were folded. On PostgreSQL a row a
    concurrent transaction adds meanwhile is not deleted (not in the delete's snapshot)
    and stays to be summed; two folds at once delete disjoint rows."""
    if binds_lists(conn.dialect.name):
        return int(conn.execute(_FOLD_IN_ONE_STATEMENT).scalar_one())
    gone = conn.execute(
        sa.delete(job_counts).returning(job_counts.c.tenant, job_counts.c.status, job_counts.c.jobs)
    ).all()
    sums: dict[tuple[str, str], int] = {}
    for tenant, status, jobs in gone:
        sums[tenant, status] = sums.get((tenant, status), 0) + jobs
    rows = [
        {"tenant": tenant, "status": status, "jobs": jobs}
        for (tenant, status), jobs in sorted(sums.items())
        if jobs
    ]
    if rows:
        conn.execute(sa.insert(job_counts), rows)
    return len(gone)


async def fold(database: Database, at: int = FOLD_AT) -> int:
    """Fold the rows of changes if there are more than `at` (a read, without SQLite's write
    lock, says whether); how many rows were folded."""
    async with database.read() as conn:
        rows = (await conn.execute(sa.select(sa.func.count()).select_from(job_counts))).scalar()
    if not rows or rows <= at:
        return 0
    return await database.transact(_fold)
