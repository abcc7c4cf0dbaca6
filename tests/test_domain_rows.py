"""The claim and the `domains` table on both backends: a claim reads the rows of its
candidates' domains only, however many rows the table holds, by key even when the table is
small, and a claim that finds a domain's row missing (retention deleted it as a job was
submitted) inserts it afresh."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import DomainPause, Lease, NewJob
from app.settings import Settings
from app.store.claim import claim_in
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue
from app.store.tables import domains, new_domain
from tests.conftest import queue_on
from tests.outcomes import record, succeeded
from tests.test_queue import RESULT

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def store(database_url):
    database = Database(database_url)
    settings = Settings(_env_file=None, domain_max_in_flight=1)
    yield JobStore(database, lambda: NOW), queue_on(database, settings)
    await database.dispose()


def new(path: str) -> NewJob:
    return NewJob(url=f"http://a.test{path}", domain="a.test", tenant="t", max_attempts=3)


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
    """Run one claim of up to 8 jobs (by the queue's rules) and record them; how many it
    took, and its work (`work_counter`)."""

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


async def test_a_claim_reads_no_domain_row_its_candidates_do_not_name(store):
    """2,700 more rows of other domains (half of them paused) add no work to a claim that
    steps over 200 jobs of a paused domain to the one it may take."""
    jobs, queue = store
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
    database = Database(pg_url)
    try:
        settings = Settings(_env_file=None, domain_max_in_flight=1)
        jobs, queue = JobStore(database, lambda: NOW), queue_on(database, settings)
        await paused_ahead(jobs, queue)
        await add_other_domains(database, 0, 300)

        taken, rows_read = await claim_work(queue, NOW + timedelta(seconds=1))
    finally:
        await database.dispose()

    assert 1 == taken
    assert rows_read < 10 * 200, rows_read


async def domain_row(queue: Queue, domain: str) -> tuple[int, ...] | None:
    stmt = sa.select(domains.c.in_flight).where(domains.c.domain == domain)
    async with queue.db.read() as conn:
        row = (await conn.execute(stmt)).first()
    return None if row is None else tuple(row)


async def test_a_claim_inserts_a_missing_domain_row_so_its_limit_holds(store):
    """A domain whose row went (retention, racing a submit) gets it back from the claim that
    finds it missing, with the fetch counted: the domain's limit of 1 holds for the next
    claim, and recording the fetch frees its slot."""
    jobs, queue = store
    await jobs.submit([new("/1"), new("/2")])
    await queue.db.transact(lambda conn: conn.execute(sa.delete(domains)))
    assert [None, None] == [job.blocked_by for job in (await jobs.list()).items]

    (lease,) = await queue.claim("w", 8, NOW, 60)

    assert (1,) == await domain_row(queue, "a.test")
    assert [] == await queue.claim("w", 8, NOW + timedelta(seconds=1), 60)
    assert await record(queue, succeeded(lease, RESULT), NOW + timedelta(seconds=2))
    assert (0,) == await domain_row(queue, "a.test")
