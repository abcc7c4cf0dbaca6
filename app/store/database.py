"""A connection to the configured database: engine, backend, migrations, health."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.dialect import WRITE, Backend, backend_for

MIGRATIONS = Path(__file__).parent / "migrations"


class Database:
    def __init__(self, database_url: str) -> None:
        self.url = database_url
        self.backend: Backend = backend_for(database_url)
        self.engine = self.backend.create_engine()
        self._writer = self.engine.execution_options(**WRITE)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that will write; committed on exit, rolled back on error."""
        async with self.backend.write_gate(), self._writer.begin() as conn:
            yield conn

    async def ping(self) -> None:
        async with self.read() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def upgrade(self) -> None:
        """Apply the Alembic migrations up to head (in a thread: Alembic runs its own loop)."""
        await asyncio.to_thread(upgrade_to_head, self.url)

    async def dispose(self) -> None:
        await self.engine.dispose()


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = database_url
    return config


def upgrade_to_head(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")
