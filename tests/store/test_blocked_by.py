"""`blocked_by`: what holds a pending job back, read with the job on both backends: a paused
domain, a retry_after to come, a domain at its limit or inside its interval, a tenant at
its limit. One query for a list of any length; the same in the API's JSON."""

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from app.model import Blocked, BlockReason, DomainPause, JobStatus, NewJob
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue
from tests.conftest import running_app
from tests.support.stores import queue_on

NOW = datetime(2026, 11, 30, 3, 12, 4, tzinfo=UTC)


def new(domain: str, i: int = 0, **fields) -> NewJob:
    return NewJob(f"http://{domain}/{i}", domain, "t", max_attempts=3, **fields)


@pytest.fixture
async def database(database_url) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


def stores(database: Database, **settings) -> tuple[JobStore, Queue]:
    limits = Settings(_env_file=None, **settings)
    return (
        JobStore(database, lambda: NOW, domain_max_in_flight=limits.domain_max_in_flight),
        queue_on(database, limits),
    )


async def test_each_reason_read_with_the_job(database):
    """Paused domain (with why), not due, domain at its limit, domain inside its interval,
    or nothing; running and finished jobs are held by nothing."""
    jobs, queue = stores(database, domain_max_in_flight=1)
    busy = await jobs.submit([new("busy.test", i) for i in range(2)])
    (running,) = await queue.claim("w", 1, NOW, 60)  # busy.test's limit is 1
    waiting = next(job for job in busy if job.id != running.id)
    _, spaced = stores(database, domain_max_in_flight=1, domain_min_interval_seconds=30)
    spaced_jobs = await jobs.submit([new("spaced.test", i) for i in range(2)])
    await spaced.claim("w", 1, NOW, 60)
    paused = (await jobs.submit([new("paused.test")]))[0]
    later = (await jobs.submit([new("later.test", not_before=NOW + timedelta(minutes=3))]))[0]
    free = (await jobs.submit([new("free.test")]))[0]
    until = NOW + timedelta(minutes=10)
    await queue.pause_domain("paused.test", DomainPause(until, "HTTP 429, Retry-After 600s"))
    read = {job.id: (await jobs.get(job.id)).blocked_by for job in [paused, later, free]}
    assert {
        paused.id: Blocked(BlockReason.DOMAIN_PAUSED, until, "HTTP 429, Retry-After 600s"),
        later.id: Blocked(BlockReason.NOT_DUE, NOW + timedelta(minutes=3)),
        free.id: None,
    } == read
    assert Blocked(BlockReason.DOMAIN_AT_LIMIT) == (await jobs.get(waiting.id)).blocked_by
    assert None is (await jobs.get(running.id)).blocked_by
    spaced_blocks = [(await jobs.get(job.id)).blocked_by for job in spaced_jobs]
    assert Blocked(BlockReason.DOMAIN_INTERVAL, NOW + timedelta(seconds=30)) in spaced_blocks


async def test_a_tenant_at_its_limit_is_read_with_the_job(database):
    """With INGEST_TENANT_MAX_IN_FLIGHT, a job of a tenant that runs that many says so, on
    a free domain; another tenant's job is held by nothing."""
    limits = Settings(_env_file=None, tenant_max_in_flight=1)
    jobs = JobStore(database, lambda: NOW, domain_max_in_flight=8, tenant_max_in_flight=1)
    queue = queue_on(database, limits)
    first, second = await jobs.submit([new(f"d{i}.test") for i in range(2)])
    other = (await jobs.submit([NewJob("http://d2.test/", "d2.test", "u", max_attempts=3)]))[0]
    claimed = {lease.id for lease in await queue.claim("w", 1, NOW, 60)}
    (waiting,) = {first.id, second.id} - claimed
    assert Blocked(BlockReason.TENANT_AT_LIMIT) == (await jobs.get(waiting)).blocked_by
    blocked = {job.id: job.blocked_by for job in (await jobs.list([JobStatus.PENDING])).items}
    assert {waiting: Blocked(BlockReason.TENANT_AT_LIMIT), other.id: None} == blocked


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """The statements the database's read engine runs meanwhile."""
    seen: list[str] = []

    def count(_conn, _cursor, statement, *_):
        seen.append(statement)

    event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)


async def test_a_list_of_500_is_one_query(database):
    """Listing 500 pending jobs of a paused domain reads them and their domain in one
    statement, and every one says the pause."""
    jobs, queue = stores(database)
    await jobs.submit([new("paused.test", i) for i in range(500)])
    until = NOW + timedelta(minutes=10)
    await queue.pause_domain("paused.test", DomainPause(until, "HTTP 503"))
    async with database.read() as conn:
        await conn.execute(sa.text("SELECT 1"))  # the pool's first connection, not counted
    with statements(database) as seen:
        page = await jobs.list([JobStatus.PENDING], limit=500)
    assert 1 == len([s for s in seen if s.lstrip().upper().startswith("SELECT")]), seen
    assert 500 == len(page.items)
    assert {Blocked(BlockReason.DOMAIN_PAUSED, until, "HTTP 503")} == {
        job.blocked_by for job in page.items
    }


async def test_the_api_says_it_for_one_job_and_in_lists(make_settings):
    """GET /jobs/{id} and GET /jobs items carry blocked_by; a submit says not_due at most."""
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        submitted = (
            await client.post(
                "/jobs", json={"url": "http://a.test/", "not_before": later.isoformat()}
            )
        ).json()
        pause = DomainPause(later + timedelta(hours=1), "HTTP 429, Retry-After 7200s")
        await queue_on(app.state.runtime.database, app.state.runtime.settings).pause_domain(
            "a.test", pause
        )
        one = (await client.get(f"/jobs/{submitted['id']}")).json()
        (listed,) = (await client.get("/jobs", params={"status": "pending"})).json()["items"]
    assert {
        "reason": "not_due",
        "until": later.isoformat().replace("+00:00", "Z"),
        "detail": None,
    } == (submitted["blocked_by"])
    assert {
        "reason": "domain_paused",
        "until": pause.until.isoformat().replace("+00:00", "Z"),
        "detail": "HTTP 429, Retry-After 7200s",
    } == one["blocked_by"]
    assert one == listed


async def test_stats_say_the_oldest_due_job_and_how_many_are_not_due(database):
    """A job created two hours ago but not due for another hour is the oldest pending, not
    the oldest due: that is the one due for a minute. Of one domain, its own."""
    early = JobStore(database, lambda: NOW - timedelta(hours=2))
    await early.submit([new("a.test", 0, not_before=NOW + timedelta(hours=1))])
    await JobStore(database, lambda: NOW - timedelta(minutes=1)).submit([new("b.test", 1)])
    jobs, _ = stores(database)
    everything, of_a = await jobs.stats(), await jobs.stats(domain="A.test")
    assert (7200, 60, 1) == (
        everything.oldest_pending_age_seconds,
        everything.oldest_due_age_seconds,
        everything.scheduled,
    )
    assert (1, None, 1) == (of_a.counts["pending"], of_a.oldest_due_age_seconds, of_a.scheduled)
