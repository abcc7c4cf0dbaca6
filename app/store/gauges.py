"""What a metrics scrape reads besides `JobStore.stats`: two aggregates, nothing written."""

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.states import JobStatus
from app.store.claim import DUE_SINCE, status_is
from app.store.database import Database
from app.store.tables import Domain, Job

jobs = Job.__table__
domains = Domain.__table__


@dataclass(frozen=True)
class QueueState:
    oldest_due_at: datetime | None
    """When the longest-waiting due pending job became claimable; None if none is due."""
    paused_domains: int


async def queue_state(database: Database, now: datetime) -> QueueState:
    """When the longest-waiting due pending job became due (`DUE_SINCE`), and how many
    domains are paused, at `now`."""
    oldest_due = sa.select(sa.func.min(DUE_SINCE)).where(
        status_is(JobStatus.PENDING),
        sa.or_(jobs.c.retry_after.is_(None), jobs.c.retry_after <= now),
    )
    paused = sa.select(sa.func.count()).select_from(domains).where(domains.c.paused_until > now)
    async with database.read() as conn:
        due_at = (await conn.execute(oldest_due)).scalar()
        paused_count = (await conn.execute(paused)).scalar() or 0
    return QueueState(due_at, paused_count)
