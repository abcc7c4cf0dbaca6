"""`ingest serve` with its worker in a process of its own (INGEST_WORKER_PROCESS): the child
fetches, each submit wakes it, a crashed child is replaced, and none outlives serve."""

import os
import re
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.conftest import eventually, submit, wait_for_status
from tests.processes import READY, ServiceProcess, service

POLL_SECONDS = 30
"""The worker's poll interval: a job it fetches sooner than this was woken by its submit."""

WOKEN_SECONDS = 15.0
"""How long a woken worker may take to fetch a job on a loaded machine (half the poll)."""


def worker_pids(process: ServiceProcess) -> list[int]:
    """The worker processes serve has started, oldest first."""
    return [int(pid) for pid in re.findall(r"worker process (\d+) started", process.text())]


def gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@asynccontextmanager
async def serving(
    database_url: str, log: Path
) -> AsyncIterator[tuple[ServiceProcess, httpx.AsyncClient]]:
    """`ingest serve` with a worker process, once that worker runs, and a client of its API."""
    with service(
        "serve",
        log,
        database_url,
        "--port",
        "0",
        worker_process="true",
        poll_interval_seconds=POLL_SECONDS,
    ) as process:
        await process.wait_for_line(READY)
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", process.text())
        assert found, process.text()
        async with httpx.AsyncClient(base_url=found[1], trust_env=False) as client:
            yield process, client


async def test_the_worker_process_fetches_each_job_as_it_is_submitted(database_url, web, tmp_path):
    """The job is fetched by the child, not by serve, long before the worker's poll; serve
    stops on SIGTERM with exit 0, and its worker process with it."""
    url = web.url("/page")
    async with serving(database_url, tmp_path / "serve.log") as (process, client):
        [child] = worker_pids(process)
        job = await submit(client, url)
        await wait_for_status(client, job["id"], "succeeded", timeout=WOKEN_SECONDS)
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
        process.signal(signal.SIGTERM)
        assert 0 == process.process.wait(timeout=30), process.text()[-3000:]
    assert f":{child}:" in attempts[0]["worker_id"]
    assert gone(child)
    assert re.search(r"worker \S+:\d+:\S+ stopped", process.text())


async def test_a_crashed_worker_process_is_replaced(sqlite_template, web, tmp_path):
    """The child killed: serve says so, starts another after half a second, and that one
    fetches what is submitted next (one backend: the process is the difference here)."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    url = web.url("/page")
    log = tmp_path / "serve.log"
    async with serving(f"sqlite:///{tmp_path / 'ingest.db'}", log) as (process, client):
        [first] = worker_pids(process)
        os.kill(first, signal.SIGKILL)
        await process.wait_for_line(
            f"worker process {first} exited with -9; starting another in 0.5s"
        )
        await eventually(lambda: _running_again(process), timeout=60)
        job = await submit(client, url)
        done = await wait_for_status(client, job["id"], "succeeded", timeout=WOKEN_SECONDS)
        [second] = worker_pids(process)[1:]
        attempts = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
    assert "succeeded" == done["status"]
    assert f":{second}:" in attempts[0]["worker_id"]


async def _running_again(process: ServiceProcess) -> bool:
    return process.text().count(READY) == 2


async def test_the_worker_process_stops_when_serve_dies(sqlite_template, tmp_path):
    """serve killed outright: its worker process sees its input end, stops as on SIGTERM
    (in-flight jobs finished or handed back) and exits: no worker outlives its API."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    log = tmp_path / "serve.log"
    async with serving(f"sqlite:///{tmp_path / 'ingest.db'}", log) as (process, _):
        [child] = worker_pids(process)
        process.signal(signal.SIGKILL)
        process.process.wait(timeout=30)
        await eventually(lambda: _gone(child), timeout=30)
    assert re.search(r"worker \S+:\d+:\S+ stopped", process.text())


async def _gone(pid: int) -> bool:
    return gone(pid)


async def test_a_worker_process_stopped_on_purpose_stays_stopped(sqlite_template, tmp_path):
    """SIGTERM sent to the child itself: it stops cleanly (exit 0), and serve says it runs
    no worker now rather than starting another against the operator's wish."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    log = tmp_path / "serve.log"
    async with serving(f"sqlite:///{tmp_path / 'ingest.db'}", log) as (process, client):
        [child] = worker_pids(process)
        os.kill(child, signal.SIGTERM)
        await process.wait_for_line(f"worker process {child} stopped; serve runs no worker now")
        answered = await client.get("/readyz")
    assert 200 == answered.status_code
    assert [child] == worker_pids(process)
