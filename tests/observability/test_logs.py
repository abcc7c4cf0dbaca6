"""INGEST_LOG_FORMAT=json end to end: the real worker's transitions as JSON events."""

import io
import json
import logging
from collections.abc import Iterator

import pytest

from app.observability.events import JsonFormatter
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.webserver import Reply


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The `ingest` loggers' records, formatted as INGEST_LOG_FORMAT=json formats them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("ingest")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def events_of(stream: io.StringIO, job_id: str) -> list[dict]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line.get("job_id") == job_id]


async def test_retry_then_death_as_json_events(make_settings, web, json_log):
    """503 then 503 with max_attempts 2: a rescheduled event, then one dead event."""
    url = web.script("/down", Reply(503))
    async with running_app(make_settings(max_attempts=2)) as (_, client):
        job = (await client.post("/jobs", json={"url": url, "tenant": "shop"})).json()
        await wait_for_status(client, job["id"], "dead")
        retry, dead = await eventually(lambda: _two(json_log, job["id"]))
    common = {
        "event": "job.failed",
        "logger": "ingest.worker",
        "level": "INFO",
        "job_id": job["id"],
        "tenant": "shop",
        "domain": job["domain"],
        "max_attempts": 2,
        "outcome": "transient",
        "error_kind": "transient",
        "error_type": "HTTPStatus",
        "http_status": 503,
        "deferrals": 0,
    }
    assert common == {k: retry[k] for k in common}
    assert common == {k: dead[k] for k in common}
    assert (1, "pending", None) == (retry["attempt"], retry["status"], retry["dead_reason"])
    assert retry["next_retry_at"].endswith("Z")
    assert retry["message"].startswith(f"job {job['id']} attempt 1/2 failed: HTTP 503 (transient);")
    assert (2, "dead", "retries_exhausted", None) == (
        dead["attempt"],
        dead["status"],
        dead["dead_reason"],
        dead["next_retry_at"],
    )
    assert isinstance(dead["duration_ms"], int)


async def _two(stream: io.StringIO, job_id: str) -> list[dict] | None:
    found = events_of(stream, job_id)
    return found if len(found) == 2 else None


async def test_success_as_a_json_event(make_settings, web, json_log):
    """A success is one job.succeeded event with its HTTP status and no error fields."""
    async with running_app(make_settings()) as (_, client):
        job = (await client.post("/jobs", json={"url": web.url("/fine")})).json()
        await wait_for_status(client, job["id"], "succeeded")
        [event] = await eventually(lambda: _one(json_log, job["id"]))
    expected = {
        "event": "job.succeeded",
        "tenant": "default",
        "attempt": 1,
        "max_attempts": 4,
        "status": "succeeded",
        "outcome": "succeeded",
        "error_kind": None,
        "error_type": None,
        "http_status": 200,
        "next_retry_at": None,
        "dead_reason": None,
    }
    assert expected == {k: event[k] for k in expected}


async def _one(stream: io.StringIO, job_id: str) -> list[dict] | None:
    found = events_of(stream, job_id)
    return found or None
