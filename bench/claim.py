"""Claim benchmark: does a claim cost the same with 1,000 and with 1,000,000 finished jobs,
with 1,000 and 1,000,000 rows in the `domains` table, and beside a crawl whose frontier holds
1,000,000 pages not yet made jobs of?

    python -m bench.claim --backend both --terminal 1000,1000000 --pending 1000 --repeats 200
    python -m bench.claim --backend both --terminal 1000 --domain-rows 1000,1000000
    python -m bench.claim --backend both --terminal 1000 --frontier 0,1000000

For each backend: a fresh database and `--pending` pending jobs (JobStore.submit); then
terminal rows (nine in ten succeeded, one in ten dead, all older than the pending jobs) are
added by one INSERT ... SELECT inside the database, up to each size in turn. Then, at the
largest of those, the `domains` table is filled up to each of `--domain-rows` in turn with
rows of hosts that have no job left (as one-job-per-host submits leave them until retention
deletes them): each fetched once long ago, one in 1,000 paused for a day after a streak of
failures (then ANALYZE on PostgreSQL, as autovacuum would). Then a running crawl's frontier
(`crawl_urls`) is filled up to each of `--frontier` in turn with pages found and waiting,
as a crawl of a large site holds them beside its window of pending jobs. At each size:

- claim: `Queue.claim(worker, 32, now, 60)`; then (untimed) the 32 jobs are recorded as
  succeeded (`Queue.record`, one batch) and 32 new ones submitted, so the queue keeps its size
  like a steady stream: jobs leave at the head and arrive at the tail. Pending jobs are
  spread over 100 domains, so the per-domain in-flight limit does not cut a claim short;
- next_due_at and overdue (expired leases, refreshes due): what an idle worker runs too;
- list dead: `JobStore.list(statuses=[dead], limit=50)`;
- stats: `JobStore.stats()` (it counts every row: expected to grow, fewer repetitions).

Prints median and p99 ms per operation and size, and the plan of each query of a claim.
"""

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from app.clock import utc_now
from app.fetch.urls import job_domain
from app.model import CrawlMode, CrawlOptions, Fetched, JobStatus, NewCrawl, NewJob
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.crawls import CrawlStore
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.maintenance import MaintenanceStore
from app.store.queue import Queue
from app.store.tables import crawl_urls, domains
from bench.harness import backends, drop_database, environment, fresh_database
from bench.numbers import fmt, median, percentile, table
from bench.workers import submit

DATABASE = "ingest_bench_claim"
BATCH = 32
DOMAINS = 100
RESULT = Fetched(200, "http://bench.invalid/", "text/html", 2048, "0" * 64, "bench page")

_TERMINAL_COLUMNS = (
    "id, url, domain, tenant, status, priority, attempts, max_attempts, deferrals, dead_reason,"
    " result_http_status, created_at, updated_at, started_at, finished_at"
)
# One statement per database; each makes rows first..last, a second apart from `base`.
TERMINAL_ROWS = {
    "postgresql": f"""
        INSERT INTO jobs ({_TERMINAL_COLUMNS})
        SELECT gen_random_uuid()::text, 'http://127.0.0.1:9/old/' || g, '127.0.0.1:9', 'old',
               CASE WHEN g % 10 = 0 THEN 'dead' ELSE 'succeeded' END, 0, 1, 4, 0,
               CASE WHEN g % 10 = 0 THEN 'fatal' END, CASE WHEN g % 10 = 0 THEN 404 ELSE 200 END,
               t, t, t, t
        FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g,
             LATERAL (SELECT CAST(:base AS timestamp) + g * interval '1 second' AS t) AS at
    """,
    # SQLAlchemy stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' text.
    "sqlite": f"""
        WITH RECURSIVE g(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM g WHERE n < :last)
        INSERT INTO jobs ({_TERMINAL_COLUMNS})
        SELECT lower(hex(randomblob(16))), 'http://127.0.0.1:9/old/' || n, '127.0.0.1:9', 'old',
               CASE WHEN n % 10 = 0 THEN 'dead' ELSE 'succeeded' END, 0, 1, 4, 0,
               CASE WHEN n % 10 = 0 THEN 'fatal' END, CASE WHEN n % 10 = 0 THEN 404 ELSE 200 END,
               t, t, t, t
        FROM (SELECT n, strftime('%Y-%m-%d %H:%M:%S', :base, '+' || n || ' seconds')
                        || '.000000' AS t FROM g)
    """,
}
_DOMAIN_COLUMNS = (
    "domain, paused_until, pause_reason, consecutive_failures, in_flight, last_started_at,"
    " next_start_at, updated_at"
)
# Hosts first..last with no job: fetched once at `base` + n seconds; every 1,000th paused
# until `until` after a streak of failures.
ORPHAN_DOMAINS = {
    "postgresql": f"""
        INSERT INTO domains ({_DOMAIN_COLUMNS})
        SELECT 'h' || g || '.orphan.invalid',
               CASE WHEN g % 1000 = 0 THEN CAST(:until AS timestamp) END,
               CASE WHEN g % 1000 = 0 THEN 'bench: failing' END,
               CASE WHEN g % 1000 = 0 THEN 5 ELSE 0 END, 0, t, t, t
        FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g,
             LATERAL (SELECT CAST(:base AS timestamp) + g * interval '1 second' AS t) AS at
    """,
    "sqlite": f"""
        WITH RECURSIVE g(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM g WHERE n < :last)
        INSERT INTO domains ({_DOMAIN_COLUMNS})
        SELECT 'h' || n || '.orphan.invalid',
               CASE WHEN n % 1000 = 0 THEN :until END,
               CASE WHEN n % 1000 = 0 THEN 'bench: failing' END,
               CASE WHEN n % 1000 = 0 THEN 5 ELSE 0 END, 0, t, t, t
        FROM (SELECT n, strftime('%Y-%m-%d %H:%M:%S', :base, '+' || n || ' seconds')
                        || '.000000' AS t FROM g)
    """,
}
EXPLAIN = {
    "postgresql": "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, BUFFERS) ",
    "sqlite": "EXPLAIN QUERY PLAN ",
}


