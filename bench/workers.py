"""Worker processes under observation: start `ingest worker`s, sample their CPU, stop them.

A `Probe` is the benchmark's own connection to the database: it polls job counts and, on
PostgreSQL, finds the server processes serving the database so their CPU can be read too.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from app.clock import utc_now
from app.fetch.urls import job_domain
from app.model import JobStatus, NewJob
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import attempts, jobs, status_is
from bench.harness import (
    RESULTS,
    TARGET_ENV,
    TICKS,
    Target,
    cpu_seconds,
    machine_ticks,
    parent_pid,
    tree_cpu_seconds,
)

INGEST = Path(sys.executable).parent / "ingest"


def new_jobs(
    target: Target, count: int, first: int = 0, tenant: str = "bench", hosts: int = 1
) -> list[NewJob]:
    """Jobs fetching the target's pages first .. first+count-1, spread over `hosts` domains."""
    urls = [target.url(i, hosts) for i in range(first, first + count)]
    return [NewJob(url=url, domain=job_domain(url), tenant=tenant, max_attempts=4) for url in urls]


async def submit(store: JobStore, jobs: list[NewJob], batch: int = 1000) -> None:
    for start in range(0, len(jobs), batch):
        await store.submit(jobs[start : start + batch])


def ingest_env(database_url: str, processes: int, args: Any) -> dict:
    """The environment of `ingest worker` and `ingest serve` processes: this one's, without
    its INGEST_* variables, the benchmark's settings, then `--set`'s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    return env | {
        "INGEST_DATABASE_URL": database_url,
        "INGEST_LOG_LEVEL": "WARNING",
        "INGEST_POLL_INTERVAL_SECONDS": str(args.poll_ms / 1000),
        "INGEST_WORKER_CONCURRENCY": str(args.concurrency),
        # Most runs fetch one local target: a per-domain politeness limit would measure
        # that limit, not the queue (a worker's claimed jobs, queued ones included, count).
        "INGEST_DOMAIN_MAX_IN_FLIGHT": "100000",
        # The target is on loopback addresses, which the SSRF guard refuses by default.
        **TARGET_ENV,
        **dict(setting.split("=", 1) for setting in args.set),
    }


class Workers:
    """`count` `ingest worker` processes on `database_url`, logging to bench/results/."""

    def __init__(self, database_url: str, count: int, args: Any):
        env = ingest_env(database_url, count, args)
        RESULTS.mkdir(exist_ok=True)
        self.logs = [RESULTS / f"worker-{i}.log" for i in range(count)]
        self._files = [log.open("w") for log in self.logs]
        self.started_at = time.time()
        self.processes = [
            subprocess.Popen([str(INGEST), "worker"], env=env, stderr=file) for file in self._files
        ]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def check_alive(self) -> None:
        for process, log in zip(self.processes, self.logs, strict=True):
            if process.poll() is not None:
                raise RuntimeError(f"worker {process.pid} exited: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for file in self._files:
            file.close()
        for log in self.logs:
            show_log(log)


NOISE = ("INGEST_WEBHOOK_SECRET is empty", "INGEST_API_KEYS is empty")
"""Start-up warnings every benchmark process logs: not worth showing."""


def show_log(log: Path) -> None:
    """The end of a process's log on stderr, unless it holds nothing but NOISE."""
    lines = [line for line in log.read_text().splitlines() if not any(n in line for n in NOISE)]
    if text := "\n".join(lines).strip():
        print(f"  {log.name}: {text[-1000:]}", file=sys.stderr)


@dataclass(frozen=True)
class Sample:
    """CPU seconds so far of each process of interest, at one wall-clock moment."""

    at: float
    cpu: dict[int, float]
    server: float
    """The whole PostgreSQL server (0 on SQLite): see `Probe.server_cpu`."""
    machine: tuple[int, int]


