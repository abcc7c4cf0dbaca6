"""Claim cost with many tenants and domains: does fair share and domain politeness cost much?

    python -m bench.fair_claim --backend both --pending 100000 --tenants 100 --domains 1000
    python -m bench.fair_claim --scheduled 0,100000    # beside 100,000 scheduled refreshes
    python -m bench.fair_claim --weighted              # tenants of weights 1 to 5

For each backend: a fresh database with `--pending` pending jobs spread round-robin over
`--tenants` tenants and `--domains` domains (submitted through JobStore.submit, 1,000 a
batch), then ANALYZE. Then `--repeats` claims of 32 (`Queue.claim` as a draining worker
calls it: after a full claim, without looking first; default domain limits: 8 in flight
per domain), each followed, untimed, by recording the 32 jobs as succeeded so the domains'
in-flight counts stay as a steady worker leaves them. Prints the median and p99 claim time
in ms. `bench.drain --scenarios fair` runs the same claims in its rounds.

`--weighted` gives the tenants weights (INGEST_TENANT_WEIGHTS: tenant i weighs 1 + i % 5),
so the claim's order is weighted fair share, not plain turns.

`--scheduled` adds that many succeeded jobs over the same tenants and domains, each waiting
for a scheduled refresh an hour away (`refresh_every`), as a table of monitored pages holds
them: the claim should not see them. With a comma-separated list, one database per count,
side by side; the look back a worker makes each pass (`MaintenanceStore.overdue`, finding no refresh
due) is timed too.
"""

import argparse
import asyncio
import time
from datetime import timedelta

import sqlalchemy as sa

from app.clock import utc_now
from app.model import Fetched, JobStatus, NewJob
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.maintenance import MaintenanceStore
from app.store.queue import Queue
from app.store.tables import jobs
from bench.harness import backends, drop_database, fresh_database
from bench.numbers import fmt, median, percentile, table
from bench.workers import Probe, cores_busy, cpu_between, other_cores

DATABASE = "ingest_bench_fair"
RESULT = Fetched(200, "http://x/", "text/html", 1, "0" * 64, None)


async def prepare(
    backend: str, pending: int, tenants: int, domains: int, scheduled: int = 0
) -> str:
    """A fresh database of `pending` jobs over `tenants` tenants and `domains` domains, and
    `scheduled` succeeded ones waiting for a refresh an hour away, analyzed; returns its URL."""
    url = await fresh_database(backend, DATABASE)
    database = Database(url)
    try:
        store = JobStore(database, utc_now)
        for kind, count in (("r", scheduled), ("p", pending)):
            for start in range(0, count, 1000):
                await store.submit(
                    [
                        NewJob(
                            url=f"http://d{i % domains}.test/{kind}{i}",
                            domain=f"d{i % domains}.test",
                            tenant=f"t{i % tenants}",
                            max_attempts=3,
                            refresh_every=3600 if kind == "r" else None,
                        )
                        for i in range(start, min(start + 1000, count))
                    ]
                )
            if kind == "r" and count:
                await database.transact(_scheduled)
        # Statistics as autovacuum (PostgreSQL) or `PRAGMA optimize` (SQLite) would leave them
        # on a table this size: without them the planner guesses a tenant has 3 rows.
        await database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    finally:
        await database.dispose()
    return url


def weights(tenants: int) -> dict[str, int]:
    """`--weighted`'s weights: tenant i weighs 1 + i % 5."""
    return {f"t{i}": 1 + i % 5 for i in range(tenants)}


async def claims(
    url: str, repeats: int, tenant_weights: dict[str, int] | None = None
) -> list[float]:
    """`repeats` claims of 32, each timed in ms; the claimed jobs are recorded (untimed)."""
    database = Database(url)
    try:
        views = PartSettings.of(Settings(_env_file=None, tenant_weights=tenant_weights or {}))
        queue = Queue(database, views.shares, views.records)
        timings = []
        full = False
        for _ in range(repeats):
            started = time.perf_counter()
            # As a draining worker claims: after a full claim, without looking first (and
            # moving waiting jobs that came due in once a second, not every claim).
            leases = await queue.claim("bench", 32, utc_now(), 60, look_first=not full)
            timings.append((time.perf_counter() - started) * 1000)
            assert len(leases) == 32, len(leases)
            full = True
            now = utc_now()
            await queue.record(
                [policy.settle(lease, RESULT, 1, now, views.retry) for lease in leases], now
            )
        return timings
    finally:
        await database.dispose()


