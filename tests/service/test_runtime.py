"""The embedded worker runs on an event loop of its own (`app.runtime.Background`): the API
answers while the worker's loop is busy, and a submit still wakes the worker at once."""

import asyncio
import threading
from typing import cast

from app.fetch.fetcher import Fetcher
from app.fetch.guard import GuardedTransport
from app.model import DEFAULT_TENANT
from app.runtime import Runtime
from tests.conftest import eventually, running_app, submit, wait_for_status

BLOCK_LIMIT_SECONDS = 30.0


async def test_the_api_answers_while_the_workers_loop_is_busy(make_settings, web, monkeypatch):
    """A fetch that holds the worker's loop (as 32 fetches at full speed hold it in turns)
    does not hold a request: the API has a loop of its own. The fetch holds the worker's
    loop until the test has its answers; sharing the loop, the answers would come only once
    the fetch gave up waiting for them."""
    fetching = threading.Event()
    answered = threading.Event()
    gave_up = []
    real_fetch = Fetcher.fetch

    async def hold_the_loop(self, url, previous=None, tenant=DEFAULT_TENANT):
        fetching.set()
        # The point: it blocks the worker's loop.
        gave_up.append(not answered.wait(BLOCK_LIMIT_SECONDS))
        return await real_fetch(self, url, previous, tenant)

    monkeypatch.setattr(Fetcher, "fetch", hold_the_loop)
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, web.url("/page"))
        assert await asyncio.to_thread(fetching.wait, 10)
        health = await client.get("/healthz")
        listed = await client.get(f"/jobs/{job['id']}")
        answered.set()
        assert (health.status_code, listed.status_code) == (200, 200)
        await wait_for_status(client, job["id"], "succeeded", timeout=BLOCK_LIMIT_SECONDS)
        assert gave_up == [False]


async def test_a_submit_wakes_the_worker_on_its_loop(make_settings, web):
    """With a poll interval (and lease checks) far beyond the test's patience, only the
    submit's wake-up, passed to the worker's loop, can start the job on SQLite (PostgreSQL
    has its NOTIFY too)."""
    settings = make_settings(poll_interval_seconds=60.0, lease_seconds=120.0)
    async with running_app(settings) as (_, client):

        async def ticked() -> bool:
            """The worker has looked once and found nothing: it waits out its poll now."""
            text = (await client.get("/metrics")).text
            return 'ingest_worker_last_tick_timestamp_seconds{loop="worker"}' in text

        await eventually(ticked)
        job = await submit(client, web.url("/page"))
        await wait_for_status(client, job["id"], "succeeded", timeout=10)


def test_the_ssrf_rules_are_parsed_once_for_the_api_the_fetcher_and_the_webhooks(make_settings):
    """The composition root parses INGEST_BLOCKED_HOSTS and friends once: the API's checks,
    every fetch client's guard and the webhooks' guard hold the same rules."""
    runtime = Runtime.build(make_settings(), run_worker=True)
    assert runtime.fetcher is not None and runtime.deliverer is not None
    guards = [cast(GuardedTransport, client._transport) for client in runtime.fetcher.clients]
    guards.append(cast(GuardedTransport, runtime.deliverer.client._transport))
    assert all(guard.destinations is runtime.destinations for guard in guards)
