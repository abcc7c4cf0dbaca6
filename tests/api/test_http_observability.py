"""The API's requests as operators see them: counted and timed by route template, and
logged one line each when INGEST_ACCESS_LOG is on."""

import json
import logging
import uuid

from app.observability.events import JsonFormatter
from tests.conftest import running_app
from tests.observability.test_metrics import parse


async def test_requests_are_labelled_by_route_template(make_settings):
    """Two job ids are one route, `/jobs/{job_id}`; no label holds a raw path; a path no
    route takes and a body refused before routing are `unmatched`."""
    ids = [str(uuid.uuid4()) for _ in range(2)]
    settings = make_settings(worker_enabled=False, max_request_bytes=1024)
    async with running_app(settings) as (_, client):
        for job_id in ids:
            assert 404 == (await client.get(f"/jobs/{job_id}")).status_code
        assert 200 == (await client.get("/jobs")).status_code
        assert 404 == (await client.get(f"/no/such/{ids[0]}")).status_code
        assert 413 == (await client.post("/jobs", content=b"x" * 2048)).status_code
        samples = parse((await client.get("/metrics")).text)
    requests = {
        labels: value
        for (name, labels), value in samples.items()
        if name == "ingest_http_requests_total"
    }
    assert {
        (("method", "GET"), ("route", "/jobs/{job_id}"), ("status", "404")): 2,
        (("method", "GET"), ("route", "/jobs"), ("status", "200")): 1,
        (("method", "GET"), ("route", "unmatched"), ("status", "404")): 1,
        (("method", "POST"), ("route", "unmatched"), ("status", "413")): 1,
    } == requests
    timed = (
        "ingest_http_request_duration_seconds_count",
        (("method", "GET"), ("route", "/jobs/{job_id}")),
    )
    assert 2 == samples[timed]
    assert not any(job_id in str(labels) for _, labels in samples for job_id in ids)


async def test_access_log_is_off_by_default(make_settings, caplog):
    """Without INGEST_ACCESS_LOG, requests write no line."""
    caplog.set_level(logging.INFO)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        await client.get("/jobs")
    assert [] == [r for r in caplog.records if r.name == "ingest.access"]


async def test_access_log_writes_one_line_per_request(make_settings, caplog):
    """With INGEST_ACCESS_LOG=true each request is one line: method, target as sent, status,
    duration; in JSON, the same as fields with the route template."""
    caplog.set_level(logging.INFO)
    job_id = str(uuid.uuid4())
    async with running_app(make_settings(worker_enabled=False, access_log=True)) as (_, client):
        await client.get(f"/jobs/{job_id}", params={"view": "a b"})
        await client.get("/healthz")
    first, second = (r for r in caplog.records if r.name == "ingest.access")
    line = json.loads(JsonFormatter().format(first))
    assert first.getMessage().startswith(f"GET /jobs/{job_id}?view=a+b 404 ")
    assert first.getMessage().endswith("ms")
    assert {
        "event": "http.request",
        "method": "GET",
        "target": f"/jobs/{job_id}?view=a+b",
        "route": "/jobs/{job_id}",
        "status": 404,
        "client": "127.0.0.1",
    } == {key: line[key] for key in ("event", "method", "target", "route", "status", "client")}
    assert line["duration_ms"] >= 0
    assert second.getMessage().startswith("GET /healthz 200 ")
