"""How an operator's command runs: its settings, the configured database, and expected errors
as one line on stderr (exit 1), invalid settings or arguments as exit 2. Nothing here prints
a traceback for them.

Imports of the store happen when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from app.settings import Settings
    from app.store.database import Database
    from app.store.jobs import JobStore

T = TypeVar("T")


def load_settings() -> Settings:
    """The settings every command reads (environment and `.env`); exit 2 if invalid."""
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"INGEST_{'_'.join(map(str, error['loc'])).upper() or '*'}: {error['msg']}"
            for error in exc.errors()
        )
        fail(f"invalid settings: {problems}", code=2)


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def run_on_store(operation: Callable[[JobStore], Awaitable[T]]) -> T:
    """Run `operation` on the configured database; expected errors end the command."""
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from app.store.database import Database
    from app.store.jobs import JobNotFound, StateConflict

    settings = load_settings()
    where = _redacted(settings.database_url)
    # Connecting to SQLite creates a missing file: an empty database, and a confusing
    # "no such table" later. Say what is wrong instead (a directory is no database either).
    missing = _missing_sqlite_file(settings.database_url)
    if missing is not None:
        fail(f"no SQLite database at {missing} (create it: ingest db upgrade)")
    try:
        database = Database(settings.database_url)
    except (ValueError, OSError, ArgumentError) as exc:
        fail(f"cannot use database {where}: {_one_line(exc)}")
    try:
        return asyncio.run(_run(database, operation))
    except JobNotFound as exc:
        fail(f"no job {exc.args[0]}")
    except StateConflict as exc:
        fail(str(exc))
    except (OSError, SQLAlchemyError) as exc:
        fail(f"database {where}: {_one_line(exc)}")


async def _run(database: Database, operation: Callable[[JobStore], Awaitable[T]]) -> T:
    from app.clock import utc_now
    from app.store.jobs import JobStore

    try:
        return await operation(JobStore(database, utc_now))
    finally:
        await database.dispose()


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return repr(url)


def _missing_sqlite_file(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return None
    return None if Path(path).is_file() else path


def _one_line(exc: BaseException) -> str:
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig  # the driver's message, without SQLAlchemy's statement and link
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