def _scheduled(conn: sa.Connection) -> None:
    """The jobs submitted with `refresh_every` made succeeded, refreshing in an hour."""
    now = utc_now()
    conn.execute(
        sa.update(jobs)
        .where(jobs.c.refresh_every.is_not(None))
        .values(
            status=JobStatus.SUCCEEDED.value,
            content_version=1,
            finished_at=now,
            refresh_at=now + timedelta(hours=1),
        )
    )


async def look_backs(url: str, repeats: int) -> list[float]:
    """`repeats` of a worker's look back (`MaintenanceStore.overdue`: expired leases, and whether a
    refresh is due; none is), each timed in ms."""
    database = Database(url)
    try:
        chores = MaintenanceStore(database)
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            overdue = await chores.overdue(utc_now())
            timings.append((time.perf_counter() - started) * 1000)
            assert not overdue.refreshes_due
        return timings
    finally:
        await database.dispose()


class FairQueue:
    """The `prepare`d database per backend, made on first use and kept across rounds (each
    round's claims take 3,200 of its jobs), for `bench.drain --scenarios fair`."""

    def __init__(self, pending: int, tenants: int, domains: int) -> None:
        self.shape = (pending, tenants, domains)
        self.urls: dict[str, str] = {}

    async def measure(self, backend: str, repeats: int) -> dict:
        if backend not in self.urls:
            self.urls[backend] = await prepare(backend, *self.shape)
        probe = Probe(Database(self.urls[backend]))
        await probe.find_server()
        try:
            first = probe.sample([])
            timings = await claims(self.urls[backend], repeats)
            last = probe.sample([])
        finally:
            await probe.database.dispose()
        ours = cpu_between(first, last) + last.server - first.server
        return {
            "p50_ms": median(timings),
            "p99_ms": percentile(timings, 0.99),
            "cores_busy": cores_busy(first, last),
            "other_cores": other_cores(first, last, ours),
        }

    async def drop(self) -> None:
        for backend in self.urls:
            await drop_database(backend, DATABASE)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="both", choices=["sqlite", "postgresql", "both"])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--domains", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument(
        "--scheduled",
        default="0",
        help="succeeded jobs waiting for a scheduled refresh; a comma-separated list compares",
    )
    parser.add_argument(
        "--weighted", action="store_true", help="tenant i weighs 1 + i %% 5 (INGEST_TENANT_WEIGHTS)"
    )
    args = parser.parse_args()
    tenant_weights = weights(args.tenants) if args.weighted else None
    rows = []
    for backend in backends(args.backend):
        for scheduled in [int(n) for n in args.scheduled.split(",")]:
            began = time.monotonic()
            url = await prepare(backend, args.pending, args.tenants, args.domains, scheduled)
            prepared = time.monotonic()
            try:
                timings = await claims(url, args.repeats, tenant_weights)
                looks = await look_backs(url, args.repeats)
            finally:
                await drop_database(backend, DATABASE)
            rows.append(
                [
                    backend,
                    str(scheduled),
                    fmt(median(timings), 2),
                    fmt(percentile(timings, 0.99), 2),
                    fmt(median(looks), 2),
                    fmt(prepared - began, 0),
                    fmt(time.monotonic() - prepared, 0),
                ]
            )
    print(
        f"claim of 32 with {args.pending} pending jobs, {args.tenants} tenants"
        f"{' (weighted)' if args.weighted else ''}, {args.domains} domains ({args.repeats} claims)"
    )
    headers = [
        "backend",
        "scheduled refreshes",
        "claim p50 ms",
        "claim p99 ms",
        "look back p50 ms",
        "set-up s",
        "claims s",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    asyncio.run(main())
