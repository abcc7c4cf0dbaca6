"""The operators' side of the `domains` table: which domains are paused, and resuming one.

Read and cleared by hand here; pausing a domain is the worker's business, not this module's.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.clock import Clock
from app.model import JobStatus
from app.store.database import Database
from app.store.tables import DUE_SINCE, Domain, UTCDateTime, domains, jobs, status_is
from app.text.safe_strings import storable


@dataclass(frozen=True)
class DomainOverview:
    domain: str
    paused_until: datetime | None
    pause_reason: str | None
    consecutive_failures: int
    in_flight: int
    pending: int
    oldest_pending_age_seconds: float | None
    scheduled: int = 0
    """Of the pending: not due yet."""
    oldest_due_age_seconds: float | None = None
    """How long its longest-waiting due pending job has been due."""


class DomainStore:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        on_resume: Callable[[int | None], None] = lambda _: None,
    ) -> None:
        self.db = database
        self.clock = clock
        self.on_resume = on_resume
        """Called after a domain was resumed: wakes the worker in this process."""

    async def paused(self, now: datetime) -> list[Domain]:
        """Domains whose pause has not run out at `now`, the soonest to resume first."""
        stmt = (
            sa.select(domains)
            .where(domains.c.paused_until > now)
            .order_by(domains.c.paused_until, domains.c.domain)
        )
        async with self.db.read() as conn:
            return [Domain(**row._mapping) for row in await conn.execute(stmt)]

    async def resume(self, domain: str) -> bool:
        """Clear the domain's pause and its failure streak now: by hand, a fresh start, so
        the next failure counts as the first, not as one more of a streak that already
        paused it (whose next pause would be longer still). False if it has no row (no job
        ever named it)."""
        if not storable(domain):
            return False  # no row can hold it, and PostgreSQL would fail on a NUL
        stmt = (
            sa.update(domains)
            .where(domains.c.domain == domain.lower())
            .values(
                paused_until=None,
                pause_reason=None,
                consecutive_failures=0,
                updated_at=self.clock(),
            )
        )
        backend = self.db.backend

        def write(conn: sa.Connection) -> bool:
            found = conn.execute(stmt).rowcount == 1
            if found:
                # Its jobs are due again: wake the workers of other processes too.
                backend.notify(conn)
            return found

        resumed = await self.db.transact(write)
        if resumed:
            self.on_resume(None)
        return resumed

    async def overview(
        self, now: datetime, limit: int = 1000, domain: str | None = None
    ) -> list[DomainOverview]:
        """Domains with work or a state worth seeing (pending or running jobs, a pause, a
        failure streak), by name: what `GET /domains` shows. With `domain`, just that one."""
        if domain is not None and not storable(domain):
            return []  # no row can hold it, and PostgreSQL would fail on a NUL
        due = sa.or_(jobs.c.retry_after.is_(None), jobs.c.retry_after <= now)
        pending = (
            sa.select(
                jobs.c.domain,
                sa.func.count().label("pending"),
                sa.type_coerce(sa.func.min(jobs.c.created_at), UTCDateTime).label("oldest"),
                sa.func.count(sa.case((jobs.c.retry_after > now, 1))).label("scheduled"),
                sa.type_coerce(sa.func.min(sa.case((due, DUE_SINCE))), UTCDateTime).label(
                    "oldest_due"
                ),
            )
            .where(status_is(JobStatus.PENDING))
            .group_by(jobs.c.domain)
            .subquery()
        )
        stmt = (
            sa.select(
                domains,
                pending.c.pending,
                pending.c.oldest,
                pending.c.scheduled,
                pending.c.oldest_due,
            )
            .select_from(domains.outerjoin(pending, pending.c.domain == domains.c.domain))
            .order_by(domains.c.domain)
            .limit(limit)
        )
        if domain is None:
            stmt = stmt.where(
                sa.or_(
                    pending.c.pending > 0,
                    domains.c.in_flight > 0,
                    domains.c.paused_until > now,
                    domains.c.consecutive_failures > 0,
                )
            )
        else:
            stmt = stmt.where(domains.c.domain == domain.lower())
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            DomainOverview(
                domain=row.domain,
                paused_until=row.paused_until
                if row.paused_until and row.paused_until > now
                else None,
                pause_reason=row.pause_reason
                if row.paused_until and row.paused_until > now
                else None,
                consecutive_failures=row.consecutive_failures,
                in_flight=row.in_flight,
                pending=row.pending or 0,
                oldest_pending_age_seconds=(
                    None if row.oldest is None else (now - row.oldest).total_seconds()
                ),
                scheduled=row.scheduled or 0,
                oldest_due_age_seconds=(
                    None if row.oldest_due is None else (now - row.oldest_due).total_seconds()
                ),
            )
            for row in rows
        ]
