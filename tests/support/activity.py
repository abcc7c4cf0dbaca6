"""A busy last hour, built through the store's own code with explicit times: jobs submitted,
claimed and finished minute by minute (succeeded, retried or dead, each with its queue
lag), jobs still running on two workers, a worker gone and one stopped. For the dashboard's
tests and its screenshot."""

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.model import (
    DeadReason,
    ErrorKind,
    Failure,
    Fetched,
    Lease,
    MarkDead,
    NewJob,
    Reschedule,
    WorkerPresence,
)
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue
from tests.support.outcomes import failed, succeeded
from tests.support.stores import queue_on

LIVE = ("crawler-1:4711:7c1e9a02", "crawler-2:4802:b5d3f611")
GONE = "crawler-3:3920:0aa4c7e9"
STOPPED = "crawler-1:2266:e81f04bd"
DOMAINS = ("news.example", "shop.example", "api.example")


@dataclass(frozen=True)
class Activity:
    totals: dict[str, int]
    """Attempts finished in the last hour: succeeded, unchanged (none), retried, dead."""
    running: list[Lease]
    """Jobs left running, on the `LIVE` workers."""


def fixed(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def _new(i: int, domain: str, tenant: str = "default") -> NewJob:
    return NewJob(f"https://{domain}/articles/{i}", domain, tenant, max_attempts=4)


async def seed_activity(database: Database, now: datetime, seed: int = 7) -> Activity:
    """The last hour before `now`, minute by minute, then running jobs and workers. The
    hour's first minute is left empty: a page read in the next minute shows it all."""
    rand = random.Random(seed)
    queue = queue_on(database, Settings(_env_file=None, domain_max_in_flight=1000))
    totals = {"succeeded": 0, "unchanged": 0, "retried": 0, "dead": 0}
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
    for minute in range(1, 60):
        # Never after `now`: the last minute may have run a few seconds only.
        at = min(start + timedelta(minutes=minute, seconds=5), now - timedelta(seconds=21))
        busy = 4 + int(10 * (1 + (minute % 20) / 20))
        lag = timedelta(seconds=rand.uniform(0.2, 2) + (25 if 38 <= minute < 44 else 0))
        store = JobStore(database, fixed(at - lag))
        jobs = await store.submit(
            [
                _new(minute * 100 + i, DOMAINS[i % 3], ("shop", "default")[i % 2])
                for i in range(busy)
            ]
        )
        leases = await queue.claim(LIVE[minute % 2], len(jobs) + 4, at, 60)
        outcomes = []
        for lease in leases:
            roll = rand.random()
            if roll < 0.08 or (38 <= minute < 44 and roll < 0.3):
                failure = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 503", 503)
                retry = Reschedule(at + timedelta(minutes=3), 180, failure)
                outcomes.append(failed(lease, retry))
                totals["retried"] += 1
            elif roll < 0.09:
                failure = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
                outcomes.append(failed(lease, MarkDead(DeadReason.FATAL, failure)))
                totals["dead"] += 1
            else:
                body = b"<title>An article</title><p>Text.</p>"
                fetched = Fetched(200, lease.url, "text/html", len(body), "0" * 64, "An article")
                outcomes.append(succeeded(lease, fetched, duration_ms=rand.randint(40, 900)))
                totals["succeeded"] += 1
        await queue.record(outcomes, at + timedelta(seconds=rand.uniform(1, 20)))
    running = await _running(database, queue, now)
    await _workers(queue, now, running)
    return Activity(totals, running)


async def _running(database: Database, queue: Queue, now: datetime) -> list[Lease]:
    """Five jobs started 10 s to 3 min ago, on the live workers."""
    leases = []
    for i in range(5):
        started = now - timedelta(seconds=10 + 40 * i)
        store = JobStore(database, fixed(started - timedelta(seconds=1)))
        await store.submit([_new(9000 + i, DOMAINS[i % 3])])
        leases += await queue.claim(LIVE[i % 2], 1, started, 600)
    return leases


async def _workers(queue: Queue, now: datetime, running: list[Lease]) -> None:
    started = now - timedelta(hours=3)
    for worker in LIVE:
        busy = sum(lease.worker_id == worker for lease in running)
        host, pid, _ = worker.split(":")
        presence = WorkerPresence(worker, host, int(pid), "0.1.0", 8, busy, 2, started)
        await queue.report(presence, now - timedelta(seconds=4))
    host, pid, _ = GONE.split(":")
    gone = WorkerPresence(GONE, host, int(pid), "0.1.0", 8, 3, 16, started)
    await queue.report(gone, now - timedelta(minutes=12))
    host, pid, _ = STOPPED.split(":")
    stopped = WorkerPresence(STOPPED, host, int(pid), "0.1.0", 8, 0, 0, now - timedelta(hours=5))
    await queue.report(stopped, now - timedelta(hours=3, minutes=2))
    await queue.stopped(STOPPED, now - timedelta(hours=3, minutes=1))
