"""Outages: which errors mean the database cannot serve now, and how long to wait one out.

A database that is away (unreachable, restarting, full, read-only, out of connections)
makes a request answer 503 with Retry-After (`app.api.problems`) and a loop try again after
`error_wait` (`app.worker.loop`, the completer's writes, the LISTEN connection); an error of the
statement itself is a bug, and is not taken for one. Each backend says an outage its own
way: SQLite by result code, PostgreSQL by SQLSTATE class.
"""

import sqlite3

import asyncpg
import sqlalchemy as sa

MAX_ERROR_WAIT = 5.0
"""The longest wait after failures in a row: a loop picks up within seconds once the
database is back."""


def error_wait(failures: int) -> float:
    """Seconds to wait after `failures` failures in a row (failed ticks of a loop, failed
    writes, a LISTEN connection lost, a worker process crashed): 0.5, 1, 2, 4, 5, 5, ..."""
    return min(0.5 * 2.0 ** min(failures - 1, 10), MAX_ERROR_WAIT)


SQLITE_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
    }
)
"""SQLite's primary result codes of a database that cannot serve now. Not SQLITE_ERROR: the
sqlite3 driver raises a bad statement ("no such table", a syntax error) as an
OperationalError too, and that is a bug to see, not an outage to wait out."""

POSTGRES_UNAVAILABLE = ("08", "53", "57", "58", "25006")
"""SQLSTATE classes (and one code) of a server that cannot serve now: connection exception,
insufficient resources (disk full, out of memory, too many connections), operator
intervention (shutting down, starting up, a statement cancelled by its timeout), system
error (I/O), and a read-only transaction (a standby, default_transaction_read_only)."""


def database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot serve now (unreachable, restarting, full,
    read-only, out of connections): worth answering "try again later". False for an error
    of the statement itself (bad SQL, a constraint), which is a bug, not an outage."""
    if isinstance(exc, sa.exc.TimeoutError):  # no pooled connection came free in time
        return True
    if isinstance(exc, sa.exc.DBAPIError) and (
        exc.connection_invalidated or isinstance(exc, sa.exc.InterfaceError)
    ):
        return True
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError | asyncpg.InterfaceError):  # refused, reset, timed out
            return True
        if isinstance(cause, sqlite3.Error):
            return (getattr(cause, "sqlite_errorcode", 0) & 0xFF) in SQLITE_UNAVAILABLE
        if isinstance(cause, asyncpg.PostgresError):
            return str(getattr(cause, "sqlstate", "")).startswith(POSTGRES_UNAVAILABLE)
        # SQLAlchemy wraps the driver's error in `orig`, its asyncpg adapter in a cause.
        cause = getattr(cause, "orig", None) or cause.__cause__
    return False
