"""Where a job is claimed: the one transaction that turns due pending jobs into leases.

0. Waiting jobs that came due join the ready ones (`stage_due`): a retry, a deferral or a
   `not_before` keeps its `retry_after` outside the claim's indexes (`app.store.tables.READY`)
   until a claim moves it in, oldest due first, as Oban's stager and River's scheduler
   make scheduled jobs available. It is when it came due that moves in, as its
   `updated_at`: the queue lag still counts from then.
1. Tenants with a job claimable now (`claimable_now`: due, on a domain that may take a
   fetch now) and under their in-flight quota, lowest pass first (fair share, weighted:
   `app.rules.scheduling`; a pass never counts below the floor, the highest pass any tenant was
   last served at, read in the same statement), then least recently served (at most
   `limit` of them: each is one more subquery to plan, and a claim serves at most `limit`
   tenants anyway). The tenants are put in that order first and asked in turn whether
   they have a job claimable until `limit` have, so a claim among many backlogged tenants
   asks about as many as it serves. A tenant whose jobs all wait (not due, or on paused or
   saturated domains) or that is at its quota is not looked at, and takes no turn.
2. Each tenant's first claimable jobs in claim order (the same predicate: not paused, under
   its in-flight limit, past its minimum interval): filtered in SQL, through the partial
   index on pending jobs per tenant, so paused domains cost no attempt. One statement: on
   PostgreSQL the tenants' list joined LATERAL to a subquery, on SQLite a UNION ALL of one
   subquery per tenant (`app.store.dialect.binds_lists` says why).
   They are locked as they are read (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so concurrent
   claims take different jobs and never wait on each other's).
3. Lock the candidates' domain rows, then, with a tenants' quota, their tenants' rows (each
   in name order, so claims never deadlock), and read their limits (with the Crawl-delay a
   worker last read of robots.txt: `app.rules.scheduling.min_interval`) and the tenants' jobs in
   flight again, now that no other claim can change them. A domain whose row is missing
   gets a fresh one first (`_lock_domains` says how one can be missing).
4. `app.rules.scheduling.choose` picks the jobs: priority, tenants by pass, oldest first, tenant
   quotas and domain limits re-checked on the locked rows.
5. Mark them running, count the attempt, lease them under a fresh random `lease_id` (the
   fencing token of every later write, `app.store.queue`); count the domains' and the
   tenants' jobs in flight, advance the tenants' passes and stamp their turns (rows updated
   in name order, so claims never deadlock). The attempt's history row is written once,
   when it ends (`app.store.record`), with when it started and how long the job had been
   due, which its lease carries: writing it here too cost a claim of 32 at ten million
   jobs a quarter of its time.

On PostgreSQL steps 2 and 3 are one statement and step 5's writes another, so a claim is
three round trips between its BEGIN and COMMIT, four with step 0 (SQLite runs each step's
statements apart, in its writer thread: `app.store.dialect.binds_lists`).

Why one module past 300 lines: one transaction, its statements built once at import; the
steps above read top-down.
"""

import dataclasses
import functools
import uuid
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.model import JobStatus, Lease, Previous
from app.rules.scheduling import (
    Candidate,
    DomainState,
    ShareRules,
    TenantState,
    candidates_per_tenant,
    choose,
    next_start,
    passes_after,
)
from app.store.backends import Backend
from app.store.database import Database
from app.store.dialect import (
    all_rows,
    any_found,
    any_of,
    binds_lists,
    each_of,
    lists_of,
    lock_rows,
    lock_skipping,
    locked_in_order,
    materialized,
)
from app.store.tables import (
    DUE_SINCE,
    UTCDateTime,
    domains,
    jobs,
    new_domain,
    ready,
    status_is,
    tenants,
)


def _now() -> sa.BindParameter[datetime]:
    return sa.bindparam("now", type_=UTCDateTime)


