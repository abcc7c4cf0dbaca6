"""Drain benchmark: how fast `ingest worker` processes empty a queue, what each job costs in
CPU, and how soon an idle worker picks up a new job; SQLite and PostgreSQL side by side.

    python -m bench.drain --backend both --jobs 5000 --rounds 3 --delay-ms 0 --processes 1

One `bench.target` process serves every fetch. Each round runs, for each backend in turn
(sqlite, postgresql, sqlite, postgresql, ...):

- drain: a fresh database gets `--jobs` jobs (JobStore.submit, 1,000 per batch, no worker
  running), then P `ingest worker` processes start. Jobs/s is N over the time from the first
  claim to the last finish, both read from the rows, so process start-up is not counted.
  CPU is utime + stime from /proc (workers: from just before each one's first claim until
  every job succeeded, before they are stopped; PostgreSQL: the whole server, including
  backends that exited, through the postmaster's cutime + cstime).
- latency: one idle worker; jobs submitted one at a time at `--latency-rate` per second;
  pickup = attempts.started_at - jobs.created_at of each job's first attempt.
- no queue: the same number of GETs against the same target by `bench.fetch_alone`
  (plain httpx by default; `--baseline httpx,fetcher` adds the worker's Fetcher).
- bare (`--baseline bare`), after each backend's drain: a fresh database with the same N
  jobs, drained by P `bench.bare_loop` processes started together (claim one job, GET,
  mark it succeeded; raw asyncpg or aiosqlite): the floor a job queue can reach here.
  Jobs/s and worker CPU are the children's own, from "go" to their last empty claim.

The headline table gives each ingest row's drain and worker CPU as a multiple of the bare
loop on the same backend ("× bare") and of httpx alone ("× httpx").

The machine may be shared: `--wait-idle S` waits up to S seconds before each run for it to
be idle, and "not ours" reports the CPU other processes used during each run.
Prints Markdown tables of the medians; raw numbers go to bench/results/drain-*.json.
"""

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import sqlalchemy as sa

from app.store.database import Database
from app.store.tables import attempts, jobs
from bench.harness import (
    RESULTS,
    TARGET_ENV,
    backends,
    cpu_seconds,
    drop_database,
    environment,
    fmt,
    fresh_database,
    machine_ticks,
    median,
    percentile,
    start_target,
    table,
)
from bench.workers import Probe, Sample, Workers, cores_busy, cpu_between, new_jobs, submit

DATABASE = "ingest_bench"
NAMES = {"sqlite": "ingest, SQLite", "postgresql": "ingest, PostgreSQL"}
BARE_NAMES = {
    "sqlite": "bare claim-one loop, SQLite",
    "postgresql": "bare claim-one loop, PostgreSQL",
}
NO_QUEUE_NAMES = {"httpx": "httpx alone, no queue", "fetcher": "Fetcher alone, no queue"}
IDLE_CORES = 0.3


async def wait_until_done(
    probe: Probe, workers: Workers, each_poll: Callable[[], object] = lambda: None
) -> None:
    """Until no job is pending or running; every ~50 ms, after `each_poll()`."""
    while True:
        workers.check_alive()
        each_poll()
        unfinished, failed = await probe.unfinished()
        if failed:
            raise RuntimeError(f"{failed} jobs dead or cancelled")
        if not unfinished:
            return
        await asyncio.sleep(0.05)


