"""Ten million rows (issue 26, part 4): the claim, the dead list, stats and retention on a
table of `--jobs` jobs, a tenth of them pending.

    python -m bench.ten_million --backend postgresql --jobs 10000000
    python -m bench.ten_million --backend sqlite --jobs 1000000 --cycles 0
    python -m bench.ten_million --jobs 100000 --prune 10000     # a quick look

The database (`ingest_tenmillion`; bench/results/ingest_tenmillion.db on SQLite) is made by
the project's migrations, then filled by set-based SQL inside the database (`fill`). On
PostgreSQL the filled tables' indexes and constraints are dropped first and made again after,
exactly as the migrations declared them (checked), which is quicker than keeping them up to
date row by row. What it holds:

- `--jobs` jobs over `--domains` domains and `--tenants` tenants, both skewed (the first
  domains and tenants hold the most: a square and a cube of a uniform draw), their ids
  made from their creation times as the app makes them (`_TIME_ORDERED_ID`);
- the newest tenth pending (1 M of 10 M), created over the last two hours: four in five
  due, one in five waiting for a retry up to an hour away with 1-2 attempts spent, one in
  a hundred at priority 5;
- the rest finished over the 30 days before: 95 % succeeded, 4 % dead, 1 % cancelled;
- 1-3 attempts rows per job that ran (a succeeded job mostly 1, a dead one 1 (fatal) or 3);
- a content row of 5-6 KB (body, text and Markdown) for `--content-share` of the
  succeeded jobs (5 %: all of them would be 8.5 M rows, some 40 GB).

Then VACUUM ANALYZE, as autovacuum would leave the tables (it is off on this machine), and
with the project's own code paths:

- claim: `Queue.claim(worker, 32, now, 60)` `--repeats` times as a draining worker calls
  it, each followed by recording its jobs as succeeded (timed apart), as bench.fair_claim
  does;
- dead list: `JobStore.list([dead], limit=50)` (what `GET /jobs?status=dead` calls): the
  first page, the next through its cursor, and pages whose cursor sits half-way down and
  at the end of the dead jobs;
- stats: `JobStore.stats()` (what `GET /stats` calls), whole and for the biggest tenant;
- with `--steady S`: claims and records back to back for S seconds (each claim's jobs
  recorded as above), the claims' p50 and p99 per 500: the drift of a table gathering
  dead row versions, or kept by autovacuum where it runs (some 200,000 jobs a 120 s);
- retention (`--cycles` times): `prune_jobs` deleting `--prune` succeeded jobs (the oldest)
  in its batches while claims run beside it (their latency before and during), then VACUUM
  as autovacuum would, then as many finished jobs inserted again, newer (the job counts'
  changes folded after the delete and after the refill, as a worker does every 30 s);
  the tables' and indexes' sizes at each step.

The plan of the list and stats queries is printed (PostgreSQL: EXPLAIN ANALYZE, BUFFERS).
"""

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.clock import utc_now
from app.model import JobStatus
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.jobs.cursor import encode_cursor
from app.store.maintenance import MaintenanceStore
from app.store.queue import Queue
from app.store.retention import prune_jobs
from app.store.tables import Job
from app.worker.maintenance import FOLD_INTERVAL
from bench.claim import claim_plans
from bench.fair_claim import RESULT
from bench.harness import PG_SERVER, drop_database, fresh_database
from bench.numbers import fmt, median, percentile, table

DATABASE = "ingest_tenmillion"
CHUNK = 1_000_000
"""Jobs inserted per statement, each statement its own transaction."""
FINISHED_SPAN = timedelta(days=30)
PENDING_SPAN = timedelta(hours=2)
FILLED = ("jobs", "attempts", "job_contents")

