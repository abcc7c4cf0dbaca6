"""Tenants' weights and in-flight quota, on both backends: a worker fetching from real local
servers serves two backlogged tenants of weights 3:1 three jobs to one, and never runs more
of a tenant's jobs than INGEST_TENANT_MAX_IN_FLIGHT; a tenant's count of jobs in flight
returns to 0 whichever way its jobs leave running."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import ErrorKind, Failure, Fetched, MarkDead, NewJob, Reschedule
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import attempts, jobs, tenants
from tests.conftest import eventually, running_app
from tests.support.outcomes import failed, record, succeeded, take_back_expired
from tests.support.stores import queue_on
from tests.support.webserver import Reply, ScriptedServer

FETCHED = 400
"""Fetches counted: two windows of 200 apart, and every window between."""


async def _lease_order(database: Database, limit: int) -> list[str]:
    """The tenants of the first `limit` attempts, in the order they were leased (attempts'
    ids: a claim inserts its attempts in the order it chose them)."""
    stmt = (
        sa.select(jobs.c.tenant)
        .select_from(attempts.join(jobs, jobs.c.id == attempts.c.job_id))
        .order_by(attempts.c.id)
        .limit(limit)
    )
    async with database.read() as conn:
        return list((await conn.execute(stmt)).scalars())


async def _attempts(database: Database) -> int:
    async with database.read() as conn:
        return (await conn.execute(sa.select(sa.func.count()).select_from(attempts))).scalar_one()


async def _in_flight(database: Database) -> dict[str, int]:
    async with database.read() as conn:
        rows = await conn.execute(sa.select(tenants.c.tenant, tenants.c.in_flight))
        return {tenant: n for tenant, n in rows}


async def test_two_backlogged_tenants_of_weights_3_and_1_are_fetched_3_to_1(make_settings, web):
    """Weights acme:3, globex:1, both backlogged on one domain without a limit: in every
    window of 200 of the first 400 jobs leased, acme has 3 for each of globex's, within 10 %.
    Both submit in one batch, so the first claim finds both backlogs."""
    settings = make_settings(
        tenant_weights="acme:3,globex:1", domain_max_in_flight=1000, worker_concurrency=8
    )
    async with running_app(settings) as (app, client):
        database = app.state.runtime.database
        body = {
            "jobs": [
                {"url": web.url(f"/{tenant}/{i}"), "tenant": tenant}
                for tenant, count in (("acme", 360), ("globex", 140))
                for i in range(count)
            ]
        }
        assert 201 == (await client.post("/jobs/batch", json=body)).status_code

        async def fetched() -> bool:
            return await _attempts(database) >= FETCHED

        await eventually(fetched, timeout=120, interval=0.2)
        order = await _lease_order(database, FETCHED)
    ratios = []
    for start in range(FETCHED - 200 + 1):
        window = order[start : start + 200]
        ratios.append(window.count("acme") / window.count("globex"))
    assert all(2.7 <= ratio <= 3.3 for ratio in ratios), (min(ratios), max(ratios))


async def test_a_tenant_never_runs_more_than_its_quota(make_settings, web):
    """INGEST_TENANT_MAX_IN_FLIGHT=2, slow answers, 8 slots: tenant hog's 10 jobs never run
    more than 2 at once while tenant other's jobs run beside them (each tenant on its own
    server, which counts the fetches it serves at once); all drained, every tenant's count
    of jobs in flight is back to 0."""
    with ScriptedServer() as other_web:
        for i in range(10):
            web.script(f"/hog/{i}", Reply(delay=0.3))
        for i in range(4):
            other_web.script(f"/other/{i}", Reply(delay=0.3))
        settings = make_settings(
            tenant_max_in_flight=2, domain_max_in_flight=1000, worker_concurrency=8
        )
        async with running_app(settings) as (app, client):
            hog = [{"url": web.url(f"/hog/{i}"), "tenant": "hog"} for i in range(10)]
            other = [{"url": other_web.url(f"/other/{i}"), "tenant": "other"} for i in range(4)]
            assert 201 == (await client.post("/jobs/batch", json={"jobs": hog})).status_code
            assert 201 == (await client.post("/jobs/batch", json={"jobs": other})).status_code

            async def drained() -> bool:
                return (await client.get("/stats")).json()["counts"]["succeeded"] == 14

            await eventually(drained, timeout=60, interval=0.1)
            in_flight = await _in_flight(app.state.runtime.database)
        hog_hits = sorted(t for i in range(10) for t in web.hits[f"/hog/{i}"])
        other_hits = sorted(t for i in range(4) for t in other_web.hits[f"/other/{i}"])
    assert (2, 2) == (web.max_in_flight, other_web.max_in_flight)
    assert other_hits[0] < hog_hits[-1], "the other tenant's jobs ran while hog's waited"
    assert {"hog": 0, "other": 0} == in_flight


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RESULT = Fetched(200, "http://a.test/", "text/html", 10, "0" * 64, "t")
SERVER_ERROR = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 500", 500)


@pytest.fixture
async def store(database_url):
    database = Database(database_url)
    settings = Settings(_env_file=None, domain_max_in_flight=1000, tenant_max_in_flight=2)
    yield JobStore(database, lambda: NOW), queue_on(database, settings), settings
    await database.dispose()


def new(i: int, tenant: str = "t") -> NewJob:
    return NewJob(f"http://a.test/{i}", "a.test", tenant, max_attempts=1)


async def test_the_count_returns_to_0_whichever_way_jobs_leave_running(store):
    """A tenant's jobs in flight are counted at claim, up to its quota of 2, and freed by a
    success, a failure (one to retry, one dead), a lease taken back, and a shutdown's
    hand-back; a stale write through a taken-back lease frees nothing twice."""
    jobs_, queue, settings = store
    await jobs_.submit([new(i) for i in range(8)])
    await jobs_.submit([NewJob("http://a.test/x", "a.test", "t", max_attempts=3)])
    now = NOW + timedelta(seconds=1)

    first = await queue.claim("w", 8, now, 60)
    assert (2, {"t": 2}) == (len(first), await _in_flight(queue.db))
    assert [] == await queue.claim("w", 8, now, 60), "at its quota"

    assert await record(queue, succeeded(first[0], RESULT), now)
    retry, failing = PartSettings.of(settings).retry, first[1]
    dead = policy.decide(
        SERVER_ERROR, failing.attempt, failing.max_attempts, failing.deferrals, now, retry
    )
    assert isinstance(dead, Reschedule | MarkDead)
    assert await record(queue, failed(first[1], dead), now)
    assert {"t": 0} == await _in_flight(queue.db)

    expiring = await queue.claim("w", 2, now, 1)
    assert {"t": 2} == await _in_flight(queue.db)
    later = now + timedelta(seconds=2)
    assert 2 == len(await take_back_expired(queue, later))
    assert {"t": 0} == await _in_flight(queue.db)
    assert not await record(queue, succeeded(expiring[0], RESULT), later), "a stale write"
    assert {"t": 0} == await _in_flight(queue.db)

    handed = await queue.claim("w", 2, later, 60)
    assert 2 == len(handed)
    await queue.record([policy.handed_back(lease, later) for lease in handed], later)
    assert {"t": 0} == await _in_flight(queue.db)


async def test_a_new_weight_1_tenant_starts_in_the_next_claim(database_url):
    """After a tenant of weight 100 was served 20 claims alone, a tenant of weight 1 that
    submits then has its first job first in the next claim (it starts level, at the
    floor, and first on the tie), then waits its turn by weight."""
    database = Database(database_url)
    settings = Settings(_env_file=None, domain_max_in_flight=1000, tenant_weights={"big": 100})
    store, queue = JobStore(database, lambda: NOW), queue_on(database, settings)
    try:
        await store.submit([new(i, "big") for i in range(400)])
        for i in range(20):
            now = NOW + timedelta(seconds=i)
            leases = await queue.claim("w", 8, now, 60)
            await queue.record([succeeded(lease, RESULT) for lease in leases], now)
        await store.submit([new(1000 + i, "small") for i in range(5)])
        leases = await queue.claim("w", 8, NOW + timedelta(seconds=30), 60)
    finally:
        await database.dispose()
    assert ["small"] + ["big"] * 7 == [lease.tenant for lease in leases]
