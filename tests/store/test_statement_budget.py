"""The statement budget: claims and records are batched, so a drained backlog costs a fraction
of a database round trip per job, on both backends."""

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy import event

from app.model import NewJob
from app.observability.metrics import Metrics
from app.runtime import Runtime
from app.store.jobs import JobStore
from tests.conftest import eventually

JOBS = 512
BUDGET_PER_JOB = 0.48
"""Statements (an executemany is one) per job drained, and round trips per job drained. A
drain of 512 through 32 slots takes 16 claims (seven statements on SQLite; four on
PostgreSQL, whose candidates lock their domains' rows and whose take counts the domains'
and tenants' jobs in flight in the same statements: `app.store.backends.postgres.claim`) and
16 records (six statements on SQLite; four on PostgreSQL, whose attempts and contents are
inserted together, and domains and tenants freed together), each in a transaction of its
own, plus the worker's passes: about 0.39 statements a job on SQLite, and 0.34 round trips
on PostgreSQL (0.52 before its claim came down from seven statements and its record from
six); on a busy machine, where claims and records take fewer jobs each, 0.43."""


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count what every engine of this process sends to its database meanwhile."""
    counts: Counter[str] = Counter()

    def statement(conn, cursor, statement, parameters, context, executemany):
        counts["statements"] += 1
        if conn.get_execution_options().get("ingest_write"):
            counts["write statements"] += 1

    def begin(conn):
        counts["begin"] += 1

    def commit(conn):
        counts["commit"] += 1

    def rollback(conn):
        counts["rollback"] += 1

    listeners: list[tuple[str, Callable[..., None]]] = [
        ("before_cursor_execute", statement),
        ("begin", begin),
        ("commit", commit),
        ("rollback", rollback),
    ]
    for name, listener in listeners:
        event.listen(sa.Engine, name, listener)
    try:
        yield counts
    finally:
        for name, listener in listeners:
            event.remove(sa.Engine, name, listener)


async def test_a_drained_backlog_stays_within_the_round_trip_budget(make_settings, web):
    """512 jobs through 32 slots: at most half a round trip per job, claims and records
    included (the submit is not counted)."""
    # The default poll interval and lease: a drain is counted, not the idle polls or the
    # heartbeats of a test setting. The record delay only bounds how long a partial batch
    # waits; a long one here flushes at a slot's worth, so the count is the batching's, not
    # how a busy machine happens to spread the fetches' ends (then batches are smaller).
    settings = make_settings(
        worker_concurrency=32,
        domain_max_in_flight=1000,
        poll_interval_seconds=2.0,
        lease_seconds=60.0,
        record_delay_seconds=1.0,
    )
    urls = [web.url(f"/page/{i}") for i in range(JOBS)]
    runtime = Runtime.build(settings, run_worker=True)
    try:
        await JobStore(runtime.database, runtime.clock).submit(
            [NewJob(url, "127.0.0.1", "t", max_attempts=3) for url in urls]
        )
        assert runtime.worker is not None
        completer = runtime.worker.completer
        with counting() as counts:
            await runtime.start(Metrics())

            async def drained() -> bool:
                # Watched without a query, so the count holds the drain's statements only.
                fetched = sum(web.count(f"/page/{i}") for i in range(JOBS))
                return fetched == JOBS and not completer.unrecorded

            await eventually(drained, timeout=60)
            seen = dict(counts)
        assert JOBS == (await runtime.jobs.stats()).counts["succeeded"]
        assert [1] * JOBS == [web.count(f"/page/{i}") for i in range(JOBS)]
    finally:
        await runtime.stop()
    assert seen["statements"] / JOBS <= BUDGET_PER_JOB, seen
    assert round_trips(seen, settings.database_url) / JOBS <= BUDGET_PER_JOB, seen


def round_trips(seen: dict[str, int], database_url: str) -> int:
    """Waits for the database to answer. PostgreSQL: every statement, BEGIN, COMMIT and
    ROLLBACK crosses the wire. SQLite: a write transaction runs whole in the writer thread
    (one wait, `app.store.backends.sqlite`), and each read statement is a hop to aiosqlite's thread
    (read transactions begin and end with no statement of their own)."""
    if database_url.startswith("sqlite"):
        return seen["commit"] + seen["statements"] - seen["write statements"]
    return seen["statements"] + seen["begin"] + seen["commit"] + seen["rollback"]


LONE_JOBS = 12
LONE_BUDGET = {"sqlite": 18, "postgresql": 11}
"""Statements per job submitted alone and fetched before the next: its submit (SQLite: three
inserts; PostgreSQL: one), its claim (SQLite: seven; PostgreSQL: four) and its record
(SQLite: six, PostgreSQL: four; one frees its tenant's count of jobs in flight,
INGEST_TENANT_MAX_IN_FLIGHT), and the worker's first pass shared by all. Passes that claim
nothing after each fetch and record, with their looks at when the next job is due, cost 6-9
more (24 a job on SQLite before they went). Measured: 16.5 on SQLite, 9 on PostgreSQL."""


async def test_jobs_one_at_a_time_cost_a_claim_and_a_record_each(make_settings, web):
    """Jobs submitted one at a time, each fetched and recorded before the next: each costs its
    submit, one claim and one record, and no pass that finds nothing (the wake-ups of a
    trickle: the submit's, not the finished fetch's nor the record's, nor, on PostgreSQL,
    the NOTIFY of this process's own submit)."""
    settings = make_settings(
        domain_max_in_flight=1000, poll_interval_seconds=2.0, lease_seconds=60.0
    )
    runtime = Runtime.build(settings, run_worker=True)
    try:
        await runtime.database.upgrade()
        assert runtime.worker is not None
        completer = runtime.worker.completer
        await runtime.start(Metrics())
        with counting() as counts:
            for i in range(LONE_JOBS):
                path = f"/lone/{i}"
                await runtime.jobs.submit([NewJob(web.url(path), "127.0.0.1", "t", 3)])

                async def recorded(path: str = path) -> bool:
                    # Watched without a query, so the count holds the worker's own.
                    return web.count(path) == 1 and not completer.unrecorded

                await eventually(recorded, timeout=30, interval=0.01)
            seen = dict(counts)

        async def all_recorded() -> bool:
            # The last fetch is served before its outcome reaches the completer.
            return LONE_JOBS == (await runtime.jobs.stats()).counts["succeeded"]

        await eventually(all_recorded)
    finally:
        await runtime.stop()
    backend = "sqlite" if settings.database_url.startswith("sqlite") else "postgresql"
    assert seen["statements"] / LONE_JOBS <= LONE_BUDGET[backend], seen
