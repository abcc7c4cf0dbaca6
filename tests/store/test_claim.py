"""Where a job is claimed (`app.store.claim`), on both backends with a fixed clock: how many
jobs a claim takes and in what order, what is not due yet, claims racing, the attempt it
opens, tenants' turns, waiting jobs moved among the ready ones as they come due (step 0);
and the `domains` table: a claim reads the rows of its candidates' domains only, however
many rows the table holds, by key even when the table is small, and a claim that finds a
domain's row missing (retention deleted it as a job was submitted) inserts it afresh."""

import asyncio
import random
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import DomainPause, JobStatus, Lease, NewJob
from app.store.claim import claim_in
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import STAGING_INTERVAL, Queue
from app.store.tables import domains, new_domain, tenants
from app.store.tables import jobs as jobs_table
from tests.support.outcomes import record, succeeded
from tests.support.stores import NOW, RESULT, new, open_stores


async def test_claim_takes_exactly_the_limit(stores):
    """Asked for 8 of 100 due jobs, the claim returns exactly 8, each once."""
    jobs, queue = stores
    await jobs.submit([new(f"/{i}") for i in range(100)])
    claimed = [await queue.claim("w", 8, NOW + timedelta(seconds=1), 60) for _ in range(3)]
    assert [8, 8, 8] == [len(c) for c in claimed]
    assert 24 == len({lease.id for batch in claimed for lease in batch})


async def test_claim_order_is_priority_then_oldest(stores):
    """Higher priority first, then oldest first."""
    jobs, queue = stores
    low = (await jobs.submit([new("/low", priority=-1)]))[0]
    old = (await jobs.submit([new("/old")]))[0]
    young = (await jobs.submit([new("/young")]))[0]
    high = (await jobs.submit([new("/high", priority=5)]))[0]
    order = [(await queue.claim("w", 1, NOW + timedelta(seconds=1), 60))[0].id for _ in range(4)]
    assert [high.id, old.id, young.id, low.id] == order


async def test_claim_skips_jobs_not_yet_due(stores):
    """A job with retry_after in the future is not claimed until then."""
    jobs, queue = stores
    later = NOW + timedelta(seconds=30)
    job = (await jobs.submit([new(not_before=later)]))[0]
    assert [] == await queue.claim("w", 10, NOW + timedelta(seconds=29), 60)
    assert later == await queue.next_due_at(NOW)
    assert [job.id] == [lease.id for lease in await queue.claim("w", 10, later, 60)]


async def retry_after_of(queue: Queue, job_id: str) -> datetime | None:
    async with queue.db.read() as conn:
        select = sa.select(jobs_table.c.retry_after).where(jobs_table.c.id == job_id)
        return (await conn.execute(select)).scalar_one()


async def test_a_job_that_came_due_is_moved_in_and_keeps_when_it_came_due(stores):
    """A `not_before` job, the only one, is claimed once due (SQLite's look first sees it
    too); its lease says it was due since its `retry_after`, not since the claim."""
    jobs, queue = stores
    due = NOW + timedelta(seconds=30)
    job = (await jobs.submit([new("/later", not_before=due)]))[0]
    assert [] == await queue.claim("w", 10, due - timedelta(seconds=1), 60)
    assert due == await retry_after_of(queue, job.id)

    (lease,) = await queue.claim("w", 10, due + timedelta(seconds=5), 60)
    assert (job.id, due) == (lease.id, lease.due_at)


async def test_a_due_job_moved_in_takes_its_place_by_priority(stores):
    """Moved in, a due job of a higher priority goes before ready jobs submitted earlier."""
    jobs, queue = stores
    due = NOW + timedelta(seconds=30)
    ready = [(await jobs.submit([new(f"/ready{i}")]))[0] for i in range(3)]
    urgent = (await jobs.submit([new("/urgent", priority=5, not_before=due)]))[0]
    leases = await queue.claim("w", 2, due, 60)
    assert [urgent.id, ready[0].id] == [lease.id for lease in leases]


async def test_a_claim_right_after_a_full_one_moves_due_jobs_in_once_a_second(stores):
    """Without a look first (draining), a claim moves due jobs in only when the last did so
    a `STAGING_INTERVAL` ago: a due job waits that long at most."""
    jobs, queue = stores
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


async def test_a_job_on_its_way_is_not_moved_in(stores):
    """Only waiting jobs whose time has come move in; the others keep their `retry_after`."""
    jobs, queue = stores
    soon, later = NOW + timedelta(seconds=10), NOW + timedelta(seconds=20)
    first = (await jobs.submit([new("/soon", not_before=soon)]))[0]
    second = (await jobs.submit([new("/later", not_before=later)]))[0]
    (lease,) = await queue.claim("w", 10, soon, 60)
    assert first.id == lease.id
    assert later == await retry_after_of(queue, second.id)
    assert later == await queue.next_due_at(soon)


