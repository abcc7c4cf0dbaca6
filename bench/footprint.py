"""What a worker process costs to hold and to start, with a large queue waiting.

- RSS (`worker_rss`): one `ingest worker` on a database with `--big-pending` pending jobs
  (the `BigQueue`), draining them against the target for `--rss-seconds` after its first
  claim; then VmRSS (now) and VmHWM (the peak) from /proc/<pid>/status.
- start-up (`help_wall`, `worker_startup`): the wall time of `ingest --help`, and of
  `ingest worker` from just before its exec to its first claim (the earliest
  attempts.started_at of that process, which is when the claiming tick began), on the
  same large queue.

The large queue is built once per backend and per run, and kept across rounds: each round
drains a few thousand of its jobs, which leaves it about as large.
"""

import asyncio
import resource
import statistics
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from app.store.database import Database
from app.store.tables import attempts
from bench.harness import Target, drop_database, fresh_database, machine_ticks
from bench.workers import (
    INGEST,
    Probe,
    Sample,
    Workers,
    cores_busy,
    cpu_between,
    new_jobs,
    other_cores,
    submit,
)

DATABASE = "ingest_bench_big"


class BigQueue:
    """Per backend, a database with `pending` pending jobs on the target, made on first use."""

    def __init__(self, target: Target, pending: int) -> None:
        self.target = target
        self.pending = pending
        self.urls: dict[str, str] = {}

    async def url(self, backend: str) -> str:
        if backend not in self.urls:
            url = await fresh_database(backend, DATABASE)
            database = Database(url)
            try:
                await submit(Probe(database).store, new_jobs(self.target, self.pending))
                # What autovacuum would do after such a load (it is off on this machine).
                await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
            finally:
                await database.dispose()
            self.urls[backend] = url
        return self.urls[backend]

    async def drop(self) -> None:
        for backend in self.urls:
            await drop_database(backend, DATABASE)


async def first_claim(database: Database, pid: int) -> datetime | None:
    """When the worker process `pid` first claimed (None: not yet). Worker ids are
    "<host>:<pid>:<random>"."""
    query = sa.select(sa.func.min(attempts.c.started_at)).where(
        attempts.c.worker_id.like(f"%:{pid}:%")
    )
    async with database.read() as conn:
        found: datetime | None = (await conn.execute(query)).scalar_one()
        return found


async def wait_for_first_claim(database: Database, workers: Workers, timeout: float) -> datetime:
    async with asyncio.timeout(timeout):
        while (claimed := await first_claim(database, workers.pids[0])) is None:
            workers.check_alive()
            await asyncio.sleep(0.1)
    return claimed


def status_kb(pid: int) -> dict[str, int]:
    """The kB fields of /proc/<pid>/status (VmRSS, VmHWM, ...)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith(" kB"):
            fields[name] = int(value.split()[0])
    return fields


async def worker_rss(backend: str, queue: BigQueue, args: Any) -> dict:
    url = await queue.url(backend)
    probe = Probe(Database(url))
    await probe.find_server()
    workers = Workers(url, 1, args)
    pid = workers.pids[0]
    try:
        await wait_for_first_claim(probe.database, workers, args.timeout)
        first = probe.sample([pid, queue.target.pid])
        before, _ = await probe.unfinished()
        deadline = time.monotonic() + args.rss_seconds
        while time.monotonic() < deadline:
            workers.check_alive()
            await asyncio.sleep(0.5)
        memory = status_kb(pid)
        after, _ = await probe.unfinished()
        last = probe.sample([pid, queue.target.pid])
    finally:
        workers.stop()
        await probe.database.dispose()
    ours = cpu_between(first, last) + last.server - first.server
    return {
        "rss_mb": memory["VmRSS"] / 1024,
        "hwm_mb": memory["VmHWM"] / 1024,
        "pending_before": before,
        "jobs_per_s": (before - after) / (last.at - first.at),
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(first, last, ours),
    }


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def help_wall(runs: int) -> dict:
    """`ingest --help`, `runs` times one after the other: the median wall time."""
    first = Sample(time.time(), {}, 0.0, machine_ticks())
    cpu = children_cpu()
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(INGEST), "--help"], check=True, stdout=subprocess.DEVNULL)
        walls.append((time.perf_counter() - started) * 1000)
    last = Sample(time.time(), {}, 0.0, machine_ticks())
    return {
        "help_ms": statistics.median(walls),
        "help_cpu_ms": (children_cpu() - cpu) / runs * 1000,
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(first, last, children_cpu() - cpu),
    }


async def worker_startup(backend: str, queue: BigQueue, args: Any) -> dict:
    """`--startup-runs` starts of `ingest worker`, one after the other: the median time from
    exec to first claim."""
    url = await queue.url(backend)
    probe = Probe(Database(url))
    await probe.find_server()
    first = probe.sample([])
    cpu = children_cpu()
    times = []
    try:
        for _ in range(args.startup_runs):
            workers = Workers(url, 1, args)
            try:
                claimed = await wait_for_first_claim(probe.database, workers, args.timeout)
            finally:
                workers.stop()
            times.append((claimed.timestamp() - workers.started_at) * 1000)
        last = probe.sample([])
    finally:
        await probe.database.dispose()
    ours = cpu_between(first, last) + children_cpu() - cpu + last.server - first.server
    return {
        "first_claim_ms": statistics.median(times),
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(first, last, ours),
    }
