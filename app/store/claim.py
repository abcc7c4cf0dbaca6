"""Where a job is claimed: the one transaction that turns due pending jobs into leases.

1. Tenants with a job claimable now (`claimable_now`: due, on a domain that may take a
   fetch now), least recently served first (at most `limit` of them: each is one more
   subquery to plan, and a claim serves at most `limit` tenants anyway). A tenant whose
   jobs all wait (not due, or on paused or saturated domains) keeps its place for later
   instead of taking a turn that would find nothing.
2. Each tenant's first claimable jobs in claim order (the same predicate: not paused, under
   its in-flight limit, past its minimum interval): filtered in SQL, through the partial
   index on pending jobs per tenant, so paused domains cost no attempt.
   They are locked as they are read (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so concurrent
   claims take different jobs and never wait on each other's).
3. Lock the candidates' domain rows (in name order, so claims never deadlock) and read
   their limits again, now that no other claim can change them.
4. `app.scheduling.choose` picks the jobs: priority, tenants in turn, oldest first, domain
   limits re-checked on the locked rows.
5. Mark them running, count the attempt, lease them under a fresh random `lease_id` (the
   fencing token of every later write, `app.store.queue`); count the domains' fetches in
   flight and stamp the tenants' turns (rows updated in name order, so claims never
   deadlock); open the attempts' history rows, with how long each job had been due.
"""

import math
import uuid
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.model import JobStatus, Lease
from app.scheduling import Candidate, DomainState, choose
from app.settings import Settings
from app.store.database import Database
from app.store.dialect import lock_rows, lock_skipping
from app.store.tables import DUE_SINCE, attempts, domains, jobs, status_is, tenants


def _domain_may_start(now: datetime, settings: Settings) -> sa.ColumnElement[bool]:
    blocked = (
        sa.select(domains.c.domain)
        .where(
            domains.c.domain == jobs.c.domain,
            sa.or_(
                domains.c.paused_until > now,
                domains.c.next_start_at > now,
                domains.c.in_flight >= settings.domain_max_in_flight,
            ),
        )
        .exists()
    )
    return ~blocked


def claimable_now(now: datetime, settings: Settings) -> sa.ColumnElement[bool]:
    """A job a claim may take now: pending, due, and on a domain that may start a fetch.
    The one predicate behind the look before a claim, the tenants' turn and the candidates."""
    return sa.and_(
        status_is(JobStatus.PENDING),
        sa.or_(jobs.c.retry_after.is_(None), jobs.c.retry_after <= now),
        _domain_may_start(now, settings),
    )


async def anything_claimable(conn: AsyncConnection, now: datetime, settings: Settings) -> bool:
    """Is any job claimable now? A cheap look before a claim: the first row in claim order
    that qualifies ends it."""
    first = (
        sa.select(jobs.c.id)
        .where(claimable_now(now, settings))
        .order_by(jobs.c.priority.desc(), jobs.c.created_at)
        .limit(1)
    )
    return (await conn.execute(first)).first() is not None


def find_candidates(
    conn: sa.Connection, limit: int, now: datetime, settings: Settings
) -> tuple[dict[str, datetime | None], list[Candidate]]:
    """Steps 1 and 2: the waiting tenants (with when each was last served) and their
    candidates. In a write transaction the candidates are locked as they are read."""
    # The tenant's first claimable job in index order, not EXISTS: PostgreSQL drops an
    # EXISTS's ORDER BY and LIMIT and may then read the tenant's whole pending list (bitmap
    # scan) to find one row; walking ix_jobs_tenant_claim in order stops at the first.
    first_claimable = (
        sa.select(jobs.c.id)
        .where(jobs.c.tenant == tenants.c.tenant, claimable_now(now, settings))
        .order_by(jobs.c.priority.desc(), jobs.c.created_at)
        .limit(1)
        .scalar_subquery()
    )
    waiting = (
        sa.select(tenants.c.tenant, tenants.c.last_served_at)
        .where(first_claimable.is_not(None))
        .order_by(tenants.c.last_served_at.asc().nulls_first(), tenants.c.tenant)
        .limit(limit)
    )
    last_served = {row.tenant: row.last_served_at for row in conn.execute(waiting)}
    if not last_served:
        return last_served, []

    # Twice the share each tenant would get in turn: room for jobs that domain limits turn
    # away within this claim, without locking far more candidates than one claim takes.
    per_tenant = min(2 * limit, max(2, math.ceil(2 * limit / len(last_served))))
    firsts = [
        lock_skipping(
            sa.select(
                jobs.c.id,
                jobs.c.tenant,
                jobs.c.domain,
                jobs.c.priority,
                jobs.c.created_at,
                DUE_SINCE.label("due_since"),
            )
            .where(jobs.c.tenant == tenant, claimable_now(now, settings))
            .order_by(jobs.c.priority.desc(), jobs.c.created_at)
            .limit(per_tenant)
        ).subquery()
        for tenant in last_served
    ]
    union = sa.union_all(*(sa.select(first) for first in firsts))
    return last_served, [Candidate(*row) for row in conn.execute(union)]


