"""The operators' side of the store: submit, read, list, search, retry, cancel, delete, count.

Used by the HTTP API, the dashboard and the CLI alike, so all see and change jobs the same
way. Every read loads each job with its domain's row (one outer join, whatever the number
of jobs), so a pending job says what holds it back (`Job.blocked_by`).

Why one module past 300 lines: it is the store's one handle on jobs for operators; every
verb and read shares the row mapping and the `blocked_by` join, and each method is short.
"""

import base64
import binascii
import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from app.model import FINISHED, CallbackContent, JobStatus, NewJob
from app.rules.scheduling import DomainState, waiting_for
from app.store import counts
from app.store.backends.writes import NewRows
from app.store.database import Database
from app.store.quotas import QuotaExceeded, Requeue, check_room, pending_count, requeue
from app.store.refreshes import REFRESHABLE, refreshed
from app.store.tables import (
    DUE_SINCE,
    Attempt,
    Job,
    UTCDateTime,
    attempts,
    domains,
    is_job_id,
    jobs,
    new_domain,
    new_job_id,
    status_is,
    tenants,
)
from app.text.safe_strings import shown, storable


class JobNotFound(LookupError):
    pass


class AmbiguousId(LookupError):
    """More than one job's id starts with the prefix given."""


class StateConflict(Exception):
    """The job is not in a state that allows the operation."""

    def __init__(self, job_id: str, status: str, operation: str) -> None:
        super().__init__(f"job {job_id} is {status}; cannot {operation}")
        self.status = status


class IdempotencyConflict(Exception):
    """The idempotency key was used before with another request body."""


class BadCursor(ValueError):
    pass


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


def _job(columns: Mapping[Any, Any]) -> Job:
    values = dict(columns)
    # Rows stored before the API refused them may hold lone surrogates (or NaN, on SQLite)
    # in their metadata: shown with U+FFFD (null) so no list or read of them can fail.
    values["meta"] = shown(values.pop("metadata"))
    # Not validated, as the table class was not: what the database holds is what it shows.
    return Job.model_construct(**values)


_REQUIRED: dict[str, Any] = {
    name: None for name, field in Job.model_fields.items() if field.is_required()
}
_UNSET_JOB = Job.model_construct(**_REQUIRED)
"""A job of default values, its fields in their order (the required ones None): what
`_submitted` copies."""


def _submitted(row: dict[str, Any]) -> Job:
    """`_job(row)` for a row a submit inserted, the same job built a quarter as dear: a copy
    of `_UNSET_JOB` with the row's values, not `model_construct` walking every field and
    default (a fifth of the store's part of a POST)."""
    values = dict(row)
    values["meta"] = shown(values.pop("metadata"))
    return _UNSET_JOB.model_copy(update=values)


def _row(new: NewJob, now: datetime) -> dict[str, Any]:
    """The row of a job `new` asks for, submitted at `now`."""
    return {
        "id": new_job_id(),
        "url": new.url,
        "domain": new.domain,
        "tenant": new.tenant,
        "status": JobStatus.PENDING.value,
        "priority": new.priority,
        "attempts": 0,
        "max_attempts": new.max_attempts,
        "deferrals": 0,
        "retry_after": new.not_before if new.not_before and new.not_before > now else None,
        "metadata": new.metadata,
        "callback_url": new.callback_url,
        # Null for none, as every job submitted before migration 0008 says.
        "callback_content": (
            None if new.callback_content is CallbackContent.NONE else new.callback_content.value
        ),
        "idempotency_key": new.idempotency_key,
        "idempotency_fingerprint": new.fingerprint,
        "refresh_every": new.refresh_every,
        "created_at": now,
        "updated_at": now,
    }


AnySelect = TypeVar("AnySelect", bound=sa.Select[*tuple[Any, ...]])

_DOMAIN_STATE = (
    domains.c.paused_until.label("domain_paused_until"),
    domains.c.pause_reason.label("domain_pause_reason"),
    domains.c.in_flight.label("domain_in_flight"),
    domains.c.next_start_at.label("domain_next_start_at"),
    tenants.c.in_flight.label("tenant_in_flight"),
)


def _shown() -> sa.Select[Any]:
    """Jobs with their domain's and their tenant's state: outer joins on the rows' primary
    keys."""
    return sa.select(jobs, *_DOMAIN_STATE).select_from(
        jobs.outerjoin(domains, domains.c.domain == jobs.c.domain).outerjoin(
            tenants, tenants.c.tenant == jobs.c.tenant
        )
    )


