"""The `ingest` command: serve the API (with its worker), run workers alone, manage the schema."""

import asyncio
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
import yaml
from pydantic import ValidationError

from app.clock import utc_now
from app.fetcher import Fetcher
from app.main import create_app
from app.observability import configure_logging
from app.settings import Settings
from app.store.database import Database, upgrade_to_head
from app.store.queue import Queue
from app.worker import Worker

cli = typer.Typer(help="ingest: fetch URLs reliably.", no_args_is_help=True)
db_cli = typer.Typer(help="Database schema.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        typer.echo(f"error: invalid settings: {exc}", err=True)
        raise typer.Exit(2) from None


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default: INGEST_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default: INGEST_PORT.")] = None,
) -> None:
    """Run the HTTP API; applies migrations first and runs a worker unless disabled."""
    settings = _settings()
    configure_logging(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) + 5,
    )


@cli.command()
def worker() -> None:
    """Run one worker without the API (the schema must be migrated: `ingest db upgrade`)."""
    settings = _settings()
    configure_logging(settings.log_level)
    asyncio.run(_run_worker(settings))


async def _run_worker(settings: Settings) -> None:
    database = Database(settings.database_url)
    fetcher = Fetcher(settings)
    worker = Worker(Queue(database), fetcher, settings, utc_now)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, worker.stop)
    try:
        await worker.run()
    finally:
        await fetcher.aclose()
        await database.dispose()


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply the migrations up to the latest schema."""
    settings = _settings()
    try:
        upgrade_to_head(settings.database_url)
    except Exception as exc:
        typer.echo(f"error: could not migrate {settings.database_url}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo("database is at the latest schema")


@cli.command()
def openapi(
    output: Annotated[Path | None, typer.Option(help="File to write; stdout if omitted.")] = None,
) -> None:
    """Write the OpenAPI schema (what openapi.yaml holds)."""
    text = openapi_yaml()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def openapi_yaml() -> str:
    schema = create_app(Settings(worker_enabled=False)).openapi()
    return yaml.safe_dump(schema, sort_keys=False, allow_unicode=True)


def main() -> None:
    cli()