# One row per g of first..last: pending from `pending_from` on (created `pending_step`
# seconds apart from `pending_base`), finished before it (`step` seconds apart from `base`).
_JOB_COLUMNS = """id, url, domain, tenant, status, priority, attempts, max_attempts, deferrals,
    retry_after, last_error_kind, last_error_type, last_error_message, last_error_http_status,
    last_error_at, dead_reason, result_http_status, result_final_url, result_content_type,
    result_bytes, result_sha256, result_title, result_text_length, result_metadata,
    result_text_sha256, content_version, changed_at, created_at, updated_at, started_at,
    finished_at"""
_JOB_VALUES = """
    s.id, 'https://' || s.domain || '/page/' || s.g, s.domain, s.tenant, k.status,
    CASE WHEN k.status = 'pending' AND s.r < 0.01 THEN 5 ELSE 0 END,
    k.attempts, 3, 0,
    CASE WHEN k.retrying THEN CAST(:now_ts AS timestamp) + (s.r2 / 0.2) * interval '1 hour' END,
    CASE WHEN k.failed THEN k.kind END,
    CASE WHEN k.failed THEN 'HTTPStatusError' END,
    CASE WHEN k.failed THEN 'HTTP ' || k.http_status END,
    CASE WHEN k.failed THEN k.http_status END,
    CASE WHEN k.failed THEN k.finished END,
    CASE WHEN k.status = 'dead' THEN
        CASE WHEN k.kind = 'fatal' THEN 'fatal' ELSE 'retries_exhausted' END END,
    CASE WHEN k.status = 'succeeded' THEN 200 END,
    CASE WHEN k.status = 'succeeded' THEN 'https://' || s.domain || '/page/' || s.g END,
    CASE WHEN k.status = 'succeeded' THEN 'text/html; charset=utf-8' END,
    CASE WHEN k.status = 'succeeded' THEN 20000 + (s.r2 * 60000)::int END,
    CASE WHEN k.status = 'succeeded' THEN md5(s.id) || md5(s.domain || s.g) END,
    CASE WHEN k.status = 'succeeded' THEN 'Page ' || s.g || ' of ' || s.domain END,
    CASE WHEN k.status = 'succeeded' THEN 1500 END,
    CASE WHEN k.status = 'succeeded' THEN CAST('{"language": "en"}' AS json) END,
    CASE WHEN k.status = 'succeeded' THEN md5(s.g || s.domain) || md5(s.id) END,
    CASE WHEN k.stored THEN 1 END,
    CASE WHEN k.stored THEN k.finished END,
    s.created, coalesce(k.finished, s.created),
    CASE WHEN k.status IN ('succeeded', 'dead') THEN k.finished - interval '2 seconds' END,
    CASE WHEN k.status <> 'pending' THEN k.finished END
"""
# The id the app gives a job made at s0.created (`app.store.tables.new_job_id`): a UUID of
# version 7, the time in ms, then the version, 12 random bits, the variant and 62 more.
_TIME_ORDERED_ID = """(
    SELECT substr(t, 1, 8) || '-' || substr(t, 9, 4) || '-7' || substr(x, 1, 3) || '-'
           || substr('89ab', 1 + floor(random() * 4)::int, 1) || substr(x, 4, 3) || '-'
           || substr(x, 7, 12)
    FROM (SELECT lpad(to_hex(floor(extract(epoch FROM s0.created) * 1000)::bigint), 12, '0')
                 AS t, md5(random()::text) AS x) AS parts)"""
_RANDOM_ID = "gen_random_uuid()::text"
"""A job made before ids were time-ordered (version 4), for `--random-ids`."""


