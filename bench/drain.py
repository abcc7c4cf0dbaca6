"""Drain benchmark: how fast `ingest worker` processes empty a queue, what each job costs in
CPU, and how soon an idle worker picks up a new job; SQLite and PostgreSQL side by side,
with the other scenarios of docs/benchmarks.md in the same rounds (`--scenarios`).

    python -m bench.drain --backend both --jobs 5000 --rounds 3 --delay-ms 0 --processes 1

One `bench.target` process serves every fetch (its 2 KB page as `--page-type`, HTML by
default; `text/plain` takes the page's extraction out of each job, which arq's jobs do
without). Each round runs, for each backend in turn (sqlite, postgresql, sqlite, ...):

- drain: a fresh database gets `--jobs` jobs (JobStore.submit, 1,000 per batch, no worker
  running), then P `ingest worker` processes start. Jobs/s is N over the time from the first
  claim to the last finish, both read from the rows, so process start-up is not counted.
  CPU is utime + stime from /proc (workers: from just before each one's first claim until
  every job succeeded, before they are stopped; PostgreSQL: the whole server, including
  backends that exited, through the postmaster's cutime + cstime).
- bare (`--baseline bare`), after each drain: the floor (`bench.baselines`).
- latency: one idle worker; jobs submitted one at a time at `--latency-rate` per second;
  pickup = attempts.started_at - jobs.created_at of each job's first attempt. With `--baseline
  arq`, arq's worker at the same trickle too (`bench.baselines.arq_trickle`).
- `--scenarios` (comma-separated, or `all`), in this order:
  - hosts: the drain with the jobs spread over `--hosts` domains, loopback addresses of the
    one target (`bench.target --hosts`), the per-domain limit unchanged;
  - slow: the drain against a second target that answers after `--slow-delay-ms`;
  - serve: pickup by the embedded worker of `ingest serve` (a thread, then a child process),
    jobs POSTed to its API (`bench.serve`);
  - submit: POST /jobs latency while `ingest serve` drains a backlog (`bench.serve`), with
    its embedded worker in a thread, in a child process (INGEST_WORKER_PROCESS), then with
    `ingest worker` apart;
  - fair: claim cost with many tenants and domains (`bench.fair_claim`);
  - rss: a worker's memory on a queue of `--big-pending` jobs (`bench.footprint`);
  - startup: `ingest worker` exec -> first claim on that queue, and (once a round)
    `ingest --help` (`bench.footprint`).

After the backends, each round runs the no-queue baselines (`--baseline httpx,fetcher`):
the same number of GETs with no queue at all.

The machine may be shared: `--wait-idle S` waits up to S seconds before each run for it to
be idle, and "not ours" reports the CPU other processes used during each run.
Prints Markdown tables of the medians over the rounds (`bench.report`); raw numbers go to
bench/results/drain-*.json.
"""

import argparse
import asyncio
import inspect
import json
import os
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa

from app.store.database import Database
from app.store.tables import attempts, jobs
from bench.baselines import ARQ_NAME, arq_queue, arq_trickle, bare, no_queue
from bench.fair_claim import FairQueue
from bench.footprint import BigQueue, help_wall, worker_rss, worker_startup
from bench.harness import (
    RESULTS,
    Target,
    backends,
    drop_database,
    environment,
    fresh_database,
    machine_ticks,
    start_target,
)
from bench.numbers import fmt, percentile
from bench.report import BARE_NAMES, NAMES, NO_QUEUE_NAMES, summarize
from bench.serve import (
    PICKUP_ARRANGEMENTS,
    SUBMIT_ARRANGEMENTS,
    embedded_pickup,
    submit_while_draining,
)
from bench.target import PAGE_TYPE
from bench.workers import (
    Probe,
    Sample,
    Workers,
    cores_busy,
    cpu_between,
    new_jobs,
    other_cores,
    submit,
    wait_until_done,
)

DATABASE = "ingest_bench"
SCENARIOS = ("hosts", "slow", "serve", "submit", "fair", "rss", "startup")
IDLE_CORES = 0.3


