"""The worker's side of the store: claim due jobs, keep leases alive, record outcomes.

Every state change is guarded on the state it expects: `status = 'running'` and the claim's
`lease_id` as a fencing token. The token is random per claim and cleared when the job
leaves running, so the late write of an attempt whose lease was taken back changes nothing,
even when the job has since been claimed again by the same worker under the same attempt
number (an operator's retry resets the count). The worker issues no SQL of its own; it is
all here.
"""

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.fetcher import FetchResult
from app.policy import Failure, MarkDead, Reschedule
from app.scheduling import DomainPause, counts_against_domain
from app.settings import Settings
from app.states import AttemptOutcome, DeadReason, ErrorKind, JobStatus
from app.store.claim import (
    anything_claimable,
    attempts,
    claim_rows,
    domains,
    jobs,
    status_is,
)
from app.store.contents import save as save_content
from app.store.database import Database
from app.store.deliveries import JOB_DEAD, JOB_SUCCEEDED, owe
from app.store.retention import prune_jobs


@dataclass(frozen=True)
class Lease:
    """A claimed job: what the worker needs to fetch it and to record the outcome."""

    id: str
    url: str
    domain: str
    tenant: str
    attempt: int
    max_attempts: int
    deferrals: int
    worker_id: str
    lease_id: str
    """The claim's fencing token: every later write of this attempt must match it."""
    claimed_at: datetime
    due_at: datetime | None = None
    """When the job became claimable, for the queue-lag metric; None if the claim did not say."""


@dataclass(frozen=True)
class Reclaimed:
    """A running job whose lease expired and was taken back."""

    id: str
    attempt: int
    max_attempts: int
    dead: bool
    tenant: str = ""
    domain: str = ""


