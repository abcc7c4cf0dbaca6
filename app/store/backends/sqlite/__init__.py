"""The SQLite backend: one writer, held by a thread of its own; wake-ups by Unix socket.

How it differs from PostgreSQL (`app.store.backends.postgres`), and why:

- One writer per database: a write transaction runs in this process's writer thread and
  takes the lock up front (`BEGIN IMMEDIATE`, tried again while another process writes:
  `_took_the_writer`); reads go through aiosqlite, beside the writer (WAL).
- No row locks, and no need of any (the compiler drops `FOR UPDATE`); a claim looks first.
- No bound lists, LATERAL or writes in CTEs: a claim's and a record's steps run apart, in
  the writer thread (`claim.py`, `record.py`, `counts.py`).
- Many rows in one statement, written and read (`many_rows.py`): the driver steps row by
  row, and every step waits for the interpreter lock.
- No NOTIFY: wake-ups through Unix sockets on this host (`wake_sockets.py`); others poll.
- No interval type (`julianday`); no ALTER in place (the migrations' batch mode).
"""

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.store.backends.sqlite import claim, counts, many_rows, record
from app.store.backends.sqlite.wake_sockets import WakeSockets
from app.store.backends.writes import InTurn, NewRows, Writes

if TYPE_CHECKING:
    from app.store.backends import ClaimStatements, CountStatements, RecordStatements

T = TypeVar("T")

WRITE = {"ingest_write": True}
"""Execution options of a write transaction; see `_begin_sqlite`."""

WAKE_AFTER_COMMIT = "ingest_wake_after_commit"
"""The flag `SQLiteBackend.notify` leaves on a write transaction's connection."""


