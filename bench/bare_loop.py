"""The floor: a bare claim-one loop on the ingest schema, with no SQLAlchemy and no ORM.

A child of `bench.drain`, like `bench.fetch_alone`. It connects, opens its HTTP pool, prints
`ready`, waits for a line on stdin, then drains the jobs already submitted with
`--concurrency` tasks, each looping: claim ONE pending job in one statement, GET its URL
(one shared `httpx.AsyncClient`, fetch_alone's limits), mark it succeeded in one statement;
a task stops when a claim returns nothing. Prints one JSON line for that phase alone:
{"seconds", "cpu_seconds", "failures", "jobs"}.

It writes no attempt rows, no lease, no result and takes no decision: it is what a job
queue on this database and this machine cannot beat, not a queue to use.
"""

import argparse
import asyncio
import contextlib
import json
import sqlite3
import sys
import time

import aiosqlite
import asyncpg
import httpx

from bench.fetch_alone import cpu_now

# The literal 'pending' matches the partial index ix_jobs_claim, as the store's claim does.
PG_CLAIM = """
    UPDATE jobs SET status = 'running', attempts = attempts + 1,
                    started_at = now(), updated_at = now()
    WHERE id = (SELECT id FROM jobs WHERE status = 'pending'
                ORDER BY priority DESC, created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id, url
"""
PG_DONE = """
    UPDATE jobs SET status = 'succeeded', finished_at = now(), updated_at = now() WHERE id = $1
"""
# SQLite has no SKIP LOCKED, nor needs it: its one writer claims one job at a time.
# Timestamps in the text form SQLAlchemy stores ('YYYY-MM-DD HH:MM:SS.ffffff', naive UTC).
SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
SQLITE_CLAIM = f"""
    UPDATE jobs SET status = 'running', attempts = attempts + 1,
                    started_at = {SQLITE_NOW}, updated_at = {SQLITE_NOW}
    WHERE id = (SELECT id FROM jobs WHERE status = 'pending'
                ORDER BY priority DESC, created_at LIMIT 1)
    RETURNING id, url
"""
SQLITE_DONE = f"""
    UPDATE jobs SET status = 'succeeded', finished_at = {SQLITE_NOW}, updated_at = {SQLITE_NOW}
    WHERE id = ?
"""
# The service's pragmas (app/store/backends/sqlite/__init__.py, _configure_sqlite).
SQLITE_PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=30000")


class PostgresJobs:
    """One task's own connection; each statement commits on its own (asyncpg's default)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def claim(self) -> tuple[str, str] | None:
        row = await self.conn.fetchrow(PG_CLAIM)
        return None if row is None else (row["id"], row["url"])

    async def done(self, job_id: str) -> None:
        await self.conn.execute(PG_DONE, job_id)


class SqliteJobs:
    """The one connection all tasks share; the lock keeps their transactions apart. BEGIN
    IMMEDIATE takes the write lock up front, as the service does, so other processes wait
    on busy_timeout instead of failing to turn a read into a write."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()

    async def write(self, statement: str, *params: str) -> list[tuple[str, str]]:
        async with self.lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                rows = await self.conn.execute_fetchall(statement, params)
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")
        return [(job_id, url) for job_id, url in rows]

    async def claim(self) -> tuple[str, str] | None:
        rows = await self.write(SQLITE_CLAIM)
        return rows[0] if rows else None

    async def done(self, job_id: str) -> None:
        await self.write(SQLITE_DONE, job_id)


async def run(database_url: str, base_url: str, concurrency: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, limits=limits))
        # Open the HTTP pool's connections before the clock starts.
        await asyncio.gather(*(client.get(f"{base_url}/page/0") for _ in range(concurrency)))
        if database_url.startswith("sqlite:///"):
            if sqlite3.sqlite_version_info < (3, 35):
                sys.exit(f"UPDATE ... RETURNING needs SQLite 3.35, not {sqlite3.sqlite_version}")
            conn = await stack.enter_async_context(
                aiosqlite.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
            )
            for pragma in SQLITE_PRAGMAS:
                await conn.execute(f"PRAGMA {pragma}")
            tasks: list[PostgresJobs | SqliteJobs] = [SqliteJobs(conn)] * concurrency
        else:
            pool = await stack.enter_async_context(
                asyncpg.create_pool(database_url, min_size=concurrency, max_size=concurrency)
            )
            # Each task holds its connection throughout: no per-statement acquire and reset.
            tasks = [
                PostgresJobs(await stack.enter_async_context(pool.acquire()))
                for _ in range(concurrency)
            ]
        jobs = failures = 0

        async def loop(store: PostgresJobs | SqliteJobs) -> None:
            nonlocal jobs, failures
            while job := await store.claim():
                job_id, url = job
                response = await client.get(url)
                failures += response.status_code != 200 or not response.content
                await store.done(job_id)
                jobs += 1

        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        cpu, started = cpu_now(), time.perf_counter()
        await asyncio.gather(*(loop(store) for store in tasks))
        return {
            "seconds": time.perf_counter() - started,
            "cpu_seconds": cpu_now() - cpu,
            "failures": failures,
            "jobs": jobs,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="sqlite:///path or postgresql://...")
    parser.add_argument("--url", required=True, help="base URL of bench.target")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    result = asyncio.run(run(args.database, args.url, args.concurrency))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
