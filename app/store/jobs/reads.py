"""The operators' reads of jobs: one job, its attempts, pages, searches and the counts.

Reads only: never changes a row. Every read loads each job with its domain's and tenant's
rows (one outer join, whatever the number of jobs: `app.store.jobs.queries._shown`), so a
pending job says what holds it back (`Job.blocked_by`). The API, the dashboard and the CLI
all read through `JobStore` (`app.store.jobs`), which holds these.
"""

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.rules.scheduling import DomainState, waiting_for
from app.store import counts
from app.store.database import Database
from app.store.jobs.cursor import decode_cursor, encode_cursor
from app.store.jobs.errors import AmbiguousId, JobNotFound
from app.store.jobs.queries import (
    _DOMAIN_STATE,
    _filtered,
    _history,
    _of_url,
    _shown,
    _starts_an_id,
    _storable,
)
from app.store.jobs.rows import _job
from app.store.tables import (
    DUE_SINCE,
    Attempt,
    Job,
    UTCDateTime,
    domains,
    is_job_id,
    jobs,
    status_is,
)


@dataclass(frozen=True)
class Page:
    items: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class Stats:
    counts: dict[str, int] = field(default_factory=dict)
    oldest_pending_age_seconds: float | None = None
    """Since the oldest pending job was created, due or not."""
    oldest_due_age_seconds: float | None = None
    """How long the longest-waiting due pending job has been due (`DUE_SINCE`)."""
    scheduled: int = 0
    """Pending jobs not due yet (a `retry_after` to come), counted up to
    `SCHEDULED_COUNTED`: that number means at least that many."""


SCHEDULED_COUNTED = 10_000
"""`Stats.scheduled` counts up to this many: counting every entry of the index costs time in
proportion to the jobs waiting for a retry (docs/design/store.md)."""