def fill_jobs_sql(new_id: str) -> str:
    """The statement that inserts jobs first..last, each id made by the SQL `new_id`."""
    return f"""
    INSERT INTO jobs ({_JOB_COLUMNS})
    SELECT {_JOB_VALUES}
    FROM (SELECT s0.*, {new_id} AS id FROM (
        SELECT g, random() AS r, random() AS r2,
               random() AS r3,
               'd' || floor(CAST(:domains AS int) * power(random(), 2))::int || '.test' AS domain,
               't' || floor(CAST(:tenants AS int) * power(random(), 3))::int AS tenant,
               CASE WHEN g >= CAST(:pending_from AS bigint)
                    THEN CAST(:pending_base AS timestamp) + (g - CAST(:pending_from AS bigint))
                         * CAST(:pending_step AS float8) * interval '1 second'
                    ELSE CAST(:base AS timestamp) + (g - CAST(:first AS bigint))
                         * CAST(:step AS float8) * interval '1 second' END AS created
        FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g
    ) AS s0) AS s,
    LATERAL (
        SELECT status, attempts, failed, kind, http_status,
               status = 'pending' AND attempts > 0 AS retrying,
               status = 'succeeded' AND s.r3 < :content_share AS stored,
               CASE WHEN status = 'pending' AND attempts > 0
                    THEN s.created + attempts * interval '30 seconds'
                    WHEN status <> 'pending'
                    THEN s.created + (1 + s.r2 * 60) * interval '1 second' END AS finished
        FROM (
            SELECT status,
                   CASE status
                       WHEN 'pending' THEN CASE WHEN s.r2 < 0.2 THEN 1 + (s.r2 < 0.1)::int
                                                ELSE 0 END
                       WHEN 'succeeded' THEN CASE WHEN s.r2 < 0.85 THEN 1
                                                  WHEN s.r2 < 0.95 THEN 2 ELSE 3 END
                       WHEN 'dead' THEN CASE WHEN s.r2 < 0.5 THEN 1 ELSE 3 END
                       ELSE 0 END AS attempts,
                   (status = 'pending' AND s.r2 < 0.2) OR status = 'dead' AS failed,
                   CASE WHEN status = 'dead' AND s.r2 < 0.5 THEN 'fatal'
                        ELSE 'transient' END AS kind,
                   CASE WHEN status = 'dead' AND s.r2 < 0.5 THEN 404 ELSE 503 END AS http_status
            FROM (SELECT CASE WHEN s.g >= CAST(:pending_from AS bigint) THEN 'pending'
                              WHEN s.r < 0.95 THEN 'succeeded'
                              WHEN s.r < 0.99 THEN 'dead'
                              ELSE 'cancelled' END AS status) AS st
        ) AS a
    ) AS k
"""


