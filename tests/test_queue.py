"""The queue's SQL on both backends, with a fixed clock: claim order, fencing, leases."""

import asyncio
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app import policy
from app.model import (
    DeadReason,
    ErrorKind,
    Failure,
    Fetched,
    JobStatus,
    MarkDead,
    NewJob,
    Reschedule,
)
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.reads import ContentStore
from app.store.tables import Domain, Tenant, contents, domains
from tests.conftest import queue_on
from tests.outcomes import failed, is_dead, record, succeeded, take_back_expired

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RESULT = Fetched(200, "http://a.test/", "text/html", 10, "0" * 64, "t")


@pytest.fixture
async def store(database_url):
    database = Database(database_url)
    clock = iter(NOW + timedelta(milliseconds=i) for i in range(10**6))
    yield (
        JobStore(database, lambda: next(clock)),
        queue_on(database, Settings(_env_file=None, domain_max_in_flight=1000)),
    )
    await database.dispose()


def new(path: str = "/", **fields) -> NewJob:
    values = {"url": f"http://a.test{path}", "domain": "a.test", "tenant": "t", "max_attempts": 3}
    return NewJob(**(values | fields))


async def test_claim_takes_exactly_the_limit(store):
    """Asked for 8 of 100 due jobs, the claim returns exactly 8, each once."""
    jobs, queue = store
    await jobs.submit([new(f"/{i}") for i in range(100)])
    claimed = [await queue.claim("w", 8, NOW + timedelta(seconds=1), 60) for _ in range(3)]
    assert [8, 8, 8] == [len(c) for c in claimed]
    assert 24 == len({lease.id for batch in claimed for lease in batch})


async def test_claim_order_is_priority_then_oldest(store):
    """Higher priority first, then oldest first."""
    jobs, queue = store
    low = (await jobs.submit([new("/low", priority=-1)]))[0]
    old = (await jobs.submit([new("/old")]))[0]
    young = (await jobs.submit([new("/young")]))[0]
    high = (await jobs.submit([new("/high", priority=5)]))[0]
    order = [(await queue.claim("w", 1, NOW + timedelta(seconds=1), 60))[0].id for _ in range(4)]
    assert [high.id, old.id, young.id, low.id] == order


async def test_claim_skips_jobs_not_yet_due(store):
    """A job with retry_after in the future is not claimed until then."""
    jobs, queue = store
    later = NOW + timedelta(seconds=30)
    job = (await jobs.submit([new(not_before=later)]))[0]
    assert [] == await queue.claim("w", 10, NOW + timedelta(seconds=29), 60)
    assert later == await queue.next_due_at(NOW)
    assert [job.id] == [lease.id for lease in await queue.claim("w", 10, later, 60)]


async def test_concurrent_claims_never_share_a_job(store):
    """Claims racing on one database never hand out the same job twice, and drain it all."""
    jobs, queue = store
    await jobs.submit([new(f"/{i}") for i in range(60)])
    ids: list[str] = []
    for _ in range(20):
        batches = await asyncio.gather(
            *[queue.claim(f"w{i}", 5, NOW + timedelta(seconds=1), 60) for i in range(8)]
        )
        ids += [lease.id for batch in batches for lease in batch]
    assert len(ids) == len(set(ids)) == 60


async def test_claim_counts_the_attempt_and_opens_its_history(store):
    """A claim marks the job running, bumps attempts and records an open attempt."""
    jobs, queue = store
    job = (await jobs.submit([new()]))[0]
    (lease,) = await queue.claim("w", 1, NOW + timedelta(seconds=1), 60)
    running = await jobs.get(job.id)
    (attempt,) = await jobs.attempts(job.id)
    assert (JobStatus.RUNNING, 1, "w") == (running.status, running.attempts, running.worker_id)
    assert NOW + timedelta(seconds=61) == running.lease_expires_at
    assert (1, "w", None) == (attempt.number, attempt.worker_id, attempt.outcome)
    assert 1 == lease.attempt