async def test_concurrent_claims_never_share_a_job(stores):
    """Claims racing on one database never hand out the same job twice, and drain it all."""
    jobs, queue = stores
    await jobs.submit([new(f"/{i}") for i in range(60)])
    ids: list[str] = []
    for _ in range(20):
        batches = await asyncio.gather(
            *[queue.claim(f"w{i}", 5, NOW + timedelta(seconds=1), 60) for i in range(8)]
        )
        ids += [lease.id for batch in batches for lease in batch]
    assert len(ids) == len(set(ids)) == 60


async def test_claim_counts_the_attempt_and_opens_its_history(stores):
    """A claim marks the job running, bumps attempts and records an open attempt."""
    jobs, queue = stores
    job = (await jobs.submit([new()]))[0]
    (lease,) = await queue.claim("w", 1, NOW + timedelta(seconds=1), 60)
    running = await jobs.get(job.id)
    (attempt,) = await jobs.attempts(job.id)
    assert (JobStatus.RUNNING, 1, "w") == (running.status, running.attempts, running.worker_id)
    assert NOW + timedelta(seconds=61) == running.lease_expires_at
    assert (1, "w", None) == (attempt.number, attempt.worker_id, attempt.outcome)
    assert 1 == lease.attempt


BLOCKED = {
    "not due": ({"not_before": NOW + timedelta(hours=1)}, {}),
    "paused domain": ({}, {"paused_until": NOW + timedelta(hours=1)}),
    "domain at its in-flight limit": ({}, {"in_flight": 1000}),
    "domain inside its min interval": ({}, {"next_start_at": NOW + timedelta(hours=1)}),
}


@pytest.mark.parametrize(("job_fields", "domain_row"), BLOCKED.values(), ids=list(BLOCKED))
async def test_blocked_tenants_do_not_hold_up_a_due_one(stores, job_fields, domain_row):
    """40 never-served tenants whose only jobs cannot start now (more tenants than the
    claim's slots) do not keep the claim from a later tenant's due job on a healthy domain."""
    jobs, queue = stores
    blocked = [
        new(url=f"http://blocked.test/{i}", domain="blocked.test", tenant=f"a{i:02}", **job_fields)
        for i in range(40)
    ]
    await jobs.submit(blocked)
    due = (await jobs.submit([new(tenant="z")]))[0]
    if domain_row:
        block = sa.update(domains).where(domains.c.domain == "blocked.test").values(**domain_row)
        await queue.db.transact(lambda conn: conn.execute(block))
    claimed = await queue.claim("w", 2, NOW + timedelta(seconds=1), 60)
    assert [due.id] == [lease.id for lease in claimed]


async def test_concurrent_claims_with_crossing_tenant_orders_do_not_deadlock(stores):
    """8 claims at once, round after round, each serving 20 tenants in its own order (mixed
    priorities, one domain per job so the claims share no domain lock): none fails."""
    jobs, queue = stores
    rand = random.Random(7)
    claimed = 0
    for round_ in range(10):
        await jobs.submit(
            [
                new(
                    f"/{round_}/{i}",
                    domain=f"d{round_}-{i}.test",
                    tenant=f"t{i % 20:02}",
                    priority=rand.randrange(5),
                )
                for i in range(400)
            ]
        )
        batches = await asyncio.gather(
            *[queue.claim(f"w{k}", 20, NOW + timedelta(seconds=1), 60) for k in range(8)]
        )
        claimed += sum(len(batch) for batch in batches)
    assert claimed > 0


async def test_a_claim_records_the_tenants_turn_order(stores):
    """Tenants served in one claim are stamped in the order they were served, not by name."""
    jobs, queue = stores
    await jobs.submit([new("/a", tenant="a"), new("/b", tenant="b", priority=5)])
    at = NOW + timedelta(seconds=1)
    assert 2 == len(await queue.claim("w", 2, at, 60))
    async with queue.db.read() as conn:
        served = {row.tenant: row.last_served_at for row in await conn.execute(sa.select(tenants))}
    assert {"b": at, "a": at + timedelta(microseconds=1)} == served


# The claim and the domains table.


@pytest.fixture
async def one_per_domain(database_url):
    """The stores at a clock that stands still, with one fetch at a time a domain."""
    async with open_stores(database_url, lambda: NOW, domain_max_in_flight=1) as both:
        yield both


