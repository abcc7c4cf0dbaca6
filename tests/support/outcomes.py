"""Outcomes for store tests, built as the worker builds them (`app.rules.policy`), and the two
worker steps a test drives by hand: recording outcomes and taking back expired leases."""

from datetime import datetime

from app.model import Died, Expired, Fetched, Lease, MarkDead, Outcome, Reschedule, Succeeded
from app.rules import policy
from app.store.maintenance import MaintenanceStore
from app.store.queue import Queue


def succeeded(lease: Lease, fetched: Fetched, duration_ms: int = 1) -> Outcome:
    return Succeeded(lease, duration_ms, fetched)


def failed(lease: Lease, decision: Reschedule | MarkDead, duration_ms: int = 1) -> Outcome:
    return policy.failed(lease, decision, duration_ms)


async def record(queue: Queue, outcome: Outcome, now: datetime) -> bool:
    """Record one outcome; whether it was (False: its lease had been taken back)."""
    return bool((await queue.record([outcome], now)).outcomes)


async def take_back_expired(queue: Queue, now: datetime) -> list[Outcome]:
    """What the maintenance service does with expired leases; the outcomes recorded."""
    overdue = await MaintenanceStore(queue.db).overdue(now)
    outcomes = [policy.expired(lease, now) for lease in overdue.expired]
    return (await queue.record(outcomes, now)).outcomes


def is_dead(outcome: Outcome) -> bool:
    return isinstance(outcome, Died) or (isinstance(outcome, Expired) and outcome.dead)
