"""Many rows in one statement on SQLite: writes over a table of bound rows, reads packed
as one JSON row.

Why: the sqlite3 module steps one row at a time, and every step lets go of the interpreter
lock and waits to get it back (for the switch interval when the worker's loop is busy), all
while the one writer is held (docs/design/sqlite.md). So many rows' writes go in as one
statement over a table of them (`updates`, `inserts`: `WITH given AS (...) UPDATE ... FROM
given`), compiled once per shape and bound apart from SQLAlchemy's per-run cache key
(`_Compiled`), and many rows' reads come back as one row (`packed_rows`). PostgreSQL needs
none of it: asyncpg pipelines an executemany and reads all rows in one go.

Built on SQLAlchemy's compiler internals (`positiontup`, `insert_prefetch`, bind
processors): `tests/store/test_many_rows.py` holds what it writes and reads to what SQLAlchemy's
own execution does, on both backends.
"""

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from app.store.backends.writes import Writes

MAX_GIVEN_ROWS = 256
"""Rows per statement over a table of rows: under SQLite's 500 terms of a compound SELECT,
and 256 rows of a job's ~20 columns under its 32,766 bound parameters."""


def updates(statement: sa.Update, rows: Sequence[dict[str, Any]], dialect: Dialect) -> Writes:
    """`statement` once per row of parameters (each row's keys its bound parameters'), as
    one statement per MAX_GIVEN_ROWS rows over a table of them, compiled and bound."""
    keys = tuple(rows[0]) if rows else ()
    return _Runs(
        [
            _update_given(statement, keys, size, dialect).bound(params)
            for size, params in _in_statements(rows)
        ]
    )


def inserts(
    table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool, dialect: Dialect
) -> Writes:
    """Insert every row (skipping those whose key exists, with `skip_existing`), as one
    statement per MAX_GIVEN_ROWS rows: `WITH given AS (...) INSERT ... SELECT`."""
    keys = tuple(rows[0]) if rows else ()
    return _Runs(
        [
            _insert_given(table, keys, size, skip_existing, dialect).bound(params)
            for size, params in _in_statements(rows)
        ]
    )


def packed_rows(
    conn: sa.Connection, statement: sa.Select[Any] | sa.CompoundSelect[Any], params: Any
) -> list[tuple[Any, ...]]:
    """Every row of `statement`, read as one row, a JSON array of the rows' values, then
    unpacked as SQLAlchemy would have read each (`SQLiteBackend.all_rows`)."""
    packed, processors = _packed(statement, conn.dialect)
    return [
        tuple(
            value if process is None else process(value)
            for process, value in zip(processors, row, strict=True)
        )
        for row in json.loads(conn.execute(packed, params).scalar_one())
    ]


@functools.lru_cache(maxsize=64)
def _packed(
    statement: sa.Select[Any] | sa.CompoundSelect[Any], dialect: Dialect
) -> tuple[sa.Select[Any], list[Any]]:
    """`statement`'s rows as one value, `json_group_array` of a `json_array` per row, and
    each column's result processor (JSON keeps text and numbers; a timestamp comes back as
    the text SQLite stores, a boolean as 0 or 1, as they would from the row itself)."""
    rows = statement.subquery("packed")
    packed = sa.select(sa.func.json_group_array(sa.func.json_array(*rows.c)))
    processors = [
        column.type.dialect_impl(dialect).result_processor(dialect, None)
        for column in statement.selected_columns
    ]
    return packed, processors


