"""`ingest serve` under load: the API and its embedded worker in one process, as deployed.

- pickup (`embedded_pickup`): an idle `ingest serve`; jobs POSTed to its own `/jobs` one at
  a time at `--latency-rate` per second (httpx, one keep-alive connection), so each submit
  wakes the worker in the same process; pickup = attempts.started_at - jobs.created_at.
- submit while draining (`submit_while_draining`): `ingest serve` starts on a database
  holding `--submit-backlog` pending jobs, and while its worker drains them the benchmark
  POSTs single jobs at `--submit-rate` per second for `--submit-seconds`: the latency of
  each POST /jobs as the client sees it (connection kept alive, so no connect counted).
  The same with serve's worker in a child process (INGEST_WORKER_PROCESS), and with the API
  and the worker apart: `ingest serve` with INGEST_WORKER_ENABLED=false, and one
  `ingest worker` process draining.
"""

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import sqlalchemy as sa

from app.store.database import Database
from app.store.tables import attempts
from bench.harness import RESULTS, Target, fresh_database
from bench.numbers import percentile
from bench.workers import (
    INGEST,
    Probe,
    Workers,
    cores_busy,
    cpu_between,
    ingest_env,
    new_jobs,
    other_cores,
    show_log,
    submit,
    wait_until_done,
)

DATABASE = "ingest_bench"
READY_SECONDS = 60.0
LOG = RESULTS / "serve.log"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Serve:
    """A running `ingest serve` and a keep-alive client of its API."""

    process: subprocess.Popen[bytes]
    client: httpx.AsyncClient

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"ingest serve exited with {self.process.returncode}")

    async def post_job(self, url: str, tenant: str) -> float:
        """POST one job; the round trip in ms."""
        started = time.perf_counter()
        response = await self.client.post("/jobs", json={"url": url, "tenant": tenant})
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 201:
            raise RuntimeError(f"POST /jobs: {response.status_code} {response.text[:200]}")
        return elapsed

    async def post_at(self, target: Target, rate: float, count: int, first: int) -> list[float]:
        """POST `count` jobs one at a time, the i-th at start + i / rate (or at once when
        behind); the latency of each in ms."""
        latencies = []
        started = time.monotonic()
        for i, job in enumerate(new_jobs(target, count, first=first)):
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
            latencies.append(await self.post_job(job.url, job.tenant))
        return latencies


WORKER_SETTINGS = {
    "thread": {"INGEST_WORKER_ENABLED": "true", "INGEST_WORKER_PROCESS": "false"},
    "process": {"INGEST_WORKER_ENABLED": "true", "INGEST_WORKER_PROCESS": "true"},
    "none": {"INGEST_WORKER_ENABLED": "false"},
}
"""How `ingest serve` runs its worker: in a thread of its own process, in a child process
(INGEST_WORKER_PROCESS), or not at all."""


def start_serve(
    database_url: str, args: Any, worker: str = "thread"
) -> tuple[subprocess.Popen[bytes], int]:
    """`ingest serve` (its worker as `worker` says, with the benchmark's worker settings) on
    a free port, logging to bench/results/serve.log."""
    port = free_port()
    env = ingest_env(database_url, 1, args) | WORKER_SETTINGS[worker]
    RESULTS.mkdir(exist_ok=True)
    with LOG.open("w") as file:
        command = [str(INGEST), "serve", "--host", "127.0.0.1", "--port", str(port)]
        return subprocess.Popen(command, env=env, stderr=file, stdout=file), port


@contextlib.asynccontextmanager
async def serving(database_url: str, args: Any, worker: str = "thread") -> AsyncIterator[Serve]:
    """`start_serve`, answering /readyz on entry; stopped (SIGTERM, as an operator would)
    on exit."""
    process, port = start_serve(database_url, args, worker)
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30
        ) as client:
            serve = Serve(process, client)
            deadline = time.monotonic() + READY_SECONDS
            while True:
                serve.check_alive()
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ingest serve not ready after {READY_SECONDS:g}s")
                await asyncio.sleep(0.05)
            yield serve
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, 30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        show_log(LOG)


