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

import app
from app.settings import Settings
from app.worker.process import Handoff
from tests.conftest import eventually, submit, wait_for_status
from tests.observability.test_metrics import free_port
from tests.support.processes import INGEST, INSTALLED, READY, ServiceProcess, service

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
    database_url: str, log: Path, cwd: Path | None = None, **settings: object
) -> AsyncIterator[tuple[ServiceProcess, httpx.AsyncClient]]:
    """`ingest serve` with a worker process, once that worker runs, and a client of its API;
    started in `cwd` as installed (`ingest`), else as the tests start it."""
    with service(
        "serve",
        log,
        database_url,
        "--port",
        "0",
        cwd=cwd,
        program=INGEST if cwd is None else INSTALLED,
        worker_process="true",
        poll_interval_seconds=POLL_SECONDS,
        **settings,
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


PLANTED = {
    "__init__.py": "__path__.append({real!r})\n"
    "exec(pathlib.Path({real!r}, '__init__.py').read_text())\n",
    "__main__.py": "from app.cli import main\nmain()\n",
}
"""A planted `app` that runs its own line, then carries on as ingest's (its modules found
in ingest's directory), so nothing fails to show it ran."""


async def test_an_app_package_planted_in_serves_directory_never_runs(
    sqlite_template, web, tmp_path
):
    """serve started (as installed) in a directory that holds an `app` package of someone
    else's, one that would pass for ingest's: its worker process fetches, and the planted
    code never runs."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    ran = tmp_path / "planted code ran"
    planted = tmp_path / "cwd" / "app"
    planted.mkdir(parents=True)
    for name, rest in PLANTED.items():
        touch = f"import pathlib\npathlib.Path({str(ran)!r}).touch()\n"
        (planted / name).write_text(touch + rest.format(real=str(Path(app.__file__).parent)))
    database_url = f"sqlite:///{tmp_path / 'ingest.db'}"
    async with serving(database_url, tmp_path / "serve.log", cwd=planted.parent) as (_, client):
        job = await submit(client, web.url("/page"))
        done = await wait_for_status(client, job["id"], "succeeded", timeout=WOKEN_SECONDS)
    assert ("succeeded", False) == (done["status"], ran.exists())


TENANT_KEY, ADMIN_KEY = "t" * 20, "a" * 20
API_KEYS = f"{TENANT_KEY}:shop,{ADMIN_KEY}:*"


def test_the_worker_process_is_sent_no_api_key():
    """What serve sends its worker process: no API key, none of the API's settings, and
    its metrics port knows the admin key (by its digest), not the tenant's."""
    settings = Settings(_env_file=None, api_keys=API_KEYS, host="0.0.0.0", port=9, max_attempts=7)
    line = Handoff.of(settings).line()
    received = Handoff.from_line(line.decode())
    defaults = Settings(_env_file=None)
    assert (False, False) == (TENANT_KEY.encode() in line, ADMIN_KEY.encode() in line)
    assert ({}, defaults.host, defaults.port, 7) == (
        received.settings.api_keys,
        received.settings.host,
        received.settings.port,
        received.settings.max_attempts,
    )
    assert ("*", None) == (
        received.metrics_keys.tenant_of(ADMIN_KEY),
        received.metrics_keys.tenant_of(TENANT_KEY),
    )


async def test_the_worker_process_holds_no_api_key_and_its_metrics_want_one(
    sqlite_template, tmp_path
):
    """serve with API keys: its worker process's environment carries none, and its metrics
    port, on INGEST_METRICS_HOST, answers 401 to no key or a tenant's and 200 to the admin's,
    as serve's /metrics does."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    port = free_port()
    metrics = f"http://127.0.0.3:{port}/metrics"
    async with serving(
        f"sqlite:///{tmp_path / 'ingest.db'}",
        tmp_path / "serve.log",
        api_keys=API_KEYS,
        metrics_port=port,
        metrics_host="127.0.0.3",
    ) as (process, _):
        [child] = worker_pids(process)
        environment = environment_of(child)
        async with httpx.AsyncClient(trust_env=False) as scraper:
            statuses = [
                (await scraper.get(metrics, headers=headers)).status_code
                for headers in ({}, bearer(TENANT_KEY), bearer(ADMIN_KEY))
            ]
    assert [] == [
        secret
        for secret in (b"INGEST_API_KEYS", TENANT_KEY.encode(), ADMIN_KEY.encode())
        if secret in environment
    ]
    assert [401, 401, 200] == statuses


def environment_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