def _in_statements(rows: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The rows, MAX_GIVEN_ROWS at most per statement, as (size, parameters) of each: the
    size a power of two (40 rows: 64), so a statement has few shapes, each compiled once;
    the rows past the given ones are all null, and `_row` (the row's number, null for
    those) tells them apart."""
    statements = []
    for start in range(0, len(rows), MAX_GIVEN_ROWS):
        chunk = rows[start : start + MAX_GIVEN_ROWS]
        size = 1 << (len(chunk) - 1).bit_length()
        params: dict[str, Any] = {f"_row_{i}": None for i in range(len(chunk), size)}
        params |= {f"{key}_{i}": None for i in range(len(chunk), size) for key in chunk[0]}
        for i, row in enumerate(chunk):
            params[f"_row_{i}"] = i
            params |= {f"{key}_{i}": value for key, value in row.items()}
        statements.append((size, params))
    return statements


def _given(types: dict[str, Any], keys: tuple[str, ...], size: int) -> sa.CTE:
    """`size` rows of bound parameters (`<key>_<i>`, and `_row_<i>`) as a table named
    `given`: SELECTs joined by UNION ALL (SQLite names no VALUES columns)."""
    rows = [
        sa.select(
            sa.bindparam(f"_row_{i}", type_=sa.Integer).label("_row"),
            *(sa.bindparam(f"{key}_{i}", type_=types[key]).label(key) for key in keys),
        )
        for i in range(size)
    ]
    return (rows[0] if size == 1 else sa.union_all(*rows)).cte("given")


_REQUIRED = object()


@dataclass(frozen=True)
class _Compiled:
    """A statement compiled once, run through the driver with its parameters processed as
    SQLAlchemy would: a statement over 64 rows has hundreds of parameters, and SQLAlchemy
    would hash them all into its cache key on every run (docs/design/sqlite.md)."""

    sql: str
    slots: tuple[tuple[str, Callable[[Any], Any] | None, Any], ...]
    """Per positional parameter: its name, its type's bind processor, and its value if fixed
    (`_REQUIRED` if each run must give it)."""

    @classmethod
    def of(cls, statement: sa.Update | sa.Insert, dialect: Dialect) -> "_Compiled":
        compiled = statement.compile(dialect=dialect)
        assert compiled.positiontup is not None  # SQLite's parameters are positional
        binds = [compiled.binds[name] for name in compiled.positiontup]
        # An insert's columns left out that have a default are bound parameters too, which
        # SQLAlchemy's own execution fills with the default: so does this one.
        defaults = {column.key: _scalar(column) for column in compiled.insert_prefetch}
        slots = tuple(
            (
                bind.key,
                bind.type.dialect_impl(dialect).bind_processor(dialect),
                defaults.get(bind.key, _REQUIRED if bind.required else bind.effective_value),
            )
            for bind in binds
        )
        return cls(compiled.string, slots)

    def bound(self, params: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """The SQL and its positional values, processed as SQLAlchemy would."""
        values = []
        for name, process, fixed in self.slots:
            value = params.get(name, fixed)
            if value is _REQUIRED:
                raise KeyError(f"no value for the bound parameter {name!r}")
            values.append(value if process is None else process(value))
        return self.sql, tuple(values)


def _scalar(column: sa.Column[Any]) -> Any:
    """`column`'s default, one value for every row (a row's own, a function's, is not
    needed by any insert here)."""
    default = column.default
    if not isinstance(default, ScalarElementColumnDefault):
        raise NotImplementedError(f"a default of {column} computed per row")
    return default.arg


@dataclass(frozen=True)
class _Runs:
    """SQLite's: each statement's SQL and values, ready for the driver."""

    statements: list[tuple[str, tuple[Any, ...]]]

    def run(self, conn: sa.Connection) -> None:
        for sql, values in self.statements:
            conn.exec_driver_sql(sql, values)


@functools.lru_cache(maxsize=128)
def _update_given(
    statement: sa.Update, keys: tuple[str, ...], size: int, dialect: Dialect
) -> _Compiled:
    """`statement` with each bound parameter named in `keys` read from `given` instead, of
    the type the compiler gives it: an untyped `bindparam("now")` assigned to a timestamp
    column is a timestamp, bound as SQLAlchemy stores them ('2026-01-01 12:00:01.000000');
    left untyped in `given`, the driver stored '2026-01-01 12:00:01+00:00', which sorts
    before the same instant bound as SQLAlchemy does (a job finished at T was pruned as
    finished before T)."""
    types: dict[str, Any] = {}
    for bind in statement.compile(dialect=dialect).binds.values():
        if isinstance(types.get(bind.key, sa.types.NULLTYPE), sa.types.NullType):
            types[bind.key] = bind.type
    given = _given(types, keys, size)

    def from_given(element: Any, **_: Any) -> Any:
        if isinstance(element, BindParameter) and element.key in keys:
            return given.c[element.key]
        return None

    updated = visitors.replacement_traverse(statement, {}, from_given)
    assert isinstance(updated, sa.Update)
    return _Compiled.of(updated.add_cte(given).where(given.c._row.is_not(None)), dialect)


@functools.lru_cache(maxsize=128)
def _insert_given(
    table: sa.Table, keys: tuple[str, ...], size: int, skip_existing: bool, dialect: Dialect
) -> _Compiled:
    given = _given({key: table.c[key].type for key in keys}, keys, size)
    # The WHERE also keeps SQLite from reading ON CONFLICT after the SELECT as a join's ON.
    rows = sa.select(*(given.c[key] for key in keys)).where(given.c._row.is_not(None))
    insert = sqlite_insert(table).from_select(keys, rows)
    return _Compiled.of(insert.on_conflict_do_nothing() if skip_existing else insert, dialect)