async def test_stale_worker_write_is_a_no_op(store):
    """After its lease was taken back, the old worker's result changes nothing."""
    jobs, queue = store
    job = (await jobs.submit([new()]))[0]
    (stale,) = await queue.claim("old", 1, NOW, 1)
    reclaimed = await take_back_expired(queue, NOW + timedelta(seconds=2))
    (fresh,) = await queue.claim("new", 1, NOW + timedelta(seconds=3), 60)
    assert [job.id] == [r.lease.id for r in reclaimed]
    assert False is await record(queue, succeeded(stale, RESULT), NOW + timedelta(seconds=4))
    assert True is await record(queue, succeeded(fresh, RESULT), NOW + timedelta(seconds=5))
    outcomes = [(a.number, a.worker_id, a.outcome) for a in await jobs.attempts(job.id)]
    assert [(1, "old", "interrupted"), (2, "new", "succeeded")] == outcomes


async def test_a_batch_records_the_held_outcomes_and_drops_the_stale(store):
    """One record of two outcomes, one of them stale (its lease taken back and the job
    claimed again): the held one is recorded whole; the stale one writes nothing, neither
    its job, its attempt, its content nor its domain's slot."""
    jobs, queue = store
    (job_a,), (job_b,) = await jobs.submit([new("/a")]), await jobs.submit([new("/b")])
    (stale,) = await queue.claim("old", 1, NOW, 1)
    (held,) = await queue.claim("w", 1, NOW, 60)
    await take_back_expired(queue, NOW + timedelta(seconds=2))
    (fresh,) = await queue.claim("new", 1, NOW + timedelta(seconds=3), 60)
    assert (stale.id, held.id, fresh.id) == (job_a.id, job_b.id, job_a.id)

    batch = [succeeded(stale, replace(RESULT, body=b"stale")), succeeded(held, RESULT)]
    recorded = await queue.record(batch, NOW + timedelta(seconds=4))

    assert [held] == [outcome.lease for outcome in recorded.outcomes]
    a, b = await jobs.get(job_a.id), await jobs.get(job_b.id)
    assert (a.status, a.worker_id, b.status) == (JobStatus.RUNNING, "new", JobStatus.SUCCEEDED)
    attempts = [(x.number, x.worker_id, x.outcome) for x in await jobs.attempts(job_a.id)]
    assert [(1, "old", "interrupted"), (2, "new", None)] == attempts
    async with jobs.db.read() as conn:
        stored = (await conn.execute(sa.select(contents.c.job_id))).scalars().all()
        in_flight = (await conn.execute(sa.select(domains.c.in_flight))).scalar_one()
    assert [job_b.id] == stored
    assert 1 == in_flight  # the fresh claim of A


async def test_a_job_finished_at_the_cutoff_is_not_pruned(store):
    """Retention deletes jobs finished before the cutoff: one finished at it stays, one a
    microsecond later goes. (On SQLite the record's timestamps were once bound untyped and
    stored in the driver's format, which sorts before the same instant as SQLAlchemy binds
    it: the job finished at the cutoff was pruned.)"""
    jobs, queue = store
    await jobs.submit([new()])
    (lease,) = await queue.claim("w", 1, NOW, 60)
    finished = NOW + timedelta(seconds=1)
    assert True is await record(queue, succeeded(lease, RESULT), finished)
    assert 0 == await queue.prune(finished)
    assert 1 == await queue.prune(finished + timedelta(microseconds=1))


