"""Batched completion: finished attempts recorded many at a time, then reported.

A fetch's outcome is handed over with `add` (it never waits); the `Completer` writes what
has gathered in one transaction (`Queue.record`, fenced on each lease), batching only when
it pays (group commit; when it writes: `Completer.run`). Only a recorded outcome counts:
its log line and metrics, and the domain pause policy asks for, follow the write. Until
then the job stays `running` under its lease, which the worker's heartbeat renews
(`unrecorded`); if the process dies first, the lease runs out and the job is fetched
again: at least once, never lost.

A write the database cannot serve is tried again, and one it refuses is split
(`Completer._write`); while a write is being tried again, `failing` is true and the worker
claims nothing.
"""

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import assert_never

from app.model import (
    Confirmed,
    Deferred,
    Died,
    DomainPause,
    DomainSignal,
    Expired,
    Failure,
    HandedBack,
    Lease,
    NotKept,
    Outcome,
    Retried,
    Succeeded,
)
from app.observability import events
from app.rules import policy
from app.store.outages import database_unavailable, error_wait
from app.store.queue import Queue
from app.store.record import Recorded
from app.text.wording import counted, error_line
from app.worker.loop import wait_for_event

log = logging.getLogger("ingest.worker")


@dataclass(frozen=True, slots=True)
class Batching:
    """When the completer writes, and the storage quota it holds new versions to; built once
    from the settings by the composition root (`app.runtime`)."""

    slots: int
    """A slot's worth of outcomes waiting is written at once (INGEST_WORKER_CONCURRENCY)."""
    record_delay_seconds: float
    """The longest a batch gathers while other outcomes are coming."""
    lease_seconds: float
    """How long a write the database cannot serve is tried again before it is given up."""
    storage_quota_bytes: int = 0
    """INGEST_TENANT_MAX_STORAGE_BYTES: the bytes of content a tenant may keep, which new
    versions are held to before they are written (`policy.within_storage_quota`); 0: none."""