def work_counter(conn: sa.Connection) -> Callable[[], int]:
    """What the transaction on `conn` has done so far, in a unit that grows with each row
    it reads: on PostgreSQL the rows of `domains` it read (by scan or index); on SQLite,
    which keeps no such count, the virtual machine instructions it ran."""
    if conn.dialect.name == "postgresql":
        read = sa.text(
            "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'domains'"
        )
        return lambda: int(conn.execute(read).scalar_one())
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    conn.connection.driver_connection.set_progress_handler(step, 1)  # type: ignore[union-attr]
    return lambda: steps[0]


async def analyzed(database: Database) -> None:
    """Statistics as PostgreSQL's autovacuum leaves them (SQLite keeps none: the service
    never asks it to), so its planner sees the table's size as it would in service."""
    if database.backend.name == "postgresql":
        await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))


async def claim_work(queue: Queue, now: datetime) -> tuple[int, int]:
    """Run one claim of up to 8 jobs and record them; how many it took, and its work
    (`work_counter`)."""

    def claim(conn: sa.Connection) -> tuple[list[Lease], int]:
        counted = work_counter(conn)
        before = counted()
        leases = claim_in(conn, queue.db.backend, "w", 8, now, 60, queue.shares)
        work = counted() - before
        if conn.dialect.name == "sqlite":
            conn.connection.driver_connection.set_progress_handler(None, 1)  # type: ignore[union-attr]
        return leases, work

    leases, work = await queue.db.transact(claim)
    for lease in leases:
        assert await record(queue, succeeded(lease, RESULT), now)
    return len(leases), work


async def paused_ahead(jobs: JobStore, queue: Queue) -> None:
    """Tenant t's first 200 jobs on a paused domain, then two it may take (a.test)."""
    paused = [NewJob(f"http://p.test/{i}", "p.test", "t", max_attempts=3) for i in range(200)]
    await jobs.submit(paused)
    await jobs.submit([new("/1"), new("/2")])
    await queue.pause_domain("p.test", DomainPause(NOW + timedelta(days=1), "HTTP 503"))


async def add_other_domains(database: Database, first: int, last: int) -> None:
    """Rows of domains no job names, every other one paused."""
    rows = [
        new_domain(f"h{i}.other.test")
        | {"paused_until": NOW + timedelta(days=1) if i % 2 else None}
        for i in range(first, last)
    ]
    await database.transact(lambda conn: database.backend.inserts(domains, rows).run(conn))
    await analyzed(database)


async def test_a_claim_reads_no_domain_row_its_candidates_do_not_name(one_per_domain):
    """2,700 more rows of other domains (half of them paused) add no work to a claim that
    steps over 200 jobs of a paused domain to the one it may take."""
    jobs, queue = one_per_domain
    await paused_ahead(jobs, queue)
    await add_other_domains(queue.db, 0, 300)
    among_few = await claim_work(queue, NOW + timedelta(seconds=1))
    await add_other_domains(queue.db, 300, 3000)

    among_many = await claim_work(queue, NOW + timedelta(seconds=2))

    assert (1, 1) == (among_few[0], among_many[0])
    assert among_many[1] - among_few[1] < 2700 // 10, (among_few, among_many)


async def test_postgresql_reads_a_small_domain_table_per_claim_not_per_job(pg_url):
    """PostgreSQL: a claim stepping over 200 jobs of a paused domain in a table of 300
    domains reads few domain rows per job (by key), not the table once per job."""
    async with open_stores(pg_url, lambda: NOW, domain_max_in_flight=1) as (jobs, queue):
        await paused_ahead(jobs, queue)
        await add_other_domains(queue.db, 0, 300)

        taken, rows_read = await claim_work(queue, NOW + timedelta(seconds=1))

    assert 1 == taken
    assert rows_read < 10 * 200, rows_read


async def domain_row(queue: Queue, domain: str) -> tuple[int, ...] | None:
    stmt = sa.select(domains.c.in_flight).where(domains.c.domain == domain)
    async with queue.db.read() as conn:
        row = (await conn.execute(stmt)).first()
    return None if row is None else tuple(row)


async def test_a_claim_inserts_a_missing_domain_row_so_its_limit_holds(one_per_domain):
    """A domain whose row went (retention, racing a submit) gets it back from the claim that
    finds it missing, with the fetch counted: the domain's limit of 1 holds for the next
    claim, and recording the fetch frees its slot."""
    jobs, queue = one_per_domain
    await jobs.submit([new("/1"), new("/2")])
    await queue.db.transact(lambda conn: conn.execute(sa.delete(domains)))
    assert [None, None] == [job.blocked_by for job in (await jobs.list()).items]

    (lease,) = await queue.claim("w", 8, NOW, 60)

    assert (1,) == await domain_row(queue, "a.test")
    assert [] == await queue.claim("w", 8, NOW + timedelta(seconds=1), 60)
    assert await record(queue, succeeded(lease, RESULT), NOW + timedelta(seconds=2))
    assert (0,) == await domain_row(queue, "a.test")
