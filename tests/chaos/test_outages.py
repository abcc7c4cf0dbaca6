"""The database goes away under running processes: connections killed, the server stopped,
too few connections, a full disk. Nothing crashes, no job is lost, duplicates stay within
what a worker holds, and work resumes within seconds of the database's return.

Real processes (`ingest serve`, `ingest worker`) on a PostgreSQL cluster the test owns
(tests/chaos/pgcluster.py) or a SQLite file on a small tmpfs; fetches go to a local server
that answers slowly and counts them per path.
"""

import asyncio
import errno
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, closing, contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.chaos.pgcluster import PG_BIN, PostgresCluster, free_port, terminate_backends
from tests.conftest import REQUIRE_PG, eventually
from tests.support.processes import READY, ServiceProcess, service
from tests.support.webserver import Reply, ScriptedServer

SLOTS = 8
PREFETCH = 2 * SLOTS  # the default INGEST_WORKER_PREFETCH
HELD_PER_PROCESS = SLOTS + PREFETCH
"""What one worker process holds leased at once: a crash or a lost write costs at most this
many fetches again (README, "What a crash costs")."""

QUIET_POLL = 30.0
"""An idle worker waits min(poll, lease / 2) = 15 s here: a job picked up within seconds
came by LISTEN (or, for `ingest serve`'s own worker, by its API's wake-up)."""

SETTINGS: dict[str, Any] = {
    "worker_concurrency": SLOTS,
    "poll_interval_seconds": QUIET_POLL,
    "domain_max_in_flight": 1000,  # every job is on 127.0.0.1: no politeness limit here
    "lease_seconds": 30,
    "shutdown_grace_seconds": 2,
}
CLIENT_TIMEOUT = 10.0
"""An API call during an outage answers within this (the answer is a 503, never a hang)."""


# --- the cluster, the processes, the jobs -------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """One cluster for the module (initdb takes seconds); each test makes its database."""
    if not (PG_BIN / "initdb").exists():
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL required but no initdb in {PG_BIN}")
        pytest.skip(f"no PostgreSQL binaries in {PG_BIN}")
    owned = PostgresCluster()
    try:
        owned.start()
        yield owned
    finally:
        owned.remove()


@pytest.fixture
def pg_url(cluster: PostgresCluster) -> Iterator[str]:
    if not cluster.running:  # a test that stopped it and failed before starting it again
        cluster.start()
    url = cluster.create_database()
    yield url
    if cluster.running:
        cluster.drop_database(url)


def slow_paths(web: ScriptedServer, count: int, delay: float) -> list[str]:
    paths = [f"/job/{i}" for i in range(count)]
    for path in paths:
        web.script(path, Reply(delay=delay))
    return paths


