"""The one place where SQLite and PostgreSQL differ: every difference is here, each with why.

Everything else (the store's SQL) is written once for both, through these helpers. What
differs:

- the async driver behind a plain URL (aiosqlite, asyncpg);
- how a write transaction runs (`transact`, given a function of a plain `Connection`):
  SQLite has one writer, so a transaction runs in a writer thread, statements back to
  back, and takes the lock up front (`BEGIN IMMEDIATE`, tried every ms while another
  process writes) instead of failing to upgrade a read lock; writers of one process (its
  API's loop and its worker's) queue for that one thread first. PostgreSQL writers run
  concurrently through the async driver;
- wake-ups across processes: PostgreSQL has LISTEN/NOTIFY; SQLite has none, so other
  processes find new jobs by polling;
- row locks (`lock_rows`, `lock_skipping`): PostgreSQL locks the rows a statement reads;
  SQLite has no row locks (its compiler drops `FOR UPDATE`), and needs none, since
  `BEGIN IMMEDIATE` holds the one writer for the whole transaction;
- partial indexes (`partial_index`): both have them, under a keyword of their own;
- inserting rows unless their key exists (`Backend.inserts(skip_existing=True)`):
  PostgreSQL's ON CONFLICT DO NOTHING waits for a transaction that updated the existing
  row, so there the insert looks for the row first;
- a submit's inserts and wake-up (`Backend.insert_and_wake`): one statement on
  PostgreSQL (a round trip each would wait for the interpreter lock when the worker shares
  the process); on SQLite, statements in one write transaction, and no wake-up;
- many rows' writes (`Backend.updates`, `Backend.inserts`): PostgreSQL's driver
  pipelines an executemany; SQLite steps it row by row in the writer thread, and every
  step lets go of the interpreter lock and waits to get it back (up to 5 ms when the
  worker's loop is busy: 40 rows took 40-60 ms), so there the rows go in as one statement
  over a table of them (`_given`), compiled and bound before the writer is taken where
  the rows are known before the transaction; many rows' reads (`all_rows`) come back as
  one row on SQLite, for the same reason;
- date arithmetic (`Backend.minutes_between`): SQLite has no interval type, only
  `julianday`; PostgreSQL subtracts timestamps into an interval;
- which errors mean "the database cannot serve now" (`database_unavailable`): SQLite says
  so by result code (full, read-only, busy, I/O), PostgreSQL by SQLSTATE class (connection,
  resources, shutdown);
- schema changes: SQLite cannot alter a column or constraint in place, so the migrations
  use Alembic's batch mode (copy the table), which PostgreSQL runs as plain ALTERs.

Timestamps are stored as naive UTC on both (`app.store.tables.UTCDateTime`).

Why one module past 300 lines: it is the one place where the backends differ (the layout's
rule), each difference beside its reason, LISTEN's keeper and the outage errors included.
"""

import asyncio
import contextlib
import functools
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import asyncpg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from app.database_url import parsed
from app.model import wake_payload, woken_for
from app.store.wake_sockets import WakeSockets

log = logging.getLogger("ingest.store")

T = TypeVar("T")

NOTIFY_CHANNEL = "ingest_jobs"
CONNECT_TIMEOUT_SECONDS = 5.0
WRITE = {"ingest_write": True}
"""Execution options of a write transaction; see `_begin_sqlite`."""


@dataclass(frozen=True)
class NewRows:
    """Rows to insert into `table` (`Backend.insert_and_wake`), each a dict of the same
    columns; with `skip_existing`, a row whose key exists is skipped."""

    table: sa.Table
    rows: Sequence[dict[str, Any]]
    skip_existing: bool = False


