"""How an operator's command runs: its settings, the configured database and its stores, as
the composition root builds them (`operator_runtime`, `app.runtime`), and expected errors
as one line on stderr (exit 1); invalid settings or arguments, and a database without the
schema this code needs, as exit 2. Nothing here prints a traceback for them.

Imports of the store happen when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.settings import Settings
    from app.store.database import Database

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


def operator_runtime() -> Runtime:
    """What the composition root builds for an operator's command on the loaded settings:
    the database and its stores, no worker, nothing connected yet (`Runtime.build` for an
    operator: its submits are not held to the tenants' quota of pending jobs). `run_on`
    runs the command on it."""
    from app.runtime import Runtime

    settings = load_settings()
    with _opening(settings.database_url):
        return Runtime.build(settings, run_worker=False, operator=True)


def run_on(runtime: Runtime, operation: Callable[[Runtime], Awaitable[T]]) -> T:
    """Run `operation` on `runtime` (`operator_runtime`) once its database's schema is
    checked, then stop it; expected errors end the command."""
    work = _run(runtime.database, lambda: operation(runtime), runtime.stop)
    return _run_ending_on_errors(runtime.settings.database_url, work)


def run_on_runtime(operation: Callable[[Runtime], Awaitable[T]]) -> T:
    """`run_on` the `operator_runtime` of the loaded settings."""
    return run_on(operator_runtime(), operation)


def require_schema(database_url: str) -> None:
    """End the command unless the database is reachable and at this code's schema."""

    async def nothing(_: Database) -> None:
        return None

    run_on_database(database_url, nothing)


def run_on_database(
    database_url: str, operation: Callable[[Database], Awaitable[T]], *, check: bool = True
) -> T:
    """Run `operation` on the database alone (what is asked of its schema, before any
    store), after checking its schema unless `check` is false."""
    from app.store.database import Database

    with _opening(database_url):
        database = Database(database_url)
    work = _run(database, lambda: operation(database), database.dispose, check)
    return _run_ending_on_errors(database_url, work)


@contextmanager
def _opening(database_url: str) -> Iterator[None]:
    """Around building what uses the database: end the command for a SQLite file that is
    not there (exit 2), checked first, or a URL no driver takes (exit 1)."""
    from sqlalchemy.exc import ArgumentError

    from app.cli.schema import SchemaRefused, describe, refuse_missing_file

    try:
        # Before connecting: connecting to SQLite creates a missing file, an empty database.
        refuse_missing_file(database_url)
        yield
    except SchemaRefused as exc:
        fail(str(exc), code=2)
    except (ValueError, OSError, ArgumentError) as exc:
        fail(f"cannot use database {describe(database_url)}: {one_line(exc)}")


def _run_ending_on_errors(database_url: str, work: Coroutine[Any, Any, T]) -> T:
    """Run `work`; the errors a command expects end it, in one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.cli.schema import SchemaRefused, describe
    from app.store.crawls import CrawlEnded, CrawlNotFound
    from app.store.jobs.errors import AmbiguousId, JobNotFound, StateConflict

    where = describe(database_url)
    try:
        return asyncio.run(work)
    except SchemaRefused as exc:
        fail(str(exc), code=2)
    except JobNotFound as exc:
        fail(f"no job {exc.args[0]}")
    except AmbiguousId as exc:
        fail(f"ambiguous: at least 2 jobs start with {exc.args[0]} (give more of the id)")
    except StateConflict as exc:
        fail(str(exc))
    except CrawlNotFound as exc:
        fail(f"no crawl {exc.args[0]}")
    except CrawlEnded as exc:
        fail(str(exc))
    except (OSError, SQLAlchemyError) as exc:
        fail(f"database {where}: {one_line(exc)}")


async def _run(
    database: Database,
    work: Callable[[], Awaitable[T]],
    close: Callable[[], Awaitable[None]],
    check: bool = True,
) -> T:
    """`work` once the database's schema is checked (unless `check` is false); then `close`
    what it ran on."""
    from app.cli.schema import require_schema

    try:
        if check:
            await require_schema(database)
        return await work()
    finally:
        await close()


def one_line(exc: BaseException) -> str:
    """The first line of an error, the driver's message for a database error."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig  # the driver's message, without SQLAlchemy's statement and link
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
