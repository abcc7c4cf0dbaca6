"""Bound lists, PostgreSQL's alone: SQLite has no arrays, no LATERAL, no writes in CTEs.

A statement over bound lists (`each_of`, `any_of`) is one statement whatever the number of
rows, tenants or domains, and its rows can be locked in order (`locked_in_order`) before
the same statement writes them: so a claim's candidates lock their domains' rows, and its
take counts the domains and tenants, each in one round trip (`claim.py`, `record.py`).
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from app.store.dialect import lock_rows, materialized


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


def lists_of(rows: Sequence[dict[str, Any]], **keys: str) -> dict[str, list[Any]]:
    """The rows' values as bound lists (`each_of`), each list named for a row key."""
    return {name: [row[key] for row in rows] for name, key in keys.items()}


def each_of(name: str = "each", **lists: sa.types.TypeEngine[Any]) -> sa.TableValuedAlias:
    """The bound lists (each named for its column, of its values' type), side by side, as
    rows named `name` (PostgreSQL's `unnest`)."""
    values = [sa.bindparam(key, type_=ARRAY(type_)) for key, type_ in lists.items()]
    return sa.func.unnest(*values).table_valued(*lists).render_derived(name=name)


def any_of(column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
    """`column = ANY(:name)`, the bound list `name` of `column`'s type (PostgreSQL): one
    statement for any length of list, where an expanding IN is one per length."""
    return column == sa.any_(sa.bindparam(name, type_=ARRAY(column.type)))