async def drain(backend: str, target: Target, processes: int, hosts: int, args: Any) -> dict:
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(target, args.jobs, hosts=hosts))
    if args.analyze:
        await probe.database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    workers = Workers(url, processes, args)
    watched = [*workers.pids, target.pid]
    samples: list[Sample] = []
    try:
        async with asyncio.timeout(args.timeout):
            await wait_until_done(
                probe, workers.check_alive, lambda: samples.append(probe.sample(watched))
            )
        end = probe.sample(watched)
    finally:
        workers.stop()
    first_claims, last_finish, attempt_count = await drain_window(probe.database)
    sessions = await probe.sessions()
    await probe.database.dispose()

    def before(moment: datetime) -> Sample:
        return [s for s in samples if s.at <= moment.timestamp()][-1]

    started = min(first_claims.values())
    start = before(started)
    per_job = 1000 / args.jobs  # seconds in all -> ms per job
    worker_cpu = sum(end.cpu[pid] - before(first_claims[pid]).cpu[pid] for pid in workers.pids)
    server_cpu = end.server - start.server
    return {
        "jobs_per_s": args.jobs / (last_finish - started).total_seconds(),
        "worker_cpu_ms": worker_cpu * per_job,
        "db_server_cpu_ms": server_cpu * per_job if backend == "postgresql" else float("nan"),
        "target_cpu_ms": cpu_between(start, end, [target.pid]) * per_job,
        "bench_cpu_ms": cpu_between(start, end, [os.getpid()]) * per_job,
        "cores_busy": cores_busy(start, end),
        "other_cores": other_cores(start, end, cpu_between(start, end) + server_cpu),
        "connections_per_1k": (sessions or 0) * 1000 / args.jobs if sessions else float("nan"),
        "extra_attempts": attempt_count - args.jobs,
    }


async def drain_window(database: Database) -> tuple[dict[int, datetime], datetime, int]:
    """First claim per worker process (by pid), last finish, and the number of attempts."""
    by_worker = sa.select(attempts.c.worker_id, sa.func.min(attempts.c.started_at)).group_by(
        attempts.c.worker_id
    )
    last = sa.select(sa.func.max(jobs.c.finished_at))
    async with database.read() as conn:
        rows = (await conn.execute(by_worker)).all()
        last_finish = (await conn.execute(last)).scalar_one()
        count = (await conn.execute(sa.select(sa.func.count()).select_from(attempts))).scalar_one()
    # worker ids are "<host>:<pid>:<random>"
    return {int(worker_id.split(":")[-2]): first for worker_id, first in rows}, last_finish, count


async def latency(backend: str, target: Target, args: Any) -> dict:
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    workers = Workers(url, 1, args)
    total = round(args.latency_rate * args.latency_seconds)
    try:
        # One job first: the worker is up, connected and idle when the clock starts.
        await submit(probe.store, new_jobs(target, 1, tenant="warmup"))
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers.check_alive)
        await asyncio.sleep(0.5)
        first = probe.sample(workers.pids)
        started = time.monotonic()
        for i, job in enumerate(new_jobs(target, total, first=1)):
            await asyncio.sleep(max(0.0, started + i / args.latency_rate - time.monotonic()))
            await probe.store.submit([job])
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers.check_alive)
        last = probe.sample(workers.pids)
    finally:
        workers.stop()
    pickups = await probe.pickups()
    done = await probe.completions()
    await probe.database.dispose()
    return {
        "p50_ms": percentile(pickups, 0.5),
        "p99_ms": percentile(pickups, 0.99),
        "done_p50_ms": percentile(done, 0.5),
        "done_p99_ms": percentile(done, 0.99),
        "worker_cpu_ms_per_job": cpu_between(first, last, workers.pids) * 1000 / total,
        "cores_busy": cores_busy(first, last),
        "other_cores": other_cores(
            first, last, cpu_between(first, last) + last.server - first.server
        ),
    }


async def quiet(args: Any) -> float:
    """Wait (at most `--wait-idle` seconds) until the machine is nearly idle: it is shared,
    and other work on two cores moves every number. Returns the busy cores last seen."""
    deadline = time.monotonic() + args.wait_idle
    while True:
        before = Sample(time.time(), {}, 0.0, machine_ticks())
        await asyncio.sleep(1.0)
        busy = cores_busy(before, Sample(time.time(), {}, 0.0, machine_ticks()))
        if busy < IDLE_CORES or time.monotonic() >= deadline:
            return busy