async def add_terminal_rows(database: Database, first: int, last: int) -> None:
    base = (utc_now() - timedelta(days=30)).replace(tzinfo=None)
    backend = database.backend.name
    params: dict[str, Any] = {"first": first, "last": last}
    params["base"] = base if backend == "postgresql" else base.strftime("%Y-%m-%d %H:%M:%S")
    rows = sa.text(TERMINAL_ROWS[backend])
    await database.transact(lambda conn: conn.execute(rows, params))


async def add_orphan_domains(database: Database, size: int) -> int:
    """Rows of hosts without jobs (`ORPHAN_DOMAINS`), until the `domains` table holds `size`;
    how many rows it holds."""
    async with database.read() as conn:
        count: int = (
            await conn.execute(sa.select(sa.func.count()).select_from(domains))
        ).scalar_one()
    if count >= size:
        return count
    now = utc_now().replace(tzinfo=None)
    base, until = now - timedelta(days=30), now + timedelta(days=1)
    params: dict[str, Any] = {"first": count + 1, "last": size}
    if database.backend.name == "postgresql":
        params |= {"base": base, "until": until}
    else:
        params |= {
            "base": base.strftime("%Y-%m-%d %H:%M:%S"),
            "until": until.strftime("%Y-%m-%d %H:%M:%S.%f"),
        }
    rows = sa.text(ORPHAN_DOMAINS[database.backend.name])
    await database.transact(lambda conn: conn.execute(rows, params))
    if database.backend.name == "postgresql":
        # As autovacuum would after so many inserts (it is off on this machine): a plan
        # cached while the table was small reads it whole (the claim's lock of its domains
        # became a scan, 560 ms at 100,000 rows). SQLite keeps no statistics to refresh.
        await database.transact(lambda conn: conn.execute(sa.text("ANALYZE domains")))
    return size


FRONTIER_ROWS = {
    "postgresql": """
        INSERT INTO crawl_urls (crawl_id, kind, url_hash, url, state, depth, source, created_at)
        SELECT :crawl, 'page', g, 'http://frontier.bench.invalid/page/' || g, 'new', 1, 'link',
               CAST(:base AS timestamp)
        FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g
    """,
    "sqlite": """
        WITH RECURSIVE g(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM g WHERE n < :last)
        INSERT INTO crawl_urls (crawl_id, kind, url_hash, url, state, depth, source, created_at)
        SELECT :crawl, 'page', n, 'http://frontier.bench.invalid/page/' || n, 'new', 1, 'link',
               :base
        FROM g
    """,
}
"""Pages first..last of a crawl's frontier, found and waiting to be made jobs of."""