# Each job's attempts, the last one ending as the job did (a pending job's all failed).
FILL_ATTEMPTS = """
    INSERT INTO attempts (job_id, number, worker_id, started_at, finished_at, outcome,
                          error_type, message, http_status, duration_ms, next_retry_at,
                          queue_lag_ms)
    SELECT j.id, n, 'bench-' || (n % 8), t.started, t.started + interval '900 milliseconds',
           o.outcome,
           CASE WHEN o.outcome <> 'succeeded' THEN 'HTTPStatusError' END,
           CASE WHEN o.outcome <> 'succeeded' THEN 'HTTP ' || o.http_status END,
           o.http_status, 900,
           CASE WHEN n < j.attempts OR j.status = 'pending'
                THEN t.started + interval '30 seconds' END,
           40
    FROM jobs AS j
    CROSS JOIN LATERAL generate_series(1, j.attempts) AS n
    CROSS JOIN LATERAL (
        SELECT coalesce(j.finished_at, j.last_error_at)
               - (j.attempts - n) * interval '30 seconds' - interval '1 second' AS started
    ) AS t
    CROSS JOIN LATERAL (
        SELECT CASE WHEN n = j.attempts AND j.status = 'succeeded' THEN 'succeeded'
                    WHEN n = j.attempts AND j.last_error_kind = 'fatal' THEN 'fatal'
                    ELSE 'transient' END AS outcome,
               CASE WHEN n = j.attempts AND j.status = 'succeeded' THEN 200
                    WHEN n = j.attempts AND j.last_error_kind = 'fatal' THEN 404
                    ELSE 503 END AS http_status
    ) AS o
    WHERE j.attempts > 0 AND j.created_at >= :since AND j.created_at < :until
      AND NOT EXISTS (SELECT FROM attempts AS a WHERE a.job_id = j.id)
"""
# Body 3.3 KB, text and Markdown 1.5 KB each: hex of md5s, which compresses about as HTML.
FILL_CONTENTS = """
    INSERT INTO job_contents (job_id, version, tenant, text_sha256, title, page_metadata,
                              content, content_type, text, markdown, text_length, stored_at)
    SELECT j.id, 1, j.tenant, j.result_text_sha256, j.result_title,
           CAST('{"language": "en"}' AS json),
           convert_to('<html><body><p>' || b.body || '</p></body></html>', 'UTF8'),
           j.result_content_type, left(b.body, 1500),
           '# ' || j.result_title || E'\n\n' || left(b.body, 1500), 1500, j.finished_at
    FROM jobs AS j
    CROSS JOIN LATERAL (
        SELECT string_agg(md5(j.id || k), ' ') AS body FROM generate_series(1, 100) AS k
    ) AS b
    WHERE j.content_version = 1 AND j.created_at >= :since AND j.created_at < :until
      AND NOT EXISTS (SELECT FROM job_contents AS c WHERE c.job_id = j.id)
"""
FILL_NAMES = (
    """INSERT INTO domains (domain, consecutive_failures, in_flight)
       SELECT 'd' || g || '.test', 0, 0 FROM generate_series(0, CAST(:domains AS int) - 1) AS g""",
    """INSERT INTO tenants (tenant)
       SELECT 't' || g FROM generate_series(0, CAST(:tenants AS int) - 1) AS g""",
)
# The constraints and indexes dropped while filling, and made again after.
CONSTRAINTS = """
    SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype::text
    FROM pg_constraint
    WHERE contype IN ('p', 'u', 'f')
      AND (conrelid::regclass::text = ANY(:tables) OR confrelid::regclass::text = ANY(:tables))
    ORDER BY 1, 2
"""
INDEXES = """
    SELECT tablename, indexname, indexdef FROM pg_indexes
    WHERE tablename = ANY(:tables)
      AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))
    ORDER BY 1, 2
"""
SIZES = """
    SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid),
           pg_total_relation_size(c.oid), c.reltuples::bigint
    FROM pg_class AS c WHERE c.relname = ANY(:tables) ORDER BY c.relname
"""


@dataclass(frozen=True)
class Shape:
    jobs: int
    domains: int
    tenants: int
    content_share: float
    random_ids: bool = False

    @property
    def pending(self) -> int:
        return self.jobs // 10


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


async def run_sql(database: Database, *statements: str, **params: Any) -> None:
    """`statements` in one transaction, each given the `params` it names."""

    def run(conn: sa.Connection) -> None:
        for sql in statements:
            stmt = sa.text(sql)
            conn.execute(stmt, {k: v for k, v in params.items() if k in stmt._bindparams})

    await database.transact(run)


async def fill_jobs(
    database: Database,
    shape: Shape,
    first: int,
    last: int,
    base: datetime,
    step: float,
    pending_from: int,
) -> None:
    """Jobs first..last (see `fill_jobs_sql`), `CHUNK` a statement, pending from `pending_from`
    on (a refill passes one past `last`: finished jobs only)."""
    now = utc_now().replace(tzinfo=None)
    pending_step = PENDING_SPAN.total_seconds() / max(shape.pending, 1)
    for start in range(first, last + 1, CHUNK):
        began = time.monotonic()
        await run_sql(
            database,
            fill_jobs_sql(_RANDOM_ID if shape.random_ids else _TIME_ORDERED_ID),
            first=start,
            last=min(start + CHUNK - 1, last),
            pending_from=pending_from,
            pending_base=now - PENDING_SPAN,
            pending_step=pending_step,
            base=base + timedelta(seconds=(start - first) * step),
            step=step,
            now_ts=now,
            domains=shape.domains,
            tenants=shape.tenants,
            content_share=shape.content_share,
        )
        say(f"  jobs {start:,}..{min(start + CHUNK - 1, last):,} ({time.monotonic() - began:.0f}s)")


