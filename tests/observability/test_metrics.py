"""GET /metrics after known work through the real worker, parsed with prometheus-client."""

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import IO

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from app.api.app import create_app
from app.api.routes import metrics as metrics_route
from app.store.tables import domains
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.webserver import Reply

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(autouse=True)
def patient_scrapes(monkeypatch):
    """A scrape waits for the database as long as a busy machine needs: these tests check
    the gauges' values, and a scrape past the shipped 2 s serves none (it did once in CI,
    PostgreSQL beside the rest of the suite)."""
    monkeypatch.setattr(metrics_route, "SCRAPE_DB_TIMEOUT_SECONDS", 60.0)


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert 200 == response.status_code, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def attempts(outcome: str, error_type: str = "") -> tuple[str, tuple]:
    return ("ingest_attempts_total", (("error_type", error_type), ("outcome", outcome)))


def finished(status: str, dead_reason: str = "") -> tuple[str, tuple]:
    return ("ingest_jobs_finished_total", (("dead_reason", dead_reason), ("status", status)))


def jobs(status: str) -> tuple[str, tuple]:
    return ("ingest_jobs", (("status", status),))


async def test_a_success_and_a_404_are_counted(make_settings, web):
    """One success and one 404 through the real worker show up in every family."""
    ok, gone = web.script("/ok", Reply(200)), web.script("/gone", Reply(404))
    async with running_app(make_settings()) as (_, client):
        first = (await client.post("/jobs", json={"url": ok})).json()
        second = (await client.post("/jobs", json={"url": gone})).json()
        await wait_for_status(client, first["id"], "succeeded")
        await wait_for_status(client, second["id"], "dead")

        async def both_finished() -> Samples | None:
            samples = await scrape(client)
            done = samples.get(finished("succeeded"), 0) + samples.get(finished("dead", "fatal"), 0)
            return samples if done == 2 else None

        samples = await eventually(both_finished)
    assert 2 == samples[("ingest_jobs_submitted_total", ())]
    assert 1 == samples[attempts("succeeded")]
    assert 1 == samples[attempts("fatal", "HTTPStatus")]
    assert 1 == samples[finished("succeeded")]
    assert 1 == samples[finished("dead", "fatal")]
    assert 1 == samples[("ingest_fetch_duration_seconds_count", (("outcome", "succeeded"),))]
    assert 1 == samples[("ingest_fetch_duration_seconds_count", (("outcome", "fatal"),))]
    assert 2 == samples[("ingest_queue_lag_seconds_count", ())]
    assert samples[("ingest_queue_lag_seconds_sum", ())] < 5
    assert 0 == samples[("ingest_domain_pauses_total", ())]
    assert (1, 1, 0, 0, 0) == tuple(
        samples[jobs(s)] for s in ("succeeded", "dead", "pending", "running", "cancelled")
    )
    assert 0 == samples[("ingest_oldest_due_job_age_seconds", ())]
    assert 0 == samples[("ingest_paused_domains", ())]
    assert 1 == samples[("ingest_database_up", ())]


async def test_each_app_counts_from_zero(make_settings, web):
    """A second app in the same process does not inherit the first one's counts."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        await client.post("/jobs", json={"url": web.url("/a")})
        assert 1 == (await scrape(client))[("ingest_jobs_submitted_total", ())]
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        samples = await scrape(client)
    assert 0 == samples[("ingest_jobs_submitted_total", ())]
    assert 1 == samples[jobs("pending")]


async def test_queue_gauges_read_the_database_at_scrape_time(make_settings, web):
    """Oldest due job's age by the app's clock; jobs not yet due and paused domains apart."""
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    app = create_app(make_settings(worker_enabled=False), clock=lambda: now[0])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            await client.post("/jobs", json={"url": web.url("/due")})
            later = (now[0] + timedelta(hours=1)).isoformat()
            await client.post("/jobs", json={"url": web.url("/later"), "not_before": later})
            now[0] += timedelta(seconds=42)
            pause = sa.update(domains).values(paused_until=now[0] + timedelta(minutes=5))
            await app.state.runtime.database.transact(lambda conn: conn.execute(pause))
            samples = await scrape(client)
    assert 42 == samples[("ingest_oldest_due_job_age_seconds", ())]
    assert 2 == samples[jobs("pending")]
    assert 1 == samples[("ingest_paused_domains", ())]


async def test_an_unreadable_database_still_serves_the_counters(make_settings, monkeypatch):
    """If the queue cannot be read, the scrape still answers, with ingest_database_up 0."""
    async with running_app(make_settings(worker_enabled=False)) as (app, client):

        async def broken(*_: object) -> None:
            raise OSError("connection refused")

        monkeypatch.setattr(app.state.runtime.jobs, "stats", broken)
        samples = await scrape(client)
    assert 0 == samples[("ingest_database_up", ())]
    assert 0 == samples[("ingest_jobs_submitted_total", ())]
    assert not any(name == "ingest_jobs" for name, _ in samples)


async def test_with_api_keys_metrics_need_an_admin_key(make_settings):
    """With INGEST_API_KEYS set, a tenant's key gets 403 and an admin key the scrape."""
    tenant_key, admin_key = "t" * 20, "a" * 20
    settings = make_settings(worker_enabled=False, api_keys={tenant_key: "shop", admin_key: "*"})
    async with running_app(settings) as (_, client):
        anonymous = await client.get("/metrics")
        tenant = await client.get("/metrics", headers={"Authorization": f"Bearer {tenant_key}"})
        admin = await client.get("/metrics", headers={"Authorization": f"Bearer {admin_key}"})
    assert (401, 403, 200) == (anonymous.status_code, tenant.status_code, admin.status_code)