class SQLiteBackend:
    name = "sqlite"
    look_before_claiming = True
    """A claim takes the one writer up front (`BEGIN IMMEDIATE`): an idle worker polling with
    write transactions would hold other processes' writers off, so it reads first."""

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

    def updates(self, statement: sa.Update, rows: Sequence[dict[str, Any]]) -> "Writes":
        """`statement` once per row of parameters (each row's keys its bound parameters'),
        as one statement per 256 rows over a table of them: `WITH given AS (...) UPDATE ...
        FROM given`. The rowcount is not kept. Compiled and bound here, so a caller that
        prepares its writes before the transaction holds the writer for running them only
        (a statement over 64 rows takes 20-30 ms to compile, the first time)."""
        keys = tuple(rows[0]) if rows else ()
        dialect = self._writer.dialect
        return _Runs(
            [
                _update_given(statement, keys, size, dialect).bound(params)
                for size, params in _in_statements(rows)
            ]
        )

    def inserts(
        self, table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool = False
    ) -> "Writes":
        """Insert every row (skipping those whose key exists, with `skip_existing`), as a
        statement per 256 rows (`updates`): `WITH given AS (...) INSERT ... SELECT`."""
        keys = tuple(rows[0]) if rows else ()
        dialect = self._writer.dialect
        return _Runs(
            [
                _insert_given(table, keys, size, skip_existing, dialect).bound(params)
                for size, params in _in_statements(rows)
            ]
        )

    async def insert_and_wake(
        self, engine: AsyncEngine, writes: Sequence[NewRows], priority: int | None = None
    ) -> None:
        """Insert every write's rows, all or nothing, then wake the workers of other
        processes on this host (`app.store.wake_sockets`: SQLite has no NOTIFY; those of
        other hosts poll). Compiled in the writer thread, unlike a record's: on the
        API's loop, the first batch of a new size would hold every request for the
        compile (a statement over 256 rows takes 75-175 ms)."""

        def insert(conn: sa.Connection) -> None:
            for write in writes:
                self.inserts(write.table, write.rows, write.skip_existing).run(conn)

        await self.transact(engine, insert)
        if self._wake is not None:
            self._wake.wake(priority)

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
        runs (`app.store.wake_sockets`)."""
        if self._wake is None:
            yield
            return
        async with self._wake.listening(on_notify):
            yield


MAX_GIVEN_ROWS = 256
"""Rows per statement over a table of rows: under SQLite's 500 terms of a compound SELECT,
and 256 rows of a job's ~20 columns under its 32,766 bound parameters."""


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
    would hash them all into its cache key on every run (a claim of 32 spent 2 ms there)."""

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


class Writes(Protocol):
    """Statements of many rows, compiled and bound (`Backend.updates`, `Backend.inserts`),
    to run in a write transaction."""

    def run(self, conn: sa.Connection) -> None: ...


@dataclass(frozen=True)
class _Runs:
    """SQLite's: each statement's SQL and values, ready for the driver."""

    statements: list[tuple[str, tuple[Any, ...]]]

    def run(self, conn: sa.Connection) -> None:
        for sql, values in self.statements:
            conn.exec_driver_sql(sql, values)


@dataclass(frozen=True)
class _ExecuteMany:
    """PostgreSQL's: one executemany, which asyncpg sends in one round trip."""

    statement: sa.Update | sa.Insert
    rows: Sequence[dict[str, Any]]

    def run(self, conn: sa.Connection) -> None:
        if self.rows:
            conn.execute(self.statement, self.rows)


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
    """BEGIN IMMEDIATE, trying again every ms while another process writes; False on any
    other error, or after WRITER_WAIT_SECONDS.

    SQLite's busy handler sleeps ever longer between tries (1, 2, 5 ... 25, 50, 100 ms):
    against a worker process whose transactions follow each other closely, a write that
    had waited a while was let in up to 100 ms late, or lost to the worker's next
    transaction again (POST /jobs p99 168 ms with `ingest worker` apart)."""
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


