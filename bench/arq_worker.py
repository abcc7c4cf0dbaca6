"""A peer: arq (asyncio jobs on Redis) fetching the same URLs, for `bench.drain --baseline arq`.

A child of `bench.drain`, like `bench.bare_loop`. It enqueues `--jobs` jobs (one GET of
`--url`/i each) into the Redis at `--redis` (a Unix socket), prints `ready`, waits for a line
on stdin, then runs one arq worker in burst mode (`--concurrency` jobs at a time, one shared
`httpx.AsyncClient` with fetch_alone's limits) until the queue is empty. Prints one JSON line
for that phase alone: {"seconds", "cpu_seconds", "failures", "jobs"}. arq keeps each job's
result in Redis, as it does by default; it writes no attempt history and takes no decision
beyond its own retries.

With `--trickle` it enqueues nothing: after the line on stdin its worker waits for jobs (as
a deployed arq worker does, polling Redis every 10 ms, as in the drain) and stops once it has
run `--jobs` of them, which `bench.baselines.arq_trickle` enqueues one at a time meanwhile.
"""

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import httpx
from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker

from bench.fetch_alone import cpu_now

failures = 0


async def fetch(ctx: dict[str, Any], url: str) -> int:
    global failures
    try:
        response = await ctx["client"].get(url)
        await response.aread()
        return response.status_code
    except httpx.HTTPError:
        failures += 1
        return 0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", required=True, help="Redis's Unix socket")
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--trickle", action="store_true", help="wait for --jobs jobs to come")
    args = parser.parse_args()
    all_ran, ran = asyncio.Event(), 0

    async def recorded(ctx: dict[str, Any]) -> None:
        """arq's hook after a job's result is stored (`--trickle`): the last one ends the run."""
        nonlocal ran
        ran += 1
        if ran == args.jobs:
            all_ran.set()

    redis = RedisSettings(unix_socket_path=args.redis)
    pool = await create_pool(redis)
    if not args.trickle:
        for i in range(args.jobs):
            await pool.enqueue_job("fetch", f"{args.url}/{i}")
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        worker = Worker(
            functions=[fetch],
            redis_pool=pool,
            burst=not args.trickle,
            max_jobs=args.concurrency,
            handle_signals=False,
            ctx={"client": client},
            poll_delay=0.01,
            after_job_end=recorded if args.trickle else None,
        )
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        started, cpu = time.monotonic(), cpu_now()
        if args.trickle:
            running = asyncio.create_task(worker.main())
            await all_ran.wait()
            seconds, cpu_seconds = time.monotonic() - started, cpu_now() - cpu
            done = args.jobs
            running.cancel()
        else:
            await worker.main()
            seconds, cpu_seconds = time.monotonic() - started, cpu_now() - cpu
            done = worker.jobs_complete + worker.jobs_failed
        await worker.close()
    print(
        json.dumps(
            {"seconds": seconds, "cpu_seconds": cpu_seconds, "failures": failures, "jobs": done}
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main())
