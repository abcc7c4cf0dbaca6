"""PostgreSQL's claim: steps 2 and 3 in one statement, step 5 in another, over bound lists.

Differs from SQLite (`app.store.backends.sqlite.claim`) because PostgreSQL takes bound
lists, joins each value to a subquery of its own (LATERAL) and writes in CTEs: a claim is
then three round trips between its BEGIN and COMMIT (four with step 0) whatever the number
of tenants, where a UNION ALL of one subquery per tenant is planned anew each time
(docs/design/claim.md). And it needs no look before a claim: one that finds nothing is a
read-only transaction.
"""

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.rules.scheduling import ShareRules
from app.store.backends.claim_sql import (
    CANDIDATE_COLUMNS,
    DOMAIN_STATE,
    Candidates,
    bound,
    candidates_of,
    domain_state,
    firsts,
    starts_update,
    take_update,
    turns_update,
)
from app.store.backends.postgres.lists import any_found, any_of, each_of, lists_of, locked_in_order
from app.store.dialect import lock_rows, materialized
from app.store.tables import UTCDateTime, domains, jobs, tenants


async def worth_claiming(
    read: Callable[[], AbstractAsyncContextManager[AsyncConnection]],
    now: datetime,
    rules: ShareRules,
) -> bool:
    """Always: a claim that finds nothing is a read-only transaction (no lock, no WAL
    written), and its first statement, the waiting tenants, is that look: a look before it
    would cost one more round trip and a pool checkout per claim."""
    return True


def _candidates_joined() -> sa.Select[Any]:
    """The candidates of the tenants in the bound list `tenant`, each joined LATERAL to its
    first `count` jobs (the bound list beside it)."""
    each = each_of(tenant=sa.String(), count=sa.Integer())
    first = firsts(each.c.tenant, each.c.count).lateral("firsts")
    return sa.select(first).select_from(each).join(first, sa.true())


def _candidates_locking_domains() -> sa.Select[Any]:
    """Steps 2 and 3 in one statement: the candidates (`_candidates_joined`), each beside its
    domain's row (`DOMAIN_STATE`; none if the row is missing), the rows locked in name order
    (`locked`: each as it comes out of the sort), as `LOCK_DOMAINS` locks them, a round trip
    earlier."""
    first = materialized(_candidates_joined().cte("firsts"))
    locked = materialized(
        lock_rows(
            sa.select(*DOMAIN_STATE)
            .where(any_found(domains.c.domain, first.c.domain))
            .order_by(domains.c.domain)
        ).cte("locked")
    )
    return sa.select(
        first, *(column.label(f"locked_{column.name}") for column in locked.c)
    ).select_from(first.outerjoin(locked, locked.c.domain == first.c.domain))


_CANDIDATES_LOCKING_DOMAINS = _candidates_locking_domains()

_DOMAIN_COLUMNS = len(DOMAIN_STATE)
"""A candidate row's last columns: its domain's row (`_CANDIDATES_LOCKING_DOMAINS`)."""


def candidates(
    conn: sa.Connection, waiting: list[str], counts: list[int], now: datetime, rules: ShareRules
) -> Candidates:
    """Steps 2 and 3: the first `counts` claimable jobs of each `waiting` tenant, locked, and
    their domains' rows, locked (all of them, or None: some row is missing)."""
    bound_lists = bound(now, rules, tenant=waiting, count=counts)
    found = conn.execute(_CANDIDATES_LOCKING_DOMAINS, bound_lists).all()
    states = {
        domain: domain_state(*state)
        for domain, *state in (row[-_DOMAIN_COLUMNS:] for row in found)
        if domain is not None
    }
    leasable = [row[CANDIDATE_COLUMNS:-_DOMAIN_COLUMNS] for row in found]
    whole = all(row[-_DOMAIN_COLUMNS] is not None for row in found)
    return candidates_of(found, leasable, states if whole else None)


def _take_and_count() -> sa.Select[Any]:
    """Step 5 in one statement: the take, the domains' counts and the tenants' turns as
    data-modifying CTEs, the domains and the tenants given as bound lists (`each_of`), the
    jobs as one (`any_of`). The jobs and the domains' rows are locked already (steps 2 and
    3); the tenants' rows, which a claim without a tenants' quota has not locked, are locked
    here first, in name order (`locked_in_order`), so two claims never lock them crosswise."""
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
    taken = take_update(any_of(jobs.c.id, "ids")).cte("taken")
    started = starts_update(starts.c.d, starts.c.dn, starts.c.next_start).cte("started")
    turned = (
        turns_update(turns.c.t, turns.c.tn, turns.c.to_last, turns.c.to_next, turns.c.at)
        .where(tenants.c.tenant.in_(sa.select(served.c.tenant)))
        .cte("turned")
    )
    return sa.select(sa.literal(1)).add_cte(taken, started, served, turned)


_TAKE_AND_COUNT = _take_and_count()


def take(
    conn: sa.Connection,
    taken: dict[str, Any],
    starts: list[dict[str, Any]],
    served: list[dict[str, Any]],
    floor: int,
) -> None:
    """Step 5 in one statement: the jobs `taken` names leased, the domains' `starts`
    counted, the tenants' `served` turns stamped from `floor` (`_take_and_count`)."""
    conn.execute(
        _TAKE_AND_COUNT,
        taken
        | {"floor": floor}
        | lists_of(starts, d="d", dn="n", next_start="next_start")
        | lists_of(served, t="t", tn="n", to_last="to_last", to_next="to_next", at="at"),
    )
