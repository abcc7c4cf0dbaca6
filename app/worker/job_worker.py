"""The job worker: claim -> fetch -> settle -> hand to the completer, with a local queue.

`tick()` is one pass of the loop (`app.worker.loop`): top up the local queue with one claim
of many jobs. Slots take jobs from the local queue without a round trip (graphile-worker's
"local queue"), which holds only the work the slots finish in INGEST_WORKER_PREFETCH_SECONDS
(`app.rules.prefetch`). Each job runs in a task of its own: fetch it (`app.fetch`), let
policy settle it (`app.rules.policy.settle`) and hand the outcome to the completer
(`app.worker.completer`), which records many at once ("batched completion").

The worker never sleeps on a job (a failed job's next attempt time is written to its row),
issues no SQL (`app.store.queue`), decides nothing, and does none of the house's chores
(`app.worker.maintenance`, run beside it). Its row in the `workers` table
(`app.store.workers`) is written at start and every heartbeat, and marked stopped after a
clean stop. What batching trades, and how a stop hands work back: `Worker`.
"""

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import assert_never

from app import __version__
from app.fetch.fetcher import Fetcher
from app.fetch.robots_reader import RobotsTxt
from app.model import (
    Confirmed,
    Deferred,
    Died,
    Expired,
    Failure,
    Fetched,
    HandedBack,
    Lease,
    NotKept,
    Outcome,
    Retried,
    Succeeded,
    Unmodified,
    WorkerPresence,
)
from app.observability import events
from app.rules import policy, scheduling
from app.rules.prefetch import FetchTimes, claim_size, prefetch_limit, room_for_a_batch
from app.store.queue import Queue
from app.text.wording import counted, error_line, seconds
from app.worker.completer import Batching, Completer
from app.worker.crawl_pages import CrawlPages
from app.worker.loop import Held, Loop

log = logging.getLogger("ingest.worker")


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pending_again(outcome: Outcome) -> bool:
    """Whether `outcome` left its job pending (a retry, a deferral, a hand-back, a lease
    taken back with attempts left)."""
    match outcome:
        case Retried() | Deferred() | HandedBack():
            return True
        case Expired():
            return not outcome.dead
        case Succeeded() | Confirmed() | NotKept() | Died():
            return False
        case _:
            assert_never(outcome)


@dataclass(frozen=True, slots=True)
class WorkerRules:
    """The worker's sizes and timings, built once from the settings by the composition root
    (`app.runtime`)."""

    concurrency: int
    """Slots: fetches at once (INGEST_WORKER_CONCURRENCY)."""
    prefetch: int
    """Jobs claimed ahead of the free slots at most (INGEST_WORKER_PREFETCH, or its default)."""
    prefetch_seconds: float
    """The most work the local queue holds (INGEST_WORKER_PREFETCH_SECONDS)."""
    lease_seconds: float
    poll_interval_seconds: float
    shutdown_grace_seconds: float


