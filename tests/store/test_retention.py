"""Retention and DELETE /jobs/{id} on both backends: what goes, what stays, in batches; and
the rows of domains no job names any more."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.model import DeadReason, ErrorKind, Failure, Fetched, JobStatus, MarkDead, NewJob
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.jobs.errors import JobNotFound, StateConflict
from app.store.maintenance import MaintenanceStore
from app.store.queue import Queue
from app.store.retention import prune_domains, prune_jobs
from app.store.tables import attempts, contents, domains, new_domain
from app.store.tables import jobs as jobs_table
from tests.conftest import running_app
from tests.support.outcomes import failed, record, succeeded
from tests.support.stores import NOW, new, open_stores, queue_on

CUTOFF = NOW + timedelta(days=5)
LATER = NOW + timedelta(days=10)
RESULT = Fetched(200, "http://a.test/", "text/html", 4, "0" * 64, "t", 1, b"body", "t")
FATAL = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def store(database_url):
    clock = Clock()
    async with open_stores(database_url, clock) as (jobs, queue):
        yield jobs, queue, clock


async def finish(jobs: JobStore, queue: Queue, path: str, outcome: str, at: datetime) -> str:
    """A job that ran once at `at` and ended `outcome` (succeeded, dead) or stays running."""
    job_id = (await jobs.submit([new(path)]))[0].id
    (lease,) = await queue.claim("w", 1, at, 60)
    assert job_id == lease.id
    if outcome == "succeeded":
        assert await record(queue, succeeded(lease, RESULT), at)
    elif outcome == "dead":
        assert await record(queue, failed(lease, MarkDead(DeadReason.FATAL, FATAL)), at)
    return job_id


async def rows_of(database: Database, table: sa.Table, column: str) -> set[str]:
    async with database.read() as conn:
        return set((await conn.execute(sa.select(table.c[column]))).scalars())


async def test_prune_deletes_old_succeeded_and_cancelled_jobs_only(store):
    """Old succeeded and cancelled jobs go with attempts and content; the rest stays."""
    jobs, queue, clock = store
    old_ok = await finish(jobs, queue, "/old-ok", "succeeded", NOW)
    old_dead = await finish(jobs, queue, "/old-dead", "dead", NOW)
    old_running = await finish(jobs, queue, "/old-running", "running", NOW)
    old_cancelled = (await jobs.submit([new("/old-cancelled")]))[0].id
    await jobs.cancel(old_cancelled)
    clock.now = LATER
    new_ok = await finish(jobs, queue, "/new-ok", "succeeded", LATER)
    new_cancelled = (await jobs.submit([new("/new-cancelled")]))[0].id
    await jobs.cancel(new_cancelled)
    clock.now = NOW  # submitted last so that no claim above takes it
    old_pending = (await jobs.submit([new("/old-pending")]))[0].id

    deleted = await MaintenanceStore(queue.db).prune(CUTOFF)

    kept = {old_dead, old_running, old_pending, new_ok, new_cancelled}
    assert 2 == deleted
    assert kept == await rows_of(queue.db, jobs_table, "id")
    # A running attempt has no row until it ends.
    assert {old_dead, new_ok} == await rows_of(queue.db, attempts, "job_id")
    assert {new_ok} == await rows_of(queue.db, contents, "job_id")
    assert old_ok not in kept


async def test_dead_jobs_are_kept_at_any_age(store):
    """A dead job finished years before the cutoff is not pruned."""
    jobs, queue, _ = store
    dead = await finish(jobs, queue, "/dead", "dead", NOW - timedelta(days=3650))

    assert 0 == await MaintenanceStore(queue.db).prune(CUTOFF)
    assert JobStatus.DEAD == (await jobs.get(dead)).status


async def test_a_job_finished_at_the_cutoff_is_not_pruned(store):
    """Retention deletes jobs finished before the cutoff: one finished at it stays, one a
    microsecond later goes. (On SQLite the record's timestamps were once bound untyped and
    stored in the driver's format, which sorts before the same instant as SQLAlchemy binds
    it: the job finished at the cutoff was pruned.)"""
    jobs, queue, _ = store
    await jobs.submit([new()])
    (lease,) = await queue.claim("w", 1, NOW, 60)
    finished = NOW + timedelta(seconds=1)
    assert True is await record(queue, succeeded(lease, RESULT), finished)
    assert 0 == await MaintenanceStore(queue.db).prune(finished)
    assert 1 == await MaintenanceStore(queue.db).prune(finished + timedelta(microseconds=1))


async def test_prune_works_in_batches_to_the_end(store, monkeypatch):
    """1,200 old jobs, 800 of them prunable, go in batches of 500: two write transactions."""
    jobs, queue, _ = store
    submitted = await jobs.submit([new(f"/{i}") for i in range(1200)])
    dead = {job.id for i, job in enumerate(submitted) if i % 3 == 0}

    def finish(conn: sa.Connection) -> None:
        conn.execute(
            sa.update(jobs_table).values(status=JobStatus.SUCCEEDED.value, finished_at=NOW)
        )
        conn.execute(
            sa.update(jobs_table)
            .where(jobs_table.c.id.in_(dead))
            .values(status=JobStatus.DEAD.value)
        )

    await queue.db.transact(finish)
    writes = []
    transact = queue.db.transact

    def counted_transact(work):
        writes.append(1)
        return transact(work)

    monkeypatch.setattr(queue.db, "transact", counted_transact)

    deleted = await prune_jobs(queue.db, CUTOFF, batch=500)

    assert (800, 2) == (deleted, len(writes))
    assert dead == await rows_of(queue.db, jobs_table, "id")


async def add_domains(database: Database, **states: dict) -> None:
    """A domain row per keyword (`a_test` names a.test), in the state given."""
    columns = {"paused_until": None, "next_start_at": None}
    rows = [new_domain(name.replace("_", ".")) | columns | state for name, state in states.items()]
    await database.transact(lambda conn: database.backend.inserts(domains, rows).run(conn))


async def test_prune_domains_deletes_the_rows_no_job_names_and_nothing_else(store):
    """Retention deletes the rows of domains without jobs whose pause and interval ran out,
    and keeps those named by a job (dead or pending) or holding a pause, a minimum interval,
    a failure streak or a fetch in flight."""
    jobs, queue, _ = store
    await finish(jobs, queue, "/dead", "dead", NOW)  # a.test: a dead job
    await jobs_on(queue, "b.test")  # pending
    await add_domains(
        queue.db,
        unused_test={},
        rested_test={"paused_until": NOW - timedelta(seconds=1)},
        paused_test={"paused_until": NOW + timedelta(seconds=1)},
        interval_test={"next_start_at": NOW + timedelta(seconds=1)},
        failing_test={"consecutive_failures": 2},
        busy_test={"in_flight": 1},
    )

    deleted = await MaintenanceStore(queue.db).prune_domains(NOW)

    kept = {"a.test", "b.test", "paused.test", "interval.test", "failing.test", "busy.test"}
    assert (2, kept) == (deleted, await rows_of(queue.db, domains, "domain"))


async def test_prune_domains_walks_a_slice_a_call_and_starts_again(store):
    """Each call looks at the next `rows` rows by name and says where the next goes on;
    the one that reaches the end says to start again."""
    _, queue, _ = store
    await add_domains(queue.db, **{f"d{i}_test": {} for i in range(5)})
    await jobs_on(queue, "d1.test")

    calls = [await prune_domains(queue.db, NOW, "", rows=2, batch=1)]
    calls.append(await prune_domains(queue.db, NOW, calls[-1][1], rows=2, batch=1))
    calls.append(await prune_domains(queue.db, NOW, calls[-1][1], rows=2, batch=1))

    assert [(1, "d1.test"), (2, "d3.test"), (1, "")] == calls
    assert {"d1.test"} == await rows_of(queue.db, domains, "domain")


async def jobs_on(queue: Queue, domain: str) -> None:
    await JobStore(queue.db, lambda: NOW).submit(
        [NewJob(url=f"http://{domain}/", domain=domain, tenant="t", max_attempts=3)]
    )


async def test_a_domain_row_that_got_a_job_since_it_was_read_stays(store, monkeypatch):
    """The delete checks each row again: a job submitted between the read and the delete
    keeps its domain's row."""
    _, queue, _ = store
    await add_domains(queue.db, a_test={}, b_test={})
    transact = queue.db.transact

    async def submit_first(work):
        await jobs_on(queue, "a.test")
        return await transact(work)

    monkeypatch.setattr(queue.db, "transact", submit_first)

    assert 1 == await MaintenanceStore(queue.db).prune_domains(NOW)
    assert {"a.test"} == await rows_of(queue.db, domains, "domain")