@asynccontextmanager
async def serve(
    log: Path, database_url: str, **settings: Any
) -> AsyncIterator[tuple[ServiceProcess, httpx.AsyncClient]]:
    """`ingest serve` on a free port, up (its worker started unless disabled), and a client."""
    port = free_port()
    merged = SETTINGS | settings
    with service(
        "serve", log, database_url, "--host", "127.0.0.1", "--port", str(port), **merged
    ) as process:
        if merged.get("worker_enabled", True):
            await process.wait_for_line(READY)
        base_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT) as client:

            async def answers() -> bool:
                try:
                    return (await client.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    assert process.process.poll() is None, process.text()[-3000:]
                    return False

            await eventually(answers, timeout=60, interval=0.1)
            yield process, client


@contextmanager
def worker_processes(
    tmp_path: Path, database_url: str, count: int, **settings: Any
) -> Iterator[list[ServiceProcess]]:
    """`count` `ingest worker` processes (not yet waited on), stopped on the way out."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(
                service(
                    "worker", tmp_path / f"worker-{i}.log", database_url, **(SETTINGS | settings)
                )
            )
            for i in range(count)
        ]


async def submit(client: httpx.AsyncClient, web: ScriptedServer, paths: list[str]) -> None:
    """One job per path, in one batch (up to 1,000)."""
    answer = await client.post("/jobs/batch", json={"jobs": [{"url": web.url(p)} for p in paths]})
    assert 201 == answer.status_code, answer.text


async def submit_when_up(client: httpx.AsyncClient, web: ScriptedServer, paths: list[str]) -> None:
    """Submit once the API takes it: 503 (never a 500) until the database serves it."""
    body = {"jobs": [{"url": web.url(path)} for path in paths]}

    async def taken() -> bool:
        answer = await client.post("/jobs/batch", json=body)
        assert answer.status_code in (201, 503), answer.text
        return answer.status_code == 201

    await eventually(taken, timeout=30, interval=0.2)


async def stats(client: httpx.AsyncClient) -> dict[str, int] | None:
    """Jobs per status, or None while the database is away (a 503: never a 500)."""
    answer = await client.get("/stats")
    if answer.status_code == 503:
        return None
    assert 200 == answer.status_code, answer.text
    counts: dict[str, int] = answer.json()["counts"]
    return counts


async def all_finished(client: httpx.AsyncClient, total: int, timeout: float) -> float:
    """Wait until `total` jobs are succeeded or dead; the seconds it took."""
    started = time.monotonic()

    async def finished() -> bool:
        counts = await stats(client)
        return counts is not None and counts["succeeded"] + counts["dead"] == total

    await eventually(finished, timeout=timeout, interval=0.1)
    return time.monotonic() - started


async def pg_jobs(database_url: str) -> dict[str, tuple[str, int]]:
    """Every job's URL: its status and attempts, read from the database itself."""
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        rows = await conn.fetch("SELECT url, status, attempts FROM jobs")
    finally:
        await conn.close()
    return {row["url"]: (row["status"], row["attempts"]) for row in rows}


def duplicates(web: ScriptedServer, paths: list[str]) -> int:
    """Fetches beyond the first of each path."""
    return sum(max(web.count(path) - 1, 0) for path in paths)


RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ", re.MULTILINE)
"""The start of a log record in the text format; a traceback's lines follow their record."""
JOB_LINE = re.compile(r" ingest\.worker: job \S+ attempt ")
"""The one record each attempt's end logs (not what an outage adds)."""


def records(process: ServiceProcess) -> int:
    """Log records so far (a record with its traceback counts once)."""
    return len(RECORD.findall(process.text()))


def tracebacks(process: ServiceProcess) -> int:
    """Log records that carry a traceback (a chained one holds several `Traceback` lines)."""
    lines = process.text().splitlines()
    return sum(
        bool(RECORD.match(line)) and following.startswith("Traceback (most recent call last)")
        for line, following in pairwise(lines)
    )


def within(logged: tuple[int, int], bound: tuple[int, int]) -> bool:
    """Records and tracebacks each within their bound."""
    return all(count <= most for count, most in zip(logged, bound, strict=True))


async def picked_up_in(
    client: httpx.AsyncClient, web: ScriptedServer, path: str, timeout: float = 10
) -> float:
    """Submit one job; seconds until it is fetched (a wake-up, not a poll: see QUIET_POLL)."""
    started = time.monotonic()
    await submit(client, web, [path])

    async def fetched() -> bool:
        return web.count(path) > 0

    await eventually(fetched, timeout=timeout, interval=0.02)
    return time.monotonic() - started


def assert_alive(*processes: ServiceProcess) -> None:
    for process in processes:
        assert process.process.poll() is None, process.text()[-3000:]


# --- the outages -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_storm_of_killed_connections_loses_nothing(pg_url, web, tmp_path):
    """Every connection of the service's database is killed every 0.5 s for 5 s while two
    workers drain 300 jobs: nothing exits, every job succeeds, each URL is fetched, the
    duplicates stay within what the workers hold, and LISTEN wakes the workers afterwards."""
    paths = slow_paths(web, 300, delay=0.2)
    database = pg_url.rsplit("/", 1)[1]
    async with serve(tmp_path / "serve.log", pg_url, worker_enabled=False) as (api, client):
        with worker_processes(tmp_path, pg_url, 2) as processes:
            for process in processes:
                await process.wait_for_line(READY)
            await submit(client, web, paths)
            killed = []
            admin = await asyncpg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", timeout=10)
            try:
                for _ in range(10):
                    killed.append(await terminate_backends(admin, database))
                    await stats(client)  # 200 or 503, never a 500
                    await asyncio.sleep(0.5)
            finally:
                await admin.close()
            storm_done = sum(web.count(path) > 0 for path in paths)
            drained = await all_finished(client, len(paths), timeout=60)
            assert_alive(api, *processes)
            # Idle now: only LISTEN (the API's NOTIFY) wakes a worker within seconds.
            pickup = await picked_up_in(client, web, "/after-the-storm")
            assert_alive(api, *processes)
        exits = [process.process.returncode for process in processes]
        jobs = await pg_jobs(pg_url)
    exits.append(api.process.returncode)
    print(
        f"storm: killed {killed} backends; {storm_done} of {len(paths)} fetched by its end;"
        f" drained {drained:.1f}s after; duplicates {duplicates(web, paths)}"
        f" (bound {2 * HELD_PER_PROCESS}); picked up {pickup:.2f}s after"
    )
    assert killed[0] >= 3, "the first round kills each process's connections"
    assert {web.url(path) for path in paths} <= set(jobs)
    assert {"succeeded"} == {status for status, _ in jobs.values()}
    assert all(web.count(path) >= 1 for path in paths)
    assert duplicates(web, paths) <= 2 * HELD_PER_PROCESS
    assert pickup < 5, "LISTEN was not reconnected: the job waited for a poll"
    assert [0, 0, 0] == exits, [process.text()[-3000:] for process in (*processes, api)]


async def listeners(database_url: str) -> int:
    """Connections of the database that LISTEN (their last statement), idle."""
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'idle' AND query ILIKE 'LISTEN%'"
        )
    finally:
        await conn.close()
    return int(count)


