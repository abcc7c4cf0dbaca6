"""The claim's SQL that both backends run as written (`app.store.claim` says the steps).

The filter of claimable jobs, the look before a claim, step 0's move, the tenants' walk,
each tenant's first jobs, the locks of step 3 and the take's updates: each backend's
`claim` module runs the ones it shares its own way, and builds the rest from them.
Built once, at import, with bound parameters, so each claim only binds values and
SQLAlchemy's compiled-statement cache always hits (docs/design/claim.md).
"""

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa

from app.model import CrawlPage, JobStatus, Previous
from app.rules.scheduling import Candidate, DomainState, ShareRules
from app.store.dialect import lock_rows, lock_skipping
from app.store.tables import DUE_SINCE, UTCDateTime, domains, jobs, ready, status_is, tenants


def _now() -> sa.BindParameter[datetime]:
    return sa.bindparam("now", type_=UTCDateTime)


_ONE = sa.literal_column("1", sa.Integer)
"""LIMIT 1 written out: bound, PostgreSQL's generic plan assumes many rows for any value,
which costs the tenants' walk many times more and, with many tenants, compiles it (JIT) on
every claim (docs/design/claim.md)."""


_ZERO = sa.literal_column("0", sa.Integer)
"""OFFSET 0 written out, a fence (`_IN_TURN`): a constant to the planner, as `_ONE` is."""


def _blocks() -> sa.ColumnElement[bool]:
    """A domain that may not start a fetch now: paused, inside its minimum interval, or at its
    in-flight limit."""
    return sa.or_(
        domains.c.paused_until > _now(),
        domains.c.next_start_at > _now(),
        domains.c.in_flight >= sa.bindparam("domain_limit", type_=sa.Integer),
    )


_JOBS_AND_DOMAINS = jobs.outerjoin(domains, domains.c.domain == jobs.c.domain)
"""Each job beside its domain's row (none if the row is missing: `app.store.claim`)."""


def claimable_now(select: sa.Select[Any]) -> sa.Select[Any]:
    """`select` of the jobs a claim may take now: ready (pending, no `retry_after`: due, or
    moved in by step 0), and on a domain that may start a fetch. The one filter behind the
    look before a claim, the tenants' turn and the candidates (bound: `now`,
    `domain_limit`).

    It reads each job beside its domain's row (`_JOBS_AND_DOMAINS`, an outer join on the
    row's primary key), so a claim reads the rows of its candidates' domains only, however
    many rows the table holds (one per host ever submitted, until retention deletes it),
    where the set of blocked domains computed once per statement read the whole table. A
    join, not a subquery per job: for a table of a few pages, PostgreSQL answers a subquery
    by scanning the table for each job it asks about, where a join walks the primary key or
    hashes the table once; and not NOT EXISTS, which it turns into an anti join that may
    hash the whole table once per tenant, however large (docs/design/claim.md)."""
    return select.select_from(_JOBS_AND_DOMAINS).where(
        ready(), ~sa.func.coalesce(_blocks(), sa.false())
    )


STAGED_AT_MOST = 100
"""Waiting jobs one claim moves in at most: after an outage many come due at once, and a
claim should stay short (each move is a row's update: docs/design/claim.md); the next
claims move in the rest, oldest due first. Three times a full claim of 32, so jobs come due
faster than claims take them only in such a burst."""

_CAME_DUE = sa.select(jobs.c.id).where(status_is(JobStatus.PENDING), jobs.c.retry_after <= _now())
"""Waiting jobs whose `retry_after` has passed (ix_jobs_pending_retry_after)."""

STAGE = (
    sa.update(jobs)
    .where(
        jobs.c.id.in_(
            lock_skipping(_CAME_DUE.order_by(jobs.c.retry_after).limit(STAGED_AT_MOST), of=jobs)
        )
    )
    # Both read the row as it was: `updated_at` becomes when the job came due.
    .values(retry_after=None, updated_at=jobs.c.retry_after)
)
"""Step 0: waiting jobs that came due move among the ready ones (bound: `now`). A retry, a
deferral or a `not_before` keeps its `retry_after` outside the claim's indexes
(`app.store.tables.READY`) until a claim moves it in, oldest due first, as Oban's stager and
River's scheduler make scheduled jobs available. It is when it came due that moves in, as
its `updated_at`: the queue lag still counts from then."""

ANY_CAME_DUE = _CAME_DUE.limit(_ONE)


def bound(now: datetime, rules: ShareRules, **values: object) -> dict[str, object]:
    """The parameters `claimable_now` binds, and `values`."""
    return {"now": now, "domain_limit": rules.domain_max_in_flight, **values}


_TENANT_LIMIT = sa.bindparam("tenant_limit", type_=sa.Integer)
"""INGEST_TENANT_MAX_IN_FLIGHT; 0: no limit."""

_EVERYONE = tenants.alias("everyone")
_FLOORED = sa.select(
    sa.func.coalesce(sa.func.max(_EVERYONE.c.last_pass), 0).label("floor")
).subquery("floored")
_FLOOR = _FLOORED.c.floor
"""The highest pass any tenant was last served at: no tenant's pass counts below it
(`app.rules.scheduling`). One read of the tenants' rows per claim."""


