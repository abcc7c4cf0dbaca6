"""Leases against slow fetches and frozen workers (README "Leases, heartbeats and graceful
shutdown"): heartbeats keep a live worker's job however long its fetch takes; a worker
that stops answering loses its job to another one, and its late result is refused by the
write fenced on the lease."""

import re
import signal
from datetime import UTC, datetime

import pytest

from tests.chaos.kit import Ledger, figures, freeze_between_transactions, started, until_hits
from tests.conftest import eventually, running_app
from tests.support.processes import READY
from tests.support.webserver import Reply

LEASE_SECONDS = 2.0
"""Short enough that a lost lease shows within seconds, long enough that a heartbeat on a
loaded machine lands within the two thirds of it it has."""

HOLDING_SECONDS = 3.0
"""The slow fetch beside the frozen job's: running when the worker is frozen, done (its
lease long lost) soon after it is woken."""

FROZEN_LEASE_SECONDS = 1.5
"""The frozen worker's: it says how many fetches it runs every third of it (0.5 s), well
within the second its answer waits to be written."""

FETCH_TIMEOUTS = {"read_timeout_seconds": 20.0, "fetch_timeout_seconds": 20.0}


def worker_id(log: str) -> str:
    found = re.search(r"worker (\S+) started \(", log)
    assert found, log
    return found.group(1)


@pytest.mark.timeout(120)
async def test_a_fetch_three_times_the_lease_is_fetched_once(
    database_url, make_settings, web, tmp_path
):
    """A fetch taking 3x the lease, with two workers up (an `ingest worker` process and the
    app's own), either of which would take back a lapsed lease: the job succeeds on its
    first attempt and the page is fetched once."""
    url = web.script("/slow", Reply(delay=3 * LEASE_SECONDS))
    leases = {"lease_seconds": LEASE_SECONDS, "poll_interval_seconds": 0.2}
    other = make_settings(domain_max_in_flight=1000, **leases, **FETCH_TIMEOUTS)
    async with Ledger(database_url) as ledger:
        with started("worker", tmp_path / "worker.log", database_url, **leases) as process:
            await process.wait_for_line(READY)
            async with running_app(other):
                (job_id,) = await ledger.submit([url])
                await ledger.until_all("succeeded", 1, timeout=60)
        jobs, history = await ledger.jobs(), await ledger.attempts()
    (job,) = [job for job in jobs if job.id == job_id]
    figures(
        f"fetch 3x lease on {database_url.split(':')[0]}",
        fetches=web.count("/slow"),
        attempts=[a.outcome for a in history[job_id]],
    )
    assert ("succeeded", 1) == (job.status, job.attempts)
    assert [(1, "succeeded")] == [(a.number, a.outcome) for a in history[job_id]]
    assert 1 == web.count("/slow")


@pytest.mark.timeout(120)
async def test_a_frozen_worker_loses_its_job_and_its_late_result_is_discarded(
    database_url, make_settings, web, tmp_path
):
    """An `ingest worker` frozen (SIGSTOP) past its lease with a fetched answer not recorded
    yet: another worker takes the job back (attempt 1 interrupted), fetches it again and
    succeeds (attempt 2). Woken (SIGCONT), the frozen worker writes its own answer, and the
    write, fenced on its lost lease, changes nothing: the job keeps the other's success."""
    url = web.script("/frozen", Reply())
    # A slow fetch beside it (its first answer takes seconds): the completer waits for it to
    # record the two together, so the frozen job's answer is held back (a lone answer is
    # written at once).
    holding = web.script("/holding", Reply(delay=HOLDING_SECONDS), Reply())
    leases = {"lease_seconds": FROZEN_LEASE_SECONDS, "poll_interval_seconds": 0.2}
    # Its answers wait a second before they are written: the moment it is frozen in.
    slow_recorder = {"record_delay_seconds": 1.0, **leases}
    async with Ledger(database_url) as ledger:
        with started("worker", tmp_path / "frozen.log", database_url, **slow_recorder) as frozen:
            await frozen.wait_for_line(READY)
            frozen_id = worker_id(frozen.text())
            await ledger.submit([holding])
            await until_hits(web, [holding], 1, timeout=30)
            (job_id,) = await ledger.submit([url])
            await until_hits(web, [url], 1, timeout=30)
            fetching_since = datetime.now(UTC)

            async def fetched_not_recorded() -> bool:
                # A heartbeat since the fetch began says only the slow one runs, while the
                # job is still running: the answer waits in its completer.
                return 1 == await ledger.running_fetches(frozen_id, since=fetching_since)

            await eventually(fetched_not_recorded, timeout=5, interval=0.01)
            await freeze_between_transactions(frozen, database_url)
            assert {"running": 2} == await ledger.statuses(), "frozen before its write"
            other = make_settings(domain_max_in_flight=1000, **leases)
            async with running_app(other) as (app, _):
                other_id = app.state.runtime.worker.id
                await ledger.until_all("succeeded", 2, timeout=60)
            taken_over = await ledger.attempts()
            frozen.signal(signal.SIGCONT)
            await frozen.wait_for_line("outcome discarded", timeout=30)
        jobs, history = await ledger.jobs(), await ledger.attempts()
    (job,) = [job for job in jobs if job.id == job_id]
    figures(
        f"SIGSTOP past the lease on {database_url.split(':')[0]}",
        fetches=web.count("/frozen"),
        attempts=[(a.number, a.outcome) for a in history[job_id]],
    )
    expected = [(1, "interrupted", frozen_id), (2, "succeeded", other_id)]
    assert expected == [(a.number, a.outcome, a.worker_id) for a in taken_over[job_id]]
    assert expected == [(a.number, a.outcome, a.worker_id) for a in history[job_id]]
    assert ("succeeded", 2) == (job.status, job.attempts)
    assert 2 == web.count("/frozen")