async def assert_unavailable(client: httpx.AsyncClient, method: str, path: str, **kw: Any) -> None:
    """The API answers 503 problem+json with a Retry-After, fast: never a 500, never a hang."""
    started = time.monotonic()
    answer = await client.request(method, path, **kw)
    took = time.monotonic() - started
    assert 503 == answer.status_code, f"{method} {path}: {answer.status_code} {answer.text[:500]}"
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.headers
    assert answer.json()["status"] == 503
    if path != "/readyz":
        assert int(answer.headers["retry-after"]) > 0
    assert took < 5, f"{method} {path} took {took:.1f}s"


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_the_server_stopped_and_started_under_load(cluster, pg_url, web, tmp_path):
    """PostgreSQL stops with jobs in flight, for a few seconds: meanwhile the API answers
    503 problem+json (readiness too) and the workers log a line per retry and stay up; once
    it is back every job is done within seconds (far less than a lease), none lost, and
    both processes LISTEN again."""
    paths = slow_paths(web, 150, delay=0.3)
    down_for = 4.0
    async with serve(tmp_path / "serve.log", pg_url) as (api, client):
        with worker_processes(tmp_path, pg_url, 1) as (worker,):
            await worker.wait_for_line(READY)
            await submit(client, web, paths)

            async def under_way() -> bool:
                return sum(web.count(path) > 0 for path in paths) >= 30

            await eventually(under_way, timeout=30, interval=0.02)
            logged = {process: (records(process), tracebacks(process)) for process in (api, worker)}
            cluster.stop()
            stopped = time.monotonic()
            try:
                await assert_unavailable(client, "GET", "/readyz")
                await assert_unavailable(client, "POST", "/jobs", json={"url": web.url("/x")})
                await assert_unavailable(client, "GET", "/stats")
                fetched_while_down = sum(web.count(path) for path in paths)
                await asyncio.sleep(max(down_for - (time.monotonic() - stopped), 0))
                fetched_while_down = sum(web.count(p) for p in paths) - fetched_while_down
                assert_alive(api, worker)
                # (records, tracebacks) each process logged while the server was down
                outage_logs = {
                    name: (
                        records(process) - logged[process][0],
                        tracebacks(process) - logged[process][1],
                    )
                    for name, process in (("serve", api), ("worker", worker))
                }
            finally:
                cluster.start()
            recovery = await all_finished(client, len(paths), timeout=30)
            assert_alive(api, worker)
            listening = await eventually(lambda: _listening_of(pg_url, 2), timeout=10, interval=0.2)
        worker_exit = worker.process.returncode
        jobs = await pg_jobs(pg_url)
    serve_exit = api.process.returncode
    print(
        f"outage {down_for:.0f}s: (records, tracebacks) logged {outage_logs}; fetched while down"
        f" {fetched_while_down}; all done {recovery:.1f}s after the start; duplicates"
        f" {duplicates(web, paths)} (bound {2 * HELD_PER_PROCESS}); listeners {listening}"
    )
    # A retry is a record: the completer's 0.5, 1, 2 and 4 s, the loop's, LISTEN lost, and
    # one per API request (3 here); a traceback once per distinct error.
    assert all(within(logs, (20, 3)) for logs in outage_logs.values()), outage_logs
    assert recovery < 15
    assert fetched_while_down <= 2 * HELD_PER_PROCESS, "claimed while the server was down?"
    assert {web.url(path) for path in paths} == set(jobs)
    assert {"succeeded"} == {status for status, _ in jobs.values()}
    assert duplicates(web, paths) <= 2 * HELD_PER_PROCESS
    assert (0, 0) == (serve_exit, worker_exit)


async def _listening_of(database_url: str, expected: int) -> int:
    count = await listeners(database_url)
    return count if count == expected else 0


def other_records(process: ServiceProcess) -> int:
    """Log records but those of attempts' ends."""
    lines = process.text().splitlines()
    return sum(bool(RECORD.match(line)) and not JOB_LINE.search(line) for line in lines)


