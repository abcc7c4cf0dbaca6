"""The last hour as the dashboard's chart reads it, on both backends: attempts finished per
minute by how they ended, their queue lag (written by the claim), and one GROUP BY through
`ix_attempts_finished`."""

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from app.model import AttemptOutcome, Fetched, NewJob, Unmodified
from app.rules import policy
from app.settings import Settings
from app.store.activity import Ended, finished_per_minute
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import attempts
from tests.support.activity import seed_activity
from tests.support.outcomes import succeeded
from tests.support.rules import RETRY
from tests.support.stores import queue_on

NOW = datetime(2026, 11, 30, 3, 12, 40, tzinfo=UTC)


@pytest.fixture
async def database(database_url) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


async def test_an_hour_by_minute_adds_up_to_what_was_recorded(database):
    """Sixty minutes, the current one last; succeeded, retried and dead attempts add up to
    those recorded; each minute the seed filled says its queue lag."""
    activity = await seed_activity(database, NOW)
    minutes = await finished_per_minute(database, NOW, 60)
    assert 60 == len(minutes)
    assert (NOW.replace(second=0) - timedelta(minutes=59), NOW.replace(second=0)) == (
        minutes[0].start,
        minutes[-1].start,
    )
    assert activity.totals == {
        ended.value: sum(m.finished[ended] for m in minutes) for ended in Ended
    }
    assert all(sum(m.finished.values()) > 0 for m in minutes[1:])
    lagged = minutes[40]  # the seed's slow minutes, 38 to 43, waited 25 s and more
    assert lagged.lag_max_ms is not None and lagged.lag_max_ms >= 25_000
    assert lagged.lag_mean_ms is not None and 0 < lagged.lag_mean_ms <= lagged.lag_max_ms


async def test_an_attempt_on_a_minute_boundary_falls_in_that_minute(database):
    """Finished at 03:05:00.000 exactly: counted in the 03:05 minute, not 03:04."""
    jobs, queue = JobStore(database, lambda: NOW), queue_on(database, Settings(_env_file=None))
    await jobs.submit([NewJob("http://a.test/", "a.test", "t", 1)])
    boundary = NOW.replace(minute=5, second=0)
    (lease,) = await queue.claim("w", 1, boundary - timedelta(seconds=1), 60)
    await queue.record([policy.handed_back(lease, boundary)], boundary)
    minutes = {m.start: m.finished for m in await finished_per_minute(database, NOW, 60)}
    assert 1 == minutes[boundary][Ended.RETRIED]
    assert 0 == sum(minutes[boundary - timedelta(minutes=1)].values())


async def test_the_claim_writes_the_queue_lag_and_a_hand_back_its_next_retry(database):
    """Due for 2.5 s when claimed: queue_lag_ms 2500. Handed back due at once: next_retry_at
    is the hand-back's time, so the attempt reads as retried, not dead."""
    jobs = JobStore(database, lambda: NOW)
    queue = queue_on(database, Settings(_env_file=None))
    (job,) = await jobs.submit([NewJob("http://a.test/", "a.test", "t", 1)])
    (lease,) = await queue.claim("w", 1, NOW + timedelta(seconds=2.5), 60)
    back = NOW + timedelta(seconds=4)
    await queue.record([policy.handed_back(lease, back)], back)
    (attempt,) = await jobs.attempts(job.id)
    assert (2500, back) == (attempt.queue_lag_ms, attempt.next_retry_at)


async def test_refreshes_that_find_the_content_as_it_was_are_unchanged_not_dead(database):
    """Three pages fetched, then refreshed: a 304 (not_modified) and the same text again
    (unchanged) count as unchanged, the changed one as succeeded; none as dead."""
    first, again = NOW - timedelta(minutes=10), NOW - timedelta(minutes=5)
    queue = queue_on(database, Settings(_env_file=None))
    jobs = await JobStore(database, lambda: first).submit(
        [NewJob(f"http://a.test/{i}", "a.test", "t", 1) for i in range(3)]
    )
    leases = await queue.claim("w", 3, first, 60)
    await queue.record([succeeded(lease, page(lease.url, "old")) for lease in leases], first)
    for job in jobs:
        await JobStore(database, lambda: again).refresh(job.id)
    leases = sorted(await queue.claim("w", 3, again, 60), key=lambda lease: lease.url)
    results: list[Fetched | Unmodified] = [
        Unmodified(AttemptOutcome.NOT_MODIFIED, 304, None, None),
        page(leases[1].url, "old"),
        page(leases[2].url, "new"),
    ]
    outcomes = [
        policy.settle(lease, result, 1, again, RETRY)
        for lease, result in zip(leases, results, strict=True)
    ]
    await queue.record(outcomes, again)
    attempts_made = [
        a.outcome for job in jobs for a in await JobStore(database, lambda: NOW).attempts(job.id)
    ]
    minutes = await finished_per_minute(database, NOW, 60)
    totals = {ended: sum(m.finished[ended] for m in minutes) for ended in Ended}
    assert ["succeeded", "not_modified", "succeeded", "unchanged", "succeeded", "succeeded"] == [
        str(outcome) for outcome in attempts_made
    ]
    assert {Ended.SUCCEEDED: 4, Ended.UNCHANGED: 2, Ended.RETRIED: 0, Ended.DEAD: 0} == totals


def page(url: str, text: str) -> Fetched:
    """A fetched page whose main text is `text`."""
    return Fetched(200, url, "text/html", 1, "0" * 64, None, text=text, text_sha256=sha(text))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


EXPLAIN = {"postgresql": "EXPLAIN ", "sqlite": "EXPLAIN QUERY PLAN "}
INDEX_USE = {"postgresql": "ix_attempts_finished", "sqlite": "USING INDEX ix_attempts_finished"}


async def test_the_hour_is_read_through_the_index(database):
    """With 20,000 attempts older than the hour, the chart's query reads the index, not the
    table (both planners, statistics fresh)."""
    jobs = JobStore(database, lambda: NOW)
    (job,) = await jobs.submit([NewJob("http://a.test/", "a.test", "t", 1)])
    old = NOW - timedelta(days=2)
    rows = [
        {
            "job_id": job.id,
            "number": 1,
            "worker_id": "w",
            "started_at": old,
            "finished_at": old + timedelta(seconds=i),
            "outcome": "succeeded",
        }
        for i in range(20_000)
    ]
    await database.transact(lambda conn: conn.execute(sa.insert(attempts), rows))
    await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    captured: list[tuple[str, object]] = []

    def capture(_conn, _cursor, statement, parameters, *_):
        if "GROUP BY" in statement:
            captured.append((statement, parameters))

    event.listen(database.engine.sync_engine, "before_cursor_execute", capture)
    try:
        await finished_per_minute(database, NOW, 60)
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", capture)
    ((statement, parameters),) = captured
    backend = database.backend.name
    async with database.read() as conn:
        plan = "\n".join(
            str(row[-1])
            for row in await conn.exec_driver_sql(EXPLAIN[backend] + statement, parameters)
        )
    assert INDEX_USE[backend] in plan, plan
