"""Submits: new jobs inserted all or nothing, or answered by a job the tenant has already.

`submit` inserts every job it is given. `submit_each` first looks for the job that answers
each one: the tenant's job under the same idempotency key (the same body, or
`IdempotencyConflict`), or for a `unique` one a job of its URL's key (`app.rules.url_key`)
that is pending or running, or succeeded within its `max_age`; jobs of one call answer
each other the same way. It inserts the rest. The look settles no race: the unique indexes
do (the idempotency key's, and `uq_jobs_unique_key` over the jobs that hold their URL
key): an insert one of them refuses looks again, and is answered by the job that won.
Never claims, retries nor refreshes (`app.store.jobs.commands`).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from app.model import JobStatus, NewJob
from app.rules.scheduling import waiting_for
from app.rules.url_key import url_hash
from app.store.backends.writes import NewRows
from app.store.jobs.errors import IdempotencyConflict
from app.store.jobs.queries import _shown
from app.store.jobs.reads import JobReads
from app.store.jobs.rows import _key_of, _row, _submitted, _url_row
from app.store.quotas import QuotaExceeded, pending_count
from app.store.tables import (
    Job,
    UTCDateTime,
    domains,
    job_urls,
    jobs,
    new_domain,
    tenants,
)

LOOKS = 4
"""How many times `submit_each` looks and inserts before it gives up: each refused insert
means another submit won a key, which the next look finds."""

_ACTIVE = (JobStatus.PENDING.value, JobStatus.RUNNING.value)


@dataclass(frozen=True)
class Submitted:
    """What answers one job of a submit: a job, and whether this submit made it."""

    job: Job
    created: bool


class JobSubmits(JobReads):
    """The submits of `JobStore`; they read the jobs that answer them through `JobReads`."""

    on_submit: Callable[[int | None], None]
    max_pending: int

    async def submit(self, new_jobs: Sequence[NewJob]) -> list[Job]:
        """Insert jobs, all or nothing, and wake the workers. QuotaExceeded, nothing stored,
        if they would give a tenant more pending jobs than `max_pending`."""
        return await self._insert(new_jobs, [_key_of(new) for new in new_jobs])

    async def _insert(
        self,
        new_jobs: Sequence[NewJob],
        keys: Sequence[str],
        held: Sequence[int | None] | None = None,
    ) -> list[Job]:
        """`submit` of jobs whose URLs' keys are `keys`; `held`: the digest of each one's
        key if it holds it (`JobFields.unique_key`). IntegrityError if a unique index
        refuses one."""
        if self.max_pending:
            await self._within_quota(new_jobs)
        now = self.clock()
        rows = [_row(new, now, None if held is None else held[i]) for i, new in enumerate(new_jobs)]
        urls = [_url_row(row, key) for row, key in zip(rows, keys, strict=True)]
        new_domains = [new_domain(d) for d in sorted({r["domain"] for r in rows})]
        new_tenants = [{"tenant": t} for t in sorted({r["tenant"] for r in rows})]

        top = max(row["priority"] for row in rows)
        await self.db.insert_and_wake(
            [
                NewRows(jobs, rows),
                NewRows(job_urls, urls),
                NewRows(domains, new_domains, skip_existing=True),
                NewRows(tenants, new_tenants, skip_existing=True),
            ],
            top,
        )
        self.on_submit(top)
        # Not read back: a new job says it is not due yet, never what its domain does.
        return [
            _submitted(row, key).held_back_by(waiting_for(row["retry_after"], None, now, None))
            for row, key in zip(rows, keys, strict=True)
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

    async def submit_each(self, new_jobs: Sequence[NewJob]) -> list[Submitted]:
        """Each job answered by one the tenant has (its idempotency key's; for a `unique`
        one, its URL key's), or made: all those made or none. IdempotencyConflict for a key
        given with another body; QuotaExceeded as `submit`."""
        keys = [_key_of(new) for new in new_jobs]
        holding, answered_before = True, -1
        for look in range(LOOKS):
            # An idempotency key's job answers first.
            found = await self._by_urls(new_jobs, keys) | await self._by_keys(new_jobs)
            answers: list[Job | int | None] = [found.get(i) for i in range(len(new_jobs))]
            made = _answered_within(new_jobs, keys, answers)
            if not made:
                return _submitted_as(answers, {})
            held = [url_hash(keys[i]) if holding and new_jobs[i].unique else None for i in made]
            try:
                inserted = await self._insert(
                    [new_jobs[i] for i in made], [keys[i] for i in made], held
                )
            except IntegrityError:
                answered = len(new_jobs) - len(made)
                if look == LOOKS - 1:
                    raise
                # Refused, and no other submit's job found since: two keys of one digest.
                holding = holding and answered > answered_before
                answered_before = answered
                continue
            return _submitted_as(answers, dict(zip(made, inserted, strict=True)))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _by_keys(self, new_jobs: Sequence[NewJob]) -> dict[int, Job]:
        """The jobs already under the idempotency keys of `new_jobs`, by place;
        IdempotencyConflict for one with another body."""
        wanted = {(new.tenant, new.idempotency_key) for new in new_jobs if new.idempotency_key}
        if not wanted:
            return {}
        stmt = _shown().where(
            jobs.c.tenant.in_(sorted({tenant for tenant, _ in wanted})),
            jobs.c.idempotency_key.in_(sorted({key for _, key in wanted if key})),
        )
        existing = {(job.tenant, job.idempotency_key): job for job in await self._fetch(stmt)}
        found: dict[int, Job] = {}
        for i, new in enumerate(new_jobs):
            job = existing.get((new.tenant, new.idempotency_key))
            if new.idempotency_key and job is not None:
                if job.idempotency_fingerprint != new.fingerprint:
                    raise _conflict(new)
                found[i] = job
        return found

    async def _by_urls(self, new_jobs: Sequence[NewJob], keys: Sequence[str]) -> dict[int, Job]:
        """The job that answers each `unique` one of `new_jobs` (by place), of those the
        tenant has of its URL's key: one that holds the key, else the newest pending or
        running, else the last to succeed within the job's `max_age`. A light read of the
        candidates first: most unique submits of a new URL find none."""
        unique = [i for i, new in enumerate(new_jobs) if new.unique]
        if not unique:
            return {}
        now = self.clock()
        ages = [age for i in unique if (age := new_jobs[i].max_age) is not None]
        params = {
            "hashes": sorted({url_hash(keys[i]) for i in unique}),
            "tenants": sorted({new_jobs[i].tenant for i in unique}),
            "since": now - timedelta(seconds=max(ages)) if ages else None,
        }
        candidates: dict[tuple[str, str], list[Any]] = {}
        async with self.db.read() as conn:
            for row in await conn.execute(_CANDIDATES, params):
                candidates.setdefault((row.tenant, row.url_key), []).append(row)
        chosen: dict[int, str] = {}
        for i in unique:
            new = new_jobs[i]
            fits = [
                row
                for row in candidates.get((new.tenant, keys[i]), [])
                if row.status in _ACTIVE or _within(row, new.max_age, now)
            ]
            if fits:
                chosen[i] = max(fits, key=_preference).id
        if not chosen:
            return {}
        read = {
            job.id: job
            for job in await self._fetch(_shown().where(jobs.c.id.in_(set(chosen.values()))))
        }
        # A job deleted since the look answers nothing: the insert settles it.
        return {i: read[job_id] for i, job_id in chosen.items() if job_id in read}


_CANDIDATES = (
    sa.select(
        jobs.c.id,
        jobs.c.tenant,
        jobs.c.status,
        jobs.c.unique_key,
        jobs.c.created_at,
        jobs.c.finished_at,
        job_urls.c.url_key,
    )
    .select_from(job_urls.join(jobs, jobs.c.id == job_urls.c.job_id))
    .where(
        job_urls.c.url_hash.in_(sa.bindparam("hashes", expanding=True)),
        job_urls.c.tenant.in_(sa.bindparam("tenants", expanding=True)),
        sa.or_(
            jobs.c.status.in_(_ACTIVE),
            sa.and_(
                jobs.c.status == JobStatus.SUCCEEDED.value,
                # Null when no job asks for a max_age: no success answers.
                jobs.c.finished_at >= sa.bindparam("since", type_=UTCDateTime),
            ),
        ),
    )
)
"""The jobs of some URL keys' digests (`hashes`) and `tenants` that may answer a unique
submit: pending or running, or succeeded `since`."""


def _within(job: sa.Row[Any], max_age: float | None, now: datetime) -> bool:
    """Whether `job` succeeded within `max_age` seconds of `now`."""
    if max_age is None or job.status != JobStatus.SUCCEEDED or job.finished_at is None:
        return False
    finished: datetime = job.finished_at
    return finished >= now - timedelta(seconds=max_age)


def _preference(job: sa.Row[Any]) -> tuple[Any, ...]:
    """The order among a URL key's jobs, the best last: the one that holds the key, the
    pending and running, the newest."""
    active = job.status in _ACTIVE
    return (active and job.unique_key is not None, active, job.finished_at or job.created_at)


def _answered_within(
    new_jobs: Sequence[NewJob], keys: Sequence[str], answers: list[Job | int | None]
) -> list[int]:
    """The places of the jobs to make; each other unanswered one is answered (in `answers`)
    by the place of an earlier job of the call that is made: one under the same
    idempotency key (the same body, or IdempotencyConflict), or for a `unique` one, one of
    its URL's key."""
    made: list[int] = []
    by_key: dict[tuple[str, str], int] = {}
    by_url: dict[tuple[str, str], int] = {}
    for i, new in enumerate(new_jobs):
        if answers[i] is not None:
            continue
        idempotency = (new.tenant, new.idempotency_key) if new.idempotency_key else None
        if idempotency and idempotency in by_key:
            first = by_key[idempotency]
            if new_jobs[first].fingerprint != new.fingerprint:
                raise _conflict(new)
            answers[i] = first
        elif new.unique and (new.tenant, keys[i]) in by_url:
            answers[i] = by_url[(new.tenant, keys[i])]
        else:
            made.append(i)
            by_url.setdefault((new.tenant, keys[i]), i)
            if idempotency:
                by_key[idempotency] = i
    return made


def _submitted_as(answers: Sequence[Job | int | None], inserted: dict[int, Job]) -> list[Submitted]:
    """Each job's answer: made by this call (`inserted`, by place), or another's."""
    submitted = []
    for i, answer in enumerate(answers):
        if answer is None:
            submitted.append(Submitted(inserted[i], True))
        elif isinstance(answer, int):
            submitted.append(Submitted(inserted[answer], False))
        else:
            submitted.append(Submitted(answer, False))
    return submitted


def _conflict(new: NewJob) -> IdempotencyConflict:
    return IdempotencyConflict(
        f"Idempotency-Key {new.idempotency_key!r} was used with a different request"
    )
