"""Claim cost with many tenants and domains: does fair share and domain politeness cost much?

    python -m bench.fair_claim --backend both --pending 100000 --tenants 100 --domains 1000

For each backend: a fresh database with `--pending` pending jobs spread round-robin over
`--tenants` tenants and `--domains` domains (submitted through JobStore.submit, 1,000 a
batch), then ANALYZE. Then `--repeats` claims of 32 (`Queue.claim`, default domain limits:
8 in flight per domain), each followed, untimed, by recording the 32 jobs as succeeded so
the domains' in-flight counts stay as a steady worker leaves them. Prints the median and
p99 claim time in ms.
"""

import argparse
import asyncio
import time

import sqlalchemy as sa

from app import policy
from app.clock import utc_now
from app.model import Fetched, NewJob
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue
from bench.harness import backends, drop_database, fmt, fresh_database, median, percentile, table

RESULT = Fetched(200, "http://x/", "text/html", 1, "0" * 64, None)


async def measure(backend: str, args: argparse.Namespace) -> tuple[float, float]:
    name = "ingest_bench_fair"
    url = await fresh_database(backend, name)
    database = Database(url)
    try:
        store = JobStore(database, utc_now)
        for start in range(0, args.pending, 1000):
            await store.submit(
                [
                    NewJob(
                        url=f"http://d{i % args.domains}.test/{i}",
                        domain=f"d{i % args.domains}.test",
                        tenant=f"t{i % args.tenants}",
                        max_attempts=3,
                    )
                    for i in range(start, min(start + 1000, args.pending))
                ]
            )
        # Statistics as autovacuum (PostgreSQL) or `PRAGMA optimize` (SQLite) would leave them
        # on a table this size: without them the planner guesses a tenant has 3 rows.
        await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
        settings = Settings(_env_file=None)
        queue = Queue(database, settings)
        timings = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            leases = await queue.claim("bench", 32, utc_now(), 60)
            timings.append((time.perf_counter() - started) * 1000)
            assert len(leases) == 32, len(leases)
            now = utc_now()
            await queue.record(
                [policy.settle(lease, RESULT, 1, now, settings) for lease in leases], now
            )
        return median(timings), percentile(timings, 0.99)
    finally:
        await database.dispose()
        await drop_database(backend, name)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="both", choices=["sqlite", "postgresql", "both"])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--domains", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    rows = []
    for backend in backends(args.backend):
        p50, p99 = await measure(backend, args)
        rows.append([backend, fmt(p50, 2), fmt(p99, 2)])
    print(
        f"claim of 32 with {args.pending} pending jobs, {args.tenants} tenants, "
        f"{args.domains} domains ({args.repeats} claims)"
    )
    print(table(["backend", "claim p50 ms", "claim p99 ms"], rows))


if __name__ == "__main__":
    asyncio.run(main())