class Completer:
    def __init__(
        self,
        queue: Queue,
        batching: Batching,
        retry: policy.RetryRules,
        clock: Callable[[], datetime],
        rand: Callable[[], float] = random.random,
        on_recorded: Callable[[Sequence[Outcome]], None] = lambda _: None,
        on_their_way: Callable[[], int] = lambda: 0,
    ) -> None:
        """`retry`: the rules policy pauses a failing domain by (`policy.domain_pause`)."""
        self.queue = queue
        self.batching = batching
        self.retry = retry
        self.clock = clock
        self.rand = rand
        self.on_recorded = on_recorded
        """Called with the outcomes just recorded: their domains' slots are free again, and
        some jobs may be pending again."""
        self.on_their_way = on_their_way
        """How many more outcomes the worker will add soon (fetches running, jobs queued)."""
        self._waiting: list[Outcome] = []
        self._writing: list[Outcome] = []
        self._gathered = asyncio.Event()
        self._full = asyncio.Event()
        self._closing = False
        self._failed_writes = 0

    @property
    def failing(self) -> bool:
        """A write failed and is being tried again: outcomes cannot be recorded now."""
        return self._failed_writes > 0

    @property
    def unrecorded(self) -> list[Lease]:
        """The leases of outcomes not recorded yet: still running, so still renewed."""
        return [outcome.lease for outcome in (*self._waiting, *self._writing)]

    def add(self, outcome: Outcome) -> None:
        """Record `outcome` with the next batch."""
        self._waiting.append(outcome)
        self._gathered.set()
        if len(self._waiting) >= self.batching.slots or self.on_their_way() == 0:
            self._full.set()

    def close(self) -> None:
        """Write what is waiting at once, then let `run` return."""
        self._closing = True
        self._gathered.set()
        self._full.set()

    async def run(self) -> None:
        """Write batches until closed and nothing waits.

        While a write is in flight, what is added waits for the next one, which takes it
        all. When the writer is free, an outcome is written at once if no other is on its
        way (no fetch of the worker running, none queued: a lone job at a trickle pays no
        delay), or once a slot's worth is waiting; otherwise the batch gathers for at most
        INGEST_RECORD_DELAY_SECONDS, since other outcomes are coming."""
        while True:
            await self._gathered.wait()
            if not self._closing and not self._full.is_set():
                await wait_for_event(self._full, self.batching.record_delay_seconds)
            batch, self._waiting = self._waiting, []
            self._gathered.clear()
            self._full.clear()
            if batch:
                self._writing = batch
                try:
                    await self._write(batch)
                finally:
                    self._writing = []
            if self._closing and not self._waiting:
                return

    async def _write(self, batch: Sequence[Outcome]) -> None:
        """Write `batch`, whatever fails.

        A write that fails because the database cannot serve (it is away, full, out of
        connections: `app.store.outages.database_unavailable`) keeps its outcomes and is
        tried again, fenced as ever, after a growing wait, for up to INGEST_LEASE_SECONDS;
        then the outcomes are given up (logged), and their jobs come back when their leases
        run out. Meanwhile `failing` is true, and the worker claims nothing: a job it
        fetched then could not be recorded either, and would cost an attempt for nothing.

        A write that fails for any other reason is a batch the database refuses, most
        likely for one outcome in it: the outcomes are then written one by one, so a bad
        one costs its batch-mates nothing. One that cannot be written even alone is given
        up at once (logged with its error), and its job comes back when its lease runs
        out; the worker goes on."""
        give_up = self.clock() + timedelta(seconds=self.batching.lease_seconds)
        try:
            await self._write_until_given_up(batch, give_up)
        finally:
            self._failed_writes = 0

    async def _write_until_given_up(self, batch: Sequence[Outcome], give_up: datetime) -> None:
        while True:
            batch, exc = await self._write_isolating(batch)
            if exc is None:
                return
            self._failed_writes += 1
            failed = self._failed_writes
            if self.clock() >= give_up:
                log.error(
                    "gave up recording %s after %s (%s); they run again once their leases run out",
                    counted(len(batch), "finished job"),
                    counted(failed, "failed write"),
                    error_line(exc),
                )
                return
            wait = error_wait(failed)
            log.warning(
                "recording %s failed (%s); trying again in %gs",
                counted(len(batch), "finished job"),
                error_line(exc),
                wait,
                exc_info=failed == 1,
            )
            await asyncio.sleep(wait)

    async def _write_isolating(
        self, batch: Sequence[Outcome]
    ) -> tuple[Sequence[Outcome], Exception | None]:
        """Record `batch`; when the database refuses it (not an outage), each outcome alone.
        What is left to write because the database cannot serve, and the error that says so
        (None: nothing is left)."""
        try:
            await self.record(batch)
            return [], None
        except Exception as exc:
            if database_unavailable(exc):
                return batch, exc
            if len(batch) > 1:
                log.warning(
                    "recording %s failed (%s); recording each alone",
                    counted(len(batch), "finished job"),
                    error_line(exc),
                )
        for i, outcome in enumerate(batch):
            try:
                await self.record([outcome])
            except Exception as exc:
                if database_unavailable(exc):
                    return batch[i:], exc
                log.error(
                    "job %s attempt %d: its outcome cannot be recorded (%s); given up, it runs "
                    "again once its lease runs out",
                    outcome.lease.id,
                    outcome.lease.attempt,
                    error_line(exc),
                    exc_info=exc,
                )
        return [], None

    async def record(self, outcomes: Sequence[Outcome]) -> Recorded:
        """Record `outcomes` now, their new versions held to their tenants' storage quota
        (`_within_quota`); log and count those recorded (and the others as lost); then pause
        the domains that policy says should wait."""
        now = self.clock()
        outcomes = await self._within_quota(outcomes)
        recorded = await self.queue.record(outcomes, now)
        if recorded.outcomes:
            self.on_recorded(recorded.outcomes)
        kept = {outcome.lease for outcome in recorded.outcomes}
        for outcome in outcomes:
            if outcome.lease in kept:
                events.recorded(outcome)
            else:
                events.lease_lost(outcome)
        try:
            await self._pause_domains(recorded, now)
        except Exception as exc:  # the outcomes are in; a pause is advice
            log.warning("could not pause domains: %s", error_line(exc))
        return recorded

    async def _within_quota(self, outcomes: Sequence[Outcome]) -> Sequence[Outcome]:
        """`outcomes`, the new versions their tenants' storage quota refuses not kept: a
        read of what the tenants keep, before the write and outside it (SQLite's writer is
        not held for it), so records at once may together pass the quota by what they
        add (a soft limit, as the pending quota is)."""
        quota = self.batching.storage_quota_bytes
        storing = sorted({o.lease.tenant for o in outcomes if isinstance(o, Succeeded)})
        if not quota or not storing:
            return outcomes
        kept = await self.queue.bytes_kept(storing)
        return policy.within_storage_quota(outcomes, kept, quota)

    async def _pause_domains(self, recorded: Recorded, now: datetime) -> None:
        """Propose each failing domain's longest pause of the batch; log it only if stored.

        A batch may hold several failures of one domain (a 429 with a long Retry-After and
        a 500): the longest pause is the one a write per outcome would have left. The store
        keeps a longer pause already there (another worker's, an earlier batch's), and then
        nothing is logged: the log says what the database holds.
        """
        pauses: dict[str, DomainPause] = {}
        for outcome in recorded.outcomes:
            failure = _failure(outcome)
            if outcome.domain is not DomainSignal.FAILING or failure is None:
                continue
            domain = outcome.lease.domain
            count = _streak(recorded, domain)
            pause = policy.domain_pause(failure, count, now, self.retry, self.rand)
            if pause is not None and (domain not in pauses or pause.until > pauses[domain].until):
                pauses[domain] = pause
        for domain, pause in sorted(pauses.items()):
            if await self.queue.pause_domain(domain, pause):
                events.domain_paused(domain, pause, _streak(recorded, domain))


def _failure(outcome: Outcome) -> Failure | None:
    """The failure an attempt ended with; None for one that did not fail."""
    match outcome:
        case Retried() | Deferred() | Died() | Expired():
            return outcome.failure
        case Succeeded() | Confirmed() | NotKept() | HandedBack():
            return None
        case _:
            assert_never(outcome)


def _streak(recorded: Recorded, domain: str) -> int:
    """The failing domain's consecutive failures: at least the one failure at hand, though
    an answer later in the same batch ended the streak."""
    return max(recorded.failures.get(domain, 0), 1)
