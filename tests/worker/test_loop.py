"""The background loop survives failing ticks, waits less than it fears, and keeps working."""

import asyncio
import logging

import pytest

from app.worker.loop import Held, Loop, wait_for_event


class Ticks:
    """A tick that fails `failures` times like an unreachable database, then succeeds and
    stops the loop after `successes` good ticks."""

    def __init__(self, failures: int, successes: int = 1) -> None:
        self.failures = failures
        self.successes = successes
        self.calls = 0
        self.loop: Loop | None = None

    async def __call__(self) -> float:
        self.calls += 1
        if self.failures:
            self.failures -= 1
            raise ConnectionRefusedError("database unreachable\nsecond line of detail")
        self.successes -= 1
        if not self.successes and self.loop is not None:
            self.loop.stop()
        return 0.0


async def test_failed_ticks_are_logged_once_with_a_trace_and_retried(caplog, monkeypatch):
    """Each failed tick is one line with its wait; the trace comes once per distinct error;
    the loop carries on and says when it recovered."""
    waits: list[float] = []

    async def no_wait(self, timeout: float) -> None:
        waits.append(timeout)

    monkeypatch.setattr("app.worker.loop.Loop._wait_out_error", no_wait)
    ticks = Ticks(failures=3)
    loop = Loop("worker w", ticks, logging.getLogger("ingest.worker"))
    ticks.loop = loop
    caplog.set_level(logging.INFO, logger="ingest.worker")
    await asyncio.wait_for(loop.run(), 5)

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [
        "worker w: ConnectionRefusedError: database unreachable; trying again in 0.5s",
        "worker w: ConnectionRefusedError: database unreachable; trying again in 1s",
        "worker w: ConnectionRefusedError: database unreachable; trying again in 2s",
    ] == [r.getMessage() for r in errors]
    assert [True, False, False] == [bool(r.exc_info) for r in errors]
    assert [0.5, 1.0, 2.0] == waits
    assert 4 == ticks.calls
    assert any("recovered after 3 failed attempts" in r.getMessage() for r in caplog.records)


async def test_one_failed_tick_reads_in_the_singular(caplog, monkeypatch):
    """Recovering after a single failed tick says "1 failed attempt"."""

    async def no_wait(self, timeout: float) -> None:
        pass

    monkeypatch.setattr("app.worker.loop.Loop._wait_out_error", no_wait)
    ticks = Ticks(failures=1)
    loop = Loop("worker w", ticks, logging.getLogger("ingest.worker"))
    ticks.loop = loop
    caplog.set_level(logging.INFO, logger="ingest.worker")
    await asyncio.wait_for(loop.run(), 5)
    assert "worker w: recovered after 1 failed attempt" == caplog.records[-1].getMessage()


@pytest.mark.parametrize("answer", [3600.0, Held(3600.0)], ids=["pass", "held"])
async def test_a_wakeup_cuts_the_wait_short(answer: float | Held):
    """A tick that asks for a long wait is followed at once by the next after a wake-up; so
    is a held one (the completer's next record wakes the worker)."""
    calls = []
    first = asyncio.Event()

    async def tick() -> float | Held:
        calls.append(1)
        first.set()
        if len(calls) == 2:
            loop.stop()
        return answer

    loop = Loop("worker w", tick, logging.getLogger("ingest.worker"))
    running = asyncio.create_task(loop.run())
    await first.wait()
    loop.notify()
    await asyncio.wait_for(running, 5)
    assert 2 == len(calls)


async def test_a_wakeup_does_not_cut_an_error_wait_short():
    """After a failed tick the loop waits its error wait out however often it is woken (a
    busy worker frees slots many times a second while the database is away); a stop ends
    the wait at once."""
    started = asyncio.get_running_loop().time()
    ticked_at: list[float] = []

    async def tick() -> float:
        ticked_at.append(asyncio.get_running_loop().time() - started)
        raise ConnectionRefusedError("database unreachable")

    loop = Loop("worker w", tick, logging.getLogger("ingest.worker"))
    running = asyncio.create_task(loop.run())
    while asyncio.get_running_loop().time() - started < 0.7:
        loop.notify()
        await asyncio.sleep(0.01)
    loop.stop()
    await asyncio.wait_for(running, 1)
    assert 2 == len(ticked_at), ticked_at  # at once, then after 0.5 s; the next is 1 s on
    assert ticked_at[1] >= 0.5


async def test_a_wait_for_an_event_ends_when_it_is_set_or_its_time_is_up():
    """`wait_for_event` returns True as soon as the event is set, long before its 30 s; False
    once its time is up with the event still unset."""
    event = asyncio.Event()
    asyncio.get_running_loop().call_soon(event.set)
    started = asyncio.get_running_loop().time()
    assert True is await wait_for_event(event, 30)
    assert asyncio.get_running_loop().time() - started < 5
    assert False is await wait_for_event(asyncio.Event(), 0.01)


async def test_a_held_tick_is_no_recovery(caplog, monkeypatch):
    """A tick held back by what it depends on (the worker while its finished jobs cannot be
    recorded) is not a recovery: no "recovered" line, no liveness tick, and a failure after
    it counts on from the failures before it. The first tick that works says it recovered."""
    waits: list[float] = []
    ticked: list[str] = []

    async def no_wait(self, timeout: float) -> None:
        waits.append(timeout)

    monkeypatch.setattr("app.worker.loop.Loop._wait_out_error", no_wait)
    monkeypatch.setattr("app.worker.loop.events.loop_ticked", ticked.append)
    answers: list[BaseException | float | Held] = [
        ConnectionRefusedError("database unreachable"),
        Held(0.0),
        ConnectionRefusedError("database unreachable"),
        Held(0.0),
        0.0,
    ]
    calls: list[int] = []

    async def tick() -> float | Held:
        calls.append(len(calls))
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if not answers:
            loop.stop()
        return answer

    loop = Loop("worker w", tick, logging.getLogger("ingest.worker"))
    caplog.set_level(logging.INFO, logger="ingest.worker")
    await asyncio.wait_for(loop.run(), 5)

    assert 5 == len(calls)
    assert [0.5, 1.0] == waits, "the failure after a held tick is the second in a row"
    lines = [r.getMessage() for r in caplog.records]
    assert [
        "worker w: ConnectionRefusedError: database unreachable; trying again in 0.5s",
        "worker w: ConnectionRefusedError: database unreachable; trying again in 1s",
        "worker w: recovered after 2 failed attempts",
    ] == lines
    assert ["worker w"] == ticked
