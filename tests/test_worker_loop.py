"""The worker loop survives a failing database and keeps working once it is back."""

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from app.settings import Settings
from app.worker import Worker


class FlakyQueue:
    """A queue whose first calls fail like an unreachable database, then find nothing."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.claims = 0
        self.db = self  # the worker reaches the backend through queue.db.backend
        self.backend = self

    def listen(self, on_notify):
        return contextlib.nullcontext()

    async def reclaim_expired(self, now):
        return []

    async def claim(self, worker_id, limit, now, lease_seconds):
        self.claims += 1
        if self.failures:
            self.failures -= 1
            raise ConnectionRefusedError("database unreachable")
        return []

    async def next_due_at(self, now):
        return None

    async def extend_leases(self, leases, until):
        return set()


async def test_database_errors_are_logged_and_retried(caplog):
    """Two failed claims are logged and retried with backoff; the loop carries on."""
    queue = FlakyQueue(failures=2)
    settings = Settings(_env_file=None, poll_interval_seconds=0.05)
    worker = Worker(queue, fetcher=None, settings=settings, clock=lambda: datetime.now(UTC))
    caplog.set_level(logging.ERROR, logger="ingest.worker")
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(2.0)
    worker.stop()
    await asyncio.wait_for(task, 5)
    errors = [r.getMessage() for r in caplog.records if "database error" in r.getMessage()]
    assert 2 == len(errors)
    assert "trying again in 0.5s" in errors[0]
    assert "trying again in 1s" in errors[1]
    assert queue.claims > 3
