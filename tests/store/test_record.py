"""Where outcomes are recorded (`app.store.record`), on both backends with a fixed clock: the
fence on the lease (a stale worker's write, a batch holding a stale outcome, an attempt
after an operator's retry), leases taken back and extended, a retry then a death, a
shutdown's hand-back, and what the remote side sent that no column holds as is."""

import asyncio
import random
from dataclasses import replace
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.model import DeadReason, ErrorKind, Failure, JobStatus, MarkDead, Reschedule
from app.rules import policy
from app.store.reads import ContentStore
from app.store.tables import attempts, contents, domains
from tests.support.outcomes import failed, is_dead, record, succeeded, take_back_expired
from tests.support.stores import NOW, RESULT, new


async def test_stale_worker_write_is_a_no_op(stores):
    """After its lease was taken back, the old worker's result changes nothing."""
    jobs, queue = stores
    job = (await jobs.submit([new()]))[0]
    (stale,) = await queue.claim("old", 1, NOW, 1)
    reclaimed = await take_back_expired(queue, NOW + timedelta(seconds=2))
    (fresh,) = await queue.claim("new", 1, NOW + timedelta(seconds=3), 60)
    assert [job.id] == [r.lease.id for r in reclaimed]
    assert False is await record(queue, succeeded(stale, RESULT), NOW + timedelta(seconds=4))
    assert True is await record(queue, succeeded(fresh, RESULT), NOW + timedelta(seconds=5))
    outcomes = [(a.number, a.worker_id, a.outcome) for a in await jobs.attempts(job.id)]
    assert [(1, "old", "interrupted"), (2, "new", "succeeded")] == outcomes


async def test_an_attempt_is_written_once_when_it_ends(stores):
    """A running attempt has no row of its own: the history reads it off the job's row.
    Its record writes it whole: when it started (the claim), ended, and how long the job had
    been due when claimed."""
    jobs, queue = stores
    job = (await jobs.submit([new()]))[0]
    claimed_at = NOW + timedelta(seconds=2)
    (lease,) = await queue.claim("w", 1, claimed_at, 60)
    running = await jobs.attempts(job.id)
    async with jobs.db.read() as conn:
        rows = (await conn.execute(sa.select(sa.func.count()).select_from(attempts))).scalar()
    await record(
        queue, succeeded(lease, RESULT, duration_ms=700), claimed_at + timedelta(seconds=1)
    )
    (ended,) = await jobs.attempts(job.id)

    assert 0 == rows
    assert [(1, "w", claimed_at, None, None)] == [
        (a.number, a.worker_id, a.started_at, a.finished_at, a.outcome) for a in running
    ]
    lag_ms = int((claimed_at - job.created_at).total_seconds() * 1000)
    assert (1, "w", claimed_at, claimed_at + timedelta(seconds=1), "succeeded", 700, lag_ms) == (
        ended.number,
        ended.worker_id,
        ended.started_at,
        ended.finished_at,
        ended.outcome,
        ended.duration_ms,
        ended.queue_lag_ms,
    )


async def test_a_batch_records_the_held_outcomes_and_drops_the_stale(stores):
    """One record of two outcomes, one of them stale (its lease taken back and the job
    claimed again): the held one is recorded whole; the stale one writes nothing, neither
    its job, its attempt, its content nor its domain's slot."""
    jobs, queue = stores
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


async def test_a_stale_attempt_cannot_touch_the_retried_job(stores):
    """Same worker, same attempt number: after its lease was taken back and an operator
    retried the job, the first attempt's heartbeat, record and release change nothing, and
    the new attempt's success counts (the history numbers it 2, after the first)."""
    jobs, queue = stores
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
    assert [(1, "interrupted"), (2, "succeeded")] == outcomes