class PostgresBackend:
    name = "postgresql"
    look_before_claiming = False
    """A claim that finds nothing is a read-only transaction (no lock, no WAL written), and
    its first statement, the waiting tenants, is that look: a look before it would cost one
    more round trip and a pool checkout per claim."""

    def __init__(self, url: URL) -> None:
        pooler = url.query.get(POOLER_PARAMETER)
        if pooler not in (None, TRANSACTION_POOLER):
            raise ValueError(
                f"{POOLER_PARAMETER}={pooler} in the database URL: only "
                f"{POOLER_PARAMETER}={TRANSACTION_POOLER} is known"
            )
        self.transaction_pooler = pooler == TRANSACTION_POOLER
        """The URL names a pooler that hands each transaction any server connection
        (PgBouncer's `pool_mode = transaction`): no statement may stay prepared on a
        connection, and LISTEN needs a connection of its own (`listen`)."""
        self.url = url.difference_update_query([POOLER_PARAMETER]).set(
            drivername="postgresql+asyncpg"
        )
        self._own_sessions: set[int] = set()
        """The server process ids of this process's connections: a NOTIFY one of them sent
        is this process's own submit, whose worker it woke directly."""

    def create_engine(self, pool_size: int) -> AsyncEngine:
        # At most `pool_size` connections per process (INGEST_DATABASE_POOL_SIZE), and one
        # more for LISTEN: claims and records are batched, so a worker needs few, and a stock
        # PostgreSQL (max_connections=100) takes many processes. No pre-ping: a connection
        # that died is invalidated on its first error, and the loop's retry uses a new one.
        # A connect gives up after CONNECT_TIMEOUT_SECONDS (asyncpg's own is 60): a server
        # that drops packets makes a request answer 503 in seconds, not hang for a minute.
        url = self.url
        connect_args: dict[str, Any] = {"timeout": CONNECT_TIMEOUT_SECONDS}
        if self.transaction_pooler:
            # Through a transaction pooler the next transaction may run on another server
            # connection, where a statement this one prepared is missing, or one of the
            # same name is there already ("prepared statement __asyncpg_stmt_1__ already
            # exists"). So nothing is cached (SQLAlchemy's cache and asyncpg's) and each
            # statement is prepared under a name of its own (SQLAlchemy's asyncpg notes).
            url = url.update_query_dict({"prepared_statement_cache_size": "0"})
            connect_args |= {
                "statement_cache_size": 0,
                "prepared_statement_name_func": _unique_statement_name,
            }
        engine = create_async_engine(
            url, pool_size=pool_size, max_overflow=0, connect_args=connect_args
        )
        own = self._own_sessions
        event.listen(
            engine.sync_engine,
            "connect",
            lambda connection, _: own.add(connection.driver_connection.get_server_pid()),
        )
        event.listen(
            engine.sync_engine,
            "close",
            lambda connection, _: own.discard(connection.driver_connection.get_server_pid()),
        )
        return engine

    async def transact(self, engine: AsyncEngine, work: Callable[[sa.Connection], T]) -> T:
        """Run `work` in one write transaction (through the async driver: PostgreSQL's
        writers run concurrently, each holding its own row locks)."""
        async with engine.begin() as conn:
            return await conn.run_sync(work)

    async def dispose(self) -> None:
        pass

    async def check_writes(self, engine: AsyncEngine) -> None:
        """Nothing beyond the ping. A PostgreSQL server that cannot write is seen by its
        clients as one that does not answer: with its WAL disk full it shuts down, and a
        failover or restart refuses connections. A write per probe from every replica would
        only add WAL and dead rows to a shared server; writes that fail all the same answer
        503 where they happen."""

    def updates(self, statement: sa.Update, rows: Sequence[dict[str, Any]]) -> Writes:
        """`statement` once per row of parameters: one executemany."""
        return _ExecuteMany(statement, rows)

    def inserts(
        self, table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool = False
    ) -> Writes:
        """Insert every row (skipping those whose key exists, with `skip_existing`: looked
        for first, `_pg_insert_missing_each`)."""
        if skip_existing and rows:
            return _ExecuteMany(_pg_insert_missing_each(table, tuple(rows[0])), rows)
        return _ExecuteMany(sa.insert(table), rows)

    async def insert_and_wake(
        self, engine: AsyncEngine, writes: Sequence[NewRows], priority: int | None = None
    ) -> None:
        """Insert every write's rows, all or nothing, and wake the workers that LISTEN,
        telling them the highest `priority` submitted (the NOTIFY's payload).

        One statement (an INSERT per table as a CTE, over the rows sent as arrays, one per
        column, and NOTIFY as `pg_notify`) in a transaction of its own: one round trip, of
        a statement prepared once whatever the number of rows. BEGIN, an INSERT per table,
        NOTIFY and COMMIT took six, and with the worker in the same process each one waits
        for the worker's thread to let go of the interpreter lock."""
        writes = [write for write in writes if write.rows]
        shape = tuple((w.table, tuple(w.rows[0]), w.skip_existing) for w in writes)
        params: dict[str, Any] = {
            _column_of(write.table, key): [row[key] for row in write.rows]
            for write in writes
            for key in write.rows[0]
        }
        params[WAKE_PAYLOAD] = wake_payload(priority)
        if self.transaction_pooler:
            # Outside a transaction the pooler may run the statement's prepare and its
            # execution on two server connections: in one, three round trips.
            async with engine.begin() as conn:
                await conn.execute(_pg_insert_and_wake(shape), params)
            return
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(_pg_insert_and_wake(shape), params)

    def minutes_between(
        self, start: sa.ColumnElement[Any], end: sa.ColumnElement[Any]
    ) -> sa.ColumnElement[int]:
        """Whole minutes from `start` to a later `end` (timestamps), floored."""
        return sa.cast(sa.func.floor(sa.extract("epoch", end - start) / 60), sa.Integer)

    def notify(self, conn: sa.Connection) -> None:
        # Delivered at commit, so listeners never wake before the job is visible.
        conn.execute(sa.text(f"NOTIFY {NOTIFY_CHANNEL}"))

    @contextlib.asynccontextmanager
    async def listen(
        self, on_notify: Callable[[int | None], None], listen_url: str | None = None
    ) -> AsyncIterator[None]:
        """Call `on_notify` whenever any process submits a job, while the block runs, with
        the highest priority submitted if the submit said it (`wake_payload`).

        LISTEN holds its connection for good, which a transaction pooler cannot give: there
        it needs `listen_url` (INGEST_LISTEN_DATABASE_URL, the server itself); without one
        the workers only poll, and say so once.

        The LISTEN connection is kept open: one that drops (the server restarted, the
        backend was terminated, the network went away) is reopened after a wait growing
        from 0.5 s to 5 s, logged once when lost and once when back. Meanwhile the worker
        still polls; once back, `on_notify` is called, as a submit may have come between.
        """
        if listen_url is not None:
            dsn = parsed(listen_url).set(drivername="postgresql")
        elif self.transaction_pooler:
            log.info(
                "LISTEN off: the database URL names a transaction pooler and "
                "INGEST_LISTEN_DATABASE_URL is not set; workers poll for new jobs"
            )
            yield
            return
        else:
            dsn = self.url.set(drivername="postgresql")
        stopping = asyncio.Event()
        keeping = asyncio.create_task(
            self._keep_listening(dsn.render_as_string(hide_password=False), on_notify, stopping),
            name="listen",
        )
        try:
            yield
        finally:
            # The flag, not only the cancel: asyncpg may turn a cancel that lands inside a
            # query into an error of its own (InternalClientError), which the loop below
            # takes for a lost connection; the flag still ends it.
            stopping.set()
            keeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeping

    async def _keep_listening(
        self, dsn: str, on_notify: Callable[[int | None], None], stopping: asyncio.Event
    ) -> None:
        failures = 0
        while not stopping.is_set():
            try:
                connection = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_SECONDS)
            except LISTEN_ERRORS as exc:
                if failures == 0:
                    log.warning("LISTEN %s unavailable (%s); reconnecting", NOTIFY_CHANNEL, exc)
                failures += 1
                await asyncio.sleep(listen_wait(failures))
                continue
            try:
                lost = await self._listen_on(connection, on_notify, back=failures > 0)
            finally:
                connection.terminate()
            if stopping.is_set():
                return
            failures = 1
            log.warning("LISTEN connection lost: %s; reconnecting", lost)
            await asyncio.sleep(listen_wait(failures))

    async def _listen_on(
        self, connection: asyncpg.Connection, on_notify: Callable[[int | None], None], back: bool
    ) -> str:
        """LISTEN on `connection` until it is lost; why it was."""
        closed = asyncio.Event()
        connection.add_termination_listener(lambda _: closed.set())
        try:
            own = self._own_sessions

            def notified(_: object, sender: int, channel: str, payload: str) -> None:
                # This process's own submits woke its worker already, before their commit
                # reached the server: a second pass would only claim nothing.
                if sender not in own:
                    on_notify(woken_for(payload))

            await connection.add_listener(NOTIFY_CHANNEL, notified)
            if back:
                log.info("LISTEN connection back")
                on_notify(None)
            while not closed.is_set():
                try:
                    await asyncio.wait_for(closed.wait(), LISTEN_PING_SECONDS)
                except TimeoutError:
                    # A connection that died without a word (a network partition) shows
                    # only when used.
                    await connection.execute("SELECT 1", timeout=CONNECT_TIMEOUT_SECONDS)
        except Exception as exc:  # whatever broke the LISTEN connection, it is reopened
            return str(exc) or type(exc).__name__
        return "the server closed the connection"