async def fill_children(database: Database, since: datetime, until: datetime) -> None:
    """The attempts and content rows of the jobs created from `since` to `until`."""
    for name, sql in (("attempts", FILL_ATTEMPTS), ("contents", FILL_CONTENTS)):
        began = time.monotonic()
        await run_sql(database, sql, since=since, until=until)
        say(f"  {name} ({time.monotonic() - began:.0f}s)")


async def schema_objects(database: Database) -> tuple[Any, Any]:
    async with database.read() as conn:
        constraints = (await conn.execute(sa.text(CONSTRAINTS), {"tables": list(FILLED)})).all()
        indexes = (await conn.execute(sa.text(INDEXES), {"tables": list(FILLED)})).all()
    return constraints, indexes


async def fill(database: Database, shape: Shape) -> None:
    """The whole database of `shape` (PostgreSQL), then VACUUM ANALYZE."""
    constraints, indexes = await schema_objects(database)
    foreign = [c for c in constraints if c[3] == "f"]
    keys = [c for c in constraints if c[3] != "f"]
    drops = [f'ALTER TABLE {t} DROP CONSTRAINT "{n}"' for t, n, _, _ in foreign + keys]
    drops += [f'DROP INDEX "{n}"' for _, n, _ in indexes]
    for statement in drops:
        await run_sql(database, statement)
    await run_sql(database, *FILL_NAMES, domains=shape.domains, tenants=shape.tenants)
    now = utc_now().replace(tzinfo=None)
    base = now - PENDING_SPAN - FINISHED_SPAN
    finished = shape.jobs - shape.pending
    step = FINISHED_SPAN.total_seconds() / max(finished, 1)
    await fill_jobs(database, shape, 1, shape.jobs, base, step, shape.jobs - shape.pending + 1)
    await fill_children(database, base, now + timedelta(days=1))
    began = time.monotonic()
    # Made again in the order they depend on each other: keys, indexes, foreign keys.
    memory = "SET LOCAL maintenance_work_mem = '512MB'"
    for table_name, name, definition, _ in keys:
        await run_sql(
            database, memory, f'ALTER TABLE {table_name} ADD CONSTRAINT "{name}" {definition}'
        )
    for _, _, definition in indexes:
        await run_sql(database, memory, definition)
    for table_name, name, definition, _ in foreign:
        await run_sql(database, f'ALTER TABLE {table_name} ADD CONSTRAINT "{name}" {definition}')
    say(f"  indexes and constraints ({time.monotonic() - began:.0f}s)")
    if await schema_objects(database) != (constraints, indexes):
        raise RuntimeError("the indexes and constraints made again differ from the migrations'")
    await vacuum(database, analyze=True)


async def vacuum(database: Database, analyze: bool = False) -> None:
    """What autovacuum would do (off on this machine): VACUUM outside a transaction."""
    began = time.monotonic()
    async with database.engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        await raw.execute("VACUUM (ANALYZE)" if analyze else "VACUUM")
    say(f"  vacuum ({time.monotonic() - began:.0f}s)")


async def sizes(database: Database) -> dict[str, tuple[int, int, int, int]]:
    async with database.read() as conn:
        rows = (await conn.execute(sa.text(SIZES), {"tables": list(FILLED)})).all()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


async def timed(repeats: int, operation: Callable[[], Awaitable[Any]]) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await operation()
        times.append((time.perf_counter() - started) * 1000)
    return times


