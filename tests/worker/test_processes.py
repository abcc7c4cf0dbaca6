"""Several worker processes on one database, and a worker killed mid-fetch."""

import signal

from tests.conftest import eventually, running_app, wait_for_status
from tests.support.processes import READY, worker_process
from tests.support.webserver import Reply


async def test_two_worker_processes_never_run_a_job_twice(
    database_url, make_settings, web, tmp_path
):
    """Two worker processes, both up, drain 200 jobs; every URL is fetched exactly once."""
    # No per-domain limit: with one (every job is on one host) a process that frees its
    # slots takes them again at once, and the other may find the domain always full.
    timing = {"poll_interval_seconds": 0.1, "worker_concurrency": 8, "domain_max_in_flight": 1000}
    for i in range(200):  # long enough that neither process can drain them all alone
        web.script(f"/job/{i}", Reply(delay=0.05))
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        with (
            worker_process(tmp_path / "a.log", database_url, **timing) as a,
            worker_process(tmp_path / "b.log", database_url, **timing) as b,
        ):
            await a.wait_for_line(READY)
            await b.wait_for_line(READY)
            body = {"jobs": [{"url": web.url(f"/job/{i}")} for i in range(200)]}
            assert 201 == (await client.post("/jobs/batch", json=body)).status_code

            async def drained() -> bool:
                return (await client.get("/stats")).json()["counts"]["succeeded"] == 200

            await eventually(drained, timeout=60, interval=0.2)
        workers = set()
        page = (await client.get("/jobs", params={"limit": 500})).json()["items"]
        for job in page:
            attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
            workers.add(attempts[0]["worker_id"])
    assert [1] * 200 == [web.count(f"/job/{i}") for i in range(200)]
    assert all(job["attempts"] == 1 for job in page)
    assert 2 == len(workers), "both processes took work"


async def test_killed_workers_job_runs_again_after_its_lease(
    database_url, make_settings, web, tmp_path
):
    """A worker killed mid-fetch loses its lease; the job runs again and the lost try counts."""
    url = web.script("/hang", Reply(delay=30), Reply(200))
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        job = (await client.post("/jobs", json={"url": url})).json()
        settings = {"lease_seconds": 1, "poll_interval_seconds": 0.1}
        with worker_process(tmp_path / "w.log", database_url, **settings) as process:
            await process.wait_for_line(READY)
            await eventually(lambda: _hit(web, "/hang"), timeout=30)
            process.signal(signal.SIGKILL)
            process.process.wait()
        running = (await client.get(f"/jobs/{job['id']}")).json()
        assert "running" == running["status"]
    async with running_app(make_settings(lease_seconds=1)) as (_, client):
        done = await wait_for_status(client, job["id"], "succeeded", timeout=30)
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
    assert ["interrupted", "succeeded"] == [a["outcome"] for a in attempts]
    assert 2 == done["attempts"]
    assert 2 == web.count("/hang")


async def _hit(web, path: str) -> bool:
    return web.count(path) >= 1