class SQLiteBackend:
    name = "sqlite"
    claim: "ClaimStatements" = claim
    record: "RecordStatements" = record
    counts: "CountStatements" = counts

    def __init__(self, url: URL) -> None:
        self.url = url.set(drivername="sqlite+aiosqlite")
        self._writer_thread = ThreadPoolExecutor(1, thread_name_prefix="ingest-sqlite-writer")
        # Created here (no connection yet), so writes can be compiled for its dialect before
        # they reach the writer thread (`updates`, `inserts`).
        self._writer = sa.create_engine(
            self.url.set(drivername="sqlite+pysqlite"),
            connect_args={"timeout": 30},
            execution_options=WRITE,
        )
        event.listen(self._writer, "connect", _configure_sqlite)
        event.listen(self._writer, "connect", _configure_writer)
        event.listen(self._writer, "begin", _begin_sqlite)
        database = self.url.database
        self._wake = WakeSockets(database) if database and database != ":memory:" else None

    def create_engine(self, pool_size: int) -> AsyncEngine:
        """The engine of reads (aiosqlite); writes have their own (`transact`)."""
        if self.url.database and self.url.database != ":memory:":
            Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(self.url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _configure_sqlite)
        event.listen(engine.sync_engine, "begin", _begin_sqlite)
        return engine

    async def transact(self, engine: AsyncEngine, work: Callable[[sa.Connection], T]) -> T:
        """Run `work` in one write transaction, in the writer thread: its statements run back
        to back, so the database's one writer is held for the transaction's own work only.
        Through aiosqlite every statement would wait for a turn of the busy event loop, and
        the writer would be held meanwhile. Writers of this process, from any of its event
        loops, queue for the thread in turn (a caller cancelled meanwhile does not take its
        write back); for those of other processes it waits in the thread (`_took_the_writer`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer_thread, self._run, work)

    def _run(self, work: Callable[[sa.Connection], T]) -> T:
        with self._writer.begin() as conn:
            conn.info.pop(WAKE_AFTER_COMMIT, None)  # left by a transaction rolled back
            result = work(conn)
            wake = conn.info.pop(WAKE_AFTER_COMMIT, False)
        # Committed: what `notify` asked for may wake the other processes' workers now.
        if wake and self._wake is not None:
            self._wake.wake(None)
        return result

    async def dispose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer_thread, self._writer.dispose)
        self._writer_thread.shutdown(wait=False)
        if self._wake is not None:
            self._wake.close()

    def updates(self, statement: sa.Update, rows: Sequence[dict[str, Any]]) -> Writes:
        """`statement` once per row of parameters (each row's keys its bound parameters'),
        as one statement per 256 rows over a table of them: `WITH given AS (...) UPDATE ...
        FROM given`. The rowcount is not kept. Compiled and bound here, so a caller that
        prepares its writes before the transaction holds the writer for running them only
        (a compile takes long, the first time: docs/design/sqlite.md)."""
        return many_rows.updates(statement, rows, self._writer.dialect)

    def inserts(
        self, table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool = False
    ) -> Writes:
        """Insert every row (skipping those whose key exists, with `skip_existing`), as a
        statement per 256 rows (`updates`): `WITH given AS (...) INSERT ... SELECT`."""
        return many_rows.inserts(table, rows, skip_existing, self._writer.dialect)

    def inserts_together(self, writes: Sequence[NewRows]) -> Writes:
        """Every write's rows inserted (`inserts`), one table after the other: the writer
        thread runs them with no round trip to save."""
        return InTurn([self.inserts(w.table, w.rows, w.skip_existing) for w in writes])

    async def insert_and_wake(
        self, engine: AsyncEngine, writes: Sequence[NewRows], priority: int | None = None
    ) -> None:
        """Insert every write's rows, all or nothing, then wake the workers of other
        processes on this host (`wake_sockets.py`: SQLite has no NOTIFY; those of other
        hosts poll). Compiled in the writer thread, unlike a record's: on the API's loop,
        the first batch of a new size would hold every request for the compile
        (docs/design/sqlite.md)."""

        await self.transact(engine, self.inserts_together(writes).run)
        if self._wake is not None:
            self._wake.wake(priority)

    def all_rows(
        self, conn: sa.Connection, statement: sa.Select[Any] | sa.CompoundSelect[Any], params: Any
    ) -> Sequence[tuple[Any, ...]]:
        """Every row of `statement` (a module-level constant: its packed form is built once
        per statement), as one row, a JSON array of the rows' values
        (`many_rows.packed_rows`): the sqlite3 module lets go of the interpreter lock for
        every row it steps to, and in the writer thread each re-take waits for the busy
        event loop (up to the switch interval), all while the writer is held."""
        return many_rows.packed_rows(conn, statement, params)

    def minutes_between(
        self, start: sa.ColumnElement[Any], end: sa.ColumnElement[Any]
    ) -> sa.ColumnElement[int]:
        """Whole minutes from `start` to a later `end` (timestamps). Through milliseconds,
        rounded, so a time on a minute's boundary falls in that minute despite `julianday`'s
        floating point; integer division then floors it."""
        days = sa.func.julianday(end) - sa.func.julianday(start)
        return sa.cast(sa.func.round(days * 86_400_000), sa.Integer) // 60_000

    async def check_writes(self, engine: AsyncEngine) -> None:
        """Raise unless a write commits now: a read-only file or a full disk leaves reads
        working, so a ping cannot tell. The write rewrites the one row Alembic keeps, with
        its own value: a page written and committed, and nothing changed."""
        await self.transact(engine, _rewrite_schema_version)

    def notify(self, conn: sa.Connection) -> None:
        """Wake the workers of other processes on this host once this transaction commits
        (a requeue, a domain resumed): before, they would look and not see it."""
        conn.info[WAKE_AFTER_COMMIT] = True

    @contextlib.asynccontextmanager
    async def listen(
        self, on_notify: Callable[[int | None], None], listen_url: str | None = None
    ) -> AsyncIterator[None]:
        """Call `on_notify` whenever a process of this host submits a job, while the block
        runs (`wake_sockets.py`)."""
        if self._wake is None:
            yield
            return
        async with self._wake.listening(on_notify):
            yield


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside the one writer; synchronous=NORMAL is durable against
    # process crashes (not power loss) and is what makes WAL commits cheap.
    cursor = dbapi_connection.cursor()
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
        "busy_timeout=30000",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()
    # Hand transaction control to SQLAlchemy's begin event (the driver's own is broken).
    dbapi_connection.isolation_level = None


def _rewrite_schema_version(conn: sa.Connection) -> None:
    conn.execute(sa.text("UPDATE alembic_version SET version_num = version_num"))


def _begin_sqlite(conn: sa.Connection) -> None:
    write = conn.get_execution_options().get("ingest_write", False)
    if write and _took_the_writer(conn.connection.driver_connection):
        return
    # A read; or a write that could not begin: once more through SQLAlchemy, whose error
    # (a DBAPIError) is what the store's callers know.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _configure_writer(dbapi_connection: Any, _record: Any) -> None:
    # The writer's own wait (`_took_the_writer`) replaces SQLite's busy handler.
    dbapi_connection.execute("PRAGMA busy_timeout=0")


WRITER_WAIT_SECONDS = 30.0
"""How long a write waits for other processes' writes before it fails (busy)."""
WRITER_RETRY_SECONDS = 0.001


def _took_the_writer(dbapi_connection: Any) -> bool:
    """BEGIN IMMEDIATE, trying again every WRITER_RETRY_SECONDS while another process
    writes; False on any other error, or after WRITER_WAIT_SECONDS.

    SQLite's busy handler sleeps ever longer between tries: against a worker process whose
    transactions follow each other closely, a write that had waited a while was let in
    late, or lost to the worker's next transaction again (docs/design/sqlite.md)."""
    deadline = time.monotonic() + WRITER_WAIT_SECONDS
    while True:
        try:
            dbapi_connection.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                return False
        time.sleep(WRITER_RETRY_SECONDS)