async def embedded_pickup(backend: str, target: Target, args: Any, worker: str) -> dict:
    """Pickup of jobs POSTed to serve, by its worker in a `thread` or a child `process`."""
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    total = round(args.latency_rate * args.latency_seconds)
    async with serving(url, args, worker) as serve:
        # One job first: the worker and both HTTP connections are warm when the clock starts.
        await serve.post_job(target.url(0), "warmup")
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, serve.check_alive)
        await asyncio.sleep(0.5)
        # A sample counts a process with its descendants (serve's worker process and the
        # extraction processes): serve's own pid covers them all.
        served = [serve.process.pid]
        watched = [*served, target.pid]
        first = probe.sample(watched)
        posts = await serve.post_at(target, args.latency_rate, total, first=1)
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, serve.check_alive)
        last = probe.sample(watched)
    ours = cpu_between(first, last) + last.server - first.server
    pickups = await probe.pickups()
    done = await probe.completions()
    await probe.database.dispose()
    return {
        "p50_ms": percentile(pickups, 0.5),
        "p99_ms": percentile(pickups, 0.99),
        "done_p50_ms": percentile(done, 0.5),
        "done_p99_ms": percentile(done, 0.99),
        # API and worker (threads or child processes), not the database server nor the target.
        "serve_cpu_ms_per_job": cpu_between(first, last, served) * 1000 / total,
        "post_p50_ms": percentile(posts, 0.5),
        "post_p99_ms": percentile(posts, 0.99),
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(first, last, ours),
    }


async def wait_for_first_claim(probe: Probe, check_alive: Callable[[], None]) -> None:
    """Until a worker process has claimed a job (it imports and connects first)."""
    deadline = time.monotonic() + READY_SECONDS
    claimed = sa.select(sa.exists().select_from(attempts))
    while True:
        async with probe.database.read() as conn:
            if (await conn.execute(claimed)).scalar_one():
                return
        check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"no claim after {READY_SECONDS:g}s")
        await asyncio.sleep(0.05)


SUBMIT_ARRANGEMENTS = {"submit": "thread", "submit-process": "process", "submit-split": "apart"}
"""The submit scenario's runs (their kinds in the results) and how the worker runs in each."""

PICKUP_ARRANGEMENTS = {"serve": "thread", "serve-process": "process"}
"""The serve scenario's runs, likewise."""


async def submit_while_draining(backend: str, target: Target, args: Any, worker: str) -> dict:
    """POSTs while the backlog drains; `worker`: serve's own in a `thread` or a child
    `process`, or `apart` (one `ingest worker`, serve running none)."""
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(target, args.submit_backlog, tenant="backlog"))
    total = round(args.submit_rate * args.submit_seconds)
    async with serving(url, args, worker="none" if worker == "apart" else worker) as serve:
        workers = Workers(url, 1, args) if worker == "apart" else None
        try:
            if workers is not None:
                await wait_for_first_claim(probe, workers.check_alive)
            elif worker == "process":
                await wait_for_first_claim(probe, serve.check_alive)
            pids = [serve.process.pid]  # with its descendants, as a sample counts it
            watched = [*pids, target.pid, *(workers.pids if workers else [])]
            first = probe.sample(watched)
            before, _ = await probe.unfinished()
            posts = await serve.post_at(target, args.submit_rate, total, first=args.submit_backlog)
            after, failed = await probe.unfinished()
            last = probe.sample(watched)
        finally:
            if workers is not None:
                workers.stop()
    await probe.database.dispose()
    if failed:
        raise RuntimeError(f"{failed} jobs dead or cancelled")
    if after < args.submit_rate:
        # Fewer left than a second of POSTs: the worker ran out of work before the POSTs
        # ended, so some answered beside an idle worker.
        raise RuntimeError(f"the backlog ran out ({after} left): raise --submit-backlog")
    ours = cpu_between(first, last) + last.server - first.server
    return {
        "post_p50_ms": percentile(posts, 0.5),
        "post_p99_ms": percentile(posts, 0.99),
        "post_max_ms": max(posts),
        "post_mean_ms": sum(posts) / len(posts),
        "posts_per_s": len(posts) / (last.at - first.at),
        "drain_jobs_per_s": (before + len(posts) - after) / (last.at - first.at),
        "backlog_left": after,
        "serve_cpu_cores": cpu_between(first, last, pids) / (last.at - first.at),
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(first, last, ours),
    }
