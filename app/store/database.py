"""A connection to the configured database: reads, write transactions, migrations, health.

Reads are async (`read()`). A write is a function of a plain `Connection`, run in one
transaction by `transact` the way the backend needs (`app.store.backends`): so the store's
writes are written once, as plain SQLAlchemy Core, for both databases.
"""

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.backends import Backend, backend_for
from app.store.backends.writes import NewRows

if TYPE_CHECKING:  # Alembic is imported where it migrates: a worker never pays for its import.
    from alembic.config import Config

T = TypeVar("T")
DEFAULT_POOL_SIZE = 5

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD_REVISION = "0019"
"""The newest migration shipped (tests/cli/test_schema_check.py holds it to the migrations): a
database at it needs no look at the migrations, so a worker starts without Alembic."""


class Database:
    def __init__(
        self,
        database_url: str,
        pool_size: int = DEFAULT_POOL_SIZE,
        *,
        beside: "Database | None" = None,
    ) -> None:
        self.url = database_url
        self.pool_size = pool_size
        # What one process must share between its event loops (SQLite's one writer) is
        # owned by the first Database, which disposes of it.
        self._owns_backend = beside is None
        self.backend: Backend = beside.backend if beside else backend_for(database_url)
        self.engine = self.backend.create_engine(pool_size)

    def beside(self) -> "Database":
        """The same database for another event loop (thread) of this process: connections
        of its own, since a driver's connections belong to the loop that opened them; the
        backend shared, so SQLite still has one writer per process."""
        return Database(self.url, self.pool_size, beside=self)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            yield conn

    async def transact(self, work: Callable[[sa.Connection], T]) -> T:
        """Run `work(conn)` in one write transaction: committed when it returns, rolled back
        when it raises. `work` issues its statements and computes nothing else."""
        return await self.backend.transact(self.engine, work)

    async def insert_and_wake(self, writes: Sequence[NewRows], priority: int | None = None) -> None:
        """Insert every write's rows, all or nothing, and wake the workers of other
        processes where the backend can (`Backend.insert_and_wake`), telling them the
        highest `priority` submitted."""
        await self.backend.insert_and_wake(self.engine, writes, priority)

    async def ping(self) -> None:
        async with self.read() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def check_ready(self) -> None:
        """Raise unless the database answers reads and takes writes (as far as the backend
        needs checking: `Backend.check_writes`)."""
        await self.ping()
        await self.backend.check_writes(self.engine)

    async def upgrade(self) -> None:
        """Apply the Alembic migrations up to head (in a thread: Alembic runs its own loop)."""
        await asyncio.to_thread(upgrade_to_head, self.url)

    async def dispose(self) -> None:
        """Close the connections; the owner (the first Database) also the backend's: call
        it after the Databases beside it are disposed."""
        if self._owns_backend:
            await self.backend.dispose()
        await self.engine.dispose()


def alembic_config(database_url: str) -> "Config":
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = database_url
    return config


def upgrade_to_head(database_url: str) -> None:
    from alembic import command

    command.upgrade(alembic_config(database_url), "head")