class Claimer:
    """Claims of 32 as a draining worker makes them (after a full claim, without looking
    first: waiting jobs that came due are moved in once a second, not on every claim), each
    followed (untimed) by recording its jobs as succeeded so the domains' in-flight counts
    stay as a steady worker leaves them, and the job counts' changes folded every
    `FOLD_INTERVAL`, as a worker folds them (unfolded, every stats read sums them)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        views = PartSettings.of(Settings(_env_file=None))
        self.queue = Queue(database, views.shares, views.records)
        self.chores = MaintenanceStore(database)
        self.retry = views.retry
        self.full = False
        self.next_fold = time.monotonic()
        self.records: list[float] = []
        """How long each record of a claim's jobs took (ms)."""

    async def once(self) -> float:
        started = time.perf_counter()
        leases = await self.queue.claim("bench", 32, utc_now(), 60, look_first=not self.full)
        took = (time.perf_counter() - started) * 1000
        assert len(leases) == 32, len(leases)
        self.full = True
        now = utc_now()
        retry = self.retry
        started = time.perf_counter()
        await self.queue.record([policy.settle(x, RESULT, 1, now, retry) for x in leases], now)
        self.records.append((time.perf_counter() - started) * 1000)
        if time.monotonic() >= self.next_fold:
            await self.chores.fold_counts()
            self.next_fold = time.monotonic() + FOLD_INTERVAL.total_seconds()
        return took

    async def repeat(self, repeats: int) -> list[float]:
        return [await self.once() for _ in range(repeats)]

    async def until(self, done: asyncio.Event) -> list[float]:
        times = []
        while not done.is_set():
            times.append(await self.once())
        return times


async def steady(database: Database, seconds: float, window: int = 500) -> list[list[str]]:
    """Claims and records back to back for `seconds`, as a worker draining the backlog at
    full speed: a row per `window` claims, so the drift of a table gathering dead row
    versions (and vacuumed, if autovacuum runs) shows."""
    claimer = Claimer(database)
    rows: list[list[str]] = []
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        claims, wal = await claims_with_wal(claimer, window)
        name = f"steady, claims {len(rows) * window + 1:,}-{(len(rows) + 1) * window:,}"
        rows.append(line(f"{name} ({time.monotonic() - began:.0f} s)", claims, wal))
        say(" ".join(rows[-1]))
    return rows


async def dead_cursor(database: Database, depth: int) -> str:
    """The cursor of the page that starts `depth` dead jobs down the list."""
    stmt = sa.text(
        "SELECT created_at, id FROM jobs WHERE status = 'dead'"
        " ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET :depth"
    )
    async with database.read() as conn:
        created_at, job_id = (await conn.execute(stmt, {"depth": depth})).one()
    if isinstance(created_at, str):  # SQLite
        created_at = datetime.fromisoformat(created_at)
    return encode_cursor(
        Job.model_construct(created_at=created_at.replace(tzinfo=utc_now().tzinfo), id=job_id)  # type: ignore[call-arg]
    )


def line(name: str, times: list[float], wal: str = "-") -> list[str]:
    return [name, str(len(times)), fmt(median(times), 2), fmt(percentile(times, 0.99), 2), wal]


async def wal_position(database: Database) -> int:
    """Where the server's WAL ends now (asyncpg reads a pg_lsn as an int)."""
    async with database.read() as conn:
        return int((await conn.execute(sa.text("SELECT pg_current_wal_insert_lsn()"))).scalar_one())


async def claims_with_wal(claimer: "Claimer", repeats: int) -> tuple[list[float], str]:
    """`repeats` claims (each with its record), and the WAL each claim and record wrote:
    KB, and how many of them were whole pages (a page's first change since a checkpoint is
    written whole), read back from the WAL itself (pg_walinspect: the whole server's WAL, so
    measured on a quiet one)."""
    began = await wal_position(claimer.database)
    times = await claimer.repeat(repeats)
    ended = await wal_position(claimer.database)
    stmt = sa.text(
        "SELECT pg_wal_lsn_diff(CAST(:ended AS pg_lsn), CAST(:began AS pg_lsn)),"
        " (SELECT sum(fpi_size) FROM pg_get_wal_stats(CAST(:began AS pg_lsn),"
        " CAST(:ended AS pg_lsn)))"
    )
    async with claimer.database.read() as conn:
        written, pages = (await conn.execute(stmt, {"began": began, "ended": ended})).one()
    kb = float(written) / repeats / 1024
    return times, f"{kb:.0f} KB, {float(pages or 0) / repeats / 1024:.0f} KB whole pages"