_ONE = sa.literal_column("1", sa.Integer)
"""LIMIT 1 written out: bound, PostgreSQL's plan for any value assumes a tenth of the rows,
so the tenants' walk costs it 36,000 with 100 tenants instead of 800, and past 100,000
(some 300 tenants) it compiles the walk (JIT) on every claim."""


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
"""Each job beside its domain's row (none if the row is missing: `_lock_domains`)."""


def claimable_now(select: sa.Select[Any]) -> sa.Select[Any]:
    """`select` of the jobs a claim may take now: ready (pending, no `retry_after`: due, or
    moved in by step 0), and on a domain that may start a fetch. The one filter behind the
    look before a claim, the tenants' turn and the candidates (bound: `now`,
    `domain_limit`).

    It reads each job beside its domain's row (`_JOBS_AND_DOMAINS`, an outer join on the
    row's primary key), so a claim reads the rows of its candidates' domains only, however
    many rows the table holds (one per host ever submitted, until retention deletes it):
    the set of blocked domains computed once per statement read the whole table, 2 -> 41 ms
    a claim on SQLite at 200,000 rows. A join, not a subquery per job: for a table of a few
    pages, PostgreSQL answers a subquery by scanning the table for each job it asks about
    (200 domains, a tenant's 20,000 jobs of a paused one ahead: a claim took 0.6 s), where a
    join walks the primary key or hashes the table once; and not NOT EXISTS, which it turns
    into an anti join that may hash the whole table once per tenant, however large."""
    return select.select_from(_JOBS_AND_DOMAINS).where(
        ready(), ~sa.func.coalesce(_blocks(), sa.false())
    )


STAGED_AT_MOST = 100
"""Waiting jobs one claim moves in at most: after an outage many come due at once, and a
claim should stay short (each move is a row's update: at ten million jobs 1,000 of them made
a claim take 200 ms); the next claims move in the rest, oldest due first. Three times a full
claim of 32, so jobs come due faster than claims take them only in such a burst."""

_CAME_DUE = sa.select(jobs.c.id).where(status_is(JobStatus.PENDING), jobs.c.retry_after <= _now())
"""Waiting jobs whose `retry_after` has passed (ix_jobs_pending_retry_after)."""

_STAGE = (
    sa.update(jobs)
    .where(
        jobs.c.id.in_(
            lock_skipping(_CAME_DUE.order_by(jobs.c.retry_after).limit(STAGED_AT_MOST), of=jobs)
        )
    )
    # Both read the row as it was: `updated_at` becomes when the job came due.
    .values(retry_after=None, updated_at=jobs.c.retry_after)
)

_ANY_CAME_DUE = _CAME_DUE.limit(_ONE)


def _bound(now: datetime, rules: ShareRules, **values: object) -> dict[str, object]:
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


# The claim's statements are built once, with bound parameters, so each claim only binds
# values and SQLAlchemy's compiled-statement cache always hits: building them anew cost
# more than running them (a claim of 32 among 100 tenants spent most of its time there).

_ANYTHING_CLAIMABLE = (
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
    # ask it of every tenant before sorting (100 tenants, a claim of 32: 4.4 -> 1.9 ms at
    # ten million jobs).
    .offset(_ZERO)
    .subquery("in_turn")
)
"""The tenants under their in-flight quota in turn order: lowest pass first, never below
the floor, then least recently served."""

# The tenant's first claimable job in index order, not EXISTS: PostgreSQL drops an EXISTS's
# ORDER BY and LIMIT and may then read the tenant's whole pending list (bitmap scan) to find
# one row; walking ix_jobs_tenant_claim in order stops at the first. The outer ORDER BY is
# the inner one, which PostgreSQL sees is already done.
_WAITING_TENANTS = (
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


def _firsts(tenant: sa.ColumnElement[str], count: sa.ColumnElement[int]) -> sa.Select[Any]:
    """`tenant`'s first `count` claimable jobs in claim order, locked as they are read."""
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
    ).where(jobs.c.tenant == tenant)
    return lock_skipping(
        claimable_now(candidates).order_by(jobs.c.priority.desc(), jobs.c.created_at).limit(count),
        of=jobs,
    )


