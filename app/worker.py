"""The worker loop: wait (wake-up | next due | poll | stop) -> claim up to free slots ->
fetch -> decide -> record.

It never sleeps on a job: a failed job's next attempt time is written to the database and
the loop moves on to other work. It issues no SQL (that is `app.store.queue`) and makes
no retry decision (that is `app.policy`).
"""

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from app import observability as events
from app.fetcher import Fetcher, FetchResult
from app.policy import decide
from app.scheduling import domain_pause
from app.settings import Settings
from app.store.queue import Lease, Queue
from app.wakeup import Wakeup

log = logging.getLogger("ingest.worker")

PRUNE_INTERVAL_SECONDS = 300.0
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
    ) -> None:
        self.queue = queue
        self.fetcher = fetcher
        self.settings = settings
        self.clock = clock
        self.rand = rand
        self.id = new_worker_id()
        self._wakeup = Wakeup()
        self._stopping = asyncio.Event()
        self._inflight: dict[asyncio.Task[None], Lease] = {}
        self._last_reclaim = float("-inf")
        self._last_prune = time.monotonic()

    def notify(self) -> None:
        """Something may be due now (a job was submitted, a slot freed): look again."""
        self._wakeup.set()

    def stop(self) -> None:
        """Stop claiming; `run` then drains in-flight fetches and returns."""
        self._stopping.set()
        self._wakeup.set()

    async def run(self) -> None:
        log.info("worker %s started (%d slots)", self.id, self.settings.worker_concurrency)
        async with self.queue.db.backend.listen(self.notify):
            heartbeat = asyncio.create_task(self._heartbeat())
            try:
                await self._loop()
            finally:
                # Leases are renewed until the last job is recorded or handed back: a job
                # whose lease lapsed during the grace period would be fetched again elsewhere.
                try:
                    await self._drain()
                finally:
                    heartbeat.cancel()
                    await asyncio.wait([heartbeat])
        log.info("worker %s stopped", self.id)

    async def _loop(self) -> None:
        errors = 0
        while not self._stopping.is_set():
            free = self.settings.worker_concurrency - len(self._inflight)
            try:
                await self._reclaim_expired()
                await self._prune()
                leases = await self._claim(free) if free > 0 else []
                # Nothing claimed with slots free: sleep until the next retry is due. No slot
                # free: until one is (a finishing job wakes the loop).
                timeout = 0.0
                if not leases:
                    timeout = await self._idle_timeout() if free > 0 else self._max_wait
                errors = 0
            except Exception:
                errors += 1
                delay = min(0.5 * 2 ** (errors - 1), 30.0)
                log.exception(
                    "worker %s: database error; trying again in %s", self.id, events.seconds(delay)
                )
                await self._wakeup.wait(delay)
                continue
            for lease in leases:
                events.job_started(lease)
                task = asyncio.create_task(self._process(lease), name=f"job {lease.id}")
                self._inflight[task] = lease
                task.add_done_callback(self._finished)
            if leases:
                # More may be due: the claim skips domains at their limits, so a short batch
                # does not mean nothing else is waiting.
                continue
            await self._wakeup.wait(timeout)

    async def _claim(self, free: int) -> list[Lease]:
        return await self.queue.claim(self.id, free, self.clock(), self.settings.lease_seconds)

    async def _reclaim_expired(self) -> None:
        if time.monotonic() - self._last_reclaim < self._reclaim_interval:
            return
        self._last_reclaim = time.monotonic()
        for job in await self.queue.reclaim_expired(self.clock()):
            events.job_reclaimed(job)

    async def _prune(self) -> None:
        """Retention: now and then, delete succeeded and cancelled jobs (and their content)
        that finished more than INGEST_RETENTION_DAYS ago. Dead jobs stay."""
        days = self.settings.retention_days
        if not days or time.monotonic() - self._last_prune < PRUNE_INTERVAL_SECONDS:
            return
        self._last_prune = time.monotonic()
        deleted = await self.queue.prune(self.clock() - timedelta(days=days))
        if deleted:
            log.info("worker %s: deleted %d finished jobs (retention)", self.id, deleted)

    @property
    def _reclaim_interval(self) -> float:
        return min(self.settings.poll_interval_seconds, self.settings.lease_seconds / 2)

    @property
    def _max_wait(self) -> float:
        return min(self.settings.poll_interval_seconds, self._reclaim_interval)

    async def _idle_timeout(self) -> float:
        """How long the loop may wait: until the next retry is due, at most one poll."""
        timeout = self._max_wait
        next_due = await self.queue.next_due_at(self.clock())
        if next_due is not None:
            timeout = min(timeout, (next_due - self.clock()).total_seconds())
        return max(timeout, 0.001)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("worker %s: job task failed", self.id, exc_info=task.exception())
        self.notify()

    async def _process(self, lease: Lease) -> None:
        started = time.monotonic()
        try:
            outcome = await self.fetcher.fetch(lease.url)
        except asyncio.CancelledError:
            await asyncio.shield(self._release(lease))
            raise
        duration_ms = int((time.monotonic() - started) * 1000)
        # Once the fetch is done its outcome is recorded, even if we are being cancelled.
        record = asyncio.ensure_future(self._record(lease, outcome, duration_ms))
        try:
            await asyncio.shield(record)
        except asyncio.CancelledError:
            await record
            raise

    async def _record(self, lease: Lease, outcome: object, duration_ms: int) -> None:
        now = self.clock()
        if isinstance(outcome, FetchResult):
            recorded = await self.queue.record_success(lease, outcome, now, duration_ms)
            if recorded:
                events.job_succeeded(lease, outcome, duration_ms)
        else:
            decision = decide(
                outcome,
                lease.attempt,
                lease.max_attempts,
                lease.deferrals,
                now,
                self.settings,
                self.rand,
            )
            recorded, pause = await self.queue.record_failure(
                lease,
                outcome,
                decision,
                now,
                duration_ms,
                lambda failures: domain_pause(outcome, failures, now, self.settings, self.rand),
            )
            if pause is not None:
                events.domain_paused(lease.domain, pause)
            if recorded:
                deferral = f"{lease.deferrals + 1}/{self.settings.max_deferrals}"
                events.job_failed(lease, outcome, decision, duration_ms, deferral)
        if not recorded:
            events.job_lease_lost(lease, outcome, duration_ms)

    async def _release(self, lease: Lease) -> None:
        if await self.queue.release(lease, self.clock()):
            events.job_released(lease)

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