async def measure_reads(database: Database, repeats: int) -> tuple[list[list[str]], str]:
    """Claim, the dead list and stats: their rows of the table and the plans."""
    store = JobStore(database, utc_now)
    claimer = Claimer(database)
    rows = [line("claim of 32 (`Queue.claim`)", *await claims_with_wal(claimer, repeats))]
    rows.append(line("record of its 32 jobs (`Queue.record`)", claimer.records))
    claim_plan, leases = await claim_plans(
        database, lambda: claimer.queue.claim("bench", 32, utc_now(), 60)
    )
    now = utc_now()
    retry = claimer.retry
    await claimer.queue.record([policy.settle(x, RESULT, 1, now, retry) for x in leases], now)
    async with database.read() as conn:
        dead = (
            await conn.execute(sa.text("SELECT count(*) FROM jobs WHERE status = 'dead'"))
        ).scalar_one()
        biggest = (
            await conn.execute(sa.text("SELECT tenant FROM tenants ORDER BY tenant LIMIT 1"))
        ).scalar_one()
    first = await store.list([JobStatus.DEAD], limit=50)
    pages: list[tuple[str, str | None]] = [("first", None), ("second", first.next_cursor)]
    pages += [
        (f"at {depth:,}", await dead_cursor(database, depth)) for depth in (dead // 2, dead - 60)
    ]
    plans = [f"claim of 32:\n{claim_plan}"]
    for name, cursor in pages:

        async def page(cursor: str | None = cursor) -> Any:
            return await store.list([JobStatus.DEAD], limit=50, cursor=cursor)

        rows.append(line(f"dead list, {name} page of 50 of {dead:,}", await timed(repeats, page)))
        plan, _ = await claim_plans(database, page)
        plans.append(f"dead list, {name} page:\n{plan}")
    for name, tenant in (("all", None), (f"tenant {biggest}", biggest)):

        async def stats(tenant: str | None = tenant) -> Any:
            return await store.stats(tenant)

        rows.append(line(f"stats ({name})", await timed(max(5, repeats // 5), stats)))
        plan, _ = await claim_plans(database, stats)
        plans.append(f"stats ({name}):\n{plan}")
    return rows, "\n\n".join(plans)


async def retention_cycle(
    database: Database, shape: Shape, prune: int, cycle: int
) -> tuple[list[list[str]], dict[str, dict[str, tuple[int, int, int, int]]]]:
    """Delete the oldest `prune` succeeded jobs through `prune_jobs` while claims run, VACUUM,
    insert as many finished jobs again: claim times and sizes at each step."""
    claimer = Claimer(database)
    before = await claimer.repeat(50)
    # The finishing time below which `prune` succeeded jobs lie.
    stmt = sa.text(
        "SELECT finished_at FROM jobs WHERE status IN ('succeeded', 'cancelled')"
        " AND refresh_every IS NULL AND finished_at IS NOT NULL"
        " ORDER BY created_at, id LIMIT 1 OFFSET :n"
    )
    async with database.read() as conn:
        older_than = (await conn.execute(stmt, {"n": prune})).scalar_one()
    measured = {"before": await sizes(database)}
    done = asyncio.Event()

    async def pruning() -> int:
        try:
            return await prune_jobs(database, older_than.replace(tzinfo=utc_now().tzinfo))
        finally:
            done.set()

    began = time.monotonic()
    deleted, during = await asyncio.gather(pruning(), claimer.until(done))
    took = time.monotonic() - began
    say(f"  cycle {cycle}: pruned {deleted:,} in {took:.0f}s")
    # Every worker folds the changes to the job counts each FOLD_INTERVAL: the ones
    # the delete and the refill below leave are folded as a worker running beside would.
    await claimer.chores.fold_counts()
    measured["after the delete"] = await sizes(database)
    await vacuum(database)
    measured["after VACUUM"] = await sizes(database)
    async with database.read() as conn:
        pending_since = (
            await conn.execute(sa.text("SELECT min(created_at) FROM jobs WHERE status = 'pending'"))
        ).scalar_one()
    # Just older than the pending jobs: none of them has attempts or content to add twice.
    base = pending_since - timedelta(hours=1)
    first = shape.jobs + cycle * prune + 1
    last = first + prune - 1
    await fill_jobs(database, shape, first, last, base, 3600 / prune, last + 1)
    await fill_children(database, base, base + timedelta(hours=1))
    await claimer.chores.fold_counts()
    await vacuum(database, analyze=True)
    measured["after the refill"] = await sizes(database)
    rows = [
        line(f"cycle {cycle}: claim of 32 before retention", before),
        line(
            f"cycle {cycle}: claim of 32 while it deletes {deleted:,} jobs ({took:.0f} s)", during
        ),
    ]
    return rows, measured


def size_table(measured: dict[str, dict[str, tuple[int, int, int, int]]]) -> str:
    mb = 1024 * 1024
    rows = []
    for step, tables in measured.items():
        for name, (heap, indexes, total, tuples) in tables.items():
            rows.append(
                [
                    step,
                    name,
                    f"{tuples:,}",
                    fmt(heap / mb, 0),
                    fmt(indexes / mb, 0),
                    fmt(total / mb, 0),
                ]
            )
    return table(["when", "table", "rows (estimate)", "heap MB", "indexes MB", "total MB"], rows)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("postgresql",), default="postgresql")
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--domains", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--content-share", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument(
        "--steady", type=float, default=0, help="then claim and record back to back for S s"
    )
    parser.add_argument("--prune", type=int, default=1_000_000)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--reuse", action="store_true", help="measure the kept database")
    parser.add_argument(
        "--random-ids",
        action="store_true",
        help="fill random ids (version 4), as jobs made before ids were time-ordered",
    )
    parser.add_argument(
        "--database", default=DATABASE, help="its name: two fills side by side need two"
    )
    args = parser.parse_args()
    shape = Shape(args.jobs, args.domains, args.tenants, args.content_share, args.random_ids)
    began = time.monotonic()
    if args.reuse:
        url = f"{PG_SERVER}/{args.database}"
    else:
        url = await fresh_database(args.backend, args.database)
    database = Database(url)
    try:
        await run_sql(database, "CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        if not args.reuse:
            say(f"filling {shape}")
            await fill(database, shape)
        say(f"filled in {time.monotonic() - began:.0f}s")
        measured = {"filled": await sizes(database)}
        rows, plans = await measure_reads(database, args.repeats)
        for name, n, p50, p99, _ in rows:
            say(f"  {name}: n {n}, p50 {p50} ms, p99 {p99} ms")
        print(f"{plans}\n\n{size_table(measured)}", flush=True)
        if args.steady:
            rows += await steady(database, args.steady)
        for cycle in range(1, args.cycles + 1):
            found, sized = await retention_cycle(database, shape, args.prune, cycle)
            rows += found
            measured |= {f"cycle {cycle}, {k}": v for k, v in sized.items()}
            say("\n".join(" ".join(row) for row in found))
            print(size_table({f"cycle {cycle}, {k}": v for k, v in sized.items()}), flush=True)
    finally:
        await database.dispose()
        if not args.keep:
            await drop_database(args.backend, args.database)
    print(f"\n{args.backend}, {shape}\n")
    print(table(["operation", "n", "p50 ms", "p99 ms", "WAL a claim and record"], rows))
    print("\n" + size_table(measured))
    print("\nPlans:\n\n" + plans)
    print(f"\ndone in {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    asyncio.run(main())
