"""Fetch the target with no queue at all: the ceiling a worker process can reach.

A child of `bench.drain`. It builds its client and warms the pool, prints `ready`, waits
for a line on stdin, makes `--requests` GETs with `--concurrency` in flight, and prints
one JSON line: {"seconds", "cpu_seconds", "failures"} for that phase alone.

`--mode httpx` is a bare `httpx.AsyncClient.get`; `--mode fetcher` is the worker's own
`app.fetch.fetcher.Fetcher.fetch` (streaming, sha256, title), still without any database.
"""

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable

import httpx

from app.fetch.fetcher import Fetcher
from app.model import Fetched
from app.part_settings import PartSettings, destinations_of
from app.settings import Settings


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(base_url: str, mode: str, requests: int, concurrency: int) -> dict[str, float]:
    if mode == "httpx":
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        client = httpx.AsyncClient(trust_env=False, limits=limits)

        async def fetch(url: str) -> bool:
            response = await client.get(url)
            return response.status_code == 200 and len(response.content) > 0

        close: Callable[[], Awaitable[None]] = client.aclose
    else:
        settings = Settings(worker_concurrency=concurrency, allow_private_networks=True)
        fetcher = Fetcher(PartSettings.of(settings).fetch, destinations=destinations_of(settings))

        async def fetch(url: str) -> bool:
            return isinstance(await fetcher.fetch(url), Fetched)

        close = fetcher.aclose

    async def drive(count: int) -> int:
        issued = failures = 0

        async def slot() -> None:
            nonlocal issued, failures
            while issued < count:
                issued += 1
                failures += not await fetch(f"{base_url}/page/{issued}")

        await asyncio.gather(*(slot() for _ in range(concurrency)))
        return failures

    await drive(concurrency)  # open the pool's connections before the clock starts
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    cpu, started = cpu_now(), time.perf_counter()
    failures = await drive(requests)
    result = {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": cpu_now() - cpu,
        "failures": failures,
    }
    await close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of bench.target")
    parser.add_argument("--mode", choices=("httpx", "fetcher"), default="httpx")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    result = asyncio.run(run(args.url, args.mode, args.requests, args.concurrency))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