class Queue:
    def __init__(self, database: Database, settings: Settings) -> None:
        self.db = database
        self.settings = settings

    async def claim(
        self, worker_id: str, limit: int, now: datetime, lease_seconds: float
    ) -> list[Lease]:
        """Atomically take up to `limit` due jobs: running, attempt counted, leased to us.

        The rules (priority, tenants in turn, oldest first, domain limits) are in
        `app.store.claim`.
        """
        # Look before taking the write lock: an idle worker polling with write transactions
        # would starve the writers of other processes on SQLite.
        async with self.db.read() as conn:
            if not await anything_claimable(conn, now, self.settings):
                return []
        async with self.db.write() as conn:
            rows = await claim_rows(conn, worker_id, limit, now, lease_seconds, self.settings)
        return [
            Lease(
                r.id,
                r.url,
                r.domain,
                r.tenant,
                r.attempts,
                r.max_attempts,
                r.deferrals,
                worker_id,
                r.lease_id,
                now,
                due_since,
            )
            for r, due_since in rows
        ]

    async def extend_leases(self, leases: Collection[Lease], until: datetime) -> set[Lease]:
        """Heartbeat: push out those of `leases` that are still held (the job runs under the
        very claim, job id and lease id as a pair); returns them."""
        if not leases:
            return set()
        by_token = {(lease.id, lease.lease_id): lease for lease in leases}
        stmt = (
            sa.update(jobs)
            .where(
                # The plain `id IN` lets both databases find the rows by primary key; the pairs
                # alone made them scan every running job.
                jobs.c.id.in_(sorted({lease.id for lease in leases})),
                sa.tuple_(jobs.c.id, jobs.c.lease_id).in_(list(by_token)),
                status_is(JobStatus.RUNNING),
            )
            .values(lease_expires_at=until)
            .returning(jobs.c.id, jobs.c.lease_id)
        )
        async with self.db.write() as conn:
            return {by_token[row.id, row.lease_id] for row in await conn.execute(stmt)}

    async def record_success(
        self, lease: Lease, result: FetchResult, now: datetime, duration_ms: int
    ) -> bool:
        """Mark the job succeeded. False if the lease was lost (the write changed nothing)."""
        values = {
            "status": JobStatus.SUCCEEDED,
            "result_http_status": result.http_status,
            "result_final_url": result.final_url,
            "result_content_type": result.content_type,
            "result_bytes": result.bytes,
            "result_sha256": result.sha256,
            "result_title": result.title,
            "result_text_length": result.text_length,
            "finished_at": now,
        }
        outcome = {"outcome": AttemptOutcome.SUCCEEDED, "http_status": result.http_status}
        domain = {"consecutive_failures": 0}
        async with self.db.write() as conn:
            failures = await self._finish_in(conn, lease, values, outcome, domain, now, duration_ms)
            if failures is None:
                return False
            await save_content(conn, lease.id, result, now)  # the body and text, same transaction
            await owe(conn, [lease.id], JOB_SUCCEEDED, now, self.settings.webhook_max_attempts)
        return True

    async def record_failure(
        self,
        lease: Lease,
        failure: Failure,
        decision: Reschedule | MarkDead,
        now: datetime,
        duration_ms: int,
        pause_for: Callable[[int], DomainPause | None] = lambda _: None,
    ) -> tuple[bool, DomainPause | None]:
        """Reschedule or kill the job after a failed attempt, and maybe pause its domain.

        `pause_for(consecutive_failures)` says whether the domain now pauses. Returns whether
        the outcome was recorded (False if the lease was lost) and the pause, if one began.
        """
        values: dict[str, Any] = _last_error(failure, now)
        if not failure.spends_attempt:
            values["attempts"] = jobs.c.attempts - 1
        if isinstance(decision, Reschedule):
            values |= {"status": JobStatus.PENDING, "retry_after": decision.retry_at}
            if not failure.spends_attempt:
                values["deferrals"] = jobs.c.deferrals + 1
        else:
            values |= {"status": JobStatus.DEAD, "dead_reason": decision.reason, "finished_at": now}
        outcome = {
            "outcome": AttemptOutcome(failure.kind),
            "error_type": failure.type,
            "message": failure.message,
            "http_status": failure.http_status,
            "next_retry_at": decision.retry_at if isinstance(decision, Reschedule) else None,
        }
        if counts_against_domain(failure):
            domain: dict[str, Any] = {"consecutive_failures": domains.c.consecutive_failures + 1}
        elif failure.http_status is not None:
            domain = {"consecutive_failures": 0}  # the server answered: it is up
        else:
            domain = {}
        pause: DomainPause | None = None
        async with self.db.write() as conn:
            failures = await self._finish_in(conn, lease, values, outcome, domain, now, duration_ms)
            if failures is None:
                return False, None
            if isinstance(decision, MarkDead):
                await owe(conn, [lease.id], JOB_DEAD, now, self.settings.webhook_max_attempts)
            pause = pause_for(failures) if counts_against_domain(failure) else None
            if pause is not None:
                await conn.execute(
                    sa.update(domains)
                    .where(
                        domains.c.domain == lease.domain,
                        sa.or_(
                            domains.c.paused_until.is_(None), domains.c.paused_until < pause.until
                        ),
                    )
                    .values(paused_until=pause.until, pause_reason=pause.reason)
                )
        return True, pause

    async def release(self, lease: Lease, now: datetime) -> bool:
        """Graceful shutdown: hand the job back, due now, without spending the attempt."""
        values = {"status": JobStatus.PENDING, "attempts": jobs.c.attempts - 1, "retry_after": None}
        outcome = {"outcome": AttemptOutcome.INTERRUPTED, "message": "worker shut down"}
        duration_ms = int((now - lease.claimed_at).total_seconds() * 1000)
        return await self._finish(lease, values, outcome, {}, now, duration_ms)

    async def _finish(
        self,
        lease: Lease,
        job_values: dict[str, Any],
        attempt_values: dict[str, Any],
        domain_values: dict[str, Any],
        now: datetime,
        duration_ms: int,
    ) -> bool:
        async with self.db.write() as conn:
            failures = await self._finish_in(
                conn, lease, job_values, attempt_values, domain_values, now, duration_ms
            )
        return failures is not None

    async def _finish_in(
        self,
        conn: AsyncConnection,
        lease: Lease,
        job_values: dict[str, Any],
        attempt_values: dict[str, Any],
        domain_values: dict[str, Any],
        now: datetime,
        duration_ms: int,
    ) -> int | None:
        """End the attempt and free its domain slot; the domain's consecutive failures after
        it, or None if the lease was lost (nothing changed)."""
        stmt = (
            sa.update(jobs)
            .where(
                jobs.c.id == lease.id,
                status_is(JobStatus.RUNNING),
                jobs.c.lease_id == lease.lease_id,
            )
            .values(
                lease_expires_at=None, worker_id=None, lease_id=None, updated_at=now, **job_values
            )
        )
        if (await conn.execute(stmt)).rowcount != 1:
            return None
        await _close_attempt(
            conn,
            lease.id,
            lease.attempt,
            {"finished_at": now, "duration_ms": duration_ms, **attempt_values},
        )
        free_slot = (
            sa.update(domains)
            .where(domains.c.domain == lease.domain)
            .values(in_flight=_minus(domains.c.in_flight, 1), updated_at=now, **domain_values)
            .returning(domains.c.consecutive_failures)
        )
        return (await conn.execute(free_slot)).scalar() or 0

    async def reclaim_expired(self, now: datetime) -> list[Reclaimed]:
        """Take back running jobs whose lease expired (their worker died or hung).

        The lost attempt counts: it is recorded as interrupted, and a job with no budget
        left is dead (`lease_expired`); the others are pending and due now.
        """
        any_expired = (
            sa.select(jobs.c.id)
            .where(status_is(JobStatus.RUNNING), jobs.c.lease_expires_at < now)
            .limit(1)
        )
        async with self.db.read() as conn:  # as in claim: no write lock just to look
            if (await conn.execute(any_expired)).first() is None:
                return []
        expired = (
            sa.select(jobs.c.id)
            .where(status_is(JobStatus.RUNNING), jobs.c.lease_expires_at < now)
            .with_for_update(skip_locked=True)
            .cte("expired")
            .prefix_with("MATERIALIZED")
        )
        exhausted = jobs.c.attempts >= jobs.c.max_attempts
        message = "lease expired: the worker stopped heartbeating"
        stmt = (
            sa.update(jobs)
            .where(jobs.c.id == expired.c.id, status_is(JobStatus.RUNNING))
            .values(
                status=sa.case((exhausted, JobStatus.DEAD.value), else_=JobStatus.PENDING.value),
                dead_reason=sa.case((exhausted, DeadReason.LEASE_EXPIRED.value), else_=None),
                finished_at=sa.case((exhausted, now), else_=None),
                retry_after=None,
                lease_expires_at=None,
                worker_id=None,
                lease_id=None,
                updated_at=now,
                **_last_error(Failure(ErrorKind.TRANSIENT, "LeaseExpired", message), now),
            )
            .returning(
                jobs.c.id,
                jobs.c.domain,
                jobs.c.tenant,
                jobs.c.attempts,
                jobs.c.max_attempts,
                jobs.c.status,
            )
        )
        async with self.db.write() as conn:
            rows = (await conn.execute(stmt)).all()
            dead = [row.id for row in rows if row.status == JobStatus.DEAD]
            await owe(conn, dead, JOB_DEAD, now, self.settings.webhook_max_attempts)
            freed: dict[str, int] = {}
            for row in rows:
                freed[row.domain] = freed.get(row.domain, 0) + 1
            for domain, count in sorted(freed.items()):
                await conn.execute(
                    sa.update(domains)
                    .where(domains.c.domain == domain)
                    .values(in_flight=_minus(domains.c.in_flight, count), updated_at=now)
                )
            for row in rows:
                await _close_attempt(
                    conn,
                    row.id,
                    row.attempts,
                    {"finished_at": now, "outcome": AttemptOutcome.INTERRUPTED, "message": message},
                )
        return [
            Reclaimed(
                r.id, r.attempts, r.max_attempts, r.status == JobStatus.DEAD, r.tenant, r.domain
            )
            for r in rows
        ]

    async def prune(self, older_than: datetime) -> int:
        """Retention: delete succeeded and cancelled jobs (with their attempts and content)
        that finished before `older_than` (app.store.retention); how many went."""
        return await prune_jobs(self.db, older_than)

    async def next_due_at(self, now: datetime) -> datetime | None:
        """When something may next become claimable: the earliest `retry_after` of a waiting
        job, or the end of a domain's pause or interval. An idle worker waits until then."""
        retry = sa.select(sa.func.min(jobs.c.retry_after)).where(
            status_is(JobStatus.PENDING), jobs.c.retry_after.is_not(None)
        )
        pause = sa.select(sa.func.min(domains.c.paused_until)).where(domains.c.paused_until > now)
        interval = sa.select(sa.func.min(domains.c.next_start_at)).where(
            domains.c.next_start_at > now
        )
        async with self.db.read() as conn:
            times = [(await conn.execute(q)).scalar() for q in (retry, pause, interval)]
        return min((t for t in times if t is not None), default=None)


def _minus(column: sa.ColumnElement[int], n: int) -> sa.ColumnElement[int]:
    """column - n, never below 0 (GREATEST is PostgreSQL's, MAX(a, b) SQLite's)."""
    return sa.case((column > n, column - n), else_=0)


def _last_error(failure: Failure, now: datetime) -> dict[str, Any]:
    return {
        "last_error_kind": failure.kind.value,
        "last_error_type": failure.type,
        "last_error_message": failure.message,
        "last_error_http_status": failure.http_status,
        "last_error_at": now,
    }


async def _close_attempt(
    conn: AsyncConnection, job_id: str, number: int, values: dict[str, Any]
) -> None:
    await conn.execute(
        sa.update(attempts)
        .where(
            attempts.c.job_id == job_id, attempts.c.number == number, attempts.c.outcome.is_(None)
        )
        .values(**values)
    )