async def add_frontier(database: Database, crawl_id: str | None, size: int) -> str | None:
    """A running crawl (made at the first call) whose frontier holds `size` waiting pages;
    its id. Its frontier only grows between calls."""
    if not size:
        return crawl_id
    base = utc_now().replace(tzinfo=None)
    if crawl_id is None:
        crawl = await CrawlStore(database, utc_now).create(
            NewCrawl(
                "frontier",
                ("http://frontier.bench.invalid/",),
                CrawlMode.CRAWL,
                CrawlOptions(limit=10_000_000, max_depth=10),
            )
        )
        crawl_id = crawl.id
    async with database.read() as conn:
        have: int = (
            await conn.execute(
                sa.select(sa.func.count())
                .select_from(crawl_urls)
                .where(crawl_urls.c.crawl_id == crawl_id, crawl_urls.c.kind == "page")
            )
        ).scalar_one()
    if have < size:
        params: dict[str, Any] = {"crawl": crawl_id, "first": have + 1, "last": size}
        params["base"] = (
            base
            if database.backend.name == "postgresql"
            else (base.strftime("%Y-%m-%d %H:%M:%S.%f"))
        )
        statement = sa.text(FRONTIER_ROWS[database.backend.name])
        await database.transact(lambda conn: conn.execute(statement, params))
        if database.backend.name == "postgresql":
            await database.transact(lambda conn: conn.execute(sa.text("ANALYZE crawl_urls")))
    return crawl_id


async def top_up(store: JobStore, count: int, first: int) -> None:
    """New pending jobs spread over `DOMAINS` domains (never fetched: this is no drain)."""
    urls = [f"http://d{i % DOMAINS}.bench.invalid/page/{i}" for i in range(first, first + count)]
    await submit(store, [NewJob(u, job_domain(u), "bench", max_attempts=4) for u in urls])


