"""SQLite's fold: the rows deleted and read back, summed in Python, the sums inserted.

Differs from PostgreSQL (`app.store.backends.postgres.counts`) because SQLite has no writes
in CTEs; the writer thread runs the delete and the insert back to back, the one writer held,
so no other transaction adds a row between them.
"""

from typing import Any

import sqlalchemy as sa


def fold(conn: sa.Connection, table: sa.Table, keys: tuple[str, ...], change: str) -> int:
    """Delete every row of `table` and write back the sums of its `change` column, one row
    per `keys` (none for a sum of 0); how many rows were folded."""
    names = [*keys, change]
    gone = conn.execute(sa.delete(table).returning(*(table.c[name] for name in names))).all()
    sums: dict[tuple[Any, ...], int] = {}
    for *key, value in gone:
        sums[tuple(key)] = sums.get(tuple(key), 0) + value
    rows = [dict(zip(names, (*key, total), strict=True)) for key, total in sorted(sums.items())]
    if rows := [row for row in rows if row[change]]:
        conn.execute(sa.insert(table), rows)
    return len(gone)