ANYTHING_CLAIMABLE = (
    claimable_now(sa.select(jobs.c.id))
    .order_by(jobs.c.priority.desc(), jobs.c.created_at)
    .limit(_ONE)
)

_TURN = sa.case((tenants.c.next_pass > _FLOOR, tenants.c.next_pass), else_=_FLOOR).label("turn")

_IN_TURN = (
    sa.select(
        tenants.c.tenant,
        tenants.c.next_pass,
        tenants.c.last_served_at,
        tenants.c.in_flight,
        _FLOOR,
        _TURN,
    )
    .select_from(tenants.join(_FLOORED, sa.true()))
    .where(sa.or_(_TENANT_LIMIT == 0, tenants.c.in_flight < _TENANT_LIMIT))
    .order_by(_TURN, tenants.c.last_served_at.asc().nulls_first(), tenants.c.tenant)
    # A fence: the tenants are sorted first, and the walk below asks about each in turn
    # until it has found enough; PostgreSQL would otherwise move the question inside and
    # ask it of every tenant before sorting (docs/design/claim.md).
    .offset(_ZERO)
    .subquery("in_turn")
)
"""The tenants under their in-flight quota in turn order: lowest pass first, never below
the floor, then least recently served."""

# The tenant's first claimable job in index order, not EXISTS: PostgreSQL drops an EXISTS's
# ORDER BY and LIMIT and may then read the tenant's whole pending list (bitmap scan) to find
# one row; walking ix_jobs_tenant_claim in order stops at the first. The outer ORDER BY is
# the inner one, which PostgreSQL sees is already done.
WAITING_TENANTS = (
    sa.select(
        _IN_TURN.c.tenant,
        _IN_TURN.c.next_pass,
        _IN_TURN.c.last_served_at,
        _IN_TURN.c.in_flight,
        _IN_TURN.c.floor,
    )
    .where(
        claimable_now(sa.select(jobs.c.id).where(jobs.c.tenant == _IN_TURN.c.tenant))
        .order_by(jobs.c.priority.desc(), jobs.c.created_at)
        .limit(_ONE)
        .scalar_subquery()
        .is_not(None)
    )
    .order_by(_IN_TURN.c.turn, _IN_TURN.c.last_served_at.asc().nulls_first(), _IN_TURN.c.tenant)
    .limit(sa.bindparam("tenants", type_=sa.Integer))
)
"""Step 1: (tenant, next pass, last served at, in flight, floor) of the first `tenants`
tenants in turn with a job claimable now (at most a claim's `limit`: each is one more
subquery to plan, and a claim serves at most `limit` tenants anyway). The tenants are put
in turn order first and asked in turn until enough have a job claimable, so a claim among
many backlogged tenants asks about as many as it serves. A tenant whose jobs all wait (not
due, or on paused or saturated domains) or that is at its quota is not looked at, and takes
no turn."""


def firsts(tenant: sa.ColumnElement[str], count: sa.ColumnElement[int]) -> sa.Select[Any]:
    """Step 2: `tenant`'s first `count` claimable jobs in claim order, filtered in SQL
    through the partial index on pending jobs per tenant (so paused domains cost no
    attempt), locked as they are read (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so concurrent
    claims take different jobs and never wait on each other's): the Candidate's columns,
    then the Leasable's."""
    candidates = sa.select(
        jobs.c.id,
        jobs.c.tenant,
        jobs.c.domain,
        jobs.c.priority,
        jobs.c.created_at,
        DUE_SINCE.label("due_since"),
        # What the lease needs beyond the candidate: read here, not returned by the take
        # (the rows are locked, so the take changes them as read).
        jobs.c.url,
        jobs.c.attempts,
        jobs.c.max_attempts,
        jobs.c.deferrals,
        jobs.c.refresh_every,
        jobs.c.content_version,
        jobs.c.result_etag,
        jobs.c.result_last_modified,
        jobs.c.result_sha256,
        jobs.c.result_text_sha256,
        jobs.c.crawl_id,
        jobs.c.crawl_depth,
    ).where(jobs.c.tenant == tenant)
    return lock_skipping(
        claimable_now(candidates).order_by(jobs.c.priority.desc(), jobs.c.created_at).limit(count),
        of=jobs,
    )


DOMAIN_STATE = (
    domains.c.domain,
    domains.c.in_flight,
    domains.c.next_start_at,
    domains.c.paused_until,
    domains.c.crawl_delay_seconds,
)
"""What `choose` reads of a domain's row (`DomainState`), its name first: its limits (with
the Crawl-delay a worker last read of robots.txt: `app.rules.scheduling.min_interval`),
read again once locked (step 3), now that no other claim can change them."""

LOCK_DOMAINS = lock_rows(
    sa.select(*DOMAIN_STATE)
    .where(domains.c.domain.in_(sa.bindparam("domains", expanding=True)))
    .order_by(domains.c.domain)
)

