"""Pages benchmark: how close one `ingest worker` draining realistic pages comes to the
extractor alone on all cores (issue 23 asks for at least 85 % of that ceiling).

    python -m bench.pages --backend both --jobs 2000 --rounds 3

Pages: the extraction eval set (`bench.extraction`: `--data`, `--pages N` for a fixed
sample), in memory. Each round, in this order:

- ceiling: `app.content.extract.extract(body, "text/html")`, the call the worker makes,
  over the pages in a tight loop in `--ceiling-processes` processes (default: the cores),
  each doing the very pages a drain's jobs fetch (job i: page i modulo their number), all
  of them once, from its own offset among the jobs, all released together once their
  pages are loaded and one warm-up call made. (Over other pages than the drain's, the
  ceiling would measure other work: the eval set's first 500 pages cost 1.4 % more to
  extract than the next 500, the least of three runs of each page.) Pages/s = the
  pages done in all over the wall time from the first start to the last end; CPU ms per
  page is their own CPU (user + system) over the pages.
- drain, for each backend in turn: a fresh database gets `--jobs` jobs cycling over the
  pages (`/page/<i>` of a `bench.target --eval`, which serves them from memory as
  `text/html` with no charset: the archive kept no headers), then one `ingest worker`
  drains it. Pages/s = jobs over first claim -> last finish, read from the rows as
  `bench.drain` does; worker CPU per page = user + system of the worker and every process
  under it (an extraction pool's), sampled over that window; "other cores busy" is how
  much of the machine processes other than the worker, the target, this benchmark and
  PostgreSQL used meanwhile. INGEST_EXTRACT_PROCESSES is passed to the worker when set
  here; `--set INGEST_NAME=VALUE` sets any other setting. The worker polls as shipped
  (`--poll-ms` 2000, as in `bench.drain`): at 50 ms its passes alone (the look back, the
  webhook sender's claim, the next due time) took 0.17-0.19 of a core idle (0.01 at 2 s), and
  the worker's own CPU a page of a drain at 30-40 pages/s was 8.9-9.6 ms against 4.9-5.8.

Prints the medians over rounds: drain pages/s, the ceiling, drain / ceiling (each round's
drain over that round's ceiling), worker CPU ms per page. The machine may be shared: the
ceiling and the drains of a round run one after the other, so a busy spell moves both, or
only one of them. Hence also "extractor CPU / drain CPU a page": the extractor's CPU a page
alone over the drain's (the worker's and its processes'), the most drain / ceiling can be
when both keep the cores busy, as on a quiet machine; CPU a page moves less than pages/s
beside other work.
Raw numbers go to bench/results/pages-*.json.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import time
from functools import partial
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from app.content.extract import extract
from app.store.database import Database
from bench.drain import add_settings_option, drain_window
from bench.eval_pages import default_data, load_pages
from bench.extraction import WARM_UP
from bench.harness import (
    RESULTS,
    Target,
    backends,
    cpu_seconds,
    drop_database,
    environment,
    fresh_database,
    start_target,
    tree_cpu_seconds,
)
from bench.numbers import fmt, median, table
from bench.report import NAMES
from bench.workers import (
    Probe,
    Sample,
    Workers,
    cpu_between,
    new_jobs,
    other_cores,
    submit,
    wait_until_done,
)

DATABASE = "ingest_bench_pages"
PASSED_THROUGH = ("INGEST_EXTRACT_PROCESSES",)
"""Settings taken from this process's environment for the worker (bench.workers gives it
none of ours otherwise)."""


def _extract_loop(
    data: Path, sample: int | None, offset: int, jobs: int, ready: Barrier, done: "Queue[Any]"
) -> None:
    """One ceiling process: the pages of `jobs` jobs (job i: page i modulo their number),
    from job `offset` on, timed from the barrier."""
    bodies = [page.body for page in load_pages(data, sample)]
    extract(WARM_UP, "text/html")
    ready.wait()
    started, cpu = time.time(), time.process_time()
    for i in range(offset, offset + jobs):
        extract(bodies[i % jobs % len(bodies)], "text/html")
    done.put((started, time.time(), time.process_time() - cpu))


def ceiling(data: Path, sample: int | None, jobs: int, processes: int) -> dict:
    """The extractor alone, `processes` at once, each over the pages of a drain's `jobs`."""
    context = multiprocessing.get_context("spawn")  # a clean process, not a copy of this one
    ready, done = context.Barrier(processes), context.Queue()
    children = [
        context.Process(
            target=_extract_loop,
            args=(data, sample, k * jobs // processes, jobs, ready, done),
        )
        for k in range(processes)
    ]
    for child in children:
        child.start()
    runs = [done.get(timeout=600) for _ in children]
    for child in children:
        child.join()
    pages = jobs * processes
    wall = max(end for _, end, _ in runs) - min(start for start, _, _ in runs)
    return {"pages_per_s": pages / wall, "cpu_ms": sum(cpu for *_, cpu in runs) * 1000 / pages}


async def drain(backend: str, target: Target, args: Any) -> dict:
    """One worker drains `--jobs` jobs of the target's pages on a fresh database."""
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(target, args.jobs))
    workers = Workers(url, 1, args)
    worker = workers.pids[0]
    # With the CPU seconds of the worker's tree, and of the worker process alone.
    samples: list[tuple[Sample, float, float]] = []

    def sample() -> None:
        samples.append((probe.sample([target.pid]), tree_cpu_seconds(worker), cpu_seconds(worker)))

    try:
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers.check_alive, sample)
        sample()
    finally:
        workers.stop()
    first_claims, last_finish, attempt_count = await drain_window(probe.database)
    await probe.database.dispose()
    started = min(first_claims.values())
    start, start_cpu, start_own = [s for s in samples if s[0].at <= started.timestamp()][-1]
    end, end_cpu, end_own = samples[-1]
    per_page = 1000 / args.jobs  # seconds in all -> ms per page
    server = end.server - start.server
    return {
        "pages_per_s": args.jobs / (last_finish - started).total_seconds(),
        "worker_cpu_ms": (end_cpu - start_cpu) * per_page,
        "worker_own_cpu_ms": (end_own - start_own) * per_page,
        "target_cpu_ms": cpu_between(start, end, [target.pid]) * per_page,
        "db_server_cpu_ms": server * per_page if backend == "postgresql" else float("nan"),
        "other_cores": other_cores(
            start, end, end_cpu - start_cpu + cpu_between(start, end) + server
        ),
        "extra_attempts": attempt_count - args.jobs,
    }