async def drain(backend: str, base_url: str, target_pid: int, processes: int, args: Any) -> dict:
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(base_url, args.jobs))
    if args.analyze:
        await probe.database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    workers = Workers(url, processes, args.poll_ms / 1000, args.concurrency)
    watched = [*workers.pids, target_pid]
    samples: list[Sample] = []
    try:
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers, lambda: samples.append(probe.sample(watched)))
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
    measured = cpu_between(start, end) + server_cpu
    return {
        "jobs_per_s": args.jobs / (last_finish - started).total_seconds(),
        "worker_cpu_ms": worker_cpu * per_job,
        "db_server_cpu_ms": server_cpu * per_job if backend == "postgresql" else float("nan"),
        "target_cpu_ms": cpu_between(start, end, [target_pid]) * per_job,
        "bench_cpu_ms": cpu_between(start, end, [os.getpid()]) * per_job,
        "cores_busy": cores_busy(start, end),
        "other_cores": cores_busy(start, end) - measured / (end.at - start.at),
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


async def latency(backend: str, base_url: str, args: Any) -> dict:
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    workers = Workers(url, 1, args.poll_ms / 1000, args.concurrency)
    total = round(args.latency_rate * args.latency_seconds)
    try:
        # One job first: the worker is up, connected and idle when the clock starts.
        await submit(probe.store, new_jobs(base_url, 1, tenant="warmup"))
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers)
        await asyncio.sleep(0.5)
        first = probe.sample(workers.pids)
        started = time.monotonic()
        for i, job in enumerate(new_jobs(base_url, total, first=1)):
            await asyncio.sleep(max(0.0, started + i / args.latency_rate - time.monotonic()))
            await probe.store.submit([job])
        async with asyncio.timeout(args.timeout):
            await wait_until_done(probe, workers)
        last = probe.sample(workers.pids)
    finally:
        workers.stop()
    ours = cpu_between(first, last) + last.server - first.server
    query = (
        sa.select(jobs.c.created_at, attempts.c.started_at)
        .join(attempts, attempts.c.job_id == jobs.c.id)
        .where(jobs.c.tenant == "bench", attempts.c.number == 1)
    )
    async with probe.database.read() as conn:
        pickups = [(s - c).total_seconds() * 1000 for c, s in await conn.execute(query)]
    await probe.database.dispose()
    return {
        "p50_ms": percentile(pickups, 0.5),
        "p99_ms": percentile(pickups, 0.99),
        "cores_busy": cores_busy(first, last),
        "other_cores": cores_busy(first, last) - ours / (last.at - first.at),
    }


@contextlib.contextmanager
def children(module: str, processes: int, *options: str) -> Iterator[list[subprocess.Popen[str]]]:
    """P processes of `python -m <module> <options>`, each up and `ready` on entry."""
    command = [sys.executable, "-m", module, *options]
    env = os.environ | TARGET_ENV
    with contextlib.ExitStack() as stack:
        started = [
            stack.enter_context(
                subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
                )
            )
            for _ in range(processes)
        ]
        try:
            for child in started:
                assert child.stdout is not None
                if (line := child.stdout.readline().strip()) != "ready":
                    raise RuntimeError(f"{module} {child.pid} said {line!r}, not 'ready'")
            yield started
        except BaseException:
            for child in started:
                child.kill()  # not EOF: a child waiting for "go" would take it as one
            raise


def go(started: list[subprocess.Popen[str]]) -> list[dict]:
    """Start every child's measured phase, then read each one's JSON line."""
    for child in started:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    return [json.loads(child.stdout.readline()) for child in started if child.stdout]


def no_queue(base_url: str, target_pid: int, mode: str, processes: int, args: Any) -> dict:
    """`bench.fetch_alone` in P processes, N GETs in all, started together."""
    per_process = args.jobs // processes
    options = ["--url", base_url, "--mode", mode, "--requests", str(per_process)]
    with children(
        "bench.fetch_alone", processes, *options, "--concurrency", str(args.concurrency)
    ) as started:
        target_cpu, ticks = cpu_seconds(target_pid), machine_ticks()
        results = go(started)
        first = Sample(0, {target_pid: target_cpu}, 0.0, ticks)
        last = Sample(0, {target_pid: cpu_seconds(target_pid)}, 0.0, machine_ticks())
    done = per_process * processes
    if failures := sum(r["failures"] for r in results):
        raise RuntimeError(f"{failures} of {done} requests failed")
    seconds = max(r["seconds"] for r in results)
    ours = sum(r["cpu_seconds"] for r in results) + cpu_between(first, last)
    return {
        "jobs_per_s": done / seconds,
        "worker_cpu_ms": sum(r["cpu_seconds"] for r in results) / done * 1000,
        "target_cpu_ms": cpu_between(first, last) / done * 1000,
        "cores_busy": cores_busy(first, last),
        "other_cores": cores_busy(first, last) - ours / seconds,
    }


