"""Where a worker's CPU goes: one drain in this process under cProfile (CPU time, not wall),
each function's own time put in the component its module belongs to, per job.

    python -m bench.where_time_goes --jobs 3000

Components, by the file a function lives in: claim (`app/store/claim.py`), record
(`app/store/record.py`, `app/worker/completer.py`), other store work (the rest of `app/store`, the
heartbeat included), database driver (SQLAlchemy, aiosqlite, sqlite3, asyncpg), fetch (`app/fetch`,
httpx, httpcore, h11), extraction (`app/content`, when it runs in the worker's thread), worker and
loop (`app/worker/job_worker.py`, `app/worker/loop.py`, `app/rules/policy.py`), logging and metrics
(`logging`, `prometheus_client`, `app/observability/events.py`, `app/observability/metrics.py`),
event loop (asyncio, selectors, ssl, socket) and the rest; a built-in or standard library helper
(isinstance, contextlib, ipaddress) counts for the component that called it. A profiler slows what
it measures (about 3x here), so read the shares, not the absolute figures. PostgreSQL only: cProfile
sees the thread it runs in, and on SQLite the statements run in the writer thread and aiosqlite's.
The profiler runs in the worker's thread (`app.runtime.Background`), from just after the worker
started until the drain ends;
the CPU figure is the whole process's."""

import argparse
import asyncio
import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Callable

from app.observability.metrics import Metrics
from app.runtime import Runtime
from app.settings import Settings
from app.store.jobs import JobStore
from bench.harness import TARGET_ENV, drop_database, fresh_database, start_target
from bench.workers import new_jobs, submit

DATABASE = "ingest_profile"

COMPONENTS = [
    (
        "claim",
        (
            "app/store/claim.py",
            "app/store/backends/claim_sql.py",
            "app/store/backends/postgres/claim.py",
            "app/store/backends/sqlite/claim.py",
        ),
    ),
    (
        "record",
        (
            "app/store/record.py",
            "app/store/record_rows.py",
            "app/store/backends/record_sql.py",
            "app/store/backends/postgres/record.py",
            "app/store/backends/sqlite/record.py",
            "app/worker/completer.py",
        ),
    ),
    ("other store work", ("app/store/",)),
    ("database driver", ("sqlalchemy", "aiosqlite", "sqlite3", "asyncpg")),
    (
        "fetch",
        ("app/fetch/", "httpx", "httpcore", "h11", "pebble"),
    ),
    (
        "extraction (in the worker's thread)",
        ("app/content/", "trafilatura", "lxml", "charset_normalizer", "pypdfium2"),
    ),
    (
        "worker and loop",
        ("app/worker/job_worker.py", "app/worker/loop.py", "app/rules/policy.py", "app/scheduling"),
    ),
    (
        "logging and metrics",
        (
            "/logging/",
            "prometheus_client",
            "app/observability/events.py",
            "app/observability/metrics.py",
        ),
    ),
    (
        "event loop",
        (
            "asyncio",
            "anyio",
            "sniffio",
            "selectors",
            "ssl.py",
            "socket.py",
            "threading",
            "queue.py",
        ),
    ),
]


def component(filename: str) -> str:
    for name, needles in COMPONENTS:
        if any(needle in filename for needle in needles):
            return name
    return "rest"


async def drain(
    serving: list[str], profiler: cProfile.Profile, jobs: int, concurrency: int
) -> float:
    """Drain `jobs` jobs with an in-process worker, profiled from its start until every job
    succeeded; the CPU seconds that took."""
    target = start_target(0, 1, *serving)
    url = await fresh_database("postgresql", DATABASE)
    settings = Settings(
        _env_file=None,
        database_url=url,
        worker_concurrency=concurrency,
        domain_max_in_flight=100_000,
        allowed_hosts=TARGET_ENV["INGEST_ALLOWED_HOSTS"],
        log_level="WARNING",
    )
    runtime = Runtime.build(settings, run_worker=True)
    try:
        await submit(JobStore(runtime.database, runtime.clock), new_jobs(target, jobs))
        began = time.process_time()
        await runtime.start(Metrics())
        # cProfile sees the thread that enables it: the worker's loop runs in a thread.
        await runtime.background.run(_call(profiler.enable))
        # No event says "drained": the rows do, read every 0.2 s as the other benchmarks do.
        while (await runtime.jobs.stats()).counts["succeeded"] < jobs:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        await runtime.background.run(_call(profiler.disable))
        return time.process_time() - began
    finally:
        await runtime.stop()
        target.stop()
        await drop_database("postgresql", DATABASE)


async def _call(function: Callable[[], None]) -> None:
    function()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--show-rest", action="store_true", help="what 'rest' holds")
    parser.add_argument(
        "--eval",
        type=str,
        default=None,
        metavar="DATA",
        help="serve the extraction eval set's pages (bench.target --eval), not the 2 KB page",
    )
    args = parser.parse_args()
    profiler = cProfile.Profile(time.process_time)
    serving = ["--eval", args.eval] if args.eval else []
    cpu = asyncio.run(drain(serving, profiler, args.jobs, args.concurrency))
    shares: dict[str, float] = defaultdict(float)
    rest: dict[str, float] = defaultdict(float)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, own, _, callers) in stats.items():
        name = component(filename)
        if name != "rest":
            shares[name] += own
            continue
        # Built-ins and the standard library's helpers (isinstance, contextlib, ipaddress)
        # count for whoever called them, one level up, in proportion to their calls' time.
        for (caller_file, _, caller), (_, _, from_caller, _) in callers.items():
            caller_name = component(caller_file)
            shares[caller_name] += from_caller
            if caller_name == "rest":
                rest[f"{filename}:{function} <- {caller_file}:{caller}"] += from_caller
    if args.show_rest:
        for where, own in sorted(rest.items(), key=lambda item: -item[1])[:15]:
            print(f"  rest: {own * 1000 / args.jobs:.3f} ms a job  {where}")
    total = sum(shares.values())
    print(f"PostgreSQL, {args.jobs} jobs: {cpu * 1000 / args.jobs:.2f} ms CPU a job, profiled")
    print("\n| component | share of CPU | ms a job (profiled) |\n|---|--:|--:|")
    for name, own in sorted(shares.items(), key=lambda item: -item[1]):
        print(f"| {name} | {own / total:.0%} | {own * 1000 / args.jobs:.2f} |")


if __name__ == "__main__":
    main()
