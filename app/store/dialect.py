"""SQL that the store's statements share, written once for both dialects: where SQLite and
PostgreSQL take it differently, the helper says how, and why.

What the backends do differently beyond a statement's text (transactions, many rows'
writes, wake-ups) is theirs (`app.store.backends`).
"""

from collections.abc import Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from app.store.backends.sqlite_many_rows import packed_rows


def lock_rows(select: sa.Select[Any]) -> sa.Select[Any]:
    """`FOR UPDATE` on PostgreSQL. Dropped on SQLite, where `BEGIN IMMEDIATE` already holds
    the writer: no other transaction can change the rows until this one ends."""
    return select.with_for_update()


def lock_skipping(select: sa.Select[Any], of: sa.Table | None = None) -> sa.Select[Any]:
    """`FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent claims take different rows and
    never wait on each other's (with `of`, only that table's rows: the others of a join
    stay unlocked). Dropped on SQLite, whose claims queue on the one writer."""
    return select.with_for_update(skip_locked=True, of=of)


def all_rows(
    conn: sa.Connection, statement: sa.Select[Any] | sa.CompoundSelect[Any], params: Any
) -> Sequence[tuple[Any, ...]]:
    """Every row of `statement` (a module-level constant: SQLite's form of it is built once
    per statement). On SQLite they come back as one row, a JSON array of the rows' values
    (`packed_rows`): the sqlite3 module lets go of the interpreter lock for every row it
    steps to, and in the writer thread each re-take waits for the busy event loop (up to the
    switch interval), all while the writer is held. PostgreSQL's driver reads all rows in
    one go."""
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, params).all()
    return packed_rows(conn, statement, params)


def locked_in_order(
    key: sa.Column[Any], values: str, name: str, after: sa.CTE | None = None
) -> sa.CTE:
    """The rows whose `key` is in the bound list `values`, locked in `key` order, as a CTE
    named `name` (PostgreSQL): each row is locked as it comes out of the sort, before any
    write of the same statement can reach it, so two statements that lock the same rows
    this way never lock them crosswise. With `after`, not one row before `after` (another
    such CTE) is read whole, so its table's rows are locked first."""
    rows = sa.select(key).where(any_of(key, values))
    if after is not None:
        rows = rows.where(sa.select(sa.func.count()).select_from(after).scalar_subquery() >= 0)
    return materialized(lock_rows(rows.order_by(key)).cte(name))


def any_found(
    column: sa.ColumnElement[Any], found: sa.ColumnElement[Any]
) -> sa.ColumnElement[bool]:
    """`column` equals a value of the `found` column (another CTE's, PostgreSQL), as ANY of
    one array: the rows are then looked up by `column`'s index, where `IN (SELECT ...)`,
    whose rows the planner cannot count, made a semi join that read the whole table."""
    values = sa.select(sa.func.array_agg(found)).scalar_subquery()
    return column == sa.any_(sa.cast(values, ARRAY(column.type)))


def binds_lists(dialect: str) -> bool:
    """Can a statement take bound lists, join each value to a subquery of its own (`each_of`
    and LATERAL), and write over them (data-modifying CTEs)? PostgreSQL can, and a claim is
    then three statements whatever the number of tenants: its candidates with their
    domains' rows locked in one (1.5 ms for 32 candidates among 100,000 pending jobs, where
    a UNION ALL of one subquery per tenant took 12 ms, 9 of them planning it anew each
    time), and its take with the counts of the domains and tenants in another, each a round
    trip saved. SQLite has neither lists, LATERAL nor writes in CTEs, plans the UNION ALL in
    no time, and runs its statements in the writer thread with no trip to make. `dialect`:
    a connection's dialect's name, or a backend's (`Backend.name`), which is the same."""
    return dialect == "postgresql"


def lists_of(rows: Sequence[dict[str, Any]], **keys: str) -> dict[str, list[Any]]:
    """The rows' values as bound lists (`each_of`), each list named for a row key."""
    return {name: [row[key] for row in rows] for name, key in keys.items()}


def each_of(name: str = "each", **lists: sa.types.TypeEngine[Any]) -> sa.TableValuedAlias:
    """The bound lists (each named for its column, of its values' type), side by side, as
    rows named `name` (PostgreSQL's `unnest`; see `binds_lists`)."""
    values = [sa.bindparam(key, type_=ARRAY(type_)) for key, type_ in lists.items()]
    return sa.func.unnest(*values).table_valued(*lists).render_derived(name=name)


def any_of(column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
    """`column = ANY(:name)`, the bound list `name` of `column`'s type (PostgreSQL): one
    statement for any length of list, where an expanding IN is one per length."""
    return column == sa.any_(sa.bindparam(name, type_=ARRAY(column.type)))


def materialized(cte: sa.CTE) -> sa.CTE:
    """A CTE evaluated once. PostgreSQL would otherwise inline it and re-run its `LIMIT ...
    SKIP LOCKED` per outer row (a claim of 8 once took 71 jobs); SQLite (3.35+) accepts the
    same keyword and needs it for nothing."""
    return cte.prefix_with("MATERIALIZED")


def floor_minus(column: sa.ColumnElement[int], n: Any) -> sa.ColumnElement[int]:
    """`column - n`, never below 0. A CASE, because the two-argument maximum is spelt
    differently (GREATEST on PostgreSQL, MAX on SQLite)."""
    return sa.case((column > n, column - n), else_=0)


def partial_index(name: str, *columns: Any, where: str) -> sa.Index:
    """An index of the rows matching `where` only (an SQL predicate that compares `status`
    with a literal: the queries must use the very same literal for either planner to pick
    it). Each dialect takes the predicate under its own keyword."""
    predicate = sa.text(where)
    return sa.Index(name, *columns, postgresql_where=predicate, sqlite_where=predicate)


T = TypeVar("T", sa.Index, sa.UniqueConstraint)

ONLY_ON = "only_on"
"""The `info` key of a schema item made on one dialect only (`only_on`)."""


def only_on(dialect_name: str, item: T) -> T:
    """`item` (an index or a constraint) made on `dialect_name` only: where the dialects need
    different objects for one rule. Marked in its `info` for Alembic's comparison
    (`made_on`), which does not read `ddl_if`."""
    item.info[ONLY_ON] = dialect_name
    return item.ddl_if(dialect=dialect_name)


def made_on(dialect_name: str, item: Any) -> bool:
    """Whether the models make `item` on `dialect_name` (Alembic's `include_object`)."""
    made_only_on: str = getattr(item, "info", {}).get(ONLY_ON, dialect_name)
    return made_only_on == dialect_name