PROCESS_FAMILIES = {
    "process_virtual_memory_bytes",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "python_gc_objects_collected_total",
    "python_gc_objects_uncollectable_total",
    "python_gc_collections_total",
}
"""prometheus-client's process (Linux /proc) and garbage-collector collectors."""

WORKER_FAMILIES = PROCESS_FAMILIES | {
    "ingest_jobs_submitted_total",
    "ingest_attempts_total",
    "ingest_jobs_finished_total",
    "ingest_domain_pauses_total",
    "ingest_fetch_duration_seconds",
    "ingest_queue_lag_seconds",
    "ingest_webhook_deliveries_total",
    "ingest_webhook_duration_seconds",
    "ingest_worker_up",
    "ingest_worker_last_tick_timestamp_seconds",
}
"""What `ingest worker`'s metrics port serves: README's Metrics table lists the same."""

APP_FAMILIES = WORKER_FAMILIES | {
    "ingest_http_requests_total",
    "ingest_http_request_duration_seconds",
    "ingest_database_up",
    "ingest_jobs",
    "ingest_oldest_due_job_age_seconds",
    "ingest_paused_domains",
}
"""What `GET /metrics` of the app serves: the worker's, the API's requests, the queue."""


def families(text: str) -> set[str]:
    """The metric families of a scrape, named as its `# TYPE` lines name them."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def sample_names(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


async def test_the_app_serves_exactly_the_listed_families(make_settings):
    """GET /metrics of an app with its worker: the listed families, none else, and no
    `_created` series; both loops up."""
    async with running_app(make_settings()) as (_, client):

        async def ticked() -> str | None:
            text = (await client.get("/metrics")).text
            ticks = "ingest_worker_last_tick_timestamp_seconds{"
            return text if text.count(ticks) == 2 else None

        text = await eventually(ticked)
    samples = parse(text)
    assert APP_FAMILIES == families(text)
    assert not any(name.endswith("_created") for name in sample_names(text))
    assert 1 == samples[("ingest_worker_up", (("loop", "worker"),))]
    assert 1 == samples[("ingest_worker_up", (("loop", "webhooks"),))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def worker_process(
    database_url: str,
    port: int,
    stderr: IO[bytes] | None = None,
    level: str = "WARNING",
    **settings: object,
) -> Iterator[subprocess.Popen]:
    """`ingest worker` in its own process, serving its metrics on `port`; `settings` are
    more INGEST_* variables (`metrics_host="127.0.0.3"`)."""
    env = {
        **os.environ,
        "INGEST_DATABASE_URL": database_url,
        "INGEST_METRICS_PORT": str(port),
        "INGEST_ALLOW_PRIVATE_NETWORKS": "true",
        "INGEST_POLL_INTERVAL_SECONDS": "0.1",
        "INGEST_LOG_LEVEL": level,
    } | {f"INGEST_{name.upper()}": str(value) for name, value in settings.items()}
    process = subprocess.Popen([sys.executable, "-m", "app", "worker"], env=env, stderr=stderr)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


async def test_a_worker_port_serves_metrics_and_its_health_only(database_url, tmp_path):
    """`ingest worker`'s metrics port: the listed families without `_created` series,
    /healthz 200 while its worker runs, 404 anywhere else; the log names the port."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        (tmp_path / "stderr").open("wb") as stderr,
        worker_process(database_url, port, stderr, level="INFO") as process,
    ):
        async with httpx.AsyncClient(base_url=base) as scraper:

            async def healthy() -> httpx.Response | None:
                try:
                    response = await scraper.get("/healthz")
                except httpx.TransportError:
                    return None
                return response if response.status_code == 200 else None

            health = await eventually(healthy, timeout=20)
            text = (await scraper.get("/metrics")).text
            elsewhere = [(await scraper.get(path)).status_code for path in ("/", "/jobs")]
    log = (tmp_path / "stderr").read_text()
    assert 0 == process.returncode
    assert {"status": "ok"} == health.json()
    assert WORKER_FAMILIES == families(text)
    assert not any(name.endswith("_created") for name in sample_names(text))
    assert [404, 404] == elsewhere
    assert f"worker metrics on http://127.0.0.1:{port}: /metrics, and /healthz" in log


async def test_a_worker_process_serves_its_own_metrics(database_url, make_settings, web):
    """`ingest worker` with INGEST_METRICS_PORT serves the attempts it made itself."""
    port = free_port()
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        job = (await client.post("/jobs", json={"url": web.url("/p")})).json()
        with worker_process(database_url, port) as process:
            await wait_for_status(client, job["id"], "succeeded", timeout=20)
            async with httpx.AsyncClient() as scraper:

                async def counted() -> Samples | None:
                    try:
                        response = await scraper.get(f"http://127.0.0.1:{port}/metrics")
                    except httpx.TransportError:
                        return None
                    samples = parse(response.text)
                    return samples if samples.get(attempts("succeeded")) == 1 else None

                samples = await eventually(counted)
    assert 0 == process.returncode
    assert 1 == samples[finished("succeeded")]
    # The queue's gauges come from GET /metrics of the API, not from every worker.
    assert jobs("succeeded") not in samples
