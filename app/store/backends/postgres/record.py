"""PostgreSQL's record: a batch's domains and tenants freed in one statement, over bound lists.

Differs from SQLite (`app.store.backends.sqlite.record`) because PostgreSQL writes in CTEs
over bound lists, and locks rows: the domains' and the tenants' rows are locked first, each
table in name order, the domains' before the tenants', as a claim locks them, so a record
and a claim never lock them crosswise. One statement, one round trip.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.store.backends.postgres.lists import each_of, lists_of, locked_in_order
from app.store.backends.record_sql import free_slots_update, free_tenants_update
from app.store.backends.writes import Once, Updates, Writes
from app.store.tables import domains, tenants


def _free_together() -> sa.Select[Any]:
    """Steps 5 and 6 in one statement: the domains' and the tenants' updates as
    data-modifying CTEs over bound lists. Their rows are locked first, each table in name
    order, the domains' before the tenants' (`locked_in_order`)."""
    slots = locked_in_order(domains.c.domain, "d", "slots")
    owners = locked_in_order(tenants.c.tenant, "t", "owners", after=slots)
    given = each_of(
        "given", d=sa.String(), freed=sa.Integer(), reset=sa.Boolean(), streak=sa.Integer()
    )
    of_tenants = each_of("of_tenants", t=sa.String(), tenant_freed=sa.Integer())
    freed_slots = (
        free_slots_update(given.c.d, given.c.freed, given.c.reset, given.c.streak)
        .where(domains.c.domain.in_(sa.select(slots.c.domain)))
        .cte("freed_slots")
    )
    freed_tenants = (
        free_tenants_update(of_tenants.c.t, of_tenants.c.tenant_freed)
        .where(tenants.c.tenant.in_(sa.select(owners.c.tenant)))
        .cte("freed_tenants")
    )
    return sa.select(sa.literal(1)).add_cte(slots, freed_slots, owners, freed_tenants)


_FREE_TOGETHER = _free_together()


def free_slots(
    freed_domains: Sequence[dict[str, Any]],
    freed_tenants: Sequence[dict[str, Any]],
    now: datetime,
    updates: Updates,
) -> list[Writes]:
    """Steps 5 and 6: each domain's slots freed and its failure streak moved on, each
    tenant's jobs in flight freed, in one statement (`updates`, many rows' statements, is
    not needed)."""
    lists = lists_of(freed_domains, d="d", freed="freed", reset="reset", streak="streak")
    lists |= lists_of(freed_tenants, t="t", tenant_freed="freed")
    return [Once(_FREE_TOGETHER, lists | {"now": now})]