async def bare(backend: str, base_url: str, target_pid: int, processes: int, args: Any) -> dict:
    """`bench.bare_loop` in P processes, started together, on a fresh database holding the
    drain's N jobs (submitted the drain's way). Jobs/s and worker CPU are the children's
    own, from "go" to their last claim coming back empty."""
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(base_url, args.jobs))
    if args.analyze:
        await probe.database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    options = ["--database", url, "--url", base_url, "--concurrency", str(args.concurrency)]
    with children("bench.bare_loop", processes, *options) as started:
        first = probe.sample([target_pid])
        async with asyncio.timeout(args.timeout):  # on expiry the children are killed
            results = await asyncio.to_thread(go, started)
        last = probe.sample([target_pid])
    unfinished, failed = await probe.unfinished()
    sessions = await probe.sessions()
    await probe.database.dispose()
    done = sum(r["jobs"] for r in results)
    if failures := sum(r["failures"] for r in results):
        raise RuntimeError(f"{failures} of {done} requests failed")
    if done != args.jobs or unfinished or failed:
        raise RuntimeError(f"{done} of {args.jobs} jobs done, {unfinished + failed} left")
    seconds = max(r["seconds"] for r in results)
    worker_cpu = sum(r["cpu_seconds"] for r in results)
    server_cpu = last.server - first.server
    ours = worker_cpu + cpu_between(first, last) + server_cpu
    per_job = 1000 / done  # seconds in all -> ms per job
    return {
        "jobs_per_s": done / seconds,
        "worker_cpu_ms": worker_cpu * per_job,
        "db_server_cpu_ms": server_cpu * per_job if backend == "postgresql" else float("nan"),
        "target_cpu_ms": cpu_between(first, last, [target_pid]) * per_job,
        "bench_cpu_ms": cpu_between(first, last, [os.getpid()]) * per_job,
        "cores_busy": cores_busy(first, last),
        "other_cores": cores_busy(first, last) - ours / (last.at - first.at),
        "connections_per_1k": sessions * per_job if sessions else float("nan"),
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
    target, base_url = start_target(args.delay_ms)
    results: list[dict] = []

    async def measure(kind: str, name: str, processes: int, rnd: int, run: Any) -> None:
        busy_before = await quiet(args) if args.wait_idle else float("nan")
        values = run()
        if inspect.isawaitable(values):
            values = await values
        values["busy_before"] = busy_before
        results.append({"kind": kind, "name": name, "processes": processes, "round": rnd, **values})
        shown = ", ".join(f"{k}={fmt(v, 2)}" for k, v in values.items())
        print(f"round {rnd} {kind:8} {name:31} P={processes}: {shown}", flush=True)

    try:
        for rnd in range(1, args.rounds + 1):
            for backend in backends(args.backend):
                for processes in args.processes:
                    drain_run = partial(drain, backend, base_url, target.pid, processes, args)
                    await measure("drain", NAMES[backend], processes, rnd, drain_run)
                    if "bare" in args.baseline:
                        bare_run = partial(bare, backend, base_url, target.pid, processes, args)
                        await measure("bare", BARE_NAMES[backend], processes, rnd, bare_run)
                if args.latency_seconds > 0:
                    latency_run = partial(latency, backend, base_url, args)
                    await measure("latency", NAMES[backend], 1, rnd, latency_run)
            for mode in args.baseline:
                if mode in NO_QUEUE_NAMES:
                    for processes in args.processes:
                        alone = partial(no_queue, base_url, target.pid, mode, processes, args)
                        await measure("no-queue", NO_QUEUE_NAMES[mode], processes, rnd, alone)
    finally:
        target.terminate()
        target.wait()
        for backend in backends(args.backend):
            await drop_database(backend, DATABASE)
    return results


Median = Callable[[str, str, int, str], float]
"""med(kind, name, processes, key): the median of one figure over the rounds."""


def summarize(results: list[dict], args: Any) -> str:
    groups: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in results:
        for key, value in r.items():
            if isinstance(value, float | int) and key not in ("processes", "round"):
                groups[r["kind"], r["name"], r["processes"]][key].append(value)

    def med(kind: str, name: str, processes: int, key: str) -> float:
        return median(groups.get((kind, name, processes), {}).get(key, []))

    headline = headline_table(med, args)

    columns = {
        "jobs_per_s": ("jobs/s", 0),
        "worker_cpu_ms": ("worker CPU ms/job", 2),
        "db_server_cpu_ms": ("PostgreSQL server CPU ms/job", 2),
        "target_cpu_ms": ("target CPU ms/job", 2),
        "bench_cpu_ms": ("bench probe CPU ms/job", 2),
        "cores_busy": ("cores busy (of 2)", 2),
        "other_cores": ("of which not ours", 2),
        "connections_per_1k": ("connections opened per 1k jobs", 1),
    }
    detail_rows = [
        [name, str(processes)]
        + [fmt(med(kind, name, processes, key), digits) for key, (_, digits) in columns.items()]
        for kind, name, processes in sorted(groups, key=lambda g: (g[0] != "drain", g))
        if kind != "latency"
    ]
    headers = ["system", "processes", *(title for title, _ in columns.values())]
    detail = table(headers, detail_rows)
    return f"{headline}\n\nWhere the CPU goes (medians):\n\n{detail}"


def headline_table(med: Median, args: Any) -> str:
    """Drain jobs/s, worker CPU and pickup per system; for ingest (and the bare loop), the
    ratio of each to the bare loop on the same backend and to httpx alone."""
    first = args.processes[0]
    labels = [label for label in ("bare", "httpx") if label in args.baseline]

    def reference(label: str, backend: str) -> tuple[str, str]:
        """The (kind, name) of the runs a `backend` row is compared with."""
        if label == "bare":
            return "bare", BARE_NAMES[backend]
        return "no-queue", NO_QUEUE_NAMES["httpx"]

    def ratios(kind: str, name: str, backend: str | None) -> list[str]:
        """Drain jobs/s for each process count, then worker CPU, over each reference."""
        if backend is None:
            return ["-"] * (2 * len(labels))
        drain, cpu = [], []
        for ref in (reference(label, backend) for label in labels):
            if ref == (kind, name):
                drain.append("-")
                cpu.append("-")
                continue
            speed = "jobs_per_s"
            over = [fmt(med(kind, name, p, speed) / med(*ref, p, speed), 2) for p in args.processes]
            drain.append(" / ".join(over))
            cost = "worker_cpu_ms"
            cpu.append(fmt(med(kind, name, first, cost) / med(*ref, first, cost), 2))
        return drain + cpu

    def row(kind: str, name: str, backend: str | None, pickup: str) -> list[str]:
        return [
            name,
            *(fmt(med(kind, name, p, "jobs_per_s"), 0) for p in args.processes),
            fmt(med(kind, name, first, "worker_cpu_ms"), 2),
            pickup,
            *ratios(kind, name, backend),
        ]

    headers = [
        "system",
        *(f"drain jobs/s, {p} process{'es' * (p > 1)}" for p in args.processes),
        f"worker CPU ms/job ({first} proc.)",
        "pickup p50 / p99 ms",
        *(f"drain × {label}" for label in labels),
        *(f"CPU × {label} ({first} proc.)" for label in labels),
    ]
    rows = []
    chosen = backends(args.backend)
    for backend in chosen:
        name = NAMES[backend]
        pickup = (
            f"{fmt(med('latency', name, 1, 'p50_ms'))} / {fmt(med('latency', name, 1, 'p99_ms'))}"
        )
        rows.append(row("drain", name, backend, pickup))
    if len(chosen) == 2:
        a, b = (NAMES[backend] for backend in chosen)

        def ratio(kind: str, processes: int, key: str) -> str:
            return fmt(med(kind, b, processes, key) / med(kind, a, processes, key), 2)

        rows.append(
            [
                "ratio PostgreSQL / SQLite",
                *(ratio("drain", p, "jobs_per_s") for p in args.processes),
                ratio("drain", first, "worker_cpu_ms"),
                f"{ratio('latency', 1, 'p50_ms')} / {ratio('latency', 1, 'p99_ms')}",
                *["-"] * (2 * len(labels)),
            ]
        )
    if "bare" in args.baseline:
        rows += [row("bare", BARE_NAMES[backend], backend, "-") for backend in chosen]
    for mode in args.baseline:
        if mode in NO_QUEUE_NAMES:
            rows.append(row("no-queue", NO_QUEUE_NAMES[mode], None, "-"))
    return table(headers, rows)


def baselines(text: str) -> list[str]:
    chosen = [m for m in text.split(",") if m]
    if unknown := set(chosen) - {*NO_QUEUE_NAMES, "bare"}:
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(sorted(unknown))}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per drain (default 5000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="target's answer delay")
    parser.add_argument(
        "--processes",
        type=lambda s: [int(p) for p in s.split(",")],
        default=[1],
        help="worker processes, e.g. 1 or 1,2 (default 1)",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="fetches in flight per process")
    parser.add_argument(
        "--poll-ms",
        type=float,
        default=50.0,
        help="INGEST_POLL_INTERVAL_SECONDS of the workers, in ms (default 50)",
    )
    parser.add_argument("--latency-rate", type=float, default=50.0, help="jobs/s (default 50)")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="0 skips it")
    parser.add_argument(
        "--baseline",
        type=baselines,
        default=["httpx"],
        help="comma-separated: httpx (default: a bare httpx client, no queue), fetcher (the"
        " worker's Fetcher, no queue), bare (a bare claim-one loop on each backend); '' for none",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per drain, seconds")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help=f"before each run, wait up to this many seconds for the machine to be idle"
        f" (under {IDLE_CORES} cores busy); for shared machines (default 0: no wait)",
    )
    parser.add_argument(
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
