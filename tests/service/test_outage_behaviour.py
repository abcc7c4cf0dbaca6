"""While the database cannot serve: the API answers 503 problem+json with a Retry-After, in
one log line per request, and recovers by itself; readiness fails when SQLite cannot write.
A bug (a statement on a table that is not there) is still a 500."""

import asyncio
import logging
import sqlite3
import time

import httpx
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from app.api.problems import PROBLEM_JSON, RETRY_AFTER_SECONDS
from app.store.backends import backend_for
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.outages import outage
from tests.support.webserver import Reply

URL = "https://example.com/page"
OUTAGE_SECONDS = 5.0


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    assert response.json()["status"] == 503


async def test_the_api_answers_503_while_the_database_cannot_serve_and_recovers(
    make_settings, database_url, tmp_path, caplog
):
    """SQLite on a full disk (reads work, writes fail), PostgreSQL unreachable: POST /jobs and
    /readyz answer 503 with Retry-After, each in one log line without a traceback; once the
    database is back both succeed again, with nothing restarted."""
    async with outage(database_url, tmp_path) as (url, switch):
        settings = make_settings(database_url=url, worker_enabled=False)
        async with running_app(settings) as (_, client):
            assert (await client.post("/jobs", json={"url": URL})).status_code == 201
            assert (await client.get("/readyz")).status_code == 200

            caplog.clear()
            with caplog.at_level(logging.INFO, logger="ingest"):
                await switch.begin()
                for _ in range(3):
                    assert_unavailable(await client.post("/jobs", json={"url": URL}))
                    assert_unavailable(await client.get("/readyz"))
            lines = [r for r in caplog.records if r.name.startswith("ingest")]
            assert len(lines) == 6, [r.getMessage() for r in lines]
            assert not [r for r in lines if r.exc_info], "no traceback for an outage"

            await switch.end()

            async def recovered() -> bool:
                ready = await client.get("/readyz")
                return ready.status_code == 200

            await eventually(recovered, timeout=20)
            assert (await client.post("/jobs", json={"url": URL})).status_code == 201


async def test_a_statement_that_is_wrong_is_still_a_500(make_settings, database_url):
    """Not every database error is an outage: a missing table is a bug, answered 500."""
    settings = make_settings(worker_enabled=False)
    async with running_app(settings) as (app, _):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            # Each backend has its URL; the protocol the store sees does not name it.
            engine = create_async_engine(backend_for(database_url).url)  # type: ignore[attr-defined]
            try:
                async with engine.begin() as conn:
                    await conn.execute(sa.text("ALTER TABLE workers RENAME TO workers_away"))
                response = await client.get("/workers")
            finally:
                async with engine.begin() as conn:
                    await conn.execute(sa.text("ALTER TABLE workers_away RENAME TO workers"))
                await engine.dispose()
    assert response.status_code == 500


async def test_a_worker_that_cannot_record_claims_nothing_until_it_can(
    make_settings, web, monkeypatch
):
    """While the completer's write fails (and is tried again), the worker claims no job: it
    could not record it either. Once writes work, the held outcome is recorded (not fetched
    again) and claims resume."""
    async with running_app(make_settings()) as (app, client):
        worker = app.state.runtime.worker
        queue = worker.queue
        real_record, real_claim = queue.record, queue.claim
        writes_work = False
        failed_writes = 0
        claims_while_failing = 0

        async def record(outcomes, now):
            nonlocal failed_writes
            if not writes_work:
                failed_writes += 1
                full = sqlite3.OperationalError("database or disk is full")
                full.sqlite_errorcode = sqlite3.SQLITE_FULL  # what the driver sets: an outage
                raise sa.exc.OperationalError("INSERT INTO attempts", {}, full)
            return await real_record(outcomes, now)

        async def claim(*args, **kwargs):
            nonlocal claims_while_failing
            claims_while_failing += worker.completer.failing
            return await real_claim(*args, **kwargs)

        monkeypatch.setattr(queue, "record", record)
        monkeypatch.setattr(queue, "claim", claim)

        first = (await client.post("/jobs", json={"url": web.url("/first")})).json()
        await eventually(lambda: _true(worker.completer.failing))
        second = (await client.post("/jobs", json={"url": web.url("/second")})).json()
        # Three failed writes: a second and a half of retries, seven polls of the loop.
        await eventually(lambda: _true(failed_writes >= 3))
        assert claims_while_failing == 0
        assert (await client.get(f"/jobs/{second['id']}")).json()["status"] == "pending"

        writes_work = True
        await wait_for_status(client, first["id"], "succeeded")
        await wait_for_status(client, second["id"], "succeeded")
        assert len(web.hits["/first"]) == 1, "the held outcome was recorded, not fetched again"
        attempts = (await client.get(f"/jobs/{first['id']}/attempts")).json()
        assert len(attempts["items"]) == 1


async def _true(value: bool) -> bool:
    return value


async def test_an_outage_of_seconds_logs_a_bounded_number_of_lines(
    make_settings, database_url, tmp_path, web, caplog
):
    """Five seconds without the database, a job in flight, the API asked twice a second: the
    API logs one line per request, the worker (loop, completer, heartbeat) one per retry,
    tracebacks once per distinct error; the job is recorded once the database is back."""
    web.script("/slow", Reply(delay=1.0))
    async with outage(database_url, tmp_path) as (url, switch):
        async with running_app(make_settings(database_url=url)) as (_, client):
            job = (await client.post("/jobs", json={"url": web.url("/slow")})).json()
            await wait_for_status(client, job["id"], "running")
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="ingest"):
                await switch.begin()
                requests = 0
                ends = time.monotonic() + OUTAGE_SECONDS
                while time.monotonic() < ends:
                    assert_unavailable(await client.post("/jobs", json={"url": URL}))
                    requests += 1
                    await asyncio.sleep(0.5)  # the outage's length: what is measured
                await switch.end()
                await wait_for_status(client, job["id"], "succeeded", timeout=20)
            lines = [r for r in caplog.records if r.name.startswith("ingest")]
            api = [r for r in lines if r.name == "ingest.api"]
            worker = [r for r in lines if r.name != "ingest.api"]
            shown = "\n".join(f"{r.name} {r.getMessage()}" for r in lines)
            assert len(api) == requests, shown
            assert len(worker) <= 30, shown
            assert len([r for r in lines if r.exc_info]) <= 6, shown