@dataclass
class Probe:
    """The benchmark's own connection: job counts and the database server's CPU."""

    database: Database
    store: JobStore = field(init=False)
    postmaster: int | None = None

    def __post_init__(self) -> None:
        self.store = JobStore(self.database, utc_now)

    async def unfinished(self) -> tuple[int, int]:
        """(pending + running, dead + cancelled): a cheap poll, each count read from a
        small index (JobStore.stats counts every row, which would cost the machine more)."""
        statuses = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.DEAD, JobStatus.CANCELLED)
        counts = [
            sa.select(sa.func.count()).select_from(jobs).where(status_is(s)).scalar_subquery()
            for s in statuses
        ]
        async with self.database.read() as conn:
            pending, running, dead, cancelled = (await conn.execute(sa.select(*counts))).one()
        return pending + running, dead + cancelled

    async def pickups(self, tenant: str = "bench") -> list[float]:
        """Pickup latency of each of `tenant`'s jobs, in ms: its first attempt's start minus
        its creation."""
        query = (
            sa.select(jobs.c.created_at, attempts.c.started_at)
            .join(attempts, attempts.c.job_id == jobs.c.id)
            .where(jobs.c.tenant == tenant, attempts.c.number == 1)
        )
        async with self.database.read() as conn:
            return [(s - c).total_seconds() * 1000 for c, s in await conn.execute(query)]

    async def completions(self, tenant: str = "bench") -> list[float]:
        """Submit -> done of each of `tenant`'s finished jobs, in ms: its finish minus its
        creation."""
        query = sa.select(jobs.c.created_at, jobs.c.finished_at).where(
            jobs.c.tenant == tenant, jobs.c.finished_at.is_not(None)
        )
        async with self.database.read() as conn:
            return [(f - c).total_seconds() * 1000 for c, f in await conn.execute(query)]

    async def find_server(self) -> None:
        """On PostgreSQL, remember the postmaster: the parent of our own backend."""
        if self.database.backend.name == "postgresql":
            async with self.database.read() as conn:
                backend = (await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one()
            self.postmaster = parent_pid(backend)

    def server_cpu(self) -> float:
        """CPU of the whole PostgreSQL server: the postmaster, its live children, and the
        children that exited (a backend whose connection was closed): their CPU is in the
        postmaster's cutime + cstime. Other databases' backends count too."""
        if self.postmaster is None:
            return 0.0
        base = Path(f"/proc/{self.postmaster}")
        fields = base.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        total = sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
        children = base.joinpath(f"task/{self.postmaster}/children").read_text().split()
        return total + sum(cpu_seconds(int(pid)) for pid in children)

    async def sessions(self) -> int | None:
        """Connections opened to this database so far (PostgreSQL 14+ keeps the count)."""
        if self.postmaster is None:
            return None
        query = sa.text("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        async with self.database.read() as conn:
            return (await conn.execute(query)).scalar_one()

    def sample(self, pids: list[int]) -> Sample:
        # A worker's extraction processes are its children: their CPU is its cost too.
        cpu = {pid: tree_cpu_seconds(pid) for pid in pids}
        cpu[os.getpid()] = cpu_seconds(os.getpid())
        return Sample(time.time(), cpu, self.server_cpu(), machine_ticks())


async def wait_until_done(
    probe: Probe, check_alive: Callable[[], None], each_poll: Callable[[], object] = lambda: None
) -> None:
    """Until no job is pending or running; every ~50 ms, after `check_alive()` (raises if a
    process under test died) and `each_poll()`."""
    while True:
        check_alive()
        each_poll()
        unfinished, failed = await probe.unfinished()
        if failed:
            raise RuntimeError(f"{failed} jobs dead or cancelled")
        if not unfinished:
            return
        await asyncio.sleep(0.05)


def other_cores(first: Sample, last: Sample, ours: float) -> float:
    """Cores busy between two samples with processes other than ours (`ours` CPU seconds)."""
    return cores_busy(first, last) - ours / (last.at - first.at)


def cpu_between(first: Sample, last: Sample, pids: list[int] | None = None) -> float:
    """CPU seconds spent between two samples by `pids` (default: all in `last`)."""
    pids = list(last.cpu) if pids is None else pids
    return sum(last.cpu.get(pid, 0.0) - first.cpu.get(pid, 0.0) for pid in pids)


def cores_busy(first: Sample, last: Sample) -> float:
    busy = last.machine[0] - first.machine[0]
    total = last.machine[1] - first.machine[1]
    return busy / total * (os.cpu_count() or 1) if total else float("nan")
