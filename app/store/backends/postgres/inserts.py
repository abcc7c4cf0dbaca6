"""PostgreSQL's many rows' writes: an executemany, or one statement over arrays.

Differs from SQLite (`app.store.backends.sqlite.many_rows`) because asyncpg pipelines an
executemany in one round trip, and PostgreSQL takes a table's rows as one array per column
(`unnest`), so the rows of several tables go in by one statement of an INSERT per table as
a CTE (`inserts_together`, `insert_and_wake`). Inserting rows unless their key exists looks
for the row first: ON CONFLICT DO NOTHING alone waits for a transaction that updated the
existing row (`insert_missing_each`).
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.store.backends.postgres.listen import NOTIFY_CHANNEL
from app.store.backends.writes import NewRows

WAKE_PAYLOAD = "wake_payload"
"""The bound parameter of a submit's NOTIFY payload."""


@dataclass(frozen=True)
class ExecuteMany:
    """PostgreSQL's: one executemany, which asyncpg sends in one round trip."""

    statement: sa.Update | sa.Insert
    rows: Sequence[dict[str, Any]]

    def run(self, conn: sa.Connection) -> None:
        if self.rows:
            conn.execute(self.statement, self.rows)


Shape = tuple[tuple[sa.Table, tuple[str, ...], bool], ...]
"""Writes' tables, their columns and whether they skip existing rows: what a statement over
their rows as arrays is built for (`_insert_ctes`)."""


def as_arrays(writes: Sequence[NewRows]) -> tuple[Shape, dict[str, Any]]:
    """The writes that have rows: their shape, and their values as one array per column."""
    writes = [write for write in writes if write.rows]
    shape = tuple((w.table, tuple(w.rows[0]), w.skip_existing) for w in writes)
    params: dict[str, Any] = {
        _column_of(write.table, key): [row[key] for row in write.rows]
        for write in writes
        for key in write.rows[0]
    }
    return shape, params


@functools.lru_cache(maxsize=16)
def insert_missing_each(table: sa.Table, keys: tuple[str, ...]) -> sa.Insert:
    """PostgreSQL's insert of a row (bound parameters `keys`) unless its key exists, which
    looks for the row first: ON CONFLICT alone waits for any transaction that updated the
    existing row to end (every claim and record updates its domain's and tenant's rows, so
    a submit would queue behind the worker's transactions), while the look reads the
    committed row without waiting. ON CONFLICT still settles two first inserts at once."""
    params = {key: sa.bindparam(key, type_=table.c[key].type) for key in keys}
    row = sa.select(*params.values()).where(_missing_from(table, params))
    return pg_insert(table).from_select(list(keys), row).on_conflict_do_nothing()


def _missing_from(
    table: sa.Table, row: Mapping[str, sa.ColumnElement[Any]]
) -> sa.ColumnElement[bool]:
    """No row of `table` has the primary key of `row` (its values by column name)."""
    return ~sa.exists().where(*(pk == row[pk.name] for pk in table.primary_key))


def _column_of(table: sa.Table, key: str) -> str:
    return f"{table.name}_{key}"


def _insert_ctes(shape: Shape) -> list[sa.CTE]:
    """An INSERT per table of `shape`, as a CTE, its rows given as one array per column."""
    inserts = []
    for table, keys, skip_existing in shape:
        arrays = []
        for key in keys:
            array = ARRAY(table.c[key].type)
            arrays.append(sa.cast(sa.bindparam(_column_of(table, key), type_=array), array))
        given = sa.func.unnest(*arrays).table_valued(*keys).render_derived(f"given_{table.name}")
        rows = sa.select(*(given.c[key] for key in keys))
        if skip_existing:  # Looked for first: see `insert_missing_each`.
            rows = rows.where(_missing_from(table, {key: given.c[key] for key in keys}))
        insert = pg_insert(table).from_select(list(keys), rows)
        if skip_existing:
            insert = insert.on_conflict_do_nothing()
        inserts.append(insert.cte(f"new_{table.name}"))
    return inserts


@functools.lru_cache(maxsize=16)
def inserts_statement(shape: Shape) -> sa.Select[Any]:
    """`PostgresBackend.inserts_together`'s statement for writes of this shape."""
    return sa.select(sa.literal(1)).add_cte(*_insert_ctes(shape))


@functools.lru_cache(maxsize=16)
def insert_and_wake_statement(shape: Shape) -> sa.Select[Any]:
    """`PostgresBackend.insert_and_wake`'s statement for writes of this shape (table,
    columns, skip existing): `inserts_statement`'s, and the NOTIFY."""
    payload = sa.bindparam(WAKE_PAYLOAD, type_=sa.String)
    return sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, payload)).add_cte(*_insert_ctes(shape))
