"""Several worker processes on one database, and a worker killed mid-fetch."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import eventually, running_app, wait_for_status
from tests.webserver import Reply


@contextmanager
def worker_process(database_url: str, **settings: object) -> Iterator[subprocess.Popen]:
    """`ingest worker` in its own process, configured through INGEST_* variables."""
    env = {
        **os.environ,
        "INGEST_DATABASE_URL": database_url,
        "INGEST_LOG_LEVEL": "WARNING",
        "INGEST_ALLOW_PRIVATE_NETWORKS": "true",  # the test servers are on 127.0.0.1
    }
    env |= {f"INGEST_{name.upper()}": str(value) for name, value in settings.items()}
    process = subprocess.Popen([sys.executable, "-m", "app", "worker"], env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def test_two_worker_processes_never_run_a_job_twice(database_url, make_settings, web):
    """Two worker processes drain 200 jobs; every URL is fetched exactly once."""
    timing = {"poll_interval_seconds": 0.1, "worker_concurrency": 8}
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        body = {"jobs": [{"url": web.url(f"/job/{i}")} for i in range(200)]}
        assert 201 == (await client.post("/jobs/batch", json=body)).status_code
        with worker_process(database_url, **timing), worker_process(database_url, **timing):

            async def drained() -> bool:
                return (await client.get("/stats")).json()["counts"]["succeeded"] == 200

            await eventually(drained, timeout=30)
        workers = set()
        page = (await client.get("/jobs", params={"limit": 500})).json()["items"]
        for job in page:
            attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
            workers.add(attempts[0]["worker_id"])
    assert [1] * 200 == [web.count(f"/job/{i}") for i in range(200)]
    assert all(job["attempts"] == 1 for job in page)
    assert 2 == len(workers), "both processes took work"


async def test_killed_workers_job_runs_again_after_its_lease(database_url, make_settings, web):
    """A worker killed mid-fetch loses its lease; the job runs again and the lost try counts."""
    url = web.script("/hang", Reply(delay=10), Reply(200))
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        job = (await client.post("/jobs", json={"url": url})).json()
        with worker_process(database_url, lease_seconds=1, poll_interval_seconds=0.1) as process:
            await eventually(lambda: _hit(web, "/hang"), timeout=10)
            process.send_signal(signal.SIGKILL)
            process.wait()
        running = (await client.get(f"/jobs/{job['id']}")).json()
        assert "running" == running["status"]
    async with running_app(make_settings(lease_seconds=1)) as (_, client):
        done = await wait_for_status(client, job["id"], "succeeded", timeout=10)
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
    assert ["interrupted", "succeeded"] == [a["outcome"] for a in attempts]
    assert 2 == done["attempts"]
    assert 2 == web.count("/hang")


async def _hit(web, path: str) -> bool:
    return web.count(path) >= 1
