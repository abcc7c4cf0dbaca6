"""What every benchmark needs: a fresh database, the HTTP target, CPU readings.

All traffic stays on 127.0.0.1. Databases are the benchmark's own: a SQLite file under
bench/results/ and a PostgreSQL database dropped and created again for every run, on
BENCH_POSTGRES_SERVER. Summaries and tables of the figures are in bench.numbers.
"""

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from app.store.database import upgrade_to_head
from bench.target import address

RESULTS = Path(__file__).parent / "results"
BACKENDS = ("sqlite", "postgresql")
PG_SERVER = os.environ.get("BENCH_POSTGRES_SERVER", "postgresql://postgres@127.0.0.1:5432")
"""The PostgreSQL server the benchmarks create their databases on (BENCH_POSTGRES_SERVER:
another cluster, e.g. a fresh one with default settings)."""
TICKS = os.sysconf("SC_CLK_TCK")
TARGET_ENV = {"INGEST_ALLOWED_HOSTS": "127.0.0.0/8"}
"""Settings for processes that fetch the target: the fetch guard refuses loopback otherwise
(all of 127.0.0.0/8: `--hosts` spreads jobs over many loopback addresses)."""


def backends(choice: str) -> list[str]:
    """`both` -> sqlite, postgresql (the order rounds interleave them in)."""
    return list(BACKENDS) if choice == "both" else [choice]


def remove_sqlite_files(name: str) -> Path:
    """Delete bench/results/<name>.db and its WAL files; returns the database's path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


async def fresh_database(backend: str, name: str) -> str:
    """Drop and recreate database `name`, migrate it to head, and return its URL."""
    if backend == "sqlite":
        url = f"sqlite:///{remove_sqlite_files(name)}"
    else:
        admin = await asyncpg.connect(f"{PG_SERVER}/postgres")
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        url = f"{PG_SERVER}/{name}"
    await asyncio.to_thread(upgrade_to_head, url)
    return url


async def drop_database(backend: str, name: str) -> None:
    if backend == "sqlite":
        remove_sqlite_files(name)
        return
    admin = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def environment() -> dict[str, str]:
    """What the numbers depend on: cores, Python, SQLite, PostgreSQL, the commit measured."""
    admin = await asyncpg.connect(f"{PG_SERVER}/postgres")
    try:
        pg_version = await admin.fetchval("SHOW server_version")
        autovacuum = await admin.fetchval("SHOW autovacuum")
    finally:
        await admin.close()
    git = await asyncio.create_subprocess_exec(
        "git",
        "describe",
        "--always",
        "--dirty",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    commit = (await git.communicate())[0].decode().strip()
    return {
        "cores": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "postgresql": f"{pg_version} (autovacuum {autovacuum})",
        "commit": commit or "unknown",
    }


@dataclass(frozen=True)
class Target:
    """A running `bench.target`: its process, port, answer delay and loopback addresses."""

    process: subprocess.Popen[str]
    port: int
    delay_ms: float
    hosts: int

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def base_url(self) -> str:
        return f"http://{address(0)}:{self.port}"

    def url(self, i: int, hosts: int = 1) -> str:
        """Page i, on the (i mod hosts)-th of the target's addresses: `hosts` domains."""
        if hosts > self.hosts:
            raise ValueError(f"the target listens on {self.hosts} addresses, not {hosts}")
        return f"http://{address(i % hosts)}:{self.port}/page/{i}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def start_target(delay_ms: float, hosts: int = 1, *serving: str) -> Target:
    """Start bench.target in its own process, on `hosts` loopback addresses; `serving`: its
    options saying what to serve, e.g. `--eval DATA` (default: the 2 KB page)."""
    command = ["--port", "0", "--delay-ms", str(delay_ms), "--hosts", str(hosts), *serving]
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.target", *command], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return Target(process, int(process.stdout.readline()), delay_ms, hosts)


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, all its threads (utime + stime of /proc/pid/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a live process and all its descendants: the live ones read one by one, those
    that exited and were waited for through cutime + cstime."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    own = sum(int(v) for v in fields[11:15]) / TICKS  # utime stime cutime cstime
    return own + sum(tree_cpu_seconds(child) for child in _children(pid))


def _children(pid: int) -> list[int]:
    """The live children of every thread of a process: a pool may be started from any."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found += [int(child) for child in task.joinpath("children").read_text().split()]
    return found


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)
