"""PostgreSQL's fold: one statement (a data-modifying CTE), so the rows never leave the server.

Differs from SQLite (`app.store.backends.sqlite.counts`) because PostgreSQL writes in CTEs:
reading the rows into Python and summing them there took several times as long, in the
worker's event loop, between two claims (docs/design/record.md). A row a concurrent
transaction adds meanwhile is not deleted (not in the delete's snapshot) and stays to be
summed; two folds at once delete disjoint rows.
"""

import functools
from typing import Any

import sqlalchemy as sa


@functools.cache
def _fold_in_one_statement(table: sa.Table, keys: tuple[str, ...], change: str) -> sa.Select[Any]:
    """`fold` as one statement: the rows deleted, their sums per key inserted back."""
    names = [*keys, change]
    gone = sa.delete(table).returning(*(table.c[name] for name in names)).cte("gone")
    key_columns = [gone.c[key] for key in keys]
    total = sa.func.sum(gone.c[change])
    sums = sa.select(*key_columns, total).group_by(*key_columns).having(total != 0)
    written = sa.insert(table).from_select(names, sums).cte("written")
    return sa.select(sa.func.count()).select_from(gone).add_cte(written)


def fold(conn: sa.Connection, table: sa.Table, keys: tuple[str, ...], change: str) -> int:
    """Delete every row of `table` and write back the sums of its `change` column, one row
    per `keys` (none for a sum of 0); how many rows were folded."""
    return int(conn.execute(_fold_in_one_statement(table, keys, change)).scalar_one())
