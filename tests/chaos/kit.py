"""What the chaos tests share: the database as the processes left it (the ledger), slow
pages on the scripted server, and `ingest serve` / `ingest worker` started alike.

The tests kill, stop and freeze real processes; what they check is read back from the
database the processes share and from the hits the test server counted, never from the
processes' own word.
"""

import asyncio
import signal
import socket
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg
import sqlalchemy as sa

from app.model import NewJob
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import attempts, domains, jobs, workers
from tests.conftest import eventually
from tests.support.processes import ServiceProcess, service
from tests.support.webserver import Reply, ScriptedServer

HOST = "127.0.0.1"

BUSY: dict[str, Any] = {
    "poll_interval_seconds": 0.2,
    "domain_max_in_flight": 1000,  # every page is on 127.0.0.1: no per-domain limit
    "backoff_base_seconds": 0.2,
    "backoff_max_seconds": 1.0,
    "record_delay_seconds": 0.01,
}
"""Settings every process of these tests runs with (INGEST_* variables)."""


def free_port() -> int:
    with socket.create_server((HOST, 0)) as probe:
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def started(kind: str, log: Path, database_url: str, **settings: Any) -> Iterator[ServiceProcess]:
    """`ingest serve` (on a free port) or `ingest worker`, with BUSY settings under `settings`;
    stopped (SIGTERM, then SIGKILL) on the way out unless the test ended it."""
    args = ("--host", HOST, "--port", str(free_port())) if kind == "serve" else ()
    with service(kind, log, database_url, *args, **(BUSY | settings)) as process:
        try:
            yield process
        finally:
            if process.process.poll() is None:
                process.signal(signal.SIGCONT)  # frozen, it would not hear the SIGTERM


def slow_pages(web: ScriptedServer, count: int, *replies: Reply) -> list[str]:
    """`count` pages /page/<i>, each answering `replies` in turn (the last one repeats)."""
    return [web.script(f"/page/{i}", *replies) for i in range(count)]


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


@dataclass(frozen=True)
class JobRow:
    id: str
    url: str
    status: str
    attempts: int


@dataclass(frozen=True)
class AttemptRow:
    number: int
    outcome: str | None
    worker_id: str


class Ledger:
    """The shared database, read and written from the test: jobs submitted through the
    store, statuses, jobs and their attempts as the processes recorded them."""

    def __init__(self, database_url: str) -> None:
        self.db = Database(database_url)
        self.store = JobStore(self.db, lambda: datetime.now(UTC))

    async def __aenter__(self) -> "Ledger":
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.db.dispose()

    async def submit(self, urls: list[str], max_attempts: int = 4) -> list[str]:
        """Submit one job per URL (in batches); their ids, in order."""
        ids: list[str] = []
        for start in range(0, len(urls), 500):
            batch = [
                NewJob(url, HOST, "default", max_attempts) for url in urls[start : start + 500]
            ]
            ids += [job.id for job in await self.store.submit(batch)]
        return ids

    async def jobs(self) -> list[JobRow]:
        stmt = sa.select(jobs.c.id, jobs.c.url, jobs.c.status, jobs.c.attempts)
        async with self.db.read() as conn:
            return [JobRow(*row) for row in await conn.execute(stmt)]

    async def statuses(self) -> Counter[str]:
        stmt = sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status)
        async with self.db.read() as conn:
            return Counter({status: count for status, count in await conn.execute(stmt)})

    async def running(self) -> list[JobRow]:
        return [job for job in await self.jobs() if job.status == "running"]

    async def attempts(self) -> dict[str, list[AttemptRow]]:
        """Each job's attempts, in order."""
        stmt = sa.select(
            attempts.c.job_id, attempts.c.number, attempts.c.outcome, attempts.c.worker_id
        ).order_by(attempts.c.id)
        history: dict[str, list[AttemptRow]] = {}
        async with self.db.read() as conn:
            for job_id, *row in await conn.execute(stmt):
                history.setdefault(job_id, []).append(AttemptRow(*row))
        return history

    async def in_flight(self) -> int:
        """The running jobs the domains' counters hold (what the per-domain limit reads)."""
        stmt = sa.select(sa.func.coalesce(sa.func.sum(domains.c.in_flight), 0))
        async with self.db.read() as conn:
            count: int = (await conn.execute(stmt)).scalar_one()
            return count

    async def running_fetches(self, worker_id: str, since: datetime) -> int | None:
        """The fetches a worker said it runs in its last heartbeat, if that came after
        `since`; else None."""
        stmt = sa.select(workers.c.running).where(
            workers.c.id == worker_id, workers.c.last_heartbeat_at > since
        )
        async with self.db.read() as conn:
            running: int | None = (await conn.execute(stmt)).scalar()
            return running

    async def until_all(self, status: str, count: int, timeout: float) -> Counter[str]:
        """Wait until `count` jobs have `status`; the statuses then."""

        async def reached() -> Counter[str] | None:
            statuses = await self.statuses()
            return statuses if statuses[status] >= count else None

        reached_statuses: Counter[str] = await eventually(reached, timeout, interval=0.2)
        return reached_statuses


def hits(web: ScriptedServer, urls: list[str]) -> dict[str, int]:
    """How many times the server was asked for each of `urls`."""
    return {url: web.count(path_of(url)) for url in urls}


async def until_hits(web: ScriptedServer, urls: list[str], count: int, timeout: float) -> int:
    """Wait until the server has seen `count` requests for `urls` in all; how many then."""

    async def seen() -> int:
        total = sum(hits(web, urls).values())
        return total if total >= count else 0

    total: int = await eventually(seen, timeout, interval=0.02)
    return total


def figures(test: str, **numbers: object) -> None:
    """The figures a test measured, on one line (shown with `pytest -s`; the report quotes them)."""
    print(f"\nFIGURES {test}: " + ", ".join(f"{k}={v}" for k, v in numbers.items()))


async def exited(process: ServiceProcess, timeout: float) -> int:
    """Wait for a process told to stop; its exit code."""
    deadline = asyncio.get_running_loop().time() + timeout
    while process.process.poll() is None:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still running after {timeout}s: {process.text()[-3000:]}")
        await asyncio.sleep(0.05)
    return process.process.returncode


async def _transaction_open(database_url: str) -> bool:
    """Whether another connection holds a write transaction open: the SQLite write lock, or
    a PostgreSQL session in a transaction (this probe's own excepted)."""
    if database_url.startswith("sqlite"):

        def locked() -> bool:
            conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=0.2)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
                return False
            except sqlite3.OperationalError:
                return True
            finally:
                conn.close()

        return await asyncio.to_thread(locked)
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        busy: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state <> 'idle'"
        )
        return busy > 0
    finally:
        await conn.close()


async def freeze_between_transactions(process: ServiceProcess, database_url: str) -> None:
    """SIGSTOP `process` at a moment it holds no transaction open. A process frozen inside a
    write would hold SQLite's one write lock (or PostgreSQL row locks) and stall every other
    worker: a hazard of its own, not the one a test of leases means to show."""
    for _ in range(100):
        process.signal(signal.SIGSTOP)
        if not await _transaction_open(database_url):
            return
        process.signal(signal.SIGCONT)
        await asyncio.sleep(0.01)
    raise AssertionError("the process never stopped outside a transaction")
