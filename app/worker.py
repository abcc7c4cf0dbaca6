"""The job worker: claim -> fetch -> settle -> record -> events, one job per slot.

`tick()` is one pass of the loop (`app.loop`): take back expired leases now and then,
prune now and then, and claim up to the free slots; each claimed job then runs in a task
of its own: fetch it (`app.fetch`), let policy settle the outcome (`app.policy.settle`),
record it (`app.store.queue`), log and count it (`app.observability`), and pause the
domain if policy says so. The worker never sleeps on a job: a failed job's next attempt
time is written to its row and the loop moves on. It issues no SQL and decides nothing.
"""

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from app import observability as events
from app import policy
from app.fetch.fetcher import Fetcher
from app.loop import Loop, Wakeup
from app.model import Complete, DomainSignal, Lease, Outcome
from app.settings import Settings
from app.store.queue import Queue
from app.store.record import Recorded

log = logging.getLogger("ingest.worker")

PRUNE_INTERVAL = timedelta(minutes=5)
"""How often a worker deletes finished jobs past INGEST_RETENTION_DAYS."""


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        queue: Queue,
        fetcher: Fetcher,
        settings: Settings,
        clock: Callable[[], datetime],
        rand: Callable[[], float] = random.random,
        wakeup: Wakeup | None = None,
    ) -> None:
        self.queue = queue
        self.fetcher = fetcher
        self.settings = settings
        self.clock = clock
        self.rand = rand
        self.id = new_worker_id()
        self.loop = Loop(f"worker {self.id}", self.tick, log, wakeup)
        self._inflight: dict[asyncio.Task[None], Lease] = {}
        self._next_take_back = clock()
        self._next_prune = clock() + PRUNE_INTERVAL

    def notify(self) -> None:
        """Something may be due now (a job was submitted, a slot freed): look again."""
        self.loop.notify()

    def stop(self) -> None:
        """Stop claiming; `run` then drains in-flight fetches and returns."""
        self.loop.stop()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    async def run(self) -> None:
        log.info("worker %s started (%d slots)", self.id, self.settings.worker_concurrency)
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            await self.loop.run()
        finally:
            # Leases are renewed until the last job is recorded or handed back: a job
            # whose lease lapsed during the grace period would be fetched again elsewhere.
            try:
                await self._drain()
            finally:
                heartbeat.cancel()
                await asyncio.wait([heartbeat])
        log.info("worker %s stopped", self.id)

    async def tick(self) -> float:
        """One pass: take back expired leases and prune when due, claim up to the free slots
        and start them. Returns how long the loop may wait before the next pass."""
        now = self.clock()
        if now >= self._next_take_back:
            self._next_take_back = now + timedelta(seconds=self._take_back_interval)
            await self._take_back_expired(now)
        if self.settings.retention_days and now >= self._next_prune:
            self._next_prune = now + PRUNE_INTERVAL
            await self._prune(now)
        free = self.settings.worker_concurrency - len(self._inflight)
        if free <= 0:
            return self._max_wait  # a finishing job wakes the loop
        leases = await self.queue.claim(self.id, free, now, self.settings.lease_seconds)
        for lease in leases:
            events.job_started(lease)
            task = asyncio.create_task(self._process(lease), name=f"job {lease.id}")
            self._inflight[task] = lease
            task.add_done_callback(self._finished)
        if leases:
            # More may be due: the claim skips domains at their limits, so a short batch
            # does not mean nothing else is waiting.
            return 0.0
        return await self._idle_timeout(now)

    async def _take_back_expired(self, now: datetime) -> None:
        """Record the expired leases of other (dead or hung) workers as policy settles them."""
        outcomes = [policy.expired(lease, now) for lease in await self.queue.expired(now)]
        await self._record(outcomes)

    async def _prune(self, now: datetime) -> None:
        """Retention: delete succeeded and cancelled jobs (and their content) that finished
        more than INGEST_RETENTION_DAYS ago. Dead jobs stay."""
        deleted = await self.queue.prune(now - timedelta(days=self.settings.retention_days))
        if deleted:
            log.info("worker %s: deleted %d finished jobs (retention)", self.id, deleted)

    @property
    def _take_back_interval(self) -> float:
        return min(self.settings.poll_interval_seconds, self.settings.lease_seconds / 2)

    @property
    def _max_wait(self) -> float:
        return min(self.settings.poll_interval_seconds, self._take_back_interval)

    async def _idle_timeout(self, now: datetime) -> float:
        """How long the loop may wait: until the next retry is due, at most one poll."""
        timeout = self._max_wait
        next_due = await self.queue.next_due_at(now)
        if next_due is not None:
            timeout = min(timeout, (next_due - now).total_seconds())
        return max(timeout, 0.001)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("worker %s: job task failed", self.id, exc_info=task.exception())
        self.notify()

    async def _process(self, lease: Lease) -> None:
        started = time.monotonic()
        try:
            result = await self.fetcher.fetch(lease.url)
        except asyncio.CancelledError:
            await asyncio.shield(self._record([policy.handed_back(lease, self.clock())]))
            raise
        duration_ms = int((time.monotonic() - started) * 1000)
        outcome = policy.settle(lease, result, duration_ms, self.clock(), self.settings, self.rand)
        # Once the fetch is done its outcome is recorded, even if we are being cancelled.
        record = asyncio.ensure_future(self._record([outcome]))
        try:
            await asyncio.shield(record)
        except asyncio.CancelledError:
            await record
            raise

    async def _record(self, outcomes: Sequence[Outcome]) -> None:
        """Record the outcomes; log and count those recorded (and the others as lost); then
        pause the domains that policy says should wait."""
        if not outcomes:
            return
        now = self.clock()
        recorded = await self.queue.record(outcomes, now)
        held = {outcome.lease for outcome in recorded.outcomes}
        for outcome in outcomes:
            if outcome.lease in held:
                events.recorded(outcome)
            else:
                events.lease_lost(outcome)
        await self._pause_domains(recorded, now)

    async def _pause_domains(self, recorded: Recorded, now: datetime) -> None:
        failing = {o.lease.domain: o for o in recorded.outcomes if o.domain is DomainSignal.FAILING}
        for domain, outcome in sorted(failing.items()):
            decision = outcome.decision
            if isinstance(decision, Complete) or decision.failure is None:
                continue
            count = recorded.failures.get(domain, 0)
            pause = policy.domain_pause(decision.failure, count, now, self.settings, self.rand)
            if pause is not None and await self.queue.pause_domain(domain, pause):
                events.domain_paused(domain, pause)

    async def _heartbeat(self) -> None:
        interval = self.settings.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            held = list(self._inflight.values())
            try:
                until = self.clock() + timedelta(seconds=self.settings.lease_seconds)
                kept = await self.queue.extend_leases(held, until)
            except Exception:
                log.exception("worker %s: heartbeat failed; leases may expire", self.id)
                continue
            # A job recorded while the heartbeat waited is no longer running, and not lost.
            still_held = set(self._inflight.values())
            lost = [lease for lease in held if lease in still_held and lease not in kept]
            if lost:
                log.warning(
                    "worker %s: %d of %d leases were taken back", self.id, len(lost), len(held)
                )

    async def _drain(self) -> None:
        """Give in-flight fetches the grace period, then hand the rest back."""
        if not self._inflight:
            return
        tasks = list(self._inflight)
        log.info(
            "worker %s: waiting up to %s for %d in-flight jobs",
            self.id,
            events.seconds(self.settings.shutdown_grace_seconds),
            len(tasks),
        )
        _, pending = await asyncio.wait(tasks, timeout=self.settings.shutdown_grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