async def timed(
    repeats: int,
    operation: Callable[[], Awaitable[Any]],
    after: Callable[[Any], Awaitable[None]] | None = None,
) -> list[float]:
    """Milliseconds of each of `repeats` calls of `operation` (`after` runs untimed)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = await operation()
        times.append((time.perf_counter() - started) * 1000)
        if after is not None:
            await after(result)
    return times


async def claim_plans(database: Database, claim: Callable[[], Awaitable[Any]]) -> tuple[str, Any]:
    """The plan of every query one claim sends, and the claim's result. The statements are
    captured as the claim runs, then explained (on PostgreSQL with EXPLAIN ANALYZE, which
    runs them again, in a transaction that is rolled back)."""
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        many = isinstance(parameters, list)  # executemany: one row per parameter set
        if not many and statement.lstrip().upper().startswith(("WITH", "UPDATE", "SELECT")):
            captured.append((statement, parameters))

    event.listen(database.engine.sync_engine, "before_cursor_execute", capture)
    try:
        result = await claim()
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", capture)
    parts = []
    async with database.engine.connect() as conn:
        for statement, parameters in captured:
            if statement.strip() == "SELECT 1" or statement.strip() == ";":
                continue  # the pool's ping
            rows = (await conn.exec_driver_sql(EXPLAIN[database.backend.name] + statement,
                                               parameters)).all()  # fmt: skip
            parts.append(f"-- {' '.join(statement.split())[:110]}...\n{_plan_text(rows)}")
        await conn.rollback()
    return "\n".join(parts), result


def _plan_text(rows: Sequence[Any]) -> str:
    if not rows:
        return "(no table read)"
    if len(rows[0]) == 1:  # PostgreSQL: one line per row
        return "\n".join(row[0] for row in rows)
    depth = {0: -1}  # SQLite: (id, parent, notused, detail)
    lines = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return "\n".join(lines)


async def measure(database: Database, args: Any) -> tuple[dict[str, list[float]], str]:
    """Time each operation; returns the times and the claim's query plans."""
    views = PartSettings.of(Settings())
    queue, store = Queue(database, views.shares, views.records), JobStore(database, utc_now)
    worker = f"bench:{uuid.uuid4().hex[:8]}"
    submitted = args.pending

    async def claim() -> list[Any]:
        leases = await queue.claim(worker, BATCH, utc_now(), 60)
        if len(leases) != BATCH:
            raise RuntimeError(f"claimed {len(leases)} jobs, expected {BATCH}")
        return leases

    async def finish(leases: list[Any]) -> None:
        """Untimed: the claimed jobs succeed, and as many new ones join the queue's tail."""
        nonlocal submitted
        now = utc_now()
        await queue.record(
            [policy.settle(lease, RESULT, 1, now, views.retry) for lease in leases], now
        )
        await top_up(store, len(leases), submitted)
        submitted += len(leases)

    plans, leases = await claim_plans(database, claim)
    await finish(leases)
    never = datetime(2000, 1, 1, tzinfo=UTC)
    chores = MaintenanceStore(database)
    times = {
        "claim 32": await timed(args.repeats, claim, finish),
        "next_due_at": await timed(args.repeats // 4, lambda: queue.next_due_at(utc_now())),
        "overdue": await timed(args.repeats // 4, lambda: chores.overdue(never)),
        "list dead, 50": await timed(
            args.repeats // 4, lambda: store.list(statuses=[JobStatus.DEAD], limit=50)
        ),
        "stats": await timed(max(3, args.repeats // 20), store.stats),
    }
    return times, plans


async def run(args: Any) -> tuple[list[list[str]], list[str]]:
    rows: list[list[str]] = []
    plans: list[str] = []
    results: dict[tuple[str, int, int, int], dict[str, list[float]]] = {}
    for backend in backends(args.backend):
        url = await fresh_database(backend, DATABASE)
        database = Database(url)
        await top_up(JobStore(database, utc_now), args.pending, 0)
        loaded = 0
        # The terminal sizes at the domains the pending jobs name; then, at the largest
        # terminal size, the domain-row sizes.
        steps = [(size, 0, 0) for size in args.terminal]
        steps += [(args.terminal[-1], size, 0) for size in args.domain_rows]
        last_rows = args.domain_rows[-1] if args.domain_rows else 0
        steps += [(args.terminal[-1], last_rows, size) for size in args.frontier]
        crawl_id = None
        for terminal, domain_rows, frontier in steps:
            started = time.perf_counter()
            if terminal > loaded:
                await add_terminal_rows(database, loaded + 1, terminal)
                loaded = terminal
            domain_rows = await add_orphan_domains(database, domain_rows)
            crawl_id = await add_frontier(database, crawl_id, frontier)
            if args.analyze:
                await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
            shape = (
                f"{terminal:,} terminal rows, {domain_rows:,} domain rows, "
                f"{frontier:,} frontier rows"
            )
            print(f"{backend}: {shape} in {time.perf_counter() - started:.1f}s", flush=True)
            found, plan = await measure(database, args)
            results[backend, terminal, domain_rows, frontier] = found
            plans.append(f"{backend}, {shape}:\n{plan}")
            for operation, times in found.items():
                print(
                    f"  {operation:16} median {median(times):8.2f} ms"
                    f"  p99 {percentile(times, 0.99):8.2f} ms",
                    flush=True,
                )
        await database.dispose()
        await drop_database(backend, DATABASE)
    for (backend, terminal, domain_rows, frontier), found in results.items():
        for operation, times in found.items():
            rows.append(
                [
                    backend,
                    f"{terminal:,}",
                    f"{domain_rows:,}",
                    f"{frontier:,}",
                    operation,
                    str(len(times)),
                    fmt(median(times), 2),
                    fmt(percentile(times, 0.99), 2),
                ]
            )
    return rows, plans


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--terminal",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[1000, 1_000_000],
        help="terminal rows, ascending (default 1000,1000000)",
    )
    parser.add_argument(
        "--domain-rows",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[],
        help="rows in the domains table, ascending, measured at the largest terminal size"
        " (default none: only the 100 domains of the pending jobs)",
    )
    parser.add_argument(
        "--frontier",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[],
        help="pages waiting in a crawl's frontier, ascending, measured at the largest"
        " terminal and domain-row sizes (default none)",
    )
    parser.add_argument("--pending", type=int, default=1000, help="pending jobs (default 1000)")
    parser.add_argument("--repeats", type=int, default=200, help="claims per size (default 200)")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="run ANALYZE after loading (the service never does on SQLite;"
        " PostgreSQL's autovacuum would, but it is off on this machine)",
    )
    args = parser.parse_args()
    began = time.monotonic()
    print(", ".join(f"{k} {v}" for k, v in asyncio.run(environment()).items()), flush=True)
    rows, plans = asyncio.run(run(args))
    headers = [
        "backend",
        "terminal rows",
        "domain rows",
        "frontier rows",
        "operation",
        "n",
        "median ms",
        "p99 ms",
    ]
    print("\n" + table(headers, rows))
    print("\nClaim query plans:\n\n" + "\n\n".join(plans))
    print(f"\ndone in {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