async def test_a_stale_attempt_cannot_touch_the_retried_job(store):
    """Same worker, same attempt number: after its lease was taken back and an operator
    retried the job, the first attempt's heartbeat, record and release change nothing, and
    the new attempt's success counts."""
    jobs, queue = store
    job = (await jobs.submit([new(max_attempts=1)]))[0]
    (stale,) = await queue.claim("w", 1, NOW, 1)
    (reclaimed,) = await take_back_expired(queue, NOW + timedelta(seconds=2))
    await jobs.retry(job.id)
    (fresh,) = await queue.claim("w", 1, NOW + timedelta(seconds=3), 60)
    assert is_dead(reclaimed)
    assert (stale.worker_id, stale.attempt) == (fresh.worker_id, fresh.attempt)
    later = NOW + timedelta(seconds=4)
    fatal = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
    assert set() == await queue.extend_leases([stale], later + timedelta(seconds=60))
    assert False is await record(queue, failed(stale, MarkDead(DeadReason.FATAL, fatal)), later)
    assert False is await record(queue, policy.handed_back(stale, later), later)
    assert False is await record(queue, succeeded(stale, RESULT), later)
    still = await jobs.get(job.id)
    assert (JobStatus.RUNNING, NOW + timedelta(seconds=63)) == (
        still.status,
        still.lease_expires_at,
    )
    assert True is await record(queue, succeeded(fresh, RESULT), NOW + timedelta(seconds=5))
    done = await jobs.get(job.id)
    outcomes = [(a.number, a.outcome) for a in await jobs.attempts(job.id)]
    assert (JobStatus.SUCCEEDED, None, None) == (done.status, done.worker_id, done.lease_id)
    assert [(1, "interrupted"), (1, "succeeded")] == outcomes


async def test_expired_lease_with_no_budget_left_is_dead(store):
    """A lost attempt that was the last of the budget kills the job: lease_expired."""
    jobs, queue = store
    job = (await jobs.submit([new(max_attempts=1)]))[0]
    await queue.claim("w", 1, NOW, 1)
    (reclaimed,) = await take_back_expired(queue, NOW + timedelta(seconds=2))
    dead = await jobs.get(job.id)
    assert is_dead(reclaimed)
    assert (JobStatus.DEAD, DeadReason.LEASE_EXPIRED) == (dead.status, dead.dead_reason)
    assert ("transient", "LeaseExpired") == (dead.last_error_kind, dead.last_error_type)


async def test_live_lease_is_not_reclaimed(store):
    """A lease that has not expired, or was extended, stays with its worker."""
    jobs, queue = store
    await jobs.submit([new()])
    (lease,) = await queue.claim("w", 1, NOW, 10)
    assert [] == await take_back_expired(queue, NOW + timedelta(seconds=5))
    assert {lease} == await queue.extend_leases([lease], NOW + timedelta(seconds=30))
    other = replace(lease, lease_id="someone else's")
    assert set() == await queue.extend_leases([other], NOW + timedelta(seconds=90))
    assert [] == await take_back_expired(queue, NOW + timedelta(seconds=20))


async def test_reschedule_then_dead(store):
    """A transient failure sets retry_after; a fatal one kills the job and clears it."""
    jobs, queue = store
    job = (await jobs.submit([new()]))[0]
    failure = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 503", 503)
    (lease,) = await queue.claim("w", 1, NOW, 60)
    retry_at = NOW + timedelta(seconds=30)
    assert await record(queue, failed(lease, Reschedule(retry_at, 30, failure)), NOW)
    waiting = await jobs.get(job.id)
    assert (JobStatus.PENDING, retry_at, 503) == (
        waiting.status,
        waiting.retry_after,
        waiting.last_error_http_status,
    )
    (lease,) = await queue.claim("w", 1, retry_at, 60)
    fatal = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
    assert await record(queue, failed(lease, MarkDead(DeadReason.FATAL, fatal)), retry_at)
    dead = await jobs.get(job.id)
    assert (JobStatus.DEAD, None, 2) == (dead.status, dead.retry_after, dead.attempts)
    attempts = await jobs.attempts(job.id)
    assert [retry_at, None] == [a.next_retry_at for a in attempts]


async def test_release_gives_the_attempt_back(store):
    """Shutdown hands the job back due now, attempts as before the claim."""
    jobs, queue = store
    job = (await jobs.submit([new()]))[0]
    (lease,) = await queue.claim("w", 1, NOW, 60)
    later = NOW + timedelta(seconds=1)
    assert await record(queue, policy.handed_back(lease, later), later)
    back = await jobs.get(job.id)
    assert (JobStatus.PENDING, 0, None, None) == (
        back.status,
        back.attempts,
        back.retry_after,
        back.worker_id,
    )
    assert ["interrupted"] == [a.outcome for a in await jobs.attempts(job.id)]


