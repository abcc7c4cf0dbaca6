"""Domain pauses as the completer records them, on both backends: the pause stored, its
log line, and the domain view."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

from app.model import ErrorKind, Failure, Fetched, Lease, NewJob
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.worker.completer import Completer
from tests.support.stores import queue_on

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
RESULT = Fetched(200, "http://a.test/", "text/html", 10, "0" * 64, "t")
SETTINGS = Settings(
    _env_file=None,
    backoff_base_seconds=60,
    backoff_max_seconds=300,
    backoff_jitter=0.0,
    domain_failure_threshold=3,
    domain_max_in_flight=1000,
)
VIEWS = PartSettings.of(SETTINGS)


def http(status: int, retry_after: str | None = None) -> Failure:
    kind = ErrorKind.RATE_LIMITED if status == 429 else ErrorKind.TRANSIENT
    return Failure(kind, "HTTPStatus", f"HTTP {status}", status, retry_after)


@pytest.fixture
async def parts(database_url):
    """A completer on a real queue with a fixed clock, leases of jobs on a.test, the
    domain view."""
    database = Database(database_url)
    queue = queue_on(database, SETTINGS)
    jobs = JobStore(database, lambda: NOW)
    new = [NewJob(f"http://a.test/{i}", "a.test", "t", 5) for i in range(4)]
    await jobs.submit(new)
    leases = await queue.claim("w", 4, NOW, 60)
    completer = Completer(queue, VIEWS.batching, VIEWS.retry, lambda: NOW)
    yield completer, sorted(leases, key=lambda lease: lease.url), DomainStore(database, jobs.clock)
    await database.dispose()


def settled(lease: Lease, result: Failure | Fetched):
    return policy.settle(lease, result, 5, NOW, VIEWS.retry, rand=lambda: 0.5)


def pause_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "paused until" in r.getMessage()]


async def test_a_shorter_pause_than_the_stored_one_is_not_logged(parts, caplog):
    """A 429 asking an hour pauses a.test; a later 429 asking 5 s changes nothing, and no
    "paused until" line claims it did."""
    completer, leases, domains = parts
    caplog.set_level(logging.INFO, logger="ingest.worker")
    await completer.record([settled(leases[0], http(429, "3600"))])
    await completer.record([settled(leases[1], http(429, "5"))])
    [view] = await domains.overview(NOW)
    assert [
        "domain a.test paused until 2026-01-01T13:00:00.000Z (HTTP 429, Retry-After 3600s), "
        "after 1 consecutive failure"
    ] == pause_lines(caplog)
    assert (NOW + HOUR, "HTTP 429, Retry-After 3600s") == (view.paused_until, view.pause_reason)


async def test_a_batch_keeps_its_longest_pause(parts, caplog):
    """One batch holding a 429 that asks an hour and, after it, a third 500 in a row: the
    hour is stored and logged, not the 500's shorter backoff."""
    completer, leases, domains = parts
    caplog.set_level(logging.INFO, logger="ingest.worker")
    await completer.record([settled(leases[0], http(500)), settled(leases[1], http(500))])
    assert [] == pause_lines(caplog), "two failures are under the threshold"
    await completer.record([settled(leases[2], http(429, "3600")), settled(leases[3], http(500))])
    [view] = await domains.overview(NOW)
    assert [
        "domain a.test paused until 2026-01-01T13:00:00.000Z (HTTP 429, Retry-After 3600s), "
        "after 4 consecutive failures"
    ] == pause_lines(caplog)
    assert (NOW + HOUR, 4) == (view.paused_until, view.consecutive_failures)


async def test_the_domain_view_count_and_reason_agree(parts):
    """Three 500s pause a.test; a success still in flight then ends the streak. The view
    shows 0 consecutive failures and a reason that claims no count of its own."""
    completer, leases, domains = parts
    await completer.record([settled(lease, http(500)) for lease in leases[:3]])
    [paused] = await domains.overview(NOW)
    await completer.record([settled(leases[3], RESULT)])
    [after] = await domains.overview(NOW)
    expected_until = NOW + timedelta(seconds=240)  # backoff after 3 failures: 60 * 2**2
    assert (3, expected_until, "HTTP 500, backoff 240s") == (
        paused.consecutive_failures,
        paused.paused_until,
        paused.pause_reason,
    )
    assert (0, expected_until, "HTTP 500, backoff 240s") == (
        after.consecutive_failures,
        after.paused_until,
        after.pause_reason,
    )