def _candidates_joined() -> sa.Select[Any]:
    """The candidates of the tenants in the bound list `tenant`, each joined LATERAL to its
    first `count` jobs (the bound list beside it) (PostgreSQL)."""
    each = each_of(tenant=sa.String(), count=sa.Integer())
    firsts = _firsts(each.c.tenant, each.c.count).lateral("firsts")
    return sa.select(firsts).select_from(each).join(firsts, sa.true())


@functools.cache
def _candidates_apart(tenant_count: int) -> sa.CompoundSelect[Any]:
    """The candidates of `tenant_count` tenants (bound: t0, t1, ... and their counts n0, n1,
    ...), one subquery each, in a UNION ALL (SQLite)."""
    firsts = [
        _firsts(sa.bindparam(f"t{i}"), sa.bindparam(f"n{i}", type_=sa.Integer)).subquery()
        for i in range(tenant_count)
    ]
    return sa.union_all(*(sa.select(first) for first in firsts))


_DOMAIN_STATE = (
    domains.c.domain,
    domains.c.in_flight,
    domains.c.next_start_at,
    domains.c.paused_until,
    domains.c.crawl_delay_seconds,
)
"""What `choose` reads of a domain's row (`DomainState`), its name first."""

_LOCK_DOMAINS = lock_rows(
    sa.select(*_DOMAIN_STATE)
    .where(domains.c.domain.in_(sa.bindparam("domains", expanding=True)))
    .order_by(domains.c.domain)
)


def _candidates_locking_domains() -> sa.Select[Any]:
    """Steps 2 and 3 in one statement (PostgreSQL, `binds_lists`): the candidates
    (`_candidates_joined`), each beside its domain's row (`_DOMAIN_STATE`; none if the row is
    missing), the rows locked in name order (`locked`: each as it comes out of the sort),
    as `_LOCK_DOMAINS` locks them, a round trip earlier."""
    firsts = materialized(_candidates_joined().cte("firsts"))
    locked = materialized(
        lock_rows(
            sa.select(*_DOMAIN_STATE)
            .where(any_found(domains.c.domain, firsts.c.domain))
            .order_by(domains.c.domain)
        ).cte("locked")
    )
    return sa.select(
        firsts, *(column.label(f"locked_{column.name}") for column in locked.c)
    ).select_from(firsts.outerjoin(locked, locked.c.domain == firsts.c.domain))


_CANDIDATES_LOCKING_DOMAINS = _candidates_locking_domains()

_LOCK_TENANTS = lock_rows(
    sa.select(tenants.c.tenant, tenants.c.next_pass, tenants.c.last_served_at, tenants.c.in_flight)
    .where(tenants.c.tenant.in_(sa.bindparam("tenants", expanding=True)))
    .order_by(tenants.c.tenant)
)


def _take_update(which: sa.ColumnElement[bool]) -> sa.Update:
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