class JobReads:
    """The reads of `JobStore`: what its constructor sets, these read."""

    db: Database
    clock: Callable[[], datetime]
    domain_max_in_flight: int | None
    tenant_max_in_flight: int

    def _read(self, row: sa.Row[Any], now: datetime) -> Job:
        """A job of a `_shown()` row, saying what holds it back at `now` if it is pending."""
        values = dict(row._mapping)
        paused_until, pause_reason, in_flight, next_start_at, tenant_in_flight = (
            values.pop(column.name) for column in _DOMAIN_STATE
        )
        job = _job(values)
        if job.status != JobStatus.PENDING:
            return job
        domain = None
        # No row: retention deleted it as this job was submitted (`app.store.retention`);
        # nothing holds the job back until its claim inserts the row again.
        if in_flight is not None:
            domain = DomainState(in_flight, next_start_at, paused_until, pause_reason)
        return job.held_back_by(
            waiting_for(
                job.retry_after,
                domain,
                now,
                self.domain_max_in_flight,
                tenant_in_flight,
                self.tenant_max_in_flight,
            )
        )

    async def _fetch(self, stmt: sa.Select[Any]) -> builtins.list[Job]:
        """The jobs of a `_shown()` query, each saying what holds it back now."""
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        now = self.clock()
        return [self._read(row, now) for row in rows]

    async def _by_key(self, tenant: str, key: str) -> Job | None:
        stmt = _shown().where(jobs.c.tenant == tenant, jobs.c.idempotency_key == key)
        found = await self._fetch(stmt)
        return found[0] if found else None

    async def get(self, job_id: str, tenant: str | None = None) -> Job:
        """The job; JobNotFound if there is none, or it belongs to another than `tenant`."""
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        stmt = _shown().where(jobs.c.id == job_id)
        if tenant is not None:
            stmt = stmt.where(jobs.c.tenant == tenant)
        found = await self._fetch(stmt)
        if not found:
            raise JobNotFound(job_id)
        return found[0]

    async def match_id(self, prefix: str) -> str:
        """The id of the one job whose id starts with `prefix` (a short id, as the CLI shows
        them, or a whole one). JobNotFound if none does, AmbiguousId if several do."""
        lowered = prefix.lower()
        if not _starts_an_id(lowered):
            raise JobNotFound(prefix)
        # A range on the primary key, not LIKE 'prefix%', which no index serves on PostgreSQL
        # outside the C collation, nor on SQLite (its LIKE ignores case). Ids are lower-case
        # hex with hyphens at fixed places, all before 'g', so under any collation the range
        # holds exactly the ids that start with the prefix.
        stmt = sa.select(jobs.c.id).where(jobs.c.id >= lowered, jobs.c.id < lowered + "g").limit(2)
        async with self.db.read() as conn:
            found: list[str] = list((await conn.execute(stmt)).scalars())
        if not found:
            raise JobNotFound(prefix)
        if len(found) > 1:
            raise AmbiguousId(prefix)
        return found[0]

    async def attempts(self, job_id: str, tenant: str | None = None) -> list[Attempt]:
        """The job's attempts, oldest first, numbered 1, 2, 3 ... across its retries and
        refreshes; the one running now last, read off the job's row (an attempt's own row
        is written when it ends: `app.store.record`). One statement, so an attempt that
        ends meanwhile is read once, as either."""
        await self.get(job_id, tenant)
        async with self.db.read() as conn:
            rows = await conn.execute(_history(job_id))
            return [Attempt(**row._mapping) for row in rows]

    async def list(
        self,
        statuses: Sequence[JobStatus] = (),
        domain: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        changed_since: datetime | None = None,
        url_key: str | None = None,
        crawl_id: str | None = None,
    ) -> Page:
        """Newest first, `limit` at a time; pass `next_cursor` back for the next page. With
        `changed_since`, only jobs that stored a content version (a first success, or a
        refresh that found a change) at or after it; with `url_key`, only the jobs of URLs
        of that key (`app.rules.url_key`); with `crawl_id`, only that crawl's pages."""
        after = decode_cursor(cursor) if cursor else None
        if not _storable(domain, tenant):
            return Page([], None)
        stmt = _shown().order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit + 1)
        if url_key is not None:
            stmt = _of_url(stmt, url_key, tenant or None)
        if statuses:
            stmt = stmt.where(sa.or_(*(status_is(s) for s in statuses)))
        if changed_since is not None:
            stmt = stmt.where(jobs.c.changed_at >= changed_since)
        if crawl_id is not None:
            stmt = stmt.where(jobs.c.crawl_id == crawl_id)
        stmt = _filtered(stmt, domain, tenant)
        if after is not None:
            stmt = stmt.where(sa.tuple_(jobs.c.created_at, jobs.c.id) < after)
        items = await self._fetch(stmt)
        more = len(items) > limit
        items = items[:limit]
        return Page(items, encode_cursor(items[-1]) if more else None)

    async def waiting(
        self, domain: str | None = None, tenant: str | None = None, limit: int = 50
    ) -> builtins.list[Job]:
        """Pending jobs that something holds back now (a `retry_after` to come, their
        domain's pause, interval or in-flight limit), in claim order; each says what.

        Walks the pending jobs in claim order until `limit` such are found: cheap while
        most pending jobs wait, a scan of the due ones otherwise."""
        if not _storable(domain, tenant):
            return []
        now = self.clock()
        held = [
            jobs.c.retry_after > now,
            domains.c.paused_until > now,
            domains.c.next_start_at > now,
        ]
        if self.domain_max_in_flight is not None:
            held.append(domains.c.in_flight >= self.domain_max_in_flight)
        stmt = (
            _shown()
            .where(status_is(JobStatus.PENDING), sa.or_(*held))
            .order_by(jobs.c.priority.desc(), jobs.c.created_at)
            .limit(limit)
        )
        return await self._fetch(_filtered(stmt, domain, tenant))

    async def running(
        self, domain: str | None = None, tenant: str | None = None, limit: int = 50
    ) -> builtins.list[Job]:
        """Running jobs, the longest running first."""
        if not _storable(domain, tenant):
            return []
        stmt = (
            _shown()
            .where(status_is(JobStatus.RUNNING))
            .order_by(jobs.c.started_at, jobs.c.id)
            .limit(limit)
        )
        return await self._fetch(_filtered(stmt, domain, tenant))

    async def search(
        self,
        text: str,
        domain: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
    ) -> builtins.list[Job]:
        """Jobs whose id starts with `text` or whose URL contains it (in any case), newest
        first. The URL match reads the jobs newest first until `limit` match: no index
        serves a substring."""
        text = text.strip()
        if not text or not _storable(text, domain, tenant):
            return []
        match = jobs.c.url.icontains(text, autoescape=True)
        if _starts_an_id(text.lower()):
            # The id range as in `match_id`, which the primary key serves.
            start = text.lower()
            match = sa.or_(sa.and_(jobs.c.id >= start, jobs.c.id < start + "g"), match)
        stmt = _shown().where(match).order_by(jobs.c.created_at.desc(), jobs.c.id.desc())
        return await self._fetch(_filtered(stmt.limit(limit), domain, tenant))

    async def tenant_loads(self, tenant: str | None = None) -> Sequence[counts.TenantLoad]:
        """Each tenant's jobs pending and running (of `tenant`, when given)."""
        if not _storable(tenant):
            return []
        return await counts.tenant_loads(self.db, tenant)

    async def bytes_kept(self, tenant: str | None = None) -> dict[str, int]:
        """The bytes of content each tenant keeps, the most first (of `tenant`, when given;
        `app.store.counts.bytes_kept_by`)."""
        if not _storable(tenant):
            return {}
        return await counts.bytes_kept_by(self.db, None if tenant is None else [tenant])

    async def stats(self, tenant: str | None = None, domain: str | None = None) -> Stats:
        """Jobs per status, and of the pending: the oldest, the longest due, how many are
        not due yet (of one tenant or domain, when given)."""
        per_status = {status.value: 0 for status in JobStatus}
        if not _storable(tenant, domain):
            return Stats(per_status)
        now = self.clock()
        # Of one domain, the jobs are counted (no count is kept per domain); otherwise the
        # counts kept by the triggers on jobs are summed (`app.store.counts`).
        by_status = (
            _filtered(
                sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status), domain, tenant
            )
            if domain
            else counts.per_status(tenant)
        )
        # Each the first row of an index of the pending jobs (ix_jobs_pending_created,
        # ix_jobs_pending_due); the jobs not due yet counted up to SCHEDULED_COUNTED
        # through ix_jobs_pending_retry_after.
        oldest_created = sa.select(sa.func.min(jobs.c.created_at)).where(
            status_is(JobStatus.PENDING)
        )
        oldest_due = sa.select(sa.func.min(DUE_SINCE)).where(
            status_is(JobStatus.PENDING), DUE_SINCE <= now
        )
        not_due = (
            sa.select(jobs.c.id)
            .where(status_is(JobStatus.PENDING), jobs.c.retry_after > now)
            .limit(SCHEDULED_COUNTED)
        )
        pending = sa.select(
            sa.type_coerce(
                _filtered(oldest_created, domain, tenant).scalar_subquery(), UTCDateTime
            ),
            sa.type_coerce(_filtered(oldest_due, domain, tenant).scalar_subquery(), UTCDateTime),
            sa.select(sa.func.count())
            .select_from(_filtered(not_due, domain, tenant).subquery())
            .scalar_subquery(),
        )
        async with self.db.read() as conn:
            for status, count in await conn.execute(by_status):
                per_status[status] = int(count)
            oldest_created, oldest_due, scheduled = (await conn.execute(pending)).one()
        return Stats(per_status, _age(oldest_created, now), _age(oldest_due, now), scheduled)


def _age(moment: datetime | None, now: datetime) -> float | None:
    return None if moment is None else (now - moment).total_seconds()
