"""A lone job's claim and record: their CPU back to back, and with the machine idle between
jobs, as at a trickle.

    python -m bench.lone_job --backend both --jobs 500 --rounds 2 --gap-ms 20

For each backend, a fresh database; each job is submitted alone (untimed), then, after
`--gap-ms` of idling (0: none), claimed as a worker woken by a submit claims it
(`Queue.claim`, not looking first) and recorded as succeeded (`Queue.record`), each timed by
this process's CPU (all its threads: SQLite's writer included; PostgreSQL's server not). The
gaps alternate within each round (0, gap, 0, gap, ...), so the machine's drift hits both.

What it shows: at 50 jobs a second each job finds the CPU's caches cold, and the very same
claim and record cost more than back to back. That part of a trickle's CPU a job is not in
the statements.
"""

import argparse
import asyncio
import time
from typing import Any

import sqlalchemy as sa

from app.clock import utc_now
from app.model import NewJob
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue
from bench.fair_claim import RESULT
from bench.harness import backends, drop_database, fresh_database
from bench.numbers import fmt, median, table

DATABASE = "ingest_bench_lone"
WARM_UP = 50


async def lone_jobs(url: str, jobs: int, gap: float) -> dict[str, float]:
    """`jobs` lone jobs `gap` seconds apart: CPU ms a claim and a record, statements a job."""
    database = Database(url)
    views = PartSettings.of(Settings(_env_file=None))
    queue, store = Queue(database, views.shares, views.records), JobStore(database, utc_now)
    statements = [0]

    def count(*_: Any) -> None:
        statements[0] += 1

    sa.event.listen(database.engine.sync_engine, "before_cursor_execute", count)
    claims, records, counted = 0.0, 0.0, 0
    try:
        for i in range(WARM_UP + jobs):
            domain = f"d{i % 7}.test"
            await store.submit([NewJob(f"http://{domain}/{i}", domain, f"t{i % 3}", 3)])
            await asyncio.sleep(gap)
            before = statements[0]
            started = time.process_time()
            leases = await queue.claim("bench", 32, utc_now(), 60, look_first=False)
            claimed = time.process_time()
            now = utc_now()
            await queue.record([policy.settle(x, RESULT, 1, now, views.retry) for x in leases], now)
            recorded = time.process_time()
            assert len(leases) == 1, len(leases)
            if i >= WARM_UP:
                claims += claimed - started
                records += recorded - claimed
                counted += statements[0] - before
    finally:
        await database.dispose()
    return {
        "claim_ms": claims * 1000 / jobs,
        "record_ms": records * 1000 / jobs,
        "statements": counted / jobs,
    }


async def run(args: argparse.Namespace) -> list[list[str]]:
    rows = []
    for backend in backends(args.backend):
        runs: dict[float, list[dict[str, float]]] = {0.0: [], args.gap_ms: []}
        for round_ in range(args.rounds):
            for gap in (0.0, args.gap_ms) if round_ % 2 == 0 else (args.gap_ms, 0.0):
                url = await fresh_database(backend, DATABASE)
                runs[gap].append(await lone_jobs(url, args.jobs, gap / 1000))
                print(f"round {round_ + 1} {backend} gap {gap:g} ms: {runs[gap][-1]}", flush=True)
        await drop_database(backend, DATABASE)
        back_to_back = median([r["claim_ms"] + r["record_ms"] for r in runs[0.0]])
        for gap, measured in runs.items():
            claim = median([r["claim_ms"] for r in measured])
            record = median([r["record_ms"] for r in measured])
            rows.append(
                [
                    backend,
                    f"{gap:g}",
                    fmt(claim, 3),
                    fmt(record, 3),
                    fmt(claim + record, 3),
                    fmt((claim + record) / back_to_back, 2),
                    # SQLite's statements run on its writer's own connection, uncounted here.
                    fmt(median([r["statements"] for r in measured]), 1)
                    if backend == "postgresql"
                    else "-",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=500, help="timed jobs per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="idle between jobs")
    args = parser.parse_args()
    rows = asyncio.run(run(args))
    headers = [
        "backend",
        "idle between jobs, ms",
        "claim CPU ms",
        "record CPU ms",
        "both",
        "x back to back",
        "statements a job (PostgreSQL)",
    ]
    print()
    print(table(headers, rows))


if __name__ == "__main__":
    main()
