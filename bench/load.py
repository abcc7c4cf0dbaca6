"""Load: N jobs through POST /jobs/batch of `ingest serve` while `ingest worker`s drain them.

    python -m bench.load --backend sqlite --jobs 100000 --batch 1000 --workers 1

`ingest serve` runs without its embedded worker (the API process alone); `--workers`
`ingest worker` processes fetch every job from a local `bench.target`. One client POSTs the
batches back to back (one keep-alive connection) while the workers drain what came before.
Printed, and what they mean:

- error responses: answers other than 201, and requests that failed (must be 0);
- jobs lost: accepted (in a 201) but not succeeded once the queue is empty (must be 0),
  and jobs dead or cancelled (must be 0: the target answers 200);
- submit latency p50 / p99 / max of one batch under load, in ms, as the client sees it;
- drain rate: jobs / s from the first attempt's start to the last job's finish (rows);
- RSS of the API and of each worker: before the first batch, its peak while loaded (sampled
  every 0.5 s), and after the queue is empty (flat: after close to before).
"""

import argparse
import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.tables import UTCDateTime, attempts, jobs
from bench.harness import RESULTS, environment, fresh_database, start_target
from bench.numbers import fmt, percentile
from bench.serve import serving
from bench.workers import Probe, Workers

DATABASE = "ingest_load"
TENANT = "load"


@dataclass
class Memory:
    """RSS (KiB) of the watched processes: before, the peak, after."""

    pids: dict[str, int]
    before: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)

    def read(self) -> dict[str, int]:
        return {name: rss_kib(pid) for name, pid in self.pids.items()}

    def sample(self) -> None:
        for name, kib in self.read().items():
            self.peak[name] = max(self.peak.get(name, 0), kib)


def rss_kib(pid: int) -> int:
    """VmRSS of a live process, in KiB (0 once it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def post_batches(
    client: httpx.AsyncClient, urls: list[str], batch: int, tenant: str = TENANT
) -> tuple[list[float], int, int]:
    """POST `urls` in batches of `batch`, back to back: (latency of each in ms, jobs
    accepted, error answers or failed requests)."""
    latencies: list[float] = []
    accepted = errors = 0
    for start in range(0, len(urls), batch):
        body = {"jobs": [{"url": url, "tenant": tenant} for url in urls[start : start + batch]]}
        began = time.perf_counter()
        try:
            response = await client.post("/jobs/batch", json=body)
        except httpx.HTTPError as exc:
            errors += 1
            print(f"  POST /jobs/batch failed: {exc!r}", flush=True)
            continue
        latencies.append((time.perf_counter() - began) * 1000)
        if response.status_code == 201:
            accepted += len(response.json()["items"])
        else:
            errors += 1
            print(f"  POST /jobs/batch: {response.status_code} {response.text[:200]}", flush=True)
    return latencies, accepted, errors


async def drained(probe: Probe, memory: Memory, check_alive: Any, timeout: float) -> None:
    """Until no job is pending or running, sampling memory as it goes."""
    async with asyncio.timeout(timeout):
        while True:
            check_alive()
            memory.sample()
            unfinished, _ = await probe.unfinished()
            if not unfinished:
                return
            await asyncio.sleep(0.5)


async def sampling(memory: Memory) -> None:
    while True:
        memory.sample()
        await asyncio.sleep(0.5)


async def load(database_url: str, args: Any) -> dict[str, Any]:
    """One run on an empty, migrated database: the figures of the module's docstring."""
    target = start_target(args.delay_ms)
    probe = Probe(Database(database_url))
    workers: Workers | None = None
    try:
        urls = [target.url(i) for i in range(args.jobs)]
        async with serving(database_url, args, worker="none") as serve:
            workers = Workers(database_url, args.workers, args)
            pids = {"api": serve.process.pid}
            pids |= {f"worker {i}": pid for i, pid in enumerate(workers.pids)}
            memory = Memory(pids)
            # A warm-up batch: every process has its connections and code loaded when the
            # first reading is taken, so "before" is what an idle service holds.
            _, _, warm_errors = await post_batches(serve.client, [target.url(-1)], 1, "warmup")
            await drained(probe, memory, workers.check_alive, args.timeout)
            await asyncio.sleep(1.0)
            memory.before = memory.read()
            memory.peak = dict(memory.before)
            began = time.monotonic()
            sampler = asyncio.create_task(sampling(memory))
            try:
                latencies, accepted, errors = await post_batches(serve.client, urls, args.batch)
            finally:
                sampler.cancel()
            submitted = time.monotonic() - began
            await drained(probe, memory, workers.check_alive, args.timeout)
            await asyncio.sleep(1.0)
            memory.after = memory.read()
            workers.check_alive()
    finally:
        if workers is not None:
            workers.stop()
        target.stop()
    counts, first_start, last_finish = await _outcome(probe.database)
    await probe.database.dispose()
    succeeded = counts.get(JobStatus.SUCCEEDED, 0)
    drain_seconds = (
        (last_finish - first_start).total_seconds() if first_start and last_finish else None
    )
    return {
        "jobs": args.jobs,
        "accepted": accepted,
        "error_responses": errors + warm_errors,
        "lost": accepted - succeeded,
        "dead_or_cancelled": counts.get(JobStatus.DEAD, 0) + counts.get(JobStatus.CANCELLED, 0),
        "submit_seconds": submitted,
        "submit_p50_ms": percentile(latencies, 0.5) if latencies else None,
        "submit_p99_ms": percentile(latencies, 0.99) if latencies else None,
        "submit_max_ms": max(latencies, default=None),
        "drain_seconds": drain_seconds,
        "drain_jobs_per_s": succeeded / drain_seconds if drain_seconds else None,
        "rss_kib": {"before": memory.before, "peak": memory.peak, "after": memory.after},
    }


