"""The store as its tests drive it: a job store and the worker's queue on a test database
(`database_url`: each backend), at a fixed clock, with jobs to submit and a fetch to record.
Shared by the tests of the claim (tests/store/test_claim.py), the record
(tests/store/test_record.py) and retention (tests/store/test_retention.py); the `stores`
fixture (tests/conftest.py) opens it."""

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from app.clock import Clock
from app.model import Fetched, NewJob
from app.part_settings import PartSettings
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.queue import Queue

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RESULT = Fetched(200, "http://a.test/", "text/html", 10, "0" * 64, "t")


def new(path: str = "/", **fields: Any) -> NewJob:
    """A job on a.test for tenant t, with 3 attempts, unless `fields` say otherwise."""
    values: dict[str, Any] = {
        "url": f"http://a.test{path}",
        "domain": "a.test",
        "tenant": "t",
        "max_attempts": 3,
    }
    return NewJob(**(values | fields))


def queue_on(database: Database, settings: Settings) -> Queue:
    """The worker's handle on the store, with the claim's and the record's rules the
    composition root makes of `settings`."""
    views = PartSettings.of(settings)
    return Queue(database, views.shares, views.records)


def ticking(start: datetime = NOW) -> Clock:
    """A clock a millisecond later at each read, from `start`: jobs submitted one after the
    other are created in that order."""
    moments: Iterator[datetime] = (start + timedelta(milliseconds=i) for i in range(10**6))
    return lambda: next(moments)


@asynccontextmanager
async def open_stores(
    database_url: str, clock: Clock | None = None, **settings: Any
) -> AsyncIterator[tuple[JobStore, Queue]]:
    """A job store at `clock` (default: `ticking`) and the worker's queue on `database_url`,
    with `settings` over INGEST_DOMAIN_MAX_IN_FLIGHT=1000 (no domain limit gets in the way)."""
    database = Database(database_url)
    values: dict[str, Any] = {"domain_max_in_flight": 1000} | settings
    try:
        yield (
            JobStore(database, clock or ticking()),
            queue_on(database, Settings(_env_file=None, **values)),
        )
    finally:
        await database.dispose()
