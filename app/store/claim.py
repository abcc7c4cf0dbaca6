"""Where a job is claimed: the one transaction that turns due pending jobs into leases.

0. Waiting jobs that came due join the ready ones, oldest due first (`stage_due`).
1. Tenants with a job claimable now, under their in-flight quota, in turn order: lowest
   pass first (fair share, weighted: `app.rules.scheduling`), then least recently served.
2. Each such tenant's first claimable jobs in claim order, locked as they are read.
3. The candidates' domains' rows locked (a missing one inserted afresh), then, with a
   tenants' quota, their tenants' rows, each in name order, so claims never deadlock.
4. `app.rules.scheduling.choose` picks the jobs on the locked rows.
5. Leased under a fresh random `lease_id` (the fencing token of every later write), the
   domains' and tenants' jobs in flight counted, the passes advanced (no history row yet).

Never a dialect test: the SQL both backends run is `app.store.backends.claim_sql`; where
they differ, `backend.claim` (each backend's `claim.py`). Figures: docs/design/claim.md.
"""

import uuid
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa

from app.model import Lease
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
from app.store.backends.claim_sql import (
    LOCK_DOMAINS,
    LOCK_TENANTS,
    STAGE,
    WAITING_TENANTS,
    Leasable,
    bound,
    domain_state,
)
from app.store.database import Database
from app.store.tables import domains, new_domain


def stage_due(conn: sa.Connection, now: datetime) -> int:
    """Step 0: move waiting jobs that came due among the ready ones; how many moved."""
    return conn.execute(STAGE, {"now": now}).rowcount


class Found(NamedTuple):
    """What steps 1 and 2 found (and step 3, where the backend runs it with step 2)."""

    floor: int
    """No tenant's pass counts below it (`app.rules.scheduling`)."""
    tenants: dict[str, TenantState]
    """The waiting tenants' rows as the walk read them."""
    candidates: list[Candidate]
    leasable: dict[str, Leasable]
    """What each candidate's lease would need, by job id."""
    domains: dict[str, DomainState] | None = None
    """The candidates' domains' rows, locked, where step 3 ran with step 2 and found them
    all; else None, for `_lock_domains`."""


def find_candidates(
    conn: sa.Connection, backend: Backend, limit: int, now: datetime, rules: ShareRules
) -> Found:
    """Steps 1 and 2: the waiting tenants' candidates, and what each candidate's lease would
    need. In a write transaction the candidates are locked as they are read."""
    walk = bound(now, rules, tenants=limit, tenant_limit=rules.tenant_max_in_flight)
    rows = backend.all_rows(conn, WAITING_TENANTS, walk)
    if not rows:
        return Found(0, {}, [], {})
    waiting = [tenant for tenant, *_ in rows]
    weights = [rules.tenant_weight(tenant) for tenant in waiting]
    counts = candidates_per_tenant(weights, limit, rules.tenant_max_in_flight)
    turns = {tenant: TenantState(*state) for tenant, *state, _ in rows}
    found = backend.claim.candidates(conn, waiting, counts, now, rules)
    return Found(rows[0][-1], turns, *found)


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
    backend = database.backend
    if look_first and not await backend.claim.worth_claiming(database.read, now, rules):
        return []
    return await database.transact(
        lambda conn: claim_in(conn, backend, worker_id, limit, now, lease_seconds, rules, stage)
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
    floor, turns, candidates, leasable, states = find_candidates(conn, backend, limit, now, rules)
    if not candidates:
        return []

    if states is None:
        states = _lock_domains(conn, backend, sorted({c.domain for c in candidates}))
    if rules.tenant_max_in_flight:
        turns = _lock_tenants(conn, backend, sorted({c.tenant for c in candidates}))
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
    backend.claim.take(conn, taken, starts, served, floor)
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
            job.crawl(),
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
    rows = backend.all_rows(conn, LOCK_DOMAINS, {"domains": names})
    if len(rows) < len(names):
        found = {row[0] for row in rows}
        missing = [new_domain(name) for name in names if name not in found]
        backend.inserts(domains, missing, skip_existing=True).run(conn)
        rows = backend.all_rows(conn, LOCK_DOMAINS, {"domains": names})
    return {domain: domain_state(*state) for domain, *state in rows}


def _lock_tenants(
    conn: sa.Connection, backend: Backend, names: list[str]
) -> dict[str, TenantState]:
    """Step 3, after the domains, with a tenants' quota (INGEST_TENANT_MAX_IN_FLIGHT): the
    tenants' rows, locked, as the states `choose` reads, so concurrent claims never pass
    the quota together. Without one the walk's read is enough: the passes are advanced
    relative to the rows (`turns_update`), and on SQLite the walk ran in this very write
    transaction. Every tenant the walk found has a row: the walk starts from them."""
    rows = backend.all_rows(conn, LOCK_TENANTS, {"tenants": names})
    return {
        tenant: TenantState(next_pass, last_served_at, in_flight)
        for tenant, next_pass, last_served_at, in_flight in rows
    }


def _starts(
    chosen: list[Candidate], states: dict[str, DomainState], now: datetime, rules: ShareRules
) -> list[dict[str, Any]]:
    """The take's rows of the domains: the fetches each domain starts, in name order."""
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
    """The take's rows of the tenants: their jobs in flight, passes and turns, in name
    order."""
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
