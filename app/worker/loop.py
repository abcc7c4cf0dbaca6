"""The one background loop: wait (wake-up | timeout | stop) -> tick -> again.

The job worker, the webhook sender and the maintenance service are each a `tick()` (one
pass: claim what is due and start it, or do the chores that are due) run by a `Loop`. A
tick answers how long the loop may wait; a wake-up (new work, a freed slot) cuts the wait
short. A tick that raises (the database is away) is retried after a wait that grows with
the failed ticks in a row (`error_wait`), which no wake-up cuts short; each retry is one
log line, and a traceback is logged once per distinct error until a tick succeeds again. A
tick held back by what it depends on (`Held`) is neither: the loop waits, and says it
recovered only once a tick has done its work again.

A running loop (the worker's, the sender's) says so in its process's metrics:
`ingest_worker_up` is 1 from its start to its end, and `ingest_worker_last_tick_timestamp_seconds`
moves with each tick that neither failed nor was held (`app.observability.events`).
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.observability import events
from app.store.outages import error_wait
from app.text.wording import counted, error_line


async def wait_for_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` have passed, whichever comes first; whether it
    was set. Every "wait N seconds or until stopped" is this one: a loop's wait after a
    failed tick, a wake-up's wait, serve's wait before it starts a worker process again,
    the completer's wait for a full batch."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()


class Wakeup:
    """`set()` from anywhere on the loop; `wait(timeout)` returns at the first set or the
    timeout, whichever comes first, and re-arms. A set that comes while nobody waits is kept,
    so a loop never misses work signalled between its look and its wait."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> None:
        await wait_for_event(self._event, timeout)
        self._event.clear()


@dataclass(frozen=True)
class Held:
    """A tick's answer when it did nothing because what it depends on fails, logged where
    that fails (the worker while its finished jobs cannot be recorded): the loop waits up to
    `seconds`, cut short by a wake-up, as after a pass; but it was no pass (the liveness
    metric does not move, and no "recovered" is logged) and no failure of its own (no log
    line, and failed ticks before it still count)."""

    seconds: float


class Loop:
    def __init__(
        self,
        name: str,
        tick: Callable[[], Awaitable[float | Held]],
        log: logging.Logger,
        wakeup: Wakeup | None = None,
        role: str | None = None,
        reports: bool = True,
    ) -> None:
        """`name` starts the loop's log lines; `role` (default: the name) labels its
        liveness metrics, so it names what runs (worker, webhooks), not which instance;
        `reports`: whether it has those metrics (the maintenance service's loop has none)."""
        self.name = name
        self.role = role or name
        self.reports = reports
        self.tick = tick
        self.log = log
        self.wakeup = wakeup or Wakeup()
        self.stopping = asyncio.Event()

    def notify(self) -> None:
        """Something may be due now: tick again without waiting out the timeout."""
        self.wakeup.set()

    def stop(self) -> None:
        """Finish the tick under way, then return from `run`."""
        self.stopping.set()
        self.wakeup.set()

    async def run(self) -> None:
        if self.reports:
            events.loop_started(self.role)
        try:
            await self._run()
        finally:
            if self.reports:
                events.loop_stopped(self.role)

    async def _run(self) -> None:
        failed = 0
        traced: set[str] = set()
        while not self.stopping.is_set():
            try:
                wait = await self.tick()
            except Exception as exc:
                failed += 1
                wait = error_wait(failed)
                error = error_line(exc)
                self.log.error(
                    "%s: %s; trying again in %gs",
                    self.name,
                    error,
                    wait,
                    exc_info=error not in traced,
                )
                traced.add(error)
                await self._wait_out_error(wait)
                continue
            if isinstance(wait, Held):
                wait = wait.seconds
            else:
                if self.reports:
                    events.loop_ticked(self.role)
                if failed:
                    self.log.info(
                        "%s: recovered after %s", self.name, counted(failed, "failed attempt")
                    )
                failed, traced = 0, set()
            if wait > 0 and not self.stopping.is_set():
                await self.wakeup.wait(wait)

    async def _wait_out_error(self, wait: float) -> None:
        """After a failed tick: `wait` seconds, or until stopped. A wake-up (a slot freed, a
        submit, a NOTIFY) does not cut it short: the database failed, work did not run out,
        and each early tick would be one more failing query and log line (a busy worker
        frees slots many times a second). A wake-up that comes meanwhile is kept."""
        await wait_for_event(self.stopping, wait)