LOCK_TENANTS = lock_rows(
    sa.select(tenants.c.tenant, tenants.c.next_pass, tenants.c.last_served_at, tenants.c.in_flight)
    .where(tenants.c.tenant.in_(sa.bindparam("tenants", expanding=True)))
    .order_by(tenants.c.tenant)
)


def take_update(which: sa.ColumnElement[bool]) -> sa.Update:
    """Step 5's take of the pending jobs `which` names: running, attempt counted, leased."""
    return (
        sa.update(jobs)
        .where(which, status_is(JobStatus.PENDING))
        .values(
            status=JobStatus.RUNNING.value,
            attempts=jobs.c.attempts + 1,
            lease_expires_at=sa.bindparam("until", type_=UTCDateTime),
            worker_id=sa.bindparam("worker"),
            lease_id=sa.bindparam("lease"),
            retry_after=None,
            started_at=_now(),
            updated_at=_now(),
        )
    )


def starts_update(
    domain: sa.ColumnElement[str], n: sa.ColumnElement[int], next_start: sa.ColumnElement[datetime]
) -> sa.Update:
    """`n` fetches started on `domain`: counted in flight, the next start not before
    `next_start`."""
    return (
        sa.update(domains)
        .where(domains.c.domain == domain)
        .values(
            in_flight=domains.c.in_flight + n,
            last_started_at=_now(),
            next_start_at=next_start,
            updated_at=_now(),
        )
    )


def _start() -> sa.ColumnElement[int]:
    """The pass a tenant's first job of this claim starts at: its row's, never below the
    claim's floor (`app.rules.scheduling`), read from the row as the update finds it."""
    floor = sa.bindparam("floor", type_=sa.BigInteger)
    return sa.case((tenants.c.next_pass > floor, tenants.c.next_pass), else_=floor)


# Relative to the row, like the domains' count: a concurrent claim that served the same
# tenant (PostgreSQL; the rows are not locked before `choose` without a quota) committed
# its advance first, and this one adds to it.
def turns_update(
    tenant: sa.ColumnElement[str],
    n: sa.ColumnElement[int],
    to_last: sa.ColumnElement[int],
    to_next: sa.ColumnElement[int],
    at: sa.ColumnElement[datetime],
) -> sa.Update:
    """`tenant` served `n` jobs: counted in flight, its passes advanced from its start by
    `to_last` and `to_next`, its turn stamped `at`."""
    return (
        sa.update(tenants)
        .where(tenants.c.tenant == tenant)
        .values(
            in_flight=tenants.c.in_flight + n,
            last_pass=_start() + to_last,
            next_pass=_start() + to_next,
            last_served_at=at,
        )
    )


class Leasable(NamedTuple):
    """What a candidate's lease needs beyond the candidate, read with it (`firsts`)."""

    url: str
    attempts: int
    max_attempts: int
    deferrals: int
    refresh_every: int | None
    content_version: int | None
    etag: str | None
    last_modified: str | None
    body_sha256: str | None
    text_sha256: str | None
    crawl_id: str | None
    crawl_depth: int | None

    def crawl(self) -> CrawlPage | None:
        """Its place in its crawl, if a crawl made it."""
        if self.crawl_id is None:
            return None
        return CrawlPage(self.crawl_id, self.crawl_depth or 0)

    def previous(self) -> Previous | None:
        """What the job's last success stored, if it had one: the claim is a refresh."""
        if self.content_version is None:
            return None
        return Previous(
            self.content_version,
            self.etag,
            self.last_modified,
            self.body_sha256,
            self.text_sha256,
        )


CANDIDATE_COLUMNS = len(dataclasses.fields(Candidate))
"""A candidate row's first columns (`firsts`) are the Candidate; the rest, `Leasable`."""


class Candidates(NamedTuple):
    """What step 2 found (and step 3, where a backend runs them together)."""

    candidates: list[Candidate]
    leasable: dict[str, Leasable]
    """What each candidate's lease would need, by job id."""
    domains: dict[str, DomainState] | None = None
    """The candidates' domains' rows, locked, where step 3 ran with step 2 and found them
    all; else None, for the claim to lock them."""


def candidates_of(
    rows: Sequence[Any], leasable: Sequence[Any], domains: dict[str, DomainState] | None = None
) -> Candidates:
    """The candidates of `rows` (`firsts`' columns first), each with its `leasable` columns."""
    return Candidates(
        [Candidate(*row[:CANDIDATE_COLUMNS]) for row in rows],
        {row[0]: Leasable(*rest) for row, rest in zip(rows, leasable, strict=True)},
        domains,
    )


def domain_state(
    in_flight: int,
    next_start_at: datetime | None,
    paused_until: datetime | None,
    crawl_delay: float | None,
) -> DomainState:
    """A domain's row as read (`DOMAIN_STATE`, its name left out), as `choose` reads it."""
    return DomainState(in_flight, next_start_at, paused_until, crawl_delay=crawl_delay)