def _history(job_id: str) -> sa.CompoundSelect[Any]:
    """`job_id`'s attempts in order (`JobStore.attempts`): its rows in `attempts`, then the
    running attempt as its job's row tells it, if it runs. Each numbered by its place, not
    by its stored `number` (its attempt of the budget then in force: that starts again at
    1 with each retry and refresh, and repeats after an attempt that gave its budget back)."""
    place = sa.func.row_number().over(order_by=attempts.c.id)
    ended = sa.select(
        *(place.label("number") if column.name == "number" else column for column in attempts.c)
    ).where(attempts.c.job_id == job_id)
    so_far = sa.select(sa.func.count()).where(attempts.c.job_id == job_id).scalar_subquery()
    running = {
        "job_id": jobs.c.id,
        "number": so_far + 1,
        "worker_id": sa.func.coalesce(jobs.c.worker_id, ""),
        "started_at": jobs.c.started_at,
    }
    now = sa.select(
        *(running.get(column.name, sa.null()).label(column.name) for column in attempts.c)
    ).where(jobs.c.id == job_id, status_is(JobStatus.RUNNING), jobs.c.started_at.is_not(None))
    # The running attempt has no row, so no id: last.
    return sa.union_all(ended, now).order_by(sa.column("id").asc().nulls_last())


def _filtered(stmt: AnySelect, domain: str | None, tenant: str | None) -> AnySelect:
    if domain:
        stmt = stmt.where(jobs.c.domain == domain.lower())
    if tenant:
        stmt = stmt.where(jobs.c.tenant == tenant)
    return stmt


def encode_cursor(job: Job) -> str:
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, job_id = raw.split("|", 1)
        parsed = datetime.fromisoformat(created)
        # An offset can carry the time past year 9999 (or before year 1) in UTC.
        created_at = parsed.astimezone(UTC) if parsed.tzinfo else None
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise BadCursor("cursor is not one this service returned") from exc
    if created_at is None or not is_job_id(job_id):
        raise BadCursor("cursor is not one this service returned")
    return created_at, job_id


SCHEDULED_COUNTED = 10_000
"""`Stats.scheduled` counts up to this many: counting every entry of the index costs some
1-2 ms per 1,000 (220 ms for 130,000 jobs waiting for a retry, of 1 M pending)."""