async def test_the_history_numbers_attempts_on_across_refreshes(stores):
    """A job refreshed twice: each claim is attempt 1 of its fresh budget, and the history
    reads 1, 2, 3, the running attempt numbered after those that ended."""
    jobs, queue = stores
    job = (await jobs.submit([new()]))[0]
    leases, running = [], []
    for i in range(3):
        if i:
            await jobs.refresh(job.id)
        (lease,) = await queue.claim("w", 1, NOW + timedelta(seconds=i), 60)
        leases.append(lease)
        running.append((await jobs.attempts(job.id))[-1])
        ended = NOW + timedelta(seconds=i, milliseconds=500)
        assert await record(queue, succeeded(lease, RESULT), ended)
    history = await jobs.attempts(job.id)
    assert [1, 1, 1] == [lease.attempt for lease in leases]
    assert [(1, None), (2, None), (3, None)] == [(a.number, a.outcome) for a in running]
    assert [1, 2, 3] == [a.number for a in history]
    assert ["succeeded"] * 3 == [a.outcome for a in history]


async def test_expired_lease_with_no_budget_left_is_dead(stores):
    """A lost attempt that was the last of the budget kills the job: lease_expired."""
    jobs, queue = stores
    job = (await jobs.submit([new(max_attempts=1)]))[0]
    await queue.claim("w", 1, NOW, 1)
    (reclaimed,) = await take_back_expired(queue, NOW + timedelta(seconds=2))
    dead = await jobs.get(job.id)
    assert is_dead(reclaimed)
    assert (JobStatus.DEAD, DeadReason.LEASE_EXPIRED) == (dead.status, dead.dead_reason)
    assert ("transient", "LeaseExpired") == (dead.last_error_kind, dead.last_error_type)


async def test_live_lease_is_not_reclaimed(stores):
    """A lease that has not expired, or was extended, stays with its worker."""
    jobs, queue = stores
    await jobs.submit([new()])
    (lease,) = await queue.claim("w", 1, NOW, 10)
    assert [] == await take_back_expired(queue, NOW + timedelta(seconds=5))
    assert {lease} == await queue.extend_leases([lease], NOW + timedelta(seconds=30))
    other = replace(lease, lease_id="someone else's")
    assert set() == await queue.extend_leases([other], NOW + timedelta(seconds=90))
    assert [] == await take_back_expired(queue, NOW + timedelta(seconds=20))


async def test_reschedule_then_dead(stores):
    """A transient failure sets retry_after; a fatal one kills the job and clears it."""
    jobs, queue = stores
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


async def test_release_gives_the_attempt_back(stores):
    """Shutdown hands the job back due now, attempts as before the claim."""
    jobs, queue = stores
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


async def test_a_batch_stores_what_the_remote_side_sent_even_unstorable(stores):
    """A success whose text, title, final URL and content type hold a lone surrogate and a
    NUL, and a failure whose type and message do, recorded in one batch: both are written,
    each of those characters read back as U+FFFD."""
    jobs, queue = stores
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


@pytest.mark.parametrize("domain_count", [10, 1200], ids=["shared domains", "a domain each"])
async def test_records_and_claims_at_once_never_lock_rows_crosswise(stores, domain_count):
    """8 workers at once, round after round, each recording what it claimed while the others
    claim and record, over 10 tenants mixed in every order, their jobs on 10 domains (the
    domains' rows locked by many) or a domain each (only the tenants' rows shared): every
    write goes through (two transactions that locked the same rows crosswise would deadlock,
    and PostgreSQL would fail one of them)."""
    jobs, queue = stores
    rand = random.Random(11)
    await jobs.submit(
        [
            new(f"/{i}", domain=f"d{i % domain_count}.test", tenant=f"t{rand.randrange(10)}")
            for i in range(1200)
        ]
    )

    async def work(worker: str) -> int:
        recorded = 0
        for _ in range(6):
            leases = await queue.claim(worker, 16, NOW + timedelta(seconds=1), 60)
            outcomes = [succeeded(lease, RESULT) for lease in leases]
            recorded += len((await queue.record(outcomes, NOW + timedelta(seconds=2))).outcomes)
        return recorded

    counts = await asyncio.gather(*[work(f"w{k}") for k in range(8)])
    async with jobs.db.read() as conn:
        in_flight = (await conn.execute(sa.select(sa.func.sum(domains.c.in_flight)))).scalar()
    assert sum(counts) > 100 and 0 == in_flight, (counts, in_flight)
