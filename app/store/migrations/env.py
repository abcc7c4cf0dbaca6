"""Alembic environment: one set of migrations for SQLite and PostgreSQL.

The URL comes from `config.attributes["database_url"]` (set by `app.store.database`), so
migrations connect exactly as the service does, pragmas included.
"""

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlmodel import SQLModel

from app.store import tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from app.store.backends import backend_for
from app.store.dialect import made_on


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        # An index or constraint the models make on one dialect only is compared there only.
        include_object=lambda item, *_: made_on(connection.dialect.name, item),
    )
    with context.begin_transaction():
        context.run_migrations()


async def _migrate(database_url: str) -> None:
    engine = backend_for(database_url).create_engine(pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


asyncio.run(_migrate(context.config.attributes["database_url"]))
