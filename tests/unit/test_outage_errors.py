"""Which database errors are an outage (answered 503, retried) and which are bugs."""

import sqlite3

import asyncpg
import pytest
import sqlalchemy as sa

from app.store.outages import database_unavailable


def sqlite_error(statement: str, path: str = ":memory:") -> sqlite3.Error:
    try:
        sqlite3.connect(path, uri=path.startswith("file:")).execute(statement)
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("no error")


def wrapped(orig: BaseException) -> sa.exc.DBAPIError:
    return sa.exc.DBAPIError.instance("SELECT 1", None, orig, Exception)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
        asyncpg.exceptions.TooManyConnectionsError("too many clients already"),
        asyncpg.exceptions.DiskFullError("could not extend file"),
        asyncpg.exceptions.ReadOnlySQLTransactionError("read-only transaction"),
        ConnectionRefusedError(111, "Connect call failed"),
    ],
)
def test_outages_are_unavailable(error):
    assert database_unavailable(wrapped(error))
    assert database_unavailable(sa.exc.TimeoutError("QueuePool limit reached"))


def test_sqlite_full_or_read_only_is_unavailable(tmp_path):
    path = tmp_path / "read_only.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    read_only = sqlite_error("INSERT INTO t VALUES (1)", f"file:{path}?mode=ro")
    assert read_only.sqlite_errorname == "SQLITE_READONLY"
    assert database_unavailable(wrapped(read_only))


@pytest.mark.parametrize(
    "error",
    [
        sqlite_error("SELEC 1"),
        sqlite_error("SELECT * FROM missing"),
        asyncpg.exceptions.UndefinedTableError('relation "missing" does not exist'),
        asyncpg.exceptions.UniqueViolationError("duplicate key"),
        ValueError("not a database error"),
    ],
)
def test_bugs_are_not_unavailable(error):
    assert not database_unavailable(error)
    assert not database_unavailable(wrapped(error))