async def claim(
    database: Database,
    worker_id: str,
    limit: int,
    now: datetime,
    lease_seconds: float,
    settings: Settings,
    look_first: bool = True,
) -> list[Lease]:
    """Atomically take up to `limit` claimable jobs: running, attempt counted, leased to
    `worker_id` under a fresh `lease_id`. With `look_first`, a cheap read says first whether
    anything is claimable (skip it when the last claim was full: there surely is)."""
    # Look before taking the write lock: an idle worker polling with write transactions
    # would starve the writers of other processes on SQLite.
    if look_first:
        async with database.read() as conn:
            if not await anything_claimable(conn, now, settings):
                return []
    return await database.transact(
        lambda conn: claim_in(conn, worker_id, limit, now, lease_seconds, settings)
    )


def claim_in(
    conn: sa.Connection,
    worker_id: str,
    limit: int,
    now: datetime,
    lease_seconds: float,
    settings: Settings,
) -> list[Lease]:
    """Run steps 1-5 in the caller's write transaction."""
    last_served, candidates = find_candidates(conn, limit, now, settings)
    if not candidates:
        return []

    lock_domains = lock_rows(
        sa.select(domains)
        .where(domains.c.domain.in_(sorted({c.domain for c in candidates})))
        .order_by(domains.c.domain)
    )
    states = {
        row.domain: DomainState(row.in_flight, row.next_start_at, row.paused_until)
        for row in conn.execute(lock_domains)
    }
    chosen = choose(candidates, last_served, states, limit, now, settings)
    if not chosen:
        return []

    claim = (
        sa.update(jobs)
        .where(jobs.c.id.in_([c.id for c in chosen]), status_is(JobStatus.PENDING))
        .values(
            status=JobStatus.RUNNING,
            attempts=jobs.c.attempts + 1,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            worker_id=worker_id,
            # One token for every job of this claim is enough: a claim takes a job once, and
            # the next claim of the job writes a new token.
            lease_id=uuid.uuid4().hex,
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
            jobs.c.lease_id,
        )
    )
    due_since = {c.id: c.due_since for c in chosen}
    rows = (conn.execute(claim)).all()
    _count_starts(conn, chosen, now, settings)
    conn.execute(
        sa.insert(attempts),
        [
            {
                "job_id": r.id,
                "number": r.attempts,
                "worker_id": worker_id,
                "started_at": now,
                "queue_lag_ms": _lag_ms(due_since[r.id], now),
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
            r.lease_id,
            now,
            # When it became due, read before the claim overwrote it: for the queue-lag metric.
            due_since[r.id],
        )
        for r in rows
    ]


def _lag_ms(due_since: datetime | None, now: datetime) -> int | None:
    """How long a job had been due when claimed, for the dashboard's queue lag; never below
    0 (another host's clock may run ahead)."""
    if due_since is None:
        return None
    return max(0, int((now - due_since).total_seconds() * 1000))


def _count_starts(
    conn: sa.Connection, chosen: list[Candidate], now: datetime, settings: Settings
) -> None:
    starts: dict[str, int] = {}
    for candidate in chosen:
        starts[candidate.domain] = starts.get(candidate.domain, 0) + 1
    interval = settings.domain_min_interval_seconds
    next_start = now + timedelta(seconds=interval) if interval else None
    conn.execute(
        sa.update(domains)
        .where(domains.c.domain == sa.bindparam("d"))
        .values(
            in_flight=domains.c.in_flight + sa.bindparam("n"),
            last_started_at=now,
            next_start_at=next_start,
            updated_at=now,
        ),
        [{"d": domain, "n": n} for domain, n in sorted(starts.items())],
    )
    # Tenants served in this claim keep their turn order: a microsecond apart. The rows are
    # updated in name order, like the domains': two claims that serve the same tenants in
    # different turn orders would otherwise lock them crosswise and deadlock (PostgreSQL).
    turns = {
        t: now + timedelta(microseconds=i)
        for i, t in enumerate(dict.fromkeys(c.tenant for c in chosen))
    }
    conn.execute(
        sa.update(tenants)
        .where(tenants.c.tenant == sa.bindparam("t"))
        .values(last_served_at=sa.bindparam("at")),
        [{"t": t, "at": at} for t, at in sorted(turns.items())],
    )
