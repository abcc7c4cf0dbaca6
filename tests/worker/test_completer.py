"""The completer (app/worker/completer.py) against a store double: when it writes, what a batch
holds, how a refused batch and an outage are handled, what stays held. A fixed clock; no
database (the recording itself is tested on both backends in tests/store/test_record.py)."""

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
import sqlalchemy as sa

from app.model import (
    DomainPause,
    DomainSignal,
    ErrorKind,
    Failure,
    Lease,
    Outcome,
    Retried,
)
from app.rules.policy import RetryRules
from app.store.queue import Queue
from app.store.record import Recorded
from app.worker import completer as completer_module
from app.worker.completer import Batching, Completer
from tests.support.rules import RETRY as DEFAULT_RETRY

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def lease(n: int, domain: str = "a.test") -> Lease:
    return Lease(
        id=f"job-{n}",
        url=f"http://{domain}/{n}",
        domain=domain,
        tenant="default",
        attempt=1,
        max_attempts=5,
        deferrals=0,
        worker_id="w",
        lease_id=f"lease-{n}",
        claimed_at=NOW,
    )


def outcome(
    n: int, domain: str = "a.test", status: int | None = None, retry_after: str | None = None
) -> Outcome:
    """A failed attempt, rescheduled; a 5xx `status` says its domain is failing."""
    failure = Failure(
        ErrorKind.TRANSIENT, "HTTPStatusError", "boom", http_status=status, retry_after=retry_after
    )
    return Retried(
        lease(n, domain),
        1,
        failure,
        NOW + timedelta(seconds=10),
        10.0,
        domain=DomainSignal.FAILING if status else DomainSignal.SILENT,
    )


def unavailable() -> Exception:
    """An error that says the database cannot serve (SQLite: the disk is full)."""
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = 13
    return sa.exc.OperationalError("INSERT", {}, error)


class Store:
    """The two methods of `Queue` the completer calls. Each write waits for `open` (set by
    default); `refuse` lists job ids whose batch the database refuses, `outages` how many
    writes fail as the database being away."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.open = asyncio.Event()
        self.open.set()
        self.writing = asyncio.Event()
        self.refuse: set[str] = set()
        self.outages = 0
        self.pauses: list[tuple[str, DomainPause]] = []
        self.lost: set[str] = set()

    async def record(self, outcomes: Sequence[Outcome], now: datetime) -> Recorded:
        self.writing.set()
        await self.open.wait()
        ids = [o.lease.id for o in outcomes]
        if self.outages:
            self.outages -= 1
            raise unavailable()
        if self.refuse & set(ids):
            raise sa.exc.IntegrityError("UPDATE", {}, Exception("constraint"))
        self.batches.append(ids)
        kept = [o for o in outcomes if o.lease.id not in self.lost]
        failures: dict[str, int] = {}
        for o in kept:
            if o.domain is DomainSignal.FAILING:
                failures[o.lease.domain] = failures.get(o.lease.domain, 0) + 1
        return Recorded(kept, failures)

    async def pause_domain(self, domain: str, pause: DomainPause) -> bool:
        self.pauses.append((domain, pause))
        return True


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


BATCHING = Batching(slots=3, record_delay_seconds=1.0, lease_seconds=60.0)
RETRY = replace(DEFAULT_RETRY, backoff_jitter=0.2)


def make(
    store: Store,
    *,
    their_way: int = 0,
    clock: Clock | None = None,
    recorded: list[Outcome] | None = None,
    retry: RetryRules = RETRY,
    **batching: Any,
) -> Completer:
    return Completer(
        cast(Queue, store),
        replace(BATCHING, **batching),
        retry,
        clock or Clock(),
        rand=lambda: 0.5,
        on_recorded=(recorded if recorded is not None else []).extend,
        on_their_way=lambda: their_way,
    )


async def settle() -> None:
    """Let every task that can run, run."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_lone_outcome_is_written_at_once_with_nothing_on_its_way():
    store = Store()
    recorded: list[Outcome] = []
    completer = make(store, recorded=recorded)
    running = asyncio.create_task(completer.run())
    completer.add(outcome(1))
    await settle()
    assert [["job-1"]] == store.batches  # not after record_delay_seconds
    assert ["job-1"] == [o.lease.id for o in recorded]
    completer.close()
    await running


async def test_outcomes_gather_while_fetches_are_on_their_way_until_a_slots_worth():
    store = Store()
    completer = make(store, their_way=5)
    running = asyncio.create_task(completer.run())
    completer.add(outcome(1))
    completer.add(outcome(2))
    await settle()
    assert [] == store.batches
    completer.add(outcome(3))  # a slot's worth of outcomes: a full batch
    await settle()
    assert [["job-1", "job-2", "job-3"]] == store.batches
    completer.close()
    await running


