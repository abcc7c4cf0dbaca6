"""The two database backends, one module each, behind one interface (`Backend`).

The store's SQL is written once for both, as plain SQLAlchemy Core; what the backends do
differently sits behind `Backend`, one driver per database, with the same method names:

- `sqlite.py`: one writer, so a write transaction runs in a writer thread of its own;
  many rows in one statement (`sqlite_many_rows.py`); wake-ups by Unix socket
  (`sqlite_wake_sockets.py`);
- `postgres.py`: concurrent writers through asyncpg; a submit's inserts and NOTIFY in one
  statement; PgBouncer's transaction mode; the LISTEN connection kept open
  (`postgres_listen.py`).

Each says at its top what differs from the other, and why. What both of their statements
share (row locks, materialized CTEs, partial indexes...) is `app.store.dialect`; which
errors mean the database is away is `app.store.outages`. Timestamps are stored as naive
UTC on both (`app.store.tables.UTCDateTime`).
"""

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.backends.postgres import PostgresBackend
from app.store.backends.sqlite import SQLiteBackend
from app.store.backends.writes import NewRows, Writes
from app.text.database_url import parsed

T = TypeVar("T")


class Backend(Protocol):
    """What the store asks of a database backend."""

    name: str
    """"sqlite" or "postgresql", as SQLAlchemy names the dialect."""
    look_before_claiming: bool
    """Whether a claim looks for due jobs with a read before its write transaction."""

    def create_engine(self, pool_size: int) -> AsyncEngine:
        """The engine of the store's reads, at most `pool_size` connections."""
        ...

    async def transact(self, engine: AsyncEngine, work: Callable[[sa.Connection], T]) -> T:
        """Run `work` in one write transaction."""
        ...

    async def dispose(self) -> None:
        """Release what the backend holds beside the engine."""
        ...

    async def check_writes(self, engine: AsyncEngine) -> None:
        """Raise unless the database takes writes now (beyond a ping's reach)."""
        ...

    def updates(self, statement: sa.Update, rows: Sequence[dict[str, Any]]) -> Writes:
        """`statement` once per row of parameters."""
        ...

    def inserts(
        self, table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool = False
    ) -> Writes:
        """Insert every row, skipping those whose key exists with `skip_existing`."""
        ...

    def inserts_together(self, writes: Sequence[NewRows]) -> Writes:
        """Insert every write's rows, in as few round trips as the backend can."""
        ...

    async def insert_and_wake(
        self, engine: AsyncEngine, writes: Sequence[NewRows], priority: int | None = None
    ) -> None:
        """Insert every write's rows, all or nothing, then wake other processes' workers."""
        ...

    def minutes_between(
        self, start: sa.ColumnElement[Any], end: sa.ColumnElement[Any]
    ) -> sa.ColumnElement[int]:
        """Whole minutes from `start` to a later `end` (timestamps), floored."""
        ...

    def notify(self, conn: sa.Connection) -> None:
        """Wake other processes' workers once this transaction commits."""
        ...

    def listen(
        self, on_notify: Callable[[int | None], None], listen_url: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Call `on_notify` on other processes' wake-ups while the block runs."""
        ...


def backend_for(database_url: str) -> Backend:
    """Pick the backend and driver for a plain URL (`sqlite:///x.db`, `postgresql://...`);
    ValueError, the URL's password hidden, for one that does not parse or names another."""
    url = parsed(database_url)
    scheme = url.get_backend_name()
    if scheme == "sqlite":
        return SQLiteBackend(url)
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(url)
    raise ValueError(
        f"unsupported database URL scheme {url.drivername!r}; use sqlite or postgresql"
    )