@functools.lru_cache(maxsize=16)
def _pg_insert_missing_each(table: sa.Table, keys: tuple[str, ...]) -> sa.Insert:
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


@functools.lru_cache(maxsize=16)
def _pg_insert_and_wake(
    shape: tuple[tuple[sa.Table, tuple[str, ...], bool], ...],
) -> sa.Select[Any]:
    """`PostgresBackend.insert_and_wake`'s statement for writes of this shape (table,
    columns, skip existing): each column's values bound as one array."""
    inserts = []
    for table, keys, skip_existing in shape:
        arrays = []
        for key in keys:
            array = ARRAY(table.c[key].type)
            arrays.append(sa.cast(sa.bindparam(_column_of(table, key), type_=array), array))
        given = sa.func.unnest(*arrays).table_valued(*keys).render_derived(f"given_{table.name}")
        rows = sa.select(*(given.c[key] for key in keys))
        if skip_existing:  # Looked for first: see `_pg_insert_missing_each`.
            rows = rows.where(_missing_from(table, {key: given.c[key] for key in keys}))
        insert = pg_insert(table).from_select(list(keys), rows)
        if skip_existing:
            insert = insert.on_conflict_do_nothing()
        inserts.append(insert.cte(f"new_{table.name}"))
    payload = sa.bindparam(WAKE_PAYLOAD, type_=sa.String)
    return sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, payload)).add_cte(*inserts)