class Worker:
    """What batching trades: a process that dies can leave up to INGEST_WORKER_PREFETCH
    queued jobs, INGEST_WORKER_CONCURRENCY running ones and the outcomes of the last
    INGEST_RECORD_DELAY_SECONDS leased until their leases run out (INGEST_LEASE_SECONDS);
    they are then fetched again. A worker that stops hands its queued jobs back at once,
    gives the running ones the grace period, hands back the rest, and records everything
    before it exits."""

    def __init__(
        self,
        queue: Queue,
        fetcher: Fetcher,
        rules: WorkerRules,
        batching: Batching,
        shares: scheduling.ShareRules,
        retry: policy.RetryRules,
        clock: Callable[[], datetime],
        rand: Callable[[], float] = random.random,
        robots: RobotsTxt | None = None,
        crawl_pages: CrawlPages | None = None,
    ) -> None:
        """`batching`: the completer's; `shares`: the claim's rules, which say when a record
        frees a claim and how far apart a domain's starts go; `retry`: what policy settles
        an outcome by."""
        self.queue = queue
        self.fetcher = fetcher
        self.rules = rules
        self.shares = shares
        self.retry = retry
        self.clock = clock
        self.id = new_worker_id()
        self.loop = Loop(f"worker {self.id}", self.tick, log, role="worker")
        self.completer = Completer(
            queue,
            batching,
            retry,
            clock,
            rand,
            on_recorded=self._recorded,
            on_their_way=self._on_their_way,
        )
        self.rand = rand
        self.robots = robots
        """Asked before the fetches of the tenants that obey robots.txt, and of crawls' pages;
        None: never (a test's worker)."""
        self.crawl_pages = crawl_pages
        """What a crawl's page needs of its crawl; None: no page is a crawl's (a test's)."""
        self._fetch_times = FetchTimes()
        self._unsettled = 0
        """Fetches started whose outcome is not handed to the completer yet."""
        self._queued: deque[Lease] = deque()
        self._running: dict[asyncio.Task[None], Lease] = {}
        self._abandoned: set[Lease] = set()
        self._more_due = False
        self._waiting_for_room = False
        """The last pass left due jobs unclaimed for lack of room: a finishing job wakes it."""
        self._submitted = False
        """Jobs were submitted since the last claim: the next one need not look first."""
        self._held_back = False
        """A pass was held back while the completer could not record: its next record
        wakes the loop."""
        self._submitted_priority: int | None = None
        """The highest priority submitted since the last claim began."""
        self._started_at = clock()

    def notify(self) -> None:
        """Something may be due now (a slot freed, a domain's fetches recorded): look again."""
        self.loop.notify()

    def submitted(self, priority: int | None) -> None:
        """Jobs were submitted, up to `priority` if the waker says: queued jobs of a lower
        priority go back (their fetches have not begun), so the new ones are claimed as the
        next slot frees instead of waiting behind them; then look again."""
        if priority is not None:
            if self._submitted_priority is None or priority > self._submitted_priority:
                self._submitted_priority = priority
            self._yield_to(priority)
        self._submitted = True
        self.loop.notify()

    def _yield_to(self, priority: int) -> None:
        """Hand back the queued jobs of a priority below `priority`."""
        if self.loop.stopping.is_set():
            return
        lower = [lease for lease in self._queued if lease.priority < priority]
        now = self.clock()
        for lease in lower:
            self._queued.remove(lease)
            self.completer.add(policy.yielded(lease, now))

    def stop(self) -> None:
        """Stop claiming; `run` then drains in-flight fetches and returns."""
        self.loop.stop()

    def _recorded(self, outcomes: Sequence[Outcome]) -> None:
        """Look again if what was just recorded may have made a job claimable: a job pending
        again (a retry, a deferral, a hand-back), a domain this worker had filled to its
        in-flight limit (others' records wake them), or any domain when starts are spaced
        (INGEST_DOMAIN_MIN_INTERVAL_SECONDS, or a Crawl-delay when robots.txt is obeyed), or
        any tenant when its jobs in flight are capped (INGEST_TENANT_MAX_IN_FLIGHT). A
        success or a death at a trickle frees nothing anyone waits for: no pass, which would
        only look and find nothing. After passes held back while records failed, the first
        record wakes it: claims resume."""
        if (
            self._held_back
            or self.shares.domain_min_interval_seconds
            or self._crawl_delay_may_space(outcomes)
            or self.shares.tenant_max_in_flight  # a tenant at its quota has a slot again
            or any(_pending_again(outcome) for outcome in outcomes)
        ):
            self._held_back = False
            self.notify()
            return
        limit = self.shares.domain_max_in_flight
        if len(self._running) + len(self._queued) + len(outcomes) < limit:
            return  # too few leases in all to have filled any domain: nothing to count
        owned = Counter(lease.domain for lease in (*self._running.values(), *self._queued))
        owned.update(outcome.lease.domain for outcome in outcomes)
        if any(owned[outcome.lease.domain] >= limit for outcome in outcomes):
            self.notify()

    def _on_their_way(self) -> int:
        """Outcomes the completer will get soon: fetches running, and jobs queued for a slot
        (a slot that just finished starts the next one only after its outcome is added)."""
        return self._unsettled + len(self._queued)

    @property
    def _capacity(self) -> int:
        """Slots, and the local queue as long as its expected work allows (`app.rules.prefetch`)."""
        slots = self.rules.concurrency
        return slots + prefetch_limit(
            slots,
            self._fetch_times.mean,
            self.rules.prefetch_seconds,
            self.rules.prefetch,
        )

    async def run(self) -> None:
        self._started_at = self.clock()
        await self._report()
        log.info("worker %s started (%s)", self.id, counted(self.rules.concurrency, "slot"))
        heartbeat = asyncio.create_task(self._heartbeat())
        announcing = asyncio.create_task(self._announce())
        recording = asyncio.create_task(self.completer.run())
        try:
            await self.loop.run()
        finally:
            # Leases are renewed until the last job is recorded or handed back: a job
            # whose lease lapsed during the grace period would be fetched again elsewhere.
            try:
                await self._drain()
            finally:
                self.completer.close()
                await recording
                heartbeat.cancel()
                announcing.cancel()
                await asyncio.wait([heartbeat, announcing])
        await self._report(stopped=True)
        log.info("worker %s stopped", self.id)

    async def tick(self) -> float | Held:
        """One pass: top up the local queue with one claim. Returns how long the loop may
        wait before the next pass.

        Nothing while the completer cannot record (its write failed and is being tried
        again): what this worker fetched now could not be recorded either. Held, so the
        loop does not call that a recovery; the completer's next record wakes it."""
        if self.completer.failing:
            return self._hold_back()
        now = self.clock()
        slots = self.rules.concurrency
        room = claim_size(slots, self._capacity, len(self._running), len(self._queued))
        if not room:
            self._waiting_for_room = True  # a finishing job wakes the loop when there is room
            return self._max_wait
        # After a full claim or a submit there surely is something to claim: no look first.
        look_first = not (self._more_due or self._submitted)
        self._waiting_for_room = self._submitted = False
        self._submitted_priority = None
        leases = await self.queue.claim(
            self.id, room, now, self.rules.lease_seconds, look_first=look_first
        )
        for lease in leases:
            events.job_started(lease)
        self._queued.extend(leases)
        if self._submitted_priority is not None:
            # Submitted while this claim ran, perhaps too late for it: what it took of a
            # lower priority goes back too, as what was queued before did.
            self._yield_to(self._submitted_priority)
        self._start_queued()
        # A full claim leaves more behind: the next one need not look first.
        self._more_due = len(leases) == room
        if self._more_due:
            return 0.0  # more may be due: top up again as slots free
        if leases:
            return self._max_wait
        return await self._idle_timeout(now)

    def _hold_back(self) -> Held:
        """No claim while the completer cannot record: its next record wakes the loop."""
        self._held_back = True
        return Held(self._max_wait)

    def _start_queued(self) -> None:
        while self._queued and len(self._running) < self.rules.concurrency:
            lease = self._queued.popleft()
            task = asyncio.create_task(self._process(lease), name=f"job {lease.id}")
            self._running[task] = lease
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("worker %s: job task failed", self.id, exc_info=task.exception())
        if not self.loop.stopping.is_set():
            self._start_queued()
        # A freed slot matters only if due jobs were left for lack of room: the last claim
        # took all it could (more are due), or a pass found no room. Otherwise everything
        # due was claimed, and a pass now would only look and find nothing.
        more = self._more_due or self._waiting_for_room
        slots = self.rules.concurrency
        if more and room_for_a_batch(slots, self._capacity, len(self._running), len(self._queued)):
            self.notify()

    async def _process(self, lease: Lease) -> None:
        started = time.monotonic()
        self._unsettled += 1
        try:
            result = await self._fetch(lease)
            took = time.monotonic() - started
            self._fetch_times.add(took)
            outcome = policy.settle(
                lease, result, int(took * 1000), self.clock(), self.retry, self.rand
            )
            if lease.crawl is not None and self.crawl_pages is not None:
                if isinstance(outcome, Succeeded):
                    outcome = await self.crawl_pages.with_finds(outcome)
                elif isinstance(outcome, Confirmed):
                    outcome = await self.crawl_pages.with_stored_finds(outcome)
        except asyncio.CancelledError:
            self._unsettled -= 1
            if lease not in self._abandoned:
                self.completer.add(policy.handed_back(lease, self.clock()))
            raise
        except Exception as exc:  # a bug must not leave the job running until its lease ends
            outcome = policy.unsettled(lease, exc, int((time.monotonic() - started) * 1000))
        self._unsettled -= 1
        # Handed over at once: the outcome is recorded even if the task is cancelled now.
        self.completer.add(outcome)

    async def _fetch(self, lease: Lease) -> Fetched | Unmodified | Failure:
        """The lease's fetch, once its robots.txt allows it (when its tenant obeys it): else
        the failure that makes it dead (disallowed) or retried (robots.txt not read now)."""
        if self.robots is not None and await self._obeys_robots(lease):
            check = await self.robots.check(lease.url)
            if check.read is not None:
                await self._keep_crawl_delay(lease, check.read.crawl_delay(self.robots.token))
            if check.refusal is not None:
                return check.refusal
        return await self.fetcher.fetch(lease.url, lease.previous, lease.tenant)

    def _crawl_delay_may_space(self, outcomes: Sequence[Outcome]) -> bool:
        """Whether a Crawl-delay may space the starts of these outcomes' domains: robots.txt
        is obeyed by a tenant, or one of them is a crawl's page."""
        if self.robots is None:
            return False
        return self.robots.limits.anyone_obeys or any(o.lease.crawl for o in outcomes)

    async def _obeys_robots(self, lease: Lease) -> bool:
        """Whether the lease's fetch asks robots.txt first: its tenant obeys it, or it is a
        page of a crawl that does."""
        assert self.robots is not None
        if self.robots.limits.obeyed_by(lease.tenant):
            return True
        if lease.crawl is None or self.crawl_pages is None:
            return False
        return await self.crawl_pages.obeys_robots(lease.crawl.crawl_id)

    async def _keep_crawl_delay(self, lease: Lease, delay: float | None) -> None:
        """Write the Crawl-delay just read where every claim sees it, and space the domain's
        next start from this fetch's, which its claim did not know: from now, not from the
        claim, since reading robots.txt took time. A failure is logged: the next read writes
        it again, and the fetch goes on."""
        interval = scheduling.min_interval(delay, self.shares)
        not_before = self.clock() + timedelta(seconds=interval) if interval else None
        try:
            await self.queue.crawl_delay(lease.domain, delay, not_before)
        except Exception as exc:
            log.warning(
                "worker %s: could not keep the Crawl-delay of %s (%s)",
                self.id,
                lease.domain,
                error_line(exc),
            )

    @property
    def _max_wait(self) -> float:
        """The longest an idle worker waits: a poll, at most half a lease (as often as
        expired leases are looked for: `app.worker.maintenance`)."""
        return min(self.rules.poll_interval_seconds, self.rules.lease_seconds / 2)

    async def _idle_timeout(self, now: datetime) -> float:
        """How long the loop may wait: until the next retry is due, at most one poll."""
        timeout = self._max_wait
        next_due = await self.queue.next_due_at(now)
        if next_due is not None:
            timeout = min(timeout, (next_due - now).total_seconds())
        return max(timeout, 0.001)

    def _leases_owned(self) -> list[Lease]:
        return [*self._running.values(), *self._queued, *self.completer.unrecorded]

    async def _heartbeat(self) -> None:
        interval = self.rules.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            owned = self._leases_owned()
            try:
                until = self.clock() + timedelta(seconds=self.rules.lease_seconds)
                kept = await self.queue.extend_leases(owned, until)
            except Exception as exc:
                log.warning(
                    "worker %s: heartbeat failed (%s); leases may expire", self.id, error_line(exc)
                )
                continue
            self._drop_lost([lease for lease in owned if lease not in kept])

    async def _announce(self) -> None:
        while True:
            await asyncio.sleep(self.rules.lease_seconds / 3)
            await self._report()

    async def _report(self, stopped: bool = False) -> None:
        """Write this worker's row in the workers table: alive with its load, or stopped. A
        failure is logged and changes nothing else: the row is for operators to read."""
        try:
            if stopped:
                await self.queue.stopped(self.id, self.clock())
            else:
                presence = WorkerPresence(
                    self.id,
                    socket.gethostname(),
                    os.getpid(),
                    __version__,
                    self.rules.concurrency,
                    len(self._running),
                    len(self._queued),
                    self._started_at,
                )
                await self.queue.report(presence, self.clock())
        except Exception as exc:
            log.warning(
                "worker %s: could not write its row in the workers table (%s)",
                self.id,
                error_line(exc),
            )

    def _drop_lost(self, lost: list[Lease]) -> None:
        """Leases another worker took back while this one held them: stop their fetches and
        forget queued ones. Outcomes being written are left to the fenced write to refuse."""
        running = {lease: task for task, lease in self._running.items()}
        gone = [lease for lease in lost if lease in running or lease in self._queued]
        if not gone:
            return
        for lease in gone:
            if lease in running:
                self._abandoned.add(lease)
                running[lease].cancel()
            elif lease in self._queued:
                self._queued.remove(lease)
        log.warning(
            "worker %s: another worker took back %s; stopped here",
            self.id,
            counted(len(gone), "lease"),
        )

    async def _drain(self) -> None:
        """Hand the queued jobs back at once; give running fetches the grace period, then
        hand the rest back."""
        if self._queued:
            now = self.clock()
            for lease in self._queued:
                self.completer.add(policy.handed_back(lease, now))
            self._queued.clear()
        if not self._running:
            return
        tasks = list(self._running)
        log.info(
            "worker %s: waiting up to %s for %s",
            self.id,
            seconds(self.rules.shutdown_grace_seconds),
            counted(len(tasks), "in-flight job"),
        )
        _, pending = await asyncio.wait(tasks, timeout=self.rules.shutdown_grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