async def test_what_is_added_during_a_write_goes_in_the_next_one_whole():
    store = Store()
    store.open.clear()
    completer = make(store, their_way=5, slots=1)
    running = asyncio.create_task(completer.run())
    completer.add(outcome(1))
    await store.writing.wait()
    for n in (2, 3, 4):
        completer.add(outcome(n))
    assert {"job-1", "job-2", "job-3", "job-4"} == {held.id for held in completer.unrecorded}
    store.open.set()
    await settle()
    assert [["job-1"], ["job-2", "job-3", "job-4"]] == store.batches
    assert [] == completer.unrecorded
    completer.close()
    await running


async def test_close_writes_what_waits_without_the_delay():
    store = Store()
    completer = make(store, their_way=5)
    running = asyncio.create_task(completer.run())
    completer.add(outcome(1))
    await settle()
    completer.close()
    await asyncio.wait_for(running, 5)
    assert [["job-1"]] == store.batches


async def test_a_refused_batch_is_written_one_by_one_and_only_the_bad_outcome_given_up(caplog):
    store = Store()
    recorded: list[Outcome] = []
    store.refuse = {"job-2"}
    completer = make(store, recorded=recorded)
    await completer._write([outcome(1), outcome(2), outcome(3)])
    assert [["job-1"], ["job-3"]] == store.batches
    assert ["job-1", "job-3"] == [o.lease.id for o in recorded]
    assert "recording 3 finished jobs failed" in caplog.text
    assert "job job-2 attempt 1: its outcome cannot be recorded" in caplog.text
    assert not completer.failing


async def test_an_outage_is_waited_out_and_the_batch_written_whole(monkeypatch):
    waits: list[int] = []

    def counted(failed: int) -> float:
        waits.append(failed)
        return 0

    monkeypatch.setattr(completer_module, "error_wait", counted)
    store = Store()
    store.outages = 2
    completer = make(store)
    await completer._write([outcome(1), outcome(2)])
    assert [["job-1", "job-2"]] == store.batches
    assert [1, 2] == waits
    assert not completer.failing


async def test_a_write_failing_while_the_database_is_away_marks_the_completer_failing(
    monkeypatch,
):
    seen: list[bool] = []
    store = Store()
    store.outages = 1
    completer = make(store)

    def wait(_: int) -> float:
        seen.append(completer.failing)
        return 0

    monkeypatch.setattr(completer_module, "error_wait", wait)
    await completer._write([outcome(1)])
    assert [True] == seen


async def test_an_outage_past_the_lease_is_given_up(monkeypatch, caplog):
    clock = Clock()
    store = Store()
    store.outages = 100

    def wait(_: int) -> float:
        clock.now += timedelta(seconds=20)
        return 0

    monkeypatch.setattr(completer_module, "error_wait", wait)
    completer = make(store, clock=clock, lease_seconds=60)
    await completer._write([outcome(1)])
    assert [] == store.batches
    assert 100 - 4 == store.outages  # tried at 0, 20, 40 and 60 s, then given up
    assert "gave up recording 1 finished job after 4 failed writes" in caplog.text
    assert not completer.failing


async def test_outcomes_whose_leases_were_taken_back_are_not_reported_as_recorded():
    store = Store()
    recorded: list[Outcome] = []
    store.lost = {"job-2"}
    completer = make(store, recorded=recorded)
    result = await completer.record([outcome(1), outcome(2)])
    assert ["job-1"] == [o.lease.id for o in result.outcomes]
    assert ["job-1"] == [o.lease.id for o in recorded]


async def test_a_failing_domain_gets_the_longest_pause_of_its_batch_once():
    """Two 503s of one domain in one batch: one pause proposed, the longer Retry-After; a 500
    on a domain below the failure threshold and a silent outcome propose none."""
    store = Store()
    completer = make(store, retry=replace(RETRY, domain_failure_threshold=3))
    await completer.record(
        [
            outcome(1, "a.test", 503, "100"),
            outcome(2, "a.test", 503, "10"),
            outcome(3, "b.test", 500),
            outcome(4, "c.test"),
        ]
    )
    assert [("a.test", NOW + timedelta(seconds=100))] == [
        (domain, pause.until) for domain, pause in store.pauses
    ]


async def test_a_pause_that_cannot_be_stored_does_not_undo_the_record(caplog):
    store = Store()

    async def refuse(domain: str, pause: DomainPause) -> bool:
        raise RuntimeError("no")

    store.pause_domain = refuse  # type: ignore[method-assign]
    completer = make(store)
    result = await completer.record([outcome(1, "a.test", 503)])
    assert ["job-1"] == [o.lease.id for o in result.outcomes]
    assert "could not pause domains: RuntimeError: no" in caplog.text


@pytest.mark.parametrize("their_way", [0, 5])
async def test_held_lists_the_leases_not_recorded_yet(their_way):
    store = Store()
    store.open.clear()
    completer = make(store, their_way=their_way)
    completer.add(outcome(1))
    assert ["job-1"] == [held.id for held in completer.unrecorded]
