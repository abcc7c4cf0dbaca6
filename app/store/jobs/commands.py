"""The operators' verbs on jobs: retry, refresh, cancel, delete, one or in bulk (submits:
`app.store.jobs.submits`).

Each change is guarded on the status it expects (`WHERE id = ... AND status = ...`), so a
job that moved meanwhile is a `StateConflict`, not a corruption; work made due wakes the
workers (`on_submit`, the backend's notify). Never claims or records an attempt: that is
the worker's side (`app.store.claim`, `app.store.record`). Tenants' pending quotas are
checked through `app.store.quotas`.
"""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.model import FINISHED, JobStatus
from app.store.jobs.errors import JobNotFound, StateConflict
from app.store.jobs.queries import _of, _storable
from app.store.jobs.rows import _fresh_budget
from app.store.jobs.submits import JobSubmits
from app.store.quotas import Requeue, check_room, requeue
from app.store.refreshes import REFRESHABLE, refreshed
from app.store.tables import Job, is_job_id, jobs, status_is


class JobCommands(JobSubmits):
    """The verbs of `JobStore` (its submits: `JobSubmits`); they read the jobs they change
    through `JobReads`."""

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
        matched: list[sa.ColumnElement[bool]],
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
