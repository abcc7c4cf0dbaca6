"""Batching only when it pays, end to end on both backends: a priority submitted behind a
backlog is not overtaken by the worker's local queue, and a lone job is recorded without
waiting for batch-mates that are not coming."""

import asyncio
import socket
import statistics
from datetime import datetime

import pytest

from app.store.backends.sqlite.wake_sockets import WakeSockets
from tests.chaos.kit import Ledger, started
from tests.conftest import eventually, running_app, submit, wait_for_status
from tests.support.processes import READY
from tests.support.webserver import Reply, ScriptedServer

SLOW = 0.3
"""Seconds each low-priority page takes: far past the local queue's work bound
(INGEST_WORKER_PREFETCH_SECONDS, 50 ms by default), as a real page's fetch often is."""


async def test_a_priority_submitted_behind_a_backlog_is_fetched_second_at_worst(
    make_settings, web: ScriptedServer
):
    """One slot, default prefetch settings: 8 low-priority jobs, then (while the first runs)
    one of priority 10. The priority job is fetched right after the one running: the low
    ones the local queue holds are handed back, not fetched first (it used to come 4th).

    Fast pages first, so the worker has learnt that fetches are quick and queues ahead (two
    jobs, INGEST_WORKER_PREFETCH's default for one slot): the hand-back is what is tested,
    not the work bound that empties the queue once fetches are slow."""
    low = [web.script(f"/low/{i}", Reply(200, delay=SLOW)) for i in range(8)]
    high = web.script("/high", Reply(200))
    settings = make_settings(worker_concurrency=1, worker_prefetch=None)
    async with running_app(settings) as (_, client):
        for i in range(5):
            warm = await submit(client, web.url(f"/warm/{i}"))
            await wait_for_status(client, warm["id"], "succeeded")
        lows = [await submit(client, url, priority=0) for url in low]
        await eventually(lambda: _hit(web, "/low/"))
        job = await submit(client, high, priority=10)
        await wait_for_status(client, job["id"], "succeeded", timeout=30)
        done = [await wait_for_status(client, j["id"], "succeeded", timeout=30) for j in lows]
        yielded = [
            item
            for j in lows
            for item in (await client.get(f"/jobs/{j['id']}/attempts")).json()["items"]
            if item["outcome"] == "interrupted"
        ]
    order = sorted((times[0], path) for path, times in web.hits.items() if times)
    fetched = [path for _, path in order if not path.startswith("/warm/")]
    assert fetched.index("/high") <= 1, fetched
    # Handed back before their fetch began: no attempt spent, each fetched once.
    assert yielded, "no queued job was handed back: the test did not test the hand-back"
    assert [1] * 8 == [web.count(f"/low/{i}") for i in range(8)]
    assert all(j["attempts"] == 1 for j in done), [j["attempts"] for j in done]


async def _hit(web: ScriptedServer, prefix: str) -> bool:
    return any(path.startswith(prefix) and times for path, times in web.hits.items())


async def test_a_lone_job_is_recorded_without_the_batching_delay(make_settings, web):
    """Jobs submitted one at a time, each after the last finished: each is recorded as soon
    as it is fetched. The batching delay is set to a second, so a completer that waited it
    for batch-mates (none are running) would show; the bound is loose for a busy machine."""
    settings = make_settings(record_delay_seconds=1.0)
    took = []
    async with running_app(settings) as (_, client):
        for i in range(8):
            job = await submit(client, web.url(f"/one/{i}"))
            done = await wait_for_status(client, job["id"], "succeeded")
            took.append(_seconds(done["created_at"], done["finished_at"]))
    assert statistics.median(took) < 0.5, took


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@pytest.mark.timeout(120)
async def test_a_worker_apart_is_woken_by_another_processes_submit(database_url, web, tmp_path):
    """An `ingest worker` in a process of its own, polling once a minute, fetches a job
    another process submits within seconds: woken by NOTIFY on PostgreSQL, by a datagram to
    its socket on SQLite; the same for a dead job requeued."""
    requeued = web.script("/requeued", Reply(404), Reply(200))
    rare_polls = {"poll_interval_seconds": 60.0, "lease_seconds": 120.0}
    async with Ledger(database_url) as ledger:
        with started("worker", tmp_path / "worker.log", database_url, **rare_polls) as worker:
            await worker.wait_for_line(READY)
            # The first may be found by the worker's first claim; the second is submitted to
            # a worker that has claimed and gone idle: only a wake-up fetches it in time, far
            # less than the poll.
            for i in range(2):
                await ledger.submit([web.url(f"/woken/{i}")])
                await ledger.until_all("succeeded", i + 1, timeout=WOKEN_WITHIN_SECONDS)
            # A requeue wakes it too, once committed.
            (dead,) = await ledger.submit([requeued], max_attempts=1)
            await ledger.until_all("dead", 1, timeout=WOKEN_WITHIN_SECONDS)
            await ledger.store.retry(dead)
            await ledger.until_all("succeeded", 3, timeout=WOKEN_WITHIN_SECONDS)
    assert [1, 1, 2] == [web.count(f"/woken/{i}") for i in range(2)] + [web.count("/requeued")]


WOKEN_WITHIN_SECONDS = 20.0
"""Loose, for a busy machine: the point is the minute-long poll it does not wait for."""


def test_wake_sockets_reach_other_listeners_and_forget_gone_ones(tmp_path):
    """The sockets of one database: a listener in another process (a second instance here)
    gets the wake-up's priority; a socket whose listener is gone is removed by the next wake;
    the sender's own listeners are skipped (they are woken directly)."""

    async def scenario() -> list[int | None]:
        database = str(tmp_path / "ingest.db")
        api, worker = WakeSockets(database), WakeSockets(database)
        got: list[int | None] = []
        woken = asyncio.Event()

        def on_wake(priority: int | None) -> None:
            got.append(priority)
            woken.set()

        async with worker.listening(on_wake), api.listening(lambda _: got.append(-99)):
            stale = api.directory / "gone"
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as gone:
                gone.bind(str(stale))
            api.wake(7)
            await asyncio.wait_for(woken.wait(), 10)
            assert not stale.exists()
        api.close()
        worker.close()
        assert not list(api.directory.iterdir())  # listeners remove their sockets
        return got

    assert [7] == asyncio.run(scenario())


def test_a_wake_up_directory_others_may_enter_is_not_used(tmp_path, caplog):
    """A directory another could write to (made first by another user, say) is neither
    listened in nor sent to: the worker polls, and says so."""

    async def scenario() -> bool:
        sockets = WakeSockets(str(tmp_path / "ingest.db"))
        sockets.directory.mkdir(mode=0o700)
        sockets.directory.chmod(0o777)
        try:
            async with sockets.listening(lambda _: None):
                listened = any(sockets.directory.iterdir())
            sockets.wake(1)  # nothing to send to, nothing raised
            sockets.close()
            return listened
        finally:
            sockets.directory.rmdir()

    assert not asyncio.run(scenario())
    assert "is not this user's alone" in caplog.text
