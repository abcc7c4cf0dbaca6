"""SQL helpers written once for both dialects, which SQLAlchemy renders for each: where SQLite
and PostgreSQL take one differently, the helper says how, and why.

Nothing here asks which database runs: what the backends do differently (statements of
their own, transactions, many rows' writes and reads, wake-ups) is theirs
(`app.store.backends`). It imports no backend.
"""

from typing import Any, TypeVar

import sqlalchemy as sa


def lock_rows(select: sa.Select[Any]) -> sa.Select[Any]:
    """`FOR UPDATE` on PostgreSQL. Dropped on SQLite, where `BEGIN IMMEDIATE` already holds
    the writer: no other transaction can change the rows until this one ends."""
    return select.with_for_update()


def lock_skipping(select: sa.Select[Any], of: sa.Table | None = None) -> sa.Select[Any]:
    """`FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent claims take different rows and
    never wait on each other's (with `of`, only that table's rows: the others of a join
    stay unlocked). Dropped on SQLite, whose claims queue on the one writer."""
    return select.with_for_update(skip_locked=True, of=of)


def materialized(cte: sa.CTE) -> sa.CTE:
    """A CTE evaluated once. PostgreSQL would otherwise inline it and re-run its `LIMIT ...
    SKIP LOCKED` per outer row, taking more rows than the limit (docs/design/claim.md);
    SQLite (3.35+) accepts the same keyword and needs it for nothing."""
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