async def _outcome(
    database: Database,
) -> tuple[dict[JobStatus, int], datetime | None, datetime | None]:
    """The load tenant's jobs per status; its first attempt's start, its last finish."""
    by_status = (
        sa.select(jobs.c.status, sa.func.count())
        .where(jobs.c.tenant == TENANT)
        .group_by(jobs.c.status)
    )
    first_start = (
        sa.select(sa.func.min(attempts.c.started_at))
        .join(jobs, jobs.c.id == attempts.c.job_id)
        .where(jobs.c.tenant == TENANT)
    )
    last_finish = sa.select(sa.func.max(jobs.c.finished_at)).where(jobs.c.tenant == TENANT)
    # An aggregate loses the column's type: SQLite would hand back the stored text.
    span = sa.select(
        sa.type_coerce(first_start.scalar_subquery(), UTCDateTime),
        sa.type_coerce(last_finish.scalar_subquery(), UTCDateTime),
    )
    async with database.read() as conn:
        counts = {JobStatus(s): n for s, n in await conn.execute(by_status)}
        started, finished = (await conn.execute(span)).one()
    return counts, started, finished


def report(backend: str, result: dict[str, Any]) -> str:
    rss = result["rss_kib"]
    lines = [
        f"{backend}: {result['jobs']:,} jobs in batches, {result['accepted']:,} accepted",
        f"  error responses: {result['error_responses']}",
        f"  jobs lost: {result['lost']}; dead or cancelled: {result['dead_or_cancelled']}",
        f"  submit latency per batch (ms): p50 {fmt(result['submit_p50_ms'])}, "
        f"p99 {fmt(result['submit_p99_ms'])}, max {fmt(result['submit_max_ms'])}; "
        f"all batches posted in {fmt(result['submit_seconds'])} s",
        f"  drain: {fmt(result['drain_jobs_per_s'], 0)} jobs/s "
        f"({fmt(result['drain_seconds'])} s, first claim to last finish)",
    ]
    for name in rss["before"]:
        before, peak, after = (rss[when][name] / 1024 for when in ("before", "peak", "after"))
        lines.append(
            f"  RSS {name} (MiB): before {fmt(before)}, peak {fmt(peak)}, after {fmt(after)}"
        )
    return "\n".join(lines)


async def run(args: Any) -> dict[str, Any]:
    url = await fresh_database(args.backend, DATABASE)
    return await load(url, args)


def parser() -> argparse.ArgumentParser:
    described = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = described.add_argument
    add("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    add("--jobs", type=int, default=100_000)
    add("--batch", type=int, default=1000, help="jobs per POST /jobs/batch (at most 1,000)")
    add("--workers", type=int, default=1, help="`ingest worker` processes (default 1)")
    add("--concurrency", type=int, default=32, help="fetches in flight per worker")
    add("--poll-ms", type=float, default=50.0, help="INGEST_POLL_INTERVAL_SECONDS, in ms")
    add("--delay-ms", type=float, default=0.0, help="the target's answer delay")
    add("--timeout", type=float, default=1800.0, help="for the queue to empty, seconds")
    add("--set", action="append", default=[], metavar="INGEST_X=V", help="another setting")
    return described


def main() -> None:
    args = parser().parse_args()
    env = asyncio.run(environment())
    print(", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    began = time.monotonic()
    result = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"load-{args.backend}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"environment": env, "args": vars(args), "result": result}))
    print(report(args.backend, result))
    print(f"run in {time.monotonic() - began:.0f}s on pid {os.getpid()}; raw numbers in {out}")


if __name__ == "__main__":
    main()
