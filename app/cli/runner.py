"""How an operator's command runs: its settings, the configured database, and expected errors
as one line on stderr (exit 1); invalid settings or arguments, and a database without the
schema this code needs, as exit 2. Nothing here prints a traceback for them.

Imports of the store happen when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from app.settings import Settings
    from app.store.database import Database
    from app.store.jobs import JobStore

T = TypeVar("T")


def load_settings() -> Settings:
    """The settings every command reads (environment and `.env`); exit 2 if one is unknown
    or invalid, naming each such variable and what it accepts (`app.cli.settings_check`)."""
    from pydantic import ValidationError

    from app.cli.settings_check import invalid_values, unknown_variables
    from app.settings import Settings

    problems = unknown_variables()
    try:
        settings = Settings()
    except ValidationError as exc:
        fail("; ".join(problems + invalid_values(exc)), code=2)
    if problems:
        fail("; ".join(problems), code=2)
    return settings


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def run_on_store(operation: Callable[[JobStore], Awaitable[T]]) -> T:
    """Run `operation` on the configured database once its schema is checked; expected
    errors end the command."""
    from app.clock import utc_now
    from app.store.jobs import JobStore

    settings = load_settings()

    def store(db: Database) -> JobStore:
        return JobStore(
            db,
            utc_now,
            domain_max_in_flight=settings.domain_max_in_flight,
            tenant_max_in_flight=settings.tenant_max_in_flight,
        )

    return run_on_database(settings.database_url, lambda db: operation(store(db)))


def require_schema(database_url: str) -> None:
    """End the command unless the database is reachable and at this code's schema."""

    async def nothing(_: Database) -> None:
        return None

    run_on_database(database_url, nothing)


def run_on_database(
    database_url: str, operation: Callable[[Database], Awaitable[T]], *, check: bool = True
) -> T:
    """Run `operation` on the database, after checking its schema unless `check` is false."""
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from app.cli.schema import SchemaRefused, describe, refuse_missing_file
    from app.store.database import Database
    from app.store.jobs import AmbiguousId, JobNotFound, StateConflict

    where = describe(database_url)
    try:
        # Before connecting: connecting to SQLite creates a missing file, an empty database.
        refuse_missing_file(database_url)
        database = Database(database_url)
    except SchemaRefused as exc:
        fail(str(exc), code=2)
    except (ValueError, OSError, ArgumentError) as exc:
        fail(f"cannot use database {where}: {one_line(exc)}")
    try:
        return asyncio.run(_run(database, operation, check))
    except SchemaRefused as exc:
        fail(str(exc), code=2)
    except JobNotFound as exc:
        fail(f"no job {exc.args[0]}")
    except AmbiguousId as exc:
        fail(f"ambiguous: at least 2 jobs start with {exc.args[0]} (give more of the id)")
    except StateConflict as exc:
        fail(str(exc))
    except (OSError, SQLAlchemyError) as exc:
        fail(f"database {where}: {one_line(exc)}")


async def _run(database: Database, operation: Callable[[Database], Awaitable[T]], check: bool) -> T:
    from app.cli.schema import require_schema

    try:
        if check:
            await require_schema(database)
        return await operation(database)
    finally:
        await database.dispose()


def one_line(exc: BaseException) -> str:
    """The first line of an error, the driver's message for a database error."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig  # the driver's message, without SQLAlchemy's statement and link
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
