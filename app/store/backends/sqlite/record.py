"""SQLite's record: a batch's domains freed in one statement, then its tenants in another.

Differs from PostgreSQL (`app.store.backends.postgres.record`) because SQLite has no writes
in CTEs nor bound lists, and needs no row locks (the one writer is held): each table's rows
are updated by one statement over a table of them (`Backend.updates`), which the writer
thread runs back to back.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.store.backends.record_sql import free_slots_update, free_tenants_update
from app.store.backends.writes import Updates, Writes

_FREE_SLOTS = free_slots_update(
    sa.bindparam("d"),
    sa.bindparam("freed", type_=sa.Integer),
    sa.bindparam("reset", type_=sa.Boolean),
    sa.bindparam("streak", type_=sa.Integer),
)
_FREE_TENANTS = free_tenants_update(sa.bindparam("t"), sa.bindparam("freed", type_=sa.Integer))


def free_slots(
    freed_domains: Sequence[dict[str, Any]],
    freed_tenants: Sequence[dict[str, Any]],
    now: datetime,
    updates: Updates,
) -> list[Writes]:
    """Steps 5 and 6: each domain's slots freed and its failure streak moved on (each row
    carries `now`), then each tenant's jobs in flight freed, as `updates` writes many rows
    (compiled here, before the transaction takes the writer)."""
    writes = [updates(_FREE_SLOTS, freed_domains)]
    if freed_tenants:
        writes.append(updates(_FREE_TENANTS, freed_tenants))
    return writes
