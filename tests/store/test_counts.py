"""The job counts GET /stats reads (`app.store.counts`, kept by triggers on jobs): after every
kind of change, on both backends, they are what counting the jobs says, whole and per
tenant, before and after a fold."""

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.model import JobStatus, NewJob
from app.settings import Settings
from app.store import counts
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.retention import prune_jobs
from app.store.tables import job_counts, jobs
from tests.store.test_retention import RESULT
from tests.support.outcomes import succeeded
from tests.support.stores import queue_on

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def counted(database: Database, tenant: str | None = None) -> dict[str, int]:
    """Jobs per status as counting them says (the statuses that have jobs)."""
    stmt = sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status)
    if tenant is not None:
        stmt = stmt.where(jobs.c.tenant == tenant)
    async with database.read() as conn:
        return {status: n for status, n in await conn.execute(stmt)}


async def kept(store: JobStore, tenant: str | None = None) -> dict[str, int]:
    return {status: n for status, n in (await store.stats(tenant)).counts.items() if n}


async def change_rows(database: Database) -> int:
    async with database.read() as conn:
        return (await conn.execute(sa.select(sa.func.count()).select_from(job_counts))).scalar_one()


async def test_the_kept_counts_are_the_counted_ones_after_every_change(database_url):
    database = Database(database_url)
    store = JobStore(database, lambda: NOW)
    queue = queue_on(database, Settings(_env_file=None, domain_max_in_flight=1000))
    try:
        await store.submit(
            [
                NewJob(
                    url=f"http://a.test/{i}", domain="a.test", tenant=f"t{i % 3}", max_attempts=3
                )
                for i in range(40)
            ]
        )
        assert await kept(store) == await counted(database) == {"pending": 40}
        leases = await queue.claim("w", 10, NOW, 60)
        await queue.record([succeeded(lease, RESULT) for lease in leases[:6]], NOW)
        page = await store.list([JobStatus.PENDING], limit=5)
        await store.cancel(page.items[0].id)
        await store.cancel(page.items[1].id)
        await store.delete(page.items[0].id)
        await store.retry(page.items[1].id)
        await store.refresh_all()  # the succeeded ones, pending again
        leases = await queue.claim("w", 5, NOW, 60)
        await queue.record([succeeded(lease, RESULT) for lease in leases], NOW)
        await store.cancel((await store.list([JobStatus.PENDING], limit=1)).items[0].id)
        assert await prune_jobs(database, NOW + timedelta(days=1)) > 0
        assert {"pending", "running"} <= set(await counted(database))
        for tenant in (None, "t0", "t1", "t2", "none"):
            assert await kept(store, tenant) == await counted(database, tenant), tenant

        # Folded: one row per tenant and status that has jobs; the same counts.
        assert await change_rows(database) > 9
        assert await counts.fold(database, at=0) > 9
        assert await change_rows(database) <= 9
        for tenant in (None, "t0", "t1", "t2"):
            assert await kept(store, tenant) == await counted(database, tenant), tenant
        assert await counts.fold(database) == 0  # too few rows to be worth it
    finally:
        await database.dispose()