async def run(args: Any) -> list[dict]:
    chosen = set(args.scenarios)
    hosts = args.hosts if "hosts" in chosen else 1
    target = start_target(args.delay_ms, hosts, "--page-type", args.page_type)
    slow = start_target(args.slow_delay_ms) if "slow" in chosen else None
    fair = FairQueue(args.fair_pending, args.fair_tenants, args.fair_domains)
    big = BigQueue(target, args.big_pending)
    results: list[dict] = []

    async def measure(kind: str, name: str, processes: int, rnd: int, run: Callable) -> None:
        busy_before = await quiet(args) if args.wait_idle else float("nan")
        began = time.monotonic()
        values = run()
        if inspect.isawaitable(values):
            values = await values
        values["busy_before"] = busy_before
        values["seconds"] = time.monotonic() - began
        results.append({"kind": kind, "name": name, "processes": processes, "round": rnd, **values})
        shown = ", ".join(f"{k}={fmt(v, 2)}" for k, v in values.items())
        print(f"round {rnd} {kind:8} {name:31} P={processes}: {shown}", flush=True)

    first = args.processes[0]
    try:
        for rnd in range(1, args.rounds + 1):
            for backend in backends(args.backend):
                name = NAMES[backend]
                for processes in args.processes:
                    drain_run = partial(drain, backend, target, processes, 1, args)
                    await measure("drain", name, processes, rnd, drain_run)
                    if "bare" in args.baseline:
                        bare_run = partial(bare, backend, target, processes, args)
                        await measure("bare", BARE_NAMES[backend], processes, rnd, bare_run)
                if args.latency_seconds > 0:
                    await measure("latency", name, 1, rnd, partial(latency, backend, target, args))
                if "hosts" in chosen:
                    hosts_run = partial(drain, backend, target, first, args.hosts, args)
                    await measure("hosts", name, first, rnd, hosts_run)
                if slow is not None:
                    slow_run = partial(drain, backend, slow, first, 1, args)
                    await measure("slow", name, first, rnd, slow_run)
                if "serve" in chosen:
                    for kind, worker in PICKUP_ARRANGEMENTS.items():
                        pickup = partial(embedded_pickup, backend, target, args, worker)
                        await measure(kind, name, 1, rnd, pickup)
                if "submit" in chosen:
                    for kind, worker in SUBMIT_ARRANGEMENTS.items():
                        posting = partial(submit_while_draining, backend, target, args, worker)
                        await measure(kind, name, 1, rnd, posting)
                if "fair" in chosen:
                    claims = partial(fair.measure, backend, args.fair_repeats)
                    await measure("fair", name, 1, rnd, claims)
                if "rss" in chosen:
                    await measure("rss", name, 1, rnd, partial(worker_rss, backend, big, args))
                if "startup" in chosen:
                    starts = partial(worker_startup, backend, big, args)
                    await measure("startup", name, 1, rnd, starts)
            for mode in args.baseline:
                if mode in NO_QUEUE_NAMES:
                    for processes in args.processes:
                        alone = partial(no_queue, target, mode, processes, args)
                        await measure("no-queue", NO_QUEUE_NAMES[mode], processes, rnd, alone)
            if "arq" in args.baseline:
                for processes in args.processes:
                    peer = partial(arq_queue, target, processes, args)
                    await measure("arq", ARQ_NAME, processes, rnd, peer)
                if args.latency_seconds > 0:
                    trickle = partial(arq_trickle, target, args)
                    await measure("arq-latency", ARQ_NAME, 1, rnd, trickle)
            if "startup" in chosen:
                await measure("help", "ingest --help", 1, rnd, partial(help_wall, args.help_runs))
    finally:
        target.stop()
        if slow is not None:
            slow.stop()
        for backend in backends(args.backend):
            await drop_database(backend, DATABASE)
        await fair.drop()
        await big.drop()
    return results


def baselines(text: str) -> list[str]:
    chosen = [m for m in text.split(",") if m]
    if unknown := set(chosen) - {*NO_QUEUE_NAMES, "bare", "arq"}:
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(sorted(unknown))}")
    return chosen


def scenarios(text: str) -> list[str]:
    chosen = list(SCENARIOS) if text == "all" else [s for s in text.split(",") if s]
    if unknown := set(chosen) - set(SCENARIOS):
        raise argparse.ArgumentTypeError(f"unknown scenario {', '.join(sorted(unknown))}")
    return chosen


