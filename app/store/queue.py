"""The worker's side of the store: claim due jobs, keep leases alive, record outcomes.

Every state change is guarded on the state it expects (`status = 'running'`, the worker's
id and the attempt number as a fencing token), so a stale worker's late write changes
nothing. The worker issues no SQL of its own; it is all here.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.fetcher import FetchResult
from app.policy import Failure, MarkDead, Reschedule
from app.states import AttemptOutcome, DeadReason, ErrorKind, JobStatus
from app.store.database import Database
from app.store.tables import Attempt, Job

jobs = Job.__table__
attempts = Attempt.__table__


def status_is(status: JobStatus) -> sa.ColumnElement[bool]:
    """`status = '<literal>'`: a literal, not a bound parameter, so both databases match
    the query to the partial indexes declared on that very predicate."""
    return jobs.c.status == sa.literal_column(f"'{status}'")


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
    claimed_at: datetime


@dataclass(frozen=True)
class Reclaimed:
    """A running job whose lease expired and was taken back."""

    id: str
    attempt: int
    max_attempts: int
    dead: bool


class Queue:
    def __init__(self, database: Database) -> None:
        self.db = database

    async def claim(
        self, worker_id: str, limit: int, now: datetime, lease_seconds: float
    ) -> list[Lease]:
        """Atomically take up to `limit` due jobs: running, attempt counted, leased to us.

        Order: priority (higher first), then oldest first.
        """
        due = (
            sa.select(jobs.c.id)
            .where(
                status_is(JobStatus.PENDING),
                sa.or_(jobs.c.retry_after.is_(None), jobs.c.retry_after <= now),
            )
            .order_by(jobs.c.priority.desc(), jobs.c.created_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte("due")
            # Evaluated once: as `id IN (subquery)` PostgreSQL may re-run the LIMIT subquery
            # and, skipping rows it has just locked, claim more than `limit`.
            .prefix_with("MATERIALIZED")
        )
        claim = (
            sa.update(jobs)
            .where(jobs.c.id == due.c.id, status_is(JobStatus.PENDING))
            .values(
                status=JobStatus.RUNNING,
                attempts=jobs.c.attempts + 1,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                worker_id=worker_id,
                retry_after=None,
                started_at=now,
                updated_at=now,
            )
            .returning(
                jobs.c.id,
                jobs.c.url,
                jobs.c.domain,
                jobs.c.tenant,
                jobs.c.attempts,
                jobs.c.max_attempts,
                jobs.c.deferrals,
            )
        )
        async with self.db.write() as conn:
            rows = (await conn.execute(claim)).all()
            if not rows:
                return []
            await conn.execute(
                sa.insert(attempts),
                [
                    {
                        "job_id": r.id,
                        "number": r.attempts,
                        "worker_id": worker_id,
                        "started_at": now,
                    }
                    for r in rows
                ],
            )
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
                now,
            )
            for r in rows
        ]

    async def extend_leases(self, worker_id: str, job_ids: list[str], until: datetime) -> int:
        """Heartbeat: push out the leases this worker still holds. Returns how many it holds."""
        if not job_ids:
            return 0
        stmt = (
            sa.update(jobs)
            .where(
                jobs.c.id.in_(job_ids), jobs.c.worker_id == worker_id, status_is(JobStatus.RUNNING)
            )
            .values(lease_expires_at=until)
        )
        async with self.db.write() as conn:
            return (await conn.execute(stmt)).rowcount

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
            "finished_at": now,
        }
        outcome = {"outcome": AttemptOutcome.SUCCEEDED, "http_status": result.http_status}
        return await self._finish(lease, values, outcome, now, duration_ms)

    async def record_failure(
        self,
        lease: Lease,
        failure: Failure,
        decision: Reschedule | MarkDead,
        now: datetime,
        duration_ms: int,
    ) -> bool:
        """Reschedule or kill the job after a failed attempt. False if the lease was lost."""
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
        return await self._finish(lease, values, outcome, now, duration_ms)

    async def release(self, lease: Lease, now: datetime) -> bool:
        """Graceful shutdown: hand the job back, due now, without spending the attempt."""
        values = {"status": JobStatus.PENDING, "attempts": jobs.c.attempts - 1, "retry_after": None}
        outcome = {"outcome": AttemptOutcome.INTERRUPTED, "message": "worker shut down"}
        duration_ms = int((now - lease.claimed_at).total_seconds() * 1000)
        return await self._finish(lease, values, outcome, now, duration_ms)

    async def _finish(
        self,
        lease: Lease,
        job_values: dict[str, Any],
        attempt_values: dict[str, Any],
        now: datetime,
        duration_ms: int,
    ) -> bool:
        stmt = (
            sa.update(jobs)
            .where(
                jobs.c.id == lease.id,
                status_is(JobStatus.RUNNING),
                jobs.c.worker_id == lease.worker_id,
                jobs.c.attempts == lease.attempt,
            )
            .values(lease_expires_at=None, worker_id=None, updated_at=now, **job_values)
        )
        async with self.db.write() as conn:
            if (await conn.execute(stmt)).rowcount != 1:
                return False
            await _close_attempt(
                conn,
                lease.id,
                lease.attempt,
                {"finished_at": now, "duration_ms": duration_ms, **attempt_values},
            )
        return True

    async def reclaim_expired(self, now: datetime) -> list[Reclaimed]:
        """Take back running jobs whose lease expired (their worker died or hung).

        The lost attempt counts: it is recorded as interrupted, and a job with no budget
        left is dead (`lease_expired`); the others are pending and due now.
        """
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
                updated_at=now,
                **_last_error(Failure(ErrorKind.TRANSIENT, "LeaseExpired", message), now),
            )
            .returning(jobs.c.id, jobs.c.attempts, jobs.c.max_attempts, jobs.c.status)
        )
        async with self.db.write() as conn:
            rows = (await conn.execute(stmt)).all()
            for row in rows:
                await _close_attempt(
                    conn,
                    row.id,
                    row.attempts,
                    {"finished_at": now, "outcome": AttemptOutcome.INTERRUPTED, "message": message},
                )
        return [
            Reclaimed(r.id, r.attempts, r.max_attempts, r.status == JobStatus.DEAD) for r in rows
        ]

    async def next_due_at(self) -> datetime | None:
        """The earliest `retry_after` among waiting jobs, so an idle worker knows when to look."""
        stmt = sa.select(sa.func.min(jobs.c.retry_after)).where(
            status_is(JobStatus.PENDING), jobs.c.retry_after.is_not(None)
        )
        async with self.db.read() as conn:
            return (await conn.execute(stmt)).scalar()


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
