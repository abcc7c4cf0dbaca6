"""SQLite's claim: a look first, a UNION ALL of one subquery per tenant, each step apart.

Differs from PostgreSQL (`app.store.backends.postgres.claim`) because SQLite has neither
bound lists, LATERAL nor writes in CTEs, plans the UNION ALL in no time, and runs a claim's
statements in the writer thread with no round trip to save; and because a write
transaction takes the one writer up front, an idle worker must look before it claims.
"""

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.rules.scheduling import ShareRules
from app.store.backends.claim_sql import (
    ANY_CAME_DUE,
    ANYTHING_CLAIMABLE,
    CANDIDATE_COLUMNS,
    Candidates,
    bound,
    candidates_of,
    firsts,
    starts_update,
    take_update,
    turns_update,
)
from app.store.backends.sqlite import many_rows
from app.store.tables import UTCDateTime, jobs


async def worth_claiming(
    read: Callable[[], AbstractAsyncContextManager[AsyncConnection]],
    now: datetime,
    rules: ShareRules,
) -> bool:
    """Is any job claimable now, or has a waiting one come due (step 0 would move it in)? A
    cheap read before a claim, without the writer: an idle worker polling with write
    transactions would hold other processes' writers off. The first row in claim order
    that qualifies ends it."""
    async with read() as conn:
        for look in (ANYTHING_CLAIMABLE, ANY_CAME_DUE):
            if (await conn.execute(look, bound(now, rules))).first() is not None:
                return True
    return False


@functools.cache
def _candidates_apart(tenant_count: int) -> sa.CompoundSelect[Any]:
    """The candidates of `tenant_count` tenants (bound: t0, t1, ... and their counts n0, n1,
    ...), one subquery each, in a UNION ALL."""
    first = [
        firsts(sa.bindparam(f"t{i}"), sa.bindparam(f"n{i}", type_=sa.Integer)).subquery()
        for i in range(tenant_count)
    ]
    return sa.union_all(*(sa.select(each) for each in first))


def candidates(
    conn: sa.Connection, waiting: list[str], counts: list[int], now: datetime, rules: ShareRules
) -> Candidates:
    """Step 2: the first `counts` claimable jobs of each `waiting` tenant; their domains' rows
    are left to step 3 (None)."""
    lists: dict[str, object] = {f"t{i}": tenant for i, tenant in enumerate(waiting)}
    lists |= {f"n{i}": count for i, count in enumerate(counts)}
    found = many_rows.packed_rows(conn, _candidates_apart(len(waiting)), bound(now, rules, **lists))
    return candidates_of(found, [row[CANDIDATE_COLUMNS:] for row in found])


_TAKE = take_update(jobs.c.id.in_(sa.bindparam("ids", expanding=True)))
_COUNT_STARTS = starts_update(
    sa.bindparam("d"),
    sa.bindparam("n", type_=sa.Integer),
    sa.bindparam("next_start", type_=UTCDateTime),
)
_TURNS = turns_update(
    sa.bindparam("t"),
    sa.bindparam("n", type_=sa.Integer),
    sa.bindparam("to_last", type_=sa.BigInteger),
    sa.bindparam("to_next", type_=sa.BigInteger),
    sa.bindparam("at", type_=UTCDateTime),
)


def take(
    conn: sa.Connection,
    taken: dict[str, Any],
    starts: list[dict[str, Any]],
    served: list[dict[str, Any]],
    floor: int,
) -> None:
    """Step 5, a statement per table: the jobs `taken` names leased, then the domains'
    `starts` counted and the tenants' `served` turns stamped (each row carries `floor`),
    each as one statement over a table of their rows (`many_rows.updates`)."""
    conn.execute(_TAKE, taken)
    many_rows.updates(_COUNT_STARTS, starts, conn.dialect).run(conn)
    many_rows.updates(_TURNS, served, conn.dialect).run(conn)
