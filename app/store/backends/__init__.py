"""The two database backends, a package each, behind one interface (`Backend`).

Each backend (`postgres/`, `sqlite/`) is a driver and its statements: the `Backend` class
in its `__init__.py` (transactions, many rows' writes and reads, wake-ups), and a module
per sequence with the same function names in each (`claim.py`, `record.py`, `counts.py`,
as `ClaimStatements`, `RecordStatements`, `CountStatements` list them). Each file says at
its top how it differs from the other backend, and why. The sequences
(`app.store.claim`, `app.store.record`, `app.store.counts`) call them by name, never asking
which database runs: that is decided once, by `backend_for`.

What both backends run as written is `claim_sql.py` and `record_sql.py`; the values they
take and give, `writes.py`; the SQL helpers rendered for either, `app.store.dialect`;
which errors mean the database is away, `app.store.outages`. Timestamps are stored as
naive UTC on both (`app.store.tables.UTCDateTime`).
"""

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.rules.scheduling import ShareRules
from app.store.backends.claim_sql import Candidates
from app.store.backends.postgres import PostgresBackend
from app.store.backends.sqlite import SQLiteBackend
from app.store.backends.writes import NewRows, Updates, Writes
from app.text.database_url import parsed

T = TypeVar("T")


class ClaimStatements(Protocol):
    """The claim's statements where the backends differ (`app.store.claim` says the steps)."""

    async def worth_claiming(
        self,
        read: Callable[[], contextlib.AbstractAsyncContextManager[AsyncConnection]],
        now: datetime,
        rules: ShareRules,
    ) -> bool:
        """Whether a claim's write transaction may find anything (a look through `read`,
        outside the write transaction, where the backend needs one)."""
        ...

    def candidates(
        self,
        conn: sa.Connection,
        waiting: list[str],
        counts: list[int],
        now: datetime,
        rules: ShareRules,
    ) -> Candidates:
        """Step 2 (and 3, where the backend locks the domains' rows with it): the first
        `counts` claimable jobs of each `waiting` tenant, locked."""
        ...

    def take(
        self,
        conn: sa.Connection,
        taken: dict[str, Any],
        starts: list[dict[str, Any]],
        served: list[dict[str, Any]],
        floor: int,
    ) -> None:
        """Step 5: the jobs leased, the domains' starts and the tenants' turns counted."""
        ...


class RecordStatements(Protocol):
    """The record's statements where the backends differ (`app.store.record`)."""

    def free_slots(
        self,
        freed_domains: Sequence[dict[str, Any]],
        freed_tenants: Sequence[dict[str, Any]],
        now: datetime,
        updates: Updates,
    ) -> list[Writes]:
        """Steps 5 and 6: the domains' slots and the tenants' jobs in flight freed, compiled
        and bound before the transaction (`updates`: the backend's many rows' writes)."""
        ...


class CountStatements(Protocol):
    """The counts' statements where the backends differ (`app.store.counts`)."""

    def fold(self, conn: sa.Connection, table: sa.Table, keys: tuple[str, ...], change: str) -> int:
        """Replace the rows of `table` by the sums of `change` per `keys`; how many went."""
        ...


class Backend(Protocol):
    """What the store asks of a database backend."""

    name: str
    """"sqlite" or "postgresql", as SQLAlchemy names the dialect."""

    @property
    def claim(self) -> ClaimStatements: ...

    @property
    def record(self) -> RecordStatements: ...

    @property
    def counts(self) -> CountStatements: ...

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

    def all_rows(
        self, conn: sa.Connection, statement: sa.Select[Any] | sa.CompoundSelect[Any], params: Any
    ) -> Sequence[tuple[Any, ...]]:
        """Every row of `statement` (a module-level constant), read in one go."""
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
    ValueError, the URL's password hidden, for one that does not parse or names another.
    The one place that asks which database runs."""
    url = parsed(database_url)
    scheme = url.get_backend_name()
    if scheme == "sqlite":
        return SQLiteBackend(url)
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(url)
    raise ValueError(
        f"unsupported database URL scheme {url.drivername!r}; use sqlite or postgresql"
    )