def setting(text: str) -> str:
    if not text.startswith("INGEST_") or "=" not in text:
        raise argparse.ArgumentTypeError(f"not INGEST_NAME=VALUE: {text!r}")
    return text


def add_settings_option(parser: argparse.ArgumentParser, whose: str) -> None:
    """`--set INGEST_NAME=VALUE` (repeatable): a setting of `whose`, over the benchmark's."""
    parser.add_argument(
        "--set",
        type=setting,
        action="append",
        default=[],
        metavar="INGEST_NAME=VALUE",
        help=f"a setting of {whose}, over the benchmark's own (repeatable)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    add("--jobs", type=int, default=5000, help="jobs per drain (default 5000)")
    add("--rounds", type=int, default=3)
    add("--delay-ms", type=float, default=0.0, help="target's answer delay")
    add(
        "--page-type",
        default=PAGE_TYPE,
        help="the page's Content-Type (text/plain: the jobs without HTML extraction)",
    )
    add(
        "--processes",
        type=lambda s: [int(p) for p in s.split(",")],
        default=[1],
        help="worker processes, e.g. 1 or 1,2 (default 1)",
    )
    add("--concurrency", type=int, default=32, help="fetches in flight per process")
    add(
        "--poll-ms",
        type=float,
        default=2000.0,
        help="INGEST_POLL_INTERVAL_SECONDS of the workers, in ms (default 2000, as shipped: "
        "submits wake them)",
    )
    add("--latency-rate", type=float, default=50.0, help="jobs/s (default 50)")
    add(
        "--latency-seconds",
        type=float,
        default=10.0,
        help="of submits, for pickup latency (also --scenarios serve); 0 skips it",
    )
    add(
        "--baseline",
        type=baselines,
        default=["httpx"],
        help="comma-separated: httpx (default: a bare httpx client, no queue), fetcher (the"
        " worker's Fetcher, no queue), bare (a bare claim-one loop on each backend), arq (arq on"
        " a throwaway redis-server); '' for none",
    )
    add(
        "--scenarios",
        type=scenarios,
        default=[],
        help=f"comma-separated, or all: {', '.join(SCENARIOS)} (default: none)",
    )
    add("--hosts", type=int, default=1000, help="domains of the hosts scenario (default 1000)")
    add("--slow-delay-ms", type=float, default=100.0, help="slow scenario's target delay")
    add(
        "--submit-backlog",
        type=int,
        default=50_000,
        help="jobs queued before serve starts; enough to keep its worker busy (default 50000)",
    )
    add("--submit-rate", type=float, default=20.0, help="POST /jobs per second (default 20)")
    add("--submit-seconds", type=float, default=10.0, help="of POSTs (default 10)")
    add("--fair-pending", type=int, default=100_000)
    add("--fair-tenants", type=int, default=100)
    add("--fair-domains", type=int, default=1000)
    add("--fair-repeats", type=int, default=100, help="claims per round (default 100)")
    add("--big-pending", type=int, default=100_000, help="jobs queued for rss and startup")
    add("--rss-seconds", type=float, default=10.0, help="of draining before reading RSS")
    add("--startup-runs", type=int, default=3, help="worker starts per round and backend")
    add("--help-runs", type=int, default=10, help="`ingest --help` runs per round")
    add_settings_option(parser, "every ingest process")
    add("--timeout", type=float, default=300.0, help="per drain, seconds")
    add(
        "--wait-idle",
        type=float,
        default=0.0,
        help=f"before each run, wait up to this many seconds for the machine to be idle"
        f" (under {IDLE_CORES} cores busy); for shared machines (default 0: no wait)",
    )
    add(
        "--analyze",
        action="store_true",
        help="ANALYZE after submitting, before the workers start (PostgreSQL's autovacuum"
        " would, in time; it is off on this machine)",
    )
    args = parser.parse_args()

    began = time.monotonic()
    env = asyncio.run(environment())
    print(", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    results = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"drain-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"environment": env, "args": vars(args), "results": results}, indent=1)
    )
    print(f"\n{summarize(results, args)}\n")
    print(f"{len(results)} runs in {time.monotonic() - began:.0f}s; raw numbers in {out}")


if __name__ == "__main__":
    main()