async def test_delete_only_terminal_jobs(store):
    """JobStore.delete removes succeeded, dead and cancelled jobs; pending and running: 409."""
    jobs, queue, _ = store
    ok = await finish(jobs, queue, "/ok", "succeeded", NOW)
    dead = await finish(jobs, queue, "/dead", "dead", NOW)
    running = await finish(jobs, queue, "/running", "running", NOW)
    pending = (await jobs.submit([new("/pending")]))[0].id
    for job_id in (ok, dead):
        await jobs.delete(job_id)
    for job_id in (running, pending):
        with pytest.raises(StateConflict):
            await jobs.delete(job_id)
    with pytest.raises(JobNotFound):
        await jobs.delete(ok)

    assert {running, pending} == await rows_of(queue.db, jobs_table, "id")
    assert set() == await rows_of(queue.db, attempts, "job_id")  # none until it ends
    assert set() == await rows_of(queue.db, contents, "job_id")


KEY_A = "a" * 20
KEY_B = "b" * 20
ADMIN = "c" * 20


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def app_client(make_settings):
    keys = {KEY_A: "tenant-a", KEY_B: "tenant-b", ADMIN: "*"}
    settings = make_settings(worker_enabled=False, api_keys=keys)
    async with running_app(settings) as (app, client):
        yield app, client