class JobStore:
    def __init__(
        self,
        database: Database,
        clock: Callable[[], datetime],
        on_submit: Callable[[int | None], None] = lambda _: None,
        domain_max_in_flight: int | None = None,
        *,
        max_pending: int = 0,
        tenant_max_in_flight: int = 0,
    ) -> None:
        self.db = database
        self.clock = clock
        self.on_submit = on_submit
        """Called after new work is committed: wakes the worker in this process, with the
        highest priority submitted (None when the work is not new jobs: a requeue)."""
        self.domain_max_in_flight = domain_max_in_flight
        """INGEST_DOMAIN_MAX_IN_FLIGHT, to say when a job waits for its domain's fetches to
        end; None: not said."""
        self.max_pending = max_pending
        """INGEST_TENANT_MAX_PENDING (0: none): `submit` refuses what would pass it."""
        self.tenant_max_in_flight = tenant_max_in_flight
        """INGEST_TENANT_MAX_IN_FLIGHT (0: none), to say when a job waits for its tenant's
        jobs to end."""

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

    async def submit(self, new_jobs: Sequence[NewJob]) -> list[Job]:
        """Insert jobs, all or nothing, and wake the workers. QuotaExceeded, nothing stored,
        if they would give a tenant more pending jobs than `max_pending`."""
        if self.max_pending:
            await self._within_quota(new_jobs)
        now = self.clock()
        rows = [_row(new, now) for new in new_jobs]
        new_domains = [new_domain(d) for d in sorted({r["domain"] for r in rows})]
        new_tenants = [{"tenant": t} for t in sorted({r["tenant"] for r in rows})]

        top = max(row["priority"] for row in rows)
        await self.db.insert_and_wake(
            [
                NewRows(jobs, rows),
                NewRows(domains, new_domains, skip_existing=True),
                NewRows(tenants, new_tenants, skip_existing=True),
            ],
            top,
        )
        self.on_submit(top)
        # Not read back: a new job says it is not due yet, never what its domain does.
        return [
            _submitted(row).held_back_by(waiting_for(row["retry_after"], None, now, None))
            for row in rows
        ]

    async def _within_quota(self, new_jobs: Sequence[NewJob]) -> None:
        """QuotaExceeded unless each tenant's pending jobs and these stay within
        `max_pending`. Counted before the insert, not in its transaction: submits that race
        may pass the limit by what they add together (a soft limit, as a rate limit is)."""
        adding: dict[str, int] = {}
        for new in new_jobs:
            adding[new.tenant] = adding.get(new.tenant, 0) + 1
        async with self.db.read() as conn:
            for tenant, count in sorted(adding.items()):
                pending = pending_count(tenant, self.max_pending)
                already = (await conn.execute(pending)).scalar_one()
                if already + count > self.max_pending:
                    raise QuotaExceeded(tenant, already, count, self.max_pending)

    async def submit_once(self, new: NewJob) -> tuple[Job, bool]:
        """Submit under an idempotency key: the same key and body again returns the first job.

        Returns (job, created). Raises IdempotencyConflict for the same key with another body.
        """
        assert new.idempotency_key is not None
        existing = await self._by_key(new.tenant, new.idempotency_key)
        if existing is None:
            try:
                return (await self.submit([new]))[0], True
            except IntegrityError:
                # A concurrent request with the same key won the insert.
                existing = await self._by_key(new.tenant, new.idempotency_key)
                if existing is None:
                    raise
        if existing.idempotency_fingerprint != new.fingerprint:
            raise IdempotencyConflict(
                f"Idempotency-Key {new.idempotency_key!r} was used with a different request"
            )
        return existing, False

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
    ) -> Page:
        """Newest first, `limit` at a time; pass `next_cursor` back for the next page. With
        `changed_since`, only jobs that stored a content version (a first success, or a
        refresh that found a change) at or after it."""
        after = decode_cursor(cursor) if cursor else None
        if not _storable(domain, tenant):
            return Page([], None)
        stmt = _shown().order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit + 1)
        if statuses:
            stmt = stmt.where(sa.or_(*(status_is(s) for s in statuses)))
        if changed_since is not None:
            stmt = stmt.where(jobs.c.changed_at >= changed_since)
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

    async def retry(self, job_id: str, tenant: str | None = None) -> Job:
        """Dead or cancelled: pending with a fresh budget (QuotaExceeded, nothing changed, if
        its tenant's pending jobs are at `max_pending`). Pending: due now."""
        job = await self.get(job_id, tenant)
        now = self.clock()
        if job.status in (JobStatus.DEAD, JobStatus.CANCELLED):
            values: dict[str, Any] = _fresh_budget(now)
            held_to: str | None = job.tenant
        elif job.status == JobStatus.PENDING:
            # Pending already: counted in its tenant's quota.
            values, held_to = {"retry_after": None, "updated_at": now}, None
        else:
            raise StateConflict(job_id, job.status, "retry")
        stmt = sa.update(jobs).where(jobs.c.id == job_id, jobs.c.status == job.status)
        if not await self.db.transact(self._changed_and_notified(stmt.values(**values), held_to)):
            raise StateConflict(job_id, "changing", "retry")
        self.on_submit(None)
        return await self.get(job_id)

    async def refresh(self, job_id: str, tenant: str | None = None) -> Job:
        """Succeeded or dead: pending again as a refresh (`app.store.refreshes`), due now,
        with a fresh budget, its content kept. Otherwise StateConflict; QuotaExceeded,
        nothing changed, if its tenant's pending jobs are at `max_pending`."""
        job = await self.get(job_id, tenant)
        if job.status not in REFRESHABLE:
            raise StateConflict(job_id, job.status, "refresh")
        stmt = (
            sa.update(jobs)
            .where(jobs.c.id == job_id, jobs.c.status == job.status)
            .values(**refreshed(self.clock()))
        )
        if not await self.db.transact(self._changed_and_notified(stmt, job.tenant)):
            raise StateConflict(job_id, "changing", "refresh")
        self.on_submit(None)
        return await self.get(job_id)

    async def refresh_all(
        self,
        domain: str | None = None,
        tenant: str | None = None,
        finished_before: datetime | None = None,
    ) -> Requeue:
        """Refresh every succeeded job (of one domain or tenant, finished before a time, when
        given): how many went back to pending, and how many stayed over their tenant's
        quota (those fetched longest ago go first)."""
        if not _storable(domain, tenant):
            return Requeue(0, 0)
        matched = [status_is(JobStatus.SUCCEEDED), *_of(domain, tenant)]
        if finished_before is not None:
            matched.append(jobs.c.finished_at < finished_before)
        first = (jobs.c.finished_at, jobs.c.id)
        return await self._requeue(matched, refreshed(self.clock()), first)

    def _changed_and_notified(
        self, stmt: sa.Update, held_to: str | None = None
    ) -> Callable[[sa.Connection], int]:
        """A write of `stmt` that wakes every process's workers if it changed a row. With
        `held_to` (a tenant) and a quota, one more pending job of it must fit first."""
        backend, limit = self.db.backend, self.max_pending

        def write(conn: sa.Connection) -> int:
            if held_to is not None and limit:
                check_room(conn, held_to, 1, limit)
            changed = conn.execute(stmt).rowcount
            if changed:
                backend.notify(conn)
            return changed

        return write

    async def _requeue(
        self,
        matched: builtins.list[sa.ColumnElement[bool]],
        values: dict[str, Any],
        first: Sequence[sa.ColumnElement[Any]],
    ) -> Requeue:
        """Move the jobs `matched` selects back to pending with `values` and wake the
        workers; with a quota, of each tenant as many as it leaves room for, `first` first
        (`app.store.quotas.requeue`)."""
        if not self.max_pending:
            stmt = sa.update(jobs).where(*matched).values(**values)
            done = Requeue(await self.db.transact(self._changed_and_notified(stmt)), 0)
        else:
            backend, limit = self.db.backend, self.max_pending

            def write(conn: sa.Connection) -> Requeue:
                done = requeue(conn, matched, values, first, limit)
                if done.requeued:
                    backend.notify(conn)
                return done

            done = await self.db.transact(write)
        if done.requeued:
            self.on_submit(None)
        return done

    async def retry_all(
        self,
        statuses: Sequence[JobStatus],
        domain: str | None = None,
        tenant: str | None = None,
    ) -> Requeue:
        """Requeue every dead or cancelled job (optionally of one domain or tenant) with a
        fresh budget: how many went back to pending, and how many stayed over their
        tenant's quota (the oldest go first)."""
        if not statuses or not set(statuses) <= {JobStatus.DEAD, JobStatus.CANCELLED}:
            raise ValueError("only dead and cancelled jobs can be requeued in bulk")
        if not _storable(domain, tenant):
            return Requeue(0, 0)
        matched = [jobs.c.status.in_([s.value for s in statuses]), *_of(domain, tenant)]
        first = (jobs.c.created_at, jobs.c.id)
        return await self._requeue(matched, _fresh_budget(self.clock()), first)

    async def delete_all(
        self,
        statuses: Sequence[JobStatus],
        domain: str | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete every job of these finished statuses (optionally of one domain or tenant)
        with its attempts and content; how many went."""
        if not statuses or not set(statuses) <= set(FINISHED):
            raise ValueError("only finished jobs can be deleted")
        if not _storable(domain, tenant):
            return 0
        stmt = sa.delete(jobs).where(jobs.c.status.in_([s.value for s in statuses]))
        if domain:
            stmt = stmt.where(jobs.c.domain == domain.lower())
        if tenant is not None:
            stmt = stmt.where(jobs.c.tenant == tenant)
        return await self.db.transact(lambda conn: conn.execute(stmt).rowcount)

    async def cancel(self, job_id: str, tenant: str | None = None) -> Job:
        job = await self.get(job_id, tenant)
        if job.status != JobStatus.PENDING:
            raise StateConflict(job_id, job.status, "cancel")
        now = self.clock()
        stmt = (
            sa.update(jobs)
            .where(jobs.c.id == job_id, status_is(JobStatus.PENDING))
            .values(status=JobStatus.CANCELLED, retry_after=None, finished_at=now, updated_at=now)
        )
        if await self.db.transact(lambda conn: conn.execute(stmt).rowcount) != 1:
            raise StateConflict(job_id, "no longer pending", "cancel")
        return await self.get(job_id)

    async def delete(self, job_id: str, tenant: str | None = None) -> None:
        """Delete a succeeded, dead or cancelled job with its attempts and content.

        JobNotFound for no job (or another tenant's); StateConflict while pending or running.
        """
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        stmt = sa.delete(jobs).where(
            jobs.c.id == job_id, jobs.c.status.in_([s.value for s in FINISHED])
        )
        if tenant is not None:
            stmt = stmt.where(jobs.c.tenant == tenant)
        if await self.db.transact(lambda conn: conn.execute(stmt).rowcount) != 1:
            job = await self.get(job_id, tenant)  # JobNotFound when there is none
            raise StateConflict(job_id, job.status, "delete")

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


_ID_SHAPE = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"


def _starts_an_id(text: str) -> bool:
    """True for the start of a lower-case UUID: hex digits, hyphens where a UUID has them."""
    return 0 < len(text) <= len(_ID_SHAPE) and all(
        char == "-" if shape == "-" else char in "0123456789abcdef"
        for char, shape in zip(text, _ID_SHAPE, strict=False)
    )


def _of(domain: str | None, tenant: str | None) -> builtins.list[sa.ColumnElement[bool]]:
    """The conditions of a bulk action's filters: jobs of `domain`, of `tenant`."""
    conditions = [jobs.c.domain == domain.lower()] if domain else []
    return conditions + ([jobs.c.tenant == tenant] if tenant is not None else [])


def _storable(*filters: str | None) -> bool:
    """False if a filter holds what no row can (NUL, a lone surrogate): it matches nothing,
    and PostgreSQL would fail on it rather than say so."""
    return all(storable(value) for value in filters if value)


def _fresh_budget(now: datetime) -> dict[str, Any]:
    return {
        "status": JobStatus.PENDING,
        "attempts": 0,
        "deferrals": 0,
        "retry_after": None,
        "dead_reason": None,
        "finished_at": None,
        "updated_at": now,
    }
