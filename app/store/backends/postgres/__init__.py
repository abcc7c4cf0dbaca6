"""The PostgreSQL backend: concurrent writers, SKIP LOCKED, LISTEN/NOTIFY, PgBouncer.

How it differs from SQLite (`app.store.backends.sqlite`), and why:

- Writers run concurrently, each transaction through asyncpg holding its own row locks
  (`app.store.dialect.lock_rows`, `lock_skipping`: concurrent claims take different rows).
- Statements over bound lists, LATERAL joins and writes in CTEs: a claim's steps and a
  record's frees in fewer round trips (`claim.py`, `record.py`, `counts.py`, `lists.py`).
- Many rows' writes are one executemany, or one statement over arrays (`inserts.py`); a
  submit's inserts and its NOTIFY are one statement (`insert_and_wake`).
- Wake-ups cross hosts: NOTIFY at commit, and a LISTEN connection kept open (`listen.py`).
- Minutes between timestamps: subtracted into an interval.
- Behind PgBouncer in transaction mode (`?pooler=transaction`): no statement stays
  prepared on a server connection, and LISTEN needs a URL of the server itself.
"""

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.model import wake_payload
from app.store.backends.postgres import claim, counts, record
from app.store.backends.postgres.inserts import (
    WAKE_PAYLOAD,
    ExecuteMany,
    as_arrays,
    insert_and_wake_statement,
    insert_missing_each,
    inserts_statement,
)
from app.store.backends.postgres.listen import CONNECT_TIMEOUT_SECONDS, NOTIFY_CHANNEL, listening
from app.store.backends.writes import InTurn, NewRows, Once, Writes
from app.text.database_url import parsed

if TYPE_CHECKING:
    from app.store.backends import ClaimStatements, CountStatements, RecordStatements

log = logging.getLogger("ingest.store")

T = TypeVar("T")

POOLER_PARAMETER = "pooler"
"""A query parameter of INGEST_DATABASE_URL of ingest's own (not passed to the driver)."""
TRANSACTION_POOLER = "transaction"


def _unique_statement_name() -> str:
    return f"__asyncpg_{uuid.uuid4().hex}__"


class PostgresBackend:
    name = "postgresql"
    claim: "ClaimStatements" = claim
    record: "RecordStatements" = record
    counts: "CountStatements" = counts

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
        return ExecuteMany(statement, rows)

    def inserts(
        self, table: sa.Table, rows: Sequence[dict[str, Any]], skip_existing: bool = False
    ) -> Writes:
        """Insert every row (skipping those whose key exists, with `skip_existing`: looked
        for first, `insert_missing_each`)."""
        if skip_existing and rows:
            return ExecuteMany(insert_missing_each(table, tuple(rows[0])), rows)
        return ExecuteMany(sa.insert(table), rows)

    def inserts_together(self, writes: Sequence[NewRows]) -> Writes:
        """Every write's rows inserted by one statement (an INSERT per table as a CTE, over
        the rows sent as arrays, one per column): one round trip, of a statement prepared
        once whatever the number of rows."""
        shape, params = as_arrays(writes)
        return Once(inserts_statement(shape), params) if shape else InTurn([])

    async def insert_and_wake(
        self, engine: AsyncEngine, writes: Sequence[NewRows], priority: int | None = None
    ) -> None:
        """Insert every write's rows, all or nothing, and wake the workers that LISTEN,
        telling them the highest `priority` submitted (the NOTIFY's payload).

        One statement (`inserts_together`'s, with NOTIFY as `pg_notify`) in a transaction
        of its own: one round trip. BEGIN, an INSERT per table, NOTIFY and COMMIT took six,
        and with the worker in the same process each one waits for the worker's thread to
        let go of the interpreter lock."""
        shape, params = as_arrays(writes)
        params[WAKE_PAYLOAD] = wake_payload(priority)
        if self.transaction_pooler:
            # Outside a transaction the pooler may run the statement's prepare and its
            # execution on two server connections: in one, three round trips.
            async with engine.begin() as conn:
                await conn.execute(insert_and_wake_statement(shape), params)
            return
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(insert_and_wake_statement(shape), params)

    def all_rows(
        self, conn: sa.Connection, statement: sa.Select[Any] | sa.CompoundSelect[Any], params: Any
    ) -> Sequence[tuple[Any, ...]]:
        """Every row of `statement`: asyncpg reads them all in one go."""
        return conn.execute(statement, params).all()

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
        async with listening(
            dsn.render_as_string(hide_password=False), on_notify, self._own_sessions
        ):
            yield