TOO_FEW_CONNECTIONS = 12
"""Five processes want up to 30 connections (INGEST_DATABASE_POOL_SIZE 5 each, plus one for
LISTEN: README, "Connections per process"). Idle, they hold about 15 (LISTEN, and what their
start used); draining jobs, about 18. A worker refused its first connection at start exits
(by design), so the limit is lowered once all are up: the server restarts with it."""


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_too_few_connections_for_five_processes(cluster, pg_url, web, tmp_path):
    """`ingest serve` and 4 `ingest worker`s on a server with fewer connections than their
    pools want drain 300 jobs: none lost, none dead, none fetched twice, nothing exits, and
    the refusals are logged as retries, not a flood."""
    paths = slow_paths(web, 300, delay=0.0)  # fast fetches: the database is the bottleneck
    try:
        async with serve(tmp_path / "serve.log", pg_url) as (api, client):
            with worker_processes(tmp_path, pg_url, 4) as processes:
                for process in processes:
                    await process.wait_for_line(READY)
                cluster.configure(max_connections=TOO_FEW_CONNECTIONS)
                cluster.restart()
                await submit_when_up(client, web, paths)
                drained = await all_finished(client, len(paths), timeout=60)
                assert_alive(api, *processes)
            exits = [process.process.returncode for process in processes]
        exits.append(api.process.returncode)
        everyone = [api, *processes]
        refused = [p.text().count("too many clients") for p in everyone]
        logged = [(other_records(p), tracebacks(p)) for p in everyone]
    finally:
        cluster.configure()
        cluster.restart()
    jobs = await pg_jobs(pg_url)
    most = max(web.count(path) for path in paths)
    print(
        f"{TOO_FEW_CONNECTIONS} connections: drained in {drained:.1f}s; 'too many clients' seen"
        f" {refused} times per process; (other records, tracebacks) {logged}; duplicates"
        f" {duplicates(web, paths)}; most fetches of one job {most}"
    )
    assert sum(refused) > 0, "the processes never ran short of connections: lower the limit"
    assert {web.url(path) for path in paths} == set(jobs)
    assert {"succeeded"} == {status for status, _ in jobs.values()}
    assert 1 == most, "a lease lapsed (30 s) or an outcome was lost, and a job ran twice"
    assert all(within(logs, (100, 10)) for logs in logged), logged
    assert [0] * 5 == exits


@contextmanager
def small_tmpfs(directory: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of `size_kib` mounted on `directory` (root only), unmounted on the way out."""
    directory.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (the test runs as root): {mounted.stderr}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "--lazy", str(directory)], check=True)


def fill(path: Path) -> int:
    """Write `path` until the file system is full; the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as filler:
        for chunk in (1 << 16, 1 << 12):
            try:
                while True:
                    written += filler.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return written


async def test_sqlite_on_a_full_disk(sqlite_template, web, tmp_path):
    """The disk of the SQLite file fills up with jobs in flight: the API answers 503
    problem+json (readiness too), never a 500; once space is freed every job finishes within
    seconds, none lost, and the file passes its integrity check."""
    paths = slow_paths(web, 60, delay=0.3)
    # Room, once the filler goes, for the WAL to grow to SQLite's autocheckpoint (1,000
    # pages, 4 MB): on a 2 MB disk the jobs' own records filled it again (CI, once).
    with small_tmpfs(tmp_path / "disk", size_kib=8192) as disk:
        database = disk / "ingest.db"
        shutil.copy(sqlite_template, database)
        url = f"sqlite:///{database}"
        async with serve(tmp_path / "serve.log", url) as (api, client):
            await submit(client, web, paths)

            async def under_way() -> bool:
                return sum(web.count(path) > 0 for path in paths) >= 10

            await eventually(under_way, timeout=30, interval=0.02)
            logged = (records(api), tracebacks(api))
            filled = fill(disk / "filler")
            try:
                await assert_unavailable(client, "POST", "/jobs", json={"url": web.url("/x")})
                await assert_unavailable(client, "GET", "/readyz")
                await asyncio.sleep(2)  # the worker's writes fail meanwhile
                assert_alive(api)
                outage_logs = (records(api) - logged[0], tracebacks(api) - logged[1])
            finally:
                (disk / "filler").unlink()
            freed = time.monotonic()
            ready = await client.get("/readyz")
            await all_finished(client, len(paths), timeout=30)
            recovery = time.monotonic() - freed
        serve_exit = api.process.returncode
        with closing(sqlite3.connect(database)) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchall()
            jobs = dict(conn.execute("SELECT url, status FROM jobs").fetchall())
    print(
        f"disk full ({filled} filler bytes): (records, tracebacks) logged meanwhile"
        f" {outage_logs}; all done"
        f" {recovery:.1f}s after space came back"
    )
    assert [("ok",)] == integrity
    assert 200 == ready.status_code
    assert {web.url(path) for path in paths} == set(jobs)
    assert {"succeeded"} == set(jobs.values())
    assert recovery < 15
    assert within(outage_logs, (20, 3)), outage_logs
    assert 0 == serve_exit
