"""Step 0 of the claim on both backends, with a fixed clock: waiting jobs (a retry, a
`not_before`) stay out of the claim's indexes until a claim moves them in."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import NewJob
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import STAGING_INTERVAL, Queue
from app.store.tables import jobs as jobs_table
from tests.conftest import queue_on

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store(database_url):
    database = Database(database_url)
    clock = iter(NOW + timedelta(microseconds=i) for i in range(10**6))
    yield (
        JobStore(database, lambda: next(clock)),
        queue_on(database, Settings(_env_file=None, domain_max_in_flight=1000)),
    )
    await database.dispose()


def new(path: str, **fields) -> NewJob:
    values = {"url": f"http://a.test{path}", "domain": "a.test", "tenant": "t", "max_attempts": 3}
    return NewJob(**(values | fields))


async def retry_after_of(queue: Queue, job_id: str) -> datetime | None:
    async with queue.db.read() as conn:
        select = sa.select(jobs_table.c.retry_after).where(jobs_table.c.id == job_id)
        return (await conn.execute(select)).scalar_one()


async def test_a_job_that_came_due_is_moved_in_and_keeps_when_it_came_due(store):
    """A `not_before` job, the only one, is claimed once due (SQLite's look first sees it
    too); its lease says it was due since its `retry_after`, not since the claim."""
    jobs, queue = store
    due = NOW + timedelta(seconds=30)
    job = (await jobs.submit([new("/later", not_before=due)]))[0]
    assert [] == await queue.claim("w", 10, due - timedelta(seconds=1), 60)
    assert due == await retry_after_of(queue, job.id)

    (lease,) = await queue.claim("w", 10, due + timedelta(seconds=5), 60)
    assert (job.id, due) == (lease.id, lease.due_at)


async def test_a_due_job_moved_in_takes_its_place_by_priority(store):
    """Moved in, a due job of a higher priority goes before ready jobs submitted earlier."""
    jobs, queue = store
    due = NOW + timedelta(seconds=30)
    ready = [(await jobs.submit([new(f"/ready{i}")]))[0] for i in range(3)]
    urgent = (await jobs.submit([new("/urgent", priority=5, not_before=due)]))[0]
    leases = await queue.claim("w", 2, due, 60)
    assert [urgent.id, ready[0].id] == [lease.id for lease in leases]


async def test_a_claim_right_after_a_full_one_moves_due_jobs_in_once_a_second(store):
    """Without a look first (draining), a claim moves due jobs in only when the last did so
    a `STAGING_INTERVAL` ago: a due job waits that long at most."""
    jobs, queue = store
    due = NOW + timedelta(seconds=30)
    await jobs.submit([new(f"/ready{i}") for i in range(4)])
    waiting = (await jobs.submit([new("/waiting", priority=5, not_before=due)]))[0]

    looked = due - STAGING_INTERVAL / 2
    first = await queue.claim("w", 1, looked, 60)  # looks first: moves in what is due, none
    assert waiting.id not in {lease.id for lease in first}
    (lease,) = await queue.claim("w", 1, due + STAGING_INTERVAL / 4, 60, look_first=False)
    assert lease.id != waiting.id
    assert due == await retry_after_of(queue, waiting.id)

    (lease,) = await queue.claim("w", 1, looked + STAGING_INTERVAL, 60, look_first=False)
    assert waiting.id == lease.id


async def test_a_job_on_its_way_is_not_moved_in(store):
    """Only waiting jobs whose time has come move in; the others keep their `retry_after`."""
    jobs, queue = store
    soon, later = NOW + timedelta(seconds=10), NOW + timedelta(seconds=20)
    first = (await jobs.submit([new("/soon", not_before=soon)]))[0]
    second = (await jobs.submit([new("/later", not_before=later)]))[0]
    (lease,) = await queue.claim("w", 10, soon, 60)
    assert first.id == lease.id
    assert later == await retry_after_of(queue, second.id)
    assert later == await queue.next_due_at(soon)