def _starts_update(
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
def _turns_update(
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


_TAKE = _take_update(jobs.c.id.in_(sa.bindparam("ids", expanding=True)))
_COUNT_STARTS = _starts_update(
    sa.bindparam("d"),
    sa.bindparam("n", type_=sa.Integer),
    sa.bindparam("next_start", type_=UTCDateTime),
)
_TURNS = _turns_update(
    sa.bindparam("t"),
    sa.bindparam("n", type_=sa.Integer),
    sa.bindparam("to_last", type_=sa.BigInteger),
    sa.bindparam("to_next", type_=sa.BigInteger),
    sa.bindparam("at", type_=UTCDateTime),
)


def _take_and_count() -> sa.Select[Any]:
    """Step 5 in one statement (PostgreSQL, `binds_lists`): the take, the domains' counts
    and the tenants' turns as data-modifying CTEs, the domains and the tenants given as bound
    lists (`each_of`), the jobs as one (`any_of`). The jobs and the domains' rows are locked
    already (steps 2 and 3); the tenants' rows, which a claim without a tenants' quota has
    not locked, are locked here first, in name order (`locked_in_order`), so two claims
    never lock them crosswise."""
    starts = each_of("starts", d=sa.String(), dn=sa.Integer(), next_start=UTCDateTime())
    turns = each_of(
        "turns",
        t=sa.String(),
        tn=sa.Integer(),
        to_last=sa.BigInteger(),
        to_next=sa.BigInteger(),
        at=UTCDateTime(),
    )
    served = locked_in_order(tenants.c.tenant, "t", "served")
    taken = _take_update(any_of(jobs.c.id, "ids")).cte("taken")
    started = _starts_update(starts.c.d, starts.c.dn, starts.c.next_start).cte("started")
    turned = (
        _turns_update(turns.c.t, turns.c.tn, turns.c.to_last, turns.c.to_next, turns.c.at)
        .where(tenants.c.tenant.in_(sa.select(served.c.tenant)))
        .cte("turned")
    )
    return sa.select(sa.literal(1)).add_cte(taken, started, served, turned)


_TAKE_AND_COUNT = _take_and_count()


async def anything_claimable(conn: AsyncConnection, now: datetime, rules: ShareRules) -> bool:
    """Is any job claimable now, or has a waiting one come due (step 0 would move it in)? A
    cheap look before a claim: the first row in claim order that qualifies ends it."""
    for look in (_ANYTHING_CLAIMABLE, _ANY_CAME_DUE):
        if (await conn.execute(look, _bound(now, rules))).first() is not None:
            return True
    return False


def stage_due(conn: sa.Connection, now: datetime) -> int:
    """Step 0: move waiting jobs that came due among the ready ones; how many moved."""
    return conn.execute(_STAGE, {"now": now}).rowcount


class _Leasable(NamedTuple):
    """What a candidate's lease needs beyond the candidate, read with it."""

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


_CANDIDATE_COLUMNS = len(dataclasses.fields(Candidate))
"""A candidate row's first columns (`_firsts`) are the Candidate; the rest, `_Leasable`
(then, on PostgreSQL, the domain's row: `_DOMAIN_COLUMNS`)."""

_DOMAIN_COLUMNS = len(_DOMAIN_STATE)


class Found(NamedTuple):
    """What steps 1 and 2 found (and step 3, where they run together)."""

    floor: int
    """No tenant's pass counts below it (`_FLOOR`)."""
    tenants: dict[str, TenantState]
    """The waiting tenants' rows as the walk read them."""
    candidates: list[Candidate]
    leasable: dict[str, _Leasable]
    """What each candidate's lease would need, by job id."""
    domains: dict[str, DomainState] | None = None
    """The candidates' domains' rows, locked, where step 3 ran with step 2 and found them
    all; else None, for `_lock_domains`."""


def find_candidates(conn: sa.Connection, limit: int, now: datetime, rules: ShareRules) -> Found:
    """Steps 1 and 2: the waiting tenants' candidates, and what each candidate's lease would
    need. In a write transaction the candidates are locked as they are read."""
    walk = _bound(now, rules, tenants=limit, tenant_limit=rules.tenant_max_in_flight)
    rows = all_rows(conn, _WAITING_TENANTS, walk)
    if not rows:
        return Found(0, {}, [], {})
    waiting = [tenant for tenant, *_ in rows]
    weights = [rules.tenant_weight(tenant) for tenant in waiting]
    counts = candidates_per_tenant(weights, limit, rules.tenant_max_in_flight)
    turns = {tenant: TenantState(*state) for tenant, *state, _ in rows}
    if binds_lists(conn.dialect.name):
        bound = _bound(now, rules, tenant=waiting, count=counts)
        found = all_rows(conn, _CANDIDATES_LOCKING_DOMAINS, bound)
        states = {
            domain: _domain_state(*state)
            for domain, *state in (row[-_DOMAIN_COLUMNS:] for row in found)
            if domain is not None
        }
        leasable = [row[_CANDIDATE_COLUMNS:-_DOMAIN_COLUMNS] for row in found]
        whole = all(row[-_DOMAIN_COLUMNS] is not None for row in found)
    else:
        lists = {f"t{i}": tenant for i, tenant in enumerate(waiting)}
        lists |= {f"n{i}": count for i, count in enumerate(counts)}
        found = all_rows(conn, _candidates_apart(len(waiting)), _bound(now, rules, **lists))
        states, whole = {}, False
        leasable = [row[_CANDIDATE_COLUMNS:] for row in found]
    return Found(
        rows[0][-1],
        turns,
        [Candidate(*row[:_CANDIDATE_COLUMNS]) for row in found],
        {row[0]: _Leasable(*rest) for row, rest in zip(found, leasable, strict=True)},
        states if whole else None,
    )


async def claim(
    database: Database,
    worker_id: str,
    limit: int,
    now: datetime,
    lease_seconds: float,
    rules: ShareRules,
    look_first: bool = True,
    stage: bool = True,
) -> list[Lease]:
    """Atomically take up to `limit` claimable jobs: running, attempt counted, leased to
    `worker_id` under a fresh `lease_id`. With `look_first`, a cheap read says first whether
    anything is claimable, where the backend needs it (skip it when the last claim was full:
    there surely is). With `stage`, waiting jobs that came due are moved in first (step 0:
    a statement more, which a claim right after a full one can leave to a later claim)."""
    # Look before taking the write lock where a write transaction is one (SQLite): an idle
    # worker polling with write transactions would starve the writers of other processes.
    if look_first and database.backend.look_before_claiming:
        async with database.read() as conn:
            if not await anything_claimable(conn, now, rules):
                return []
    return await database.transact(
        lambda conn: claim_in(
            conn, database.backend, worker_id, limit, now, lease_seconds, rules, stage
        )
    )


def claim_in(
    conn: sa.Connection,
    backend: Backend,
    worker_id: str,
    limit: int,
    now: datetime,
    lease_seconds: float,
    rules: ShareRules,
    stage: bool = True,
) -> list[Lease]:
    """Run steps 0-5 (0 with `stage`) in the caller's write transaction."""
    if stage:
        stage_due(conn, now)
    floor, turns, candidates, leasable, states = find_candidates(conn, limit, now, rules)
    if not candidates:
        return []

    if states is None:
        states = _lock_domains(conn, backend, sorted({c.domain for c in candidates}))
    if rules.tenant_max_in_flight:
        turns = _lock_tenants(conn, sorted({c.tenant for c in candidates}))
    chosen = choose(candidates, turns, states, limit, now, rules, floor)
    if not chosen:
        return []

    # One token for every job of this claim is enough: a claim takes a job once, and the
    # next claim of the job writes a new token.
    lease_id = uuid.uuid4().hex
    taken = {
        "ids": [c.id for c in chosen],
        "now": now,
        "until": now + timedelta(seconds=lease_seconds),
        "worker": worker_id,
        "lease": lease_id,
    }
    starts = _starts(chosen, states, now, rules)
    served = _served(chosen, turns, floor, now, rules)
    if binds_lists(conn.dialect.name):
        conn.execute(
            _TAKE_AND_COUNT,
            taken
            | {"floor": floor}
            | lists_of(starts, d="d", dn="n", next_start="next_start")
            | lists_of(served, t="t", tn="n", to_last="to_last", to_next="to_next", at="at"),
        )
    else:
        conn.execute(_TAKE, taken)
        backend.updates(_COUNT_STARTS, starts).run(conn)
        backend.updates(_TURNS, served).run(conn)
    return [
        Lease(
            c.id,
            job.url,
            c.domain,
            c.tenant,
            job.attempts + 1,
            job.max_attempts,
            job.deferrals,
            worker_id,
            lease_id,
            now,
            # When it became due, read before the claim overwrote it: for the queue-lag metric.
            c.due_since,
            c.priority,
            job.previous(),
            job.refresh_every,
        )
        for c in chosen
        for job in [leasable[c.id]]
    ]


def _lock_domains(
    conn: sa.Connection, backend: Backend, names: list[str]
) -> dict[str, DomainState]:
    """Step 3: the domains' rows, locked, as the states `choose` reads. A row can be missing:
    retention deletes the rows of domains without jobs (`app.store.retention`), and on
    PostgreSQL a submit that saw the row before such a delete committed inserts its job
    without one. Such a row is inserted afresh here, so this claim's fetches are counted
    and the domain's limits and pauses hold again from this claim on."""
    rows = all_rows(conn, _LOCK_DOMAINS, {"domains": names})
    if len(rows) < len(names):
        found = {row[0] for row in rows}
        missing = [new_domain(name) for name in names if name not in found]
        backend.inserts(domains, missing, skip_existing=True).run(conn)
        rows = all_rows(conn, _LOCK_DOMAINS, {"domains": names})
    return {domain: _domain_state(*state) for domain, *state in rows}


def _domain_state(
    in_flight: int,
    next_start_at: datetime | None,
    paused_until: datetime | None,
    crawl_delay: float | None,
) -> DomainState:
    """A domain's row as read (`_DOMAIN_STATE`, its name left out), as `choose` reads it."""
    return DomainState(in_flight, next_start_at, paused_until, crawl_delay=crawl_delay)


def _lock_tenants(conn: sa.Connection, names: list[str]) -> dict[str, TenantState]:
    """Step 3, after the domains, with a tenants' quota (INGEST_TENANT_MAX_IN_FLIGHT): the
    tenants' rows, locked, as the states `choose` reads, so concurrent claims never pass
    the quota together. Without one the walk's read is enough: the passes are advanced
    relative to the rows (`_TURNS`), and on SQLite the walk ran in this very write
    transaction. Every tenant the walk found has a row: the walk starts from them."""
    rows = all_rows(conn, _LOCK_TENANTS, {"tenants": names})
    return {
        tenant: TenantState(next_pass, last_served_at, in_flight)
        for tenant, next_pass, last_served_at, in_flight in rows
    }


def _starts(
    chosen: list[Candidate], states: dict[str, DomainState], now: datetime, rules: ShareRules
) -> list[dict[str, Any]]:
    """`_COUNT_STARTS`'s rows: the fetches each domain starts, in name order."""
    starts: dict[str, int] = {}
    for candidate in chosen:
        starts[candidate.domain] = starts.get(candidate.domain, 0) + 1
    return [
        {"d": domain, "n": n, "now": now, "next_start": next_start(states.get(domain), now, rules)}
        for domain, n in sorted(starts.items())
    ]


def _served(
    chosen: list[Candidate],
    turns: dict[str, TenantState],
    floor: int,
    now: datetime,
    rules: ShareRules,
) -> list[dict[str, Any]]:
    """`_TURNS`'s rows: the tenants' jobs in flight, passes and turns, in name order."""
    served = passes_after(chosen, turns, rules, floor)
    # Tenants served in this claim keep their turn order: a microsecond apart. The rows are
    # updated in name order, like the domains': two claims that serve the same tenants in
    # different turn orders would otherwise lock them crosswise and deadlock (PostgreSQL).
    stamps = {
        t: now + timedelta(microseconds=i)
        for i, t in enumerate(dict.fromkeys(c.tenant for c in chosen))
    }
    return [
        {
            "t": tenant,
            "n": s.jobs,
            "floor": floor,
            "to_last": s.last_pass - s.first_pass,
            "to_next": s.next_pass - s.first_pass,
            "at": stamps[tenant],
        }
        for tenant, s in sorted(served.items())
    ]
