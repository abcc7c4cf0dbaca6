"""A service killed outright (SIGKILL) or told to stop (SIGTERM) with jobs in flight.

The promises (README "Batching: what it trades", "Leases, heartbeats and graceful
shutdown"): a killed process loses no job, and only the jobs it held leased (running or
queued locally) run again, once their leases run out, the lost attempt counted; a stopped
process hands its jobs back at once, attempt not spent, exits 0, and the next one runs them.
"""

import signal

import pytest

from tests.chaos.kit import Ledger, exited, figures, hits, path_of, slow_pages, started, until_hits
from tests.conftest import eventually, running_app
from tests.support.processes import READY
from tests.support.webserver import Reply

KILLED_JOBS = 300  # the issue says 500; 300 keeps each case near 20 s on a busy 2-core box
FETCH_SECONDS = 0.3
KILL_AFTER_HITS = 100


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("database_url", "kind"),
    [("sqlite", "serve"), ("postgresql", "worker")],
    indirect=["database_url"],
)
async def test_kill_9_mid_flight_loses_no_job_and_repeats_only_the_leased_ones(
    database_url, kind, web, tmp_path
):
    """SIGKILL once 100 of 300 slow fetches have started, then start the same kind of process
    again: every job succeeds, none stays running; a URL is fetched twice only if its job was
    leased (running or queued) when the process died, and its lost attempt counts."""
    urls = slow_pages(web, KILLED_JOBS, Reply(delay=FETCH_SECONDS))
    settings = {"lease_seconds": 2, "worker_concurrency": 32}
    async with Ledger(database_url) as ledger:
        await ledger.submit(urls)
        with started(kind, tmp_path / "killed.log", database_url, **settings) as killed:
            await killed.wait_for_line(READY)
            await until_hits(web, urls, KILL_AFTER_HITS, timeout=60)
            killed.signal(signal.SIGKILL)
            killed.process.wait()
        leased = {job.url for job in await ledger.running()}
        before = hits(web, urls)
        with started(kind, tmp_path / "again.log", database_url, **settings) as again:
            await ledger.until_all("succeeded", KILLED_JOBS, timeout=90)
            taken_back = again.text().count("interrupted: lease expired; will retry now")
        jobs, history = await ledger.jobs(), await ledger.attempts()
        in_flight = await ledger.in_flight()
    fetched = hits(web, urls)
    repeated = {url for url, count in fetched.items() if count > 1}
    figures(
        f"kill -9 {kind} on {database_url.split(':')[0]}",
        jobs=KILLED_JOBS,
        lost=sum(job.status != "succeeded" for job in jobs),
        fetches_before_kill=sum(before.values()),
        leased_at_kill=len(leased),
        fetching_at_kill=sum(before[url] for url in leased),
        duplicates=len(repeated),
        bound=len(leased),
    )
    assert leased, "killed with jobs in flight"
    assert KILLED_JOBS == len(jobs)
    assert all(job.status == "succeeded" for job in jobs), "none lost, none left running"
    assert 0 == in_flight, "the domain's count of running jobs came back to 0"
    assert repeated <= leased
    assert len(leased) == taken_back, "each lease of the killed process taken back once"
    assert {url: before[url] + 1 for url in leased} == {url: fetched[url] for url in leased}
    assert all(fetched[url] == 1 for url in urls if url not in leased)
    by_url = {job.url: job for job in jobs}
    assert {url: (2, ["interrupted", "succeeded"]) for url in leased} == {
        url: (by_url[url].attempts, [a.outcome for a in history[by_url[url].id]]) for url in leased
    }
    assert all(
        (1, ["succeeded"]) == (job.attempts, [a.outcome for a in history[job.id]])
        for job in jobs
        if job.url not in leased
    )


GRACEFUL_JOBS = 24
SLOTS, PREFETCH = 4, 4
HANG_SECONDS = 20.0
"""Longer than the grace period by far: the running fetches are cut and handed back."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["serve", "worker"])
async def test_sigterm_hands_jobs_in_flight_back_without_spending_an_attempt(
    database_url, kind, make_settings, web, tmp_path
):
    """SIGTERM while 4 fetches hang and 4 jobs wait in the local queue: the process exits 0
    within its grace period, the 8 jobs are pending again with their attempt not spent
    (one `interrupted` attempt each, the job's count back to 0), and a restarted service
    fetches them: every job succeeds on attempt 1."""
    urls = slow_pages(web, GRACEFUL_JOBS, Reply(delay=HANG_SECONDS))
    settings = {
        "worker_concurrency": SLOTS,
        "worker_prefetch": PREFETCH,
        "shutdown_grace_seconds": 0.5,
        "lease_seconds": 5,
    }
    async with Ledger(database_url) as ledger:
        ids = await ledger.submit(urls)
        with started(kind, tmp_path / "stopped.log", database_url, **settings) as process:
            await process.wait_for_line(READY)
            await until_hits(web, urls, SLOTS, timeout=60)

            async def queue_full() -> set[str]:
                running = {job.url for job in await ledger.running()}
                return running if len(running) == SLOTS + PREFETCH else set()

            leased = await eventually(queue_full, timeout=30)
            for url in urls:  # from now on every page answers at once
                web.script(path_of(url), Reply())
            process.signal(signal.SIGTERM)
            exit_code = await exited(process, timeout=30)
            log = process.text()
        stopped_jobs, stopped_history = await ledger.jobs(), await ledger.attempts()
        stopped_in_flight = await ledger.in_flight()
        before = hits(web, urls)
        restarted = make_settings(domain_max_in_flight=1000, poll_interval_seconds=0.1)
        async with running_app(restarted):
            await ledger.until_all("succeeded", GRACEFUL_JOBS, timeout=60)
        jobs, history = await ledger.jobs(), await ledger.attempts()
    fetched = hits(web, urls)
    figures(
        f"SIGTERM {kind} on {database_url.split(':')[0]}",
        jobs=GRACEFUL_JOBS,
        lost=sum(job.status != "succeeded" for job in jobs),
        leased_at_stop=len(leased),
        handed_back=log.count("handed back, due now, attempt not spent"),
        fetched_twice=sum(count == 2 for count in fetched.values()),
        exit_code=exit_code,
    )
    assert SLOTS == sum(before[url] for url in leased), "the running fetches were cut"
    assert {(job.url in leased, job.status, job.attempts) for job in stopped_jobs} == {
        (True, "pending", 0),
        (False, "pending", 0),
    }
    assert {url: [(1, "interrupted")] for url in leased} == {
        job.url: [(a.number, a.outcome) for a in stopped_history.get(job.id, [])]
        for job in stopped_jobs
        if job.url in leased or job.id in stopped_history
    }
    assert 0 == stopped_in_flight
    assert SLOTS + PREFETCH == log.count("handed back, due now, attempt not spent")
    assert {(job.status, job.attempts) for job in jobs} == {("succeeded", 1)}
    assert {
        job_id: [(1, "interrupted"), (1, "succeeded")] if url in leased else [(1, "succeeded")]
        for job_id, url in zip(ids, urls, strict=True)
    } == {job_id: [(a.number, a.outcome) for a in history[job_id]] for job_id in ids}
    assert {url: 2 if before[url] else 1 for url in urls} == fetched
    assert 0 == exit_code, f"{kind} exits 0 after a graceful stop: {log[-2000:]}"