WAKE_AFTER_COMMIT = "ingest_wake_after_commit"
"""The flag `SQLiteBackend.notify` leaves on a write transaction's connection."""

WAKE_PAYLOAD = "wake_payload"
"""The bound parameter of a submit's NOTIFY payload."""


LISTEN_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)
LISTEN_PING_SECONDS = 30.0
"""How often an idle LISTEN connection is checked."""


def listen_wait(failures: int) -> float:
    """Seconds before reopening LISTEN after `failures` failures in a row: 0.5, 1, 2, 4, 5."""
    return min(0.5 * 2.0 ** min(failures - 1, 10), 5.0)


Backend = SQLiteBackend | PostgresBackend

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
    per statement). On SQLite they come back as one row, a JSON array of the rows' values:
    the sqlite3 module lets go of the interpreter lock for every row it steps to, and in the
    writer thread each re-take waits for the busy event loop (up to the switch interval),
    all while the writer is held: 32 rows took 13-20 ms beside a spinning thread, one row
    of them packed 5 ms. PostgreSQL's driver reads all rows in one go."""
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, params).all()
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


def joins_lateral(conn: sa.Connection) -> bool:
    """Can a statement join each value of a bound list to a subquery of its own (`each_of`
    and LATERAL)? PostgreSQL can: a claim's candidates are then one small statement for any
    number of tenants (1.5 ms for 32 of them among 100,000 pending jobs), where a UNION ALL
    of one subquery per tenant took 12 ms, 9 of them planning it anew each time. SQLite has
    neither lists nor LATERAL, and plans the UNION ALL in no time."""
    return conn.dialect.name == "postgresql"


def each_of(name: str) -> sa.TableValuedAlias:
    """The values of the bound list `name` as rows of one column, `value` (PostgreSQL's
    `unnest`; see `joins_lateral`)."""
    values = sa.bindparam(name, type_=ARRAY(sa.String))
    return sa.func.unnest(values).table_valued("value").render_derived(name=name)


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


POOLER_PARAMETER = "pooler"
"""A query parameter of INGEST_DATABASE_URL of ingest's own (not passed to the driver)."""
TRANSACTION_POOLER = "transaction"


def _unique_statement_name() -> str:
    return f"__asyncpg_{uuid.uuid4().hex}__"


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