async def run(args: Any) -> list[dict]:
    serving = ["--eval", str(args.data)] + (["--eval-pages", str(args.pages)] if args.pages else [])
    target = start_target(0.0, 1, *serving)
    results: list[dict] = []

    def record(kind: str, name: str, rnd: int, values: dict) -> None:
        results.append({"kind": kind, "name": name, "round": rnd, **values})
        shown = ", ".join(f"{k}={fmt(v, 2)}" for k, v in values.items())
        print(f"round {rnd} {kind:8} {name:12} {shown}", flush=True)

    try:
        for rnd in range(1, args.rounds + 1):
            processes = args.ceiling_processes
            alone = partial(ceiling, args.data, args.pages, args.jobs, processes)
            record("ceiling", f"{processes} processes", rnd, await asyncio.to_thread(alone))
            for backend in backends(args.backend):
                record("drain", NAMES[backend], rnd, await drain(backend, target, args))
    finally:
        target.stop()
        for backend in backends(args.backend):
            await drop_database(backend, DATABASE)
    return results


def summarize(results: list[dict], args: Any) -> str:
    ceilings = {r["round"]: r for r in results if r["kind"] == "ceiling"}
    rows = []
    for backend in backends(args.backend):
        drains = [r for r in results if r["kind"] == "drain" and r["name"] == NAMES[backend]]
        ratios = [r["pages_per_s"] / ceilings[r["round"]]["pages_per_s"] for r in drains]
        cpu_ratios = [ceilings[r["round"]]["cpu_ms"] / r["worker_cpu_ms"] for r in drains]
        rows.append(
            [
                NAMES[backend],
                fmt(median([r["pages_per_s"] for r in drains])),
                fmt(median([c["pages_per_s"] for c in ceilings.values()])),
                f"{median(ratios):.0%}",
                f"{median(cpu_ratios):.0%}",
                fmt(median([r["worker_cpu_ms"] for r in drains]), 2),
                fmt(median([r["worker_own_cpu_ms"] for r in drains]), 2),
                fmt(median([c["cpu_ms"] for c in ceilings.values()]), 2),
                fmt(median([r["other_cores"] for r in drains]), 2),
            ]
        )
    headers = [
        "backend",
        "drain pages/s",
        f"ceiling pages/s ({args.ceiling_processes} processes)",
        "drain / ceiling",
        "extractor CPU / drain CPU a page",
        "worker CPU ms/page (with its extraction processes)",
        "of which the worker process",
        "extractor CPU ms/page",
        "other cores busy",
    ]
    return table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    add("--jobs", type=int, default=2000, help="jobs per drain (default 2000)")
    add("--rounds", type=int, default=3)
    add("--data", type=Path, default=default_data(), help="the extraction eval set")
    add("--pages", type=int, default=None, help="a fixed sample of this many pages (default all)")
    add("--ceiling-processes", type=int, default=os.cpu_count() or 1, help="default: the cores")
    add("--concurrency", type=int, default=32, help="the worker's fetches in flight")
    add(
        "--poll-ms",
        type=float,
        default=2000.0,
        help="INGEST_POLL_INTERVAL_SECONDS of the worker, in ms (default 2000, as shipped: "
        "every job is submitted before it starts, and each record wakes its next claim)",
    )
    add_settings_option(parser, "the worker")
    add("--timeout", type=float, default=600.0, help="per drain, seconds")
    args = parser.parse_args()
    passed = [f"{name}={os.environ[name]}" for name in PASSED_THROUGH if name in os.environ]
    args.set = [*passed, *args.set]

    env = asyncio.run(environment())
    print(", ".join(f"{k} {v}" for k, v in env.items()), ", ".join(args.set), flush=True)
    results = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"pages-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dump = {"environment": env, "args": {k: str(v) for k, v in vars(args).items()}}
    out.write_text(json.dumps({**dump, "results": results}, indent=1))
    print(f"\n{summarize(results, args)}\n\nraw numbers in {out}")


if __name__ == "__main__":
    main()
