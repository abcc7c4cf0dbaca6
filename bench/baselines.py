"""What `bench.drain` compares ingest with: the same GETs with no queue (`bench.fetch_alone`),
a bare claim-one loop on each backend (`bench.bare_loop`) and arq on Redis
(`bench.arq_worker`, needs `redis-server` on PATH), each in P child processes started
together.
"""

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from app.store.database import Database
from bench.harness import TARGET_ENV, Target, cpu_seconds, fresh_database, machine_ticks
from bench.numbers import percentile
from bench.workers import Probe, Sample, cores_busy, cpu_between, new_jobs, submit

DATABASE = "ingest_bench"


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


def no_queue(target: Target, mode: str, processes: int, args: Any) -> dict:
    """`bench.fetch_alone` in P processes, N GETs in all, started together."""
    per_process = args.jobs // processes
    options = ["--url", target.base_url, "--mode", mode, "--requests", str(per_process)]
    with children(
        "bench.fetch_alone", processes, *options, "--concurrency", str(args.concurrency)
    ) as started:
        target_cpu, ticks = cpu_seconds(target.pid), machine_ticks()
        results = go(started)
        first = Sample(0, {target.pid: target_cpu}, 0.0, ticks)
        last = Sample(0, {target.pid: cpu_seconds(target.pid)}, 0.0, machine_ticks())
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


async def bare(backend: str, target: Target, processes: int, args: Any) -> dict:
    """`bench.bare_loop` in P processes, started together, on a fresh database holding the
    drain's N jobs (submitted the drain's way). Jobs/s and worker CPU are the children's
    own, from "go" to their last claim coming back empty."""
    url = await fresh_database(backend, DATABASE)
    probe = Probe(Database(url))
    await probe.find_server()
    await submit(probe.store, new_jobs(target, args.jobs))
    if args.analyze:
        await probe.database.transact(lambda conn: conn.execute(sa.text("ANALYZE")))
    options = ["--database", url, "--url", target.base_url, "--concurrency", str(args.concurrency)]
    with children("bench.bare_loop", processes, *options) as started:
        first = probe.sample([target.pid])
        async with asyncio.timeout(args.timeout):  # on expiry the children are killed
            results = await asyncio.to_thread(go, started)
        last = probe.sample([target.pid])
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
        "target_cpu_ms": cpu_between(first, last, [target.pid]) * per_job,
        "bench_cpu_ms": cpu_between(first, last, [os.getpid()]) * per_job,
        "cores_busy": cores_busy(first, last),
        "other_cores": cores_busy(first, last) - ours / (last.at - first.at),
        "connections_per_1k": sessions * per_job if sessions else float("nan"),
    }


ARQ_NAME = "arq (Redis)"


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[str, int]]:
    """A throwaway redis-server (no persistence) on a Unix socket: its path and pid."""
    directory = tempfile.mkdtemp(prefix="ingest-bench-redis-")
    socket_path = os.path.join(directory, "redis.sock")
    command = ["redis-server", "--port", "0", "--unixsocket", socket_path, "--save", ""]
    command += ["--appendonly", "no", "--dir", directory]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(socket_path):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start (is it installed?)")
            time.sleep(0.02)
        yield socket_path, server.pid
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


def arq_queue(target: Target, processes: int, args: Any) -> dict:
    """`bench.arq_worker` in P processes on one fresh Redis, N jobs in all, started
    together. Jobs/s and worker CPU are the children's own from "go" to an empty queue;
    Redis's CPU is reported as the database server's."""
    per_process = args.jobs // processes
    with redis_server() as (socket_path, redis_pid):
        options = ["--redis", socket_path, "--url", target.base_url]
        options += ["--jobs", str(per_process), "--concurrency", str(args.concurrency)]
        with children("bench.arq_worker", processes, *options) as started:
            redis_cpu, target_cpu, ticks = (
                cpu_seconds(redis_pid),
                cpu_seconds(target.pid),
                machine_ticks(),
            )
            results = go(started)
            redis_used = cpu_seconds(redis_pid) - redis_cpu
            first = Sample(0, {target.pid: target_cpu}, 0.0, ticks)
            last = Sample(0, {target.pid: cpu_seconds(target.pid)}, 0.0, machine_ticks())
    done = sum(r["jobs"] for r in results)
    if failures := sum(r["failures"] for r in results):
        raise RuntimeError(f"{failures} of {done} requests failed")
    if done != per_process * processes:
        raise RuntimeError(f"{done} of {per_process * processes} jobs done")
    seconds = max(r["seconds"] for r in results)
    worker_cpu = sum(r["cpu_seconds"] for r in results)
    ours = worker_cpu + redis_used + cpu_between(first, last)
    per_job = 1000 / done
    return {
        "jobs_per_s": done / seconds,
        "worker_cpu_ms": worker_cpu * per_job,
        "db_server_cpu_ms": redis_used * per_job,
        "target_cpu_ms": cpu_between(first, last) * per_job,
        "cores_busy": cores_busy(first, last),
        "other_cores": cores_busy(first, last) - ours / seconds,
    }


async def arq_trickle(target: Target, args: Any) -> dict:
    """arq's worker alone at a trickle, as `bench.drain`'s latency scenario runs `ingest
    worker`: `bench.arq_worker --trickle` waiting on a fresh Redis, and jobs enqueued one at a
    time at `--latency-rate` a second for `--latency-seconds` from this process. Pickup and
    submit -> done from the times arq keeps with each result (enqueued, started, finished);
    the worker's CPU a job is its own from the first enqueue to its last job's end."""
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.jobs import Job

    total = round(args.latency_rate * args.latency_seconds)
    with redis_server() as (socket_path, _):
        options = ["--redis", socket_path, "--url", target.base_url, "--trickle"]
        options += ["--jobs", str(total), "--concurrency", str(args.concurrency)]
        pool = await create_pool(RedisSettings(unix_socket_path=socket_path))
        try:
            with children("bench.arq_worker", 1, *options) as (worker,):
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
                ticks, started = machine_ticks(), time.monotonic()
                enqueued = []
                for i in range(total):
                    await asyncio.sleep(
                        max(0.0, started + i / args.latency_rate - time.monotonic())
                    )
                    enqueued.append(await pool.enqueue_job("fetch", f"{target.base_url}/t{i}"))
                result = json.loads(await asyncio.to_thread(worker.stdout.readline))
                ended = machine_ticks()
            infos = [await job.result_info() for job in enqueued if isinstance(job, Job)]
        finally:
            await pool.aclose()
    if result["failures"] or len(infos) != total or any(info is None for info in infos):
        raise RuntimeError(f"arq at a trickle: {result}, {len(infos)} of {total} results")
    pickups = [(i.start_time - i.enqueue_time).total_seconds() * 1000 for i in infos if i]
    done = [(i.finish_time - i.enqueue_time).total_seconds() * 1000 for i in infos if i]
    first, last = Sample(0, {}, 0.0, ticks), Sample(0, {}, 0.0, ended)
    return {
        "p50_ms": percentile(pickups, 0.5),
        "p99_ms": percentile(pickups, 0.99),
        "done_p50_ms": percentile(done, 0.5),
        "done_p99_ms": percentile(done, 0.99),
        "worker_cpu_ms_per_job": result["cpu_seconds"] * 1000 / total,
        "cores_busy": cores_busy(first, last),
    }