async def test_delete_endpoint(app_client):
    """DELETE /jobs/{id}: 204 for terminal jobs, 409 problem while pending or running, 404
    for unknown ids and another tenant's jobs."""
    app, client = app_client
    queue = queue_on(app.state.runtime.database, app.state.runtime.settings)

    async def submit() -> str:
        response = await client.post("/jobs", json={"url": "http://a.test/"}, headers=auth(KEY_A))
        return response.json()["id"]

    running = await submit()
    (lease,) = await queue.claim("w", 10, datetime.now(UTC), 60)
    dead = await submit()
    (dying,) = await queue.claim("w", 10, datetime.now(UTC), 60)
    await record(queue, failed(dying, MarkDead(DeadReason.FATAL, FATAL)), datetime.now(UTC))
    pending, cancelled = await submit(), await submit()
    await client.post(f"/jobs/{cancelled}/cancel", headers=auth(KEY_A))

    async def delete(job_id: str, key: str = KEY_A) -> int:
        return (await client.delete(f"/jobs/{job_id}", headers=auth(key))).status_code

    conflict = await client.delete(f"/jobs/{running}", headers=auth(KEY_A))
    statuses = {
        "pending": await delete(pending),
        "other tenant": await delete(cancelled, KEY_B),
        "cancelled": await delete(cancelled),
        "again": await delete(cancelled),
        "unknown": await delete("nope"),
        "dead by admin": await delete(dead, ADMIN),
    }
    after = await client.get(f"/jobs/{dead}/attempts", headers=auth(ADMIN))

    assert {
        "pending": 409,
        "other tenant": 404,
        "cancelled": 204,
        "again": 404,
        "unknown": 404,
        "dead by admin": 204,
    } == statuses
    assert (409, "application/problem+json") == (
        conflict.status_code,
        conflict.headers["content-type"],
    )
    assert f"job {running} is running; cannot delete" == conflict.json()["detail"]
    assert 404 == after.status_code
    assert (running, dead) == (lease.id, dying.id)