BLOCKED = {
    "not due": ({"not_before": NOW + timedelta(hours=1)}, {}),
    "paused domain": ({}, {"paused_until": NOW + timedelta(hours=1)}),
    "domain at its in-flight limit": ({}, {"in_flight": 1000}),
    "domain inside its min interval": ({}, {"next_start_at": NOW + timedelta(hours=1)}),
}


@pytest.mark.parametrize(("job_fields", "domain_row"), BLOCKED.values(), ids=list(BLOCKED))
async def test_blocked_tenants_do_not_hold_up_a_due_one(store, job_fields, domain_row):
    """40 never-served tenants whose only jobs cannot start now (more tenants than the
    claim's slots) do not keep the claim from a later tenant's due job on a healthy domain."""
    jobs, queue = store
    blocked = [
        new(url=f"http://blocked.test/{i}", domain="blocked.test", tenant=f"a{i:02}", **job_fields)
        for i in range(40)
    ]
    await jobs.submit(blocked)
    due = (await jobs.submit([new(tenant="z")]))[0]
    if domain_row:
        domains = Domain.__table__
        block = sa.update(domains).where(domains.c.domain == "blocked.test").values(**domain_row)
        await queue.db.transact(lambda conn: conn.execute(block))
    claimed = await queue.claim("w", 2, NOW + timedelta(seconds=1), 60)
    assert [due.id] == [lease.id for lease in claimed]


async def test_concurrent_claims_with_crossing_tenant_orders_do_not_deadlock(store):
    """8 claims at once, round after round, each serving 20 tenants in its own order (mixed
    priorities, one domain per job so the claims share no domain lock): none fails."""
    jobs, queue = store
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


async def test_a_claim_records_the_tenants_turn_order(store):
    """Tenants served in one claim are stamped in the order they were served, not by name."""
    jobs, queue = store
    await jobs.submit([new("/a", tenant="a"), new("/b", tenant="b", priority=5)])
    at = NOW + timedelta(seconds=1)
    assert 2 == len(await queue.claim("w", 2, at, 60))
    tenants = Tenant.__table__
    async with queue.db.read() as conn:
        served = {row.tenant: row.last_served_at for row in await conn.execute(sa.select(tenants))}
    assert {"b": at, "a": at + timedelta(microseconds=1)} == served


async def test_a_batch_stores_what_the_remote_side_sent_even_unstorable(store):
    """A success whose text, title, final URL and content type hold a lone surrogate and a
    NUL, and a failure whose type and message do, recorded in one batch: both are written,
    each of those characters read back as U+FFFD."""
    jobs, queue = store
    await jobs.submit([new("/a"), new("/b")])
    ok, bad = await queue.claim("w", 2, NOW, 60)
    odd = "x\ud800y\x00"
    fetched = replace(
        RESULT, final_url=f"http://a.test/{odd}", content_type=f"text/plain; {odd}", title=odd
    )
    fetched = replace(fetched, text=odd, text_length=len(odd))
    failure = Failure(ErrorKind.FATAL, f"Odd{odd}", f"message {odd}")
    batch = [succeeded(ok, fetched), failed(bad, MarkDead(DeadReason.FATAL, failure))]

    recorded = await queue.record(batch, NOW + timedelta(seconds=1))

    shown = "x\ufffdy\ufffd"
    a, b = await jobs.get(ok.id), await jobs.get(bad.id)
    content = await ContentStore(jobs.db).get(ok.id, part="text")
    (attempt,) = await jobs.attempts(bad.id)
    assert 2 == len(recorded.outcomes)
    assert (JobStatus.SUCCEEDED, f"http://a.test/{shown}", f"text/plain; {shown}", shown, 4) == (
        a.status,
        a.result_final_url,
        a.result_content_type,
        a.result_title,
        a.result_text_length,
    )
    assert (shown, f"text/plain; {shown}") == (content.data, content.content_type)
    assert (JobStatus.DEAD, f"Odd{shown}", f"message {shown}") == (
        b.status,
        b.last_error_type,
        b.last_error_message,
    )
    assert (f"Odd{shown}", f"message {shown}") == (attempt.error_type, attempt.message)
