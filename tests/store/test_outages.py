"""Which database errors are an outage (answered 503, retried) and which are bugs; how long
an outage is waited out."""

import sqlite3
from typing import cast

import asyncpg
import pytest
import sqlalchemy as sa

from app.store.outages import MAX_ERROR_WAIT, database_unavailable, error_wait


def sqlite_error(statement: str, path: str = ":memory:") -> sqlite3.Error:
    try:
        sqlite3.connect(path, uri=path.startswith("file:")).execute(statement)
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("no error")


def wrapped(orig: BaseException) -> sa.exc.DBAPIError:
    return cast(sa.exc.DBAPIError, sa.exc.DBAPIError.instance("SELECT 1", None, orig, Exception))


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


def test_error_wait_grows_then_caps():
    """0.5 s after the first failure, doubling, never above MAX_ERROR_WAIT."""
    waits = [error_wait(n) for n in range(1, 10)]
    assert [0.5, 1.0, 2.0, 4.0] == waits[:4]
    assert all(wait == MAX_ERROR_WAIT for wait in waits[4:])
