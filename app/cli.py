"""The `ingest` command: serve the API (with its worker), run workers alone, manage the schema.

The operators' commands (`ingest jobs ...`, `ingest stats`) are in `app.cli_jobs`.
"""

import asyncio
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
import yaml

from app import observability
from app.cli_domains import domains
from app.cli_jobs import fail, jobs_cli, load_settings, stats
from app.clock import utc_now
from app.fetcher import Fetcher
from app.main import create_app
from app.metrics import Metrics
from app.observability import configure_logging
from app.settings import Settings
from app.store.database import Database, upgrade_to_head
from app.store.deliveries import DeliveryStore
from app.store.jobs import JobStore
from app.store.queue import Queue
from app.webhooks import Deliverer
from app.worker import Worker

# No local variables in a crash report: they hold settings, database URLs and their passwords.
cli = typer.Typer(
    help="ingest: fetch URLs reliably.", no_args_is_help=True, pretty_exceptions_show_locals=False
)
db_cli = typer.Typer(help="Database schema.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")


def _settings() -> Settings:
    return load_settings()


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default: INGEST_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default: INGEST_PORT.")] = None,
) -> None:
    """Run the HTTP API; applies migrations first and runs a worker unless disabled."""
    settings = _settings()
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) + 5,
    )


@cli.command()
def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve GET /metrics here. Default: INGEST_METRICS_PORT."
        ),
    ] = None,
) -> None:
    """Run one worker without the API (the schema must be migrated: `ingest db upgrade`)."""
    settings = _settings()
    configure_logging(settings.log_level, settings.log_format)
    port = settings.metrics_port if metrics_port is None else metrics_port
    metrics = Metrics()
    # One scrape per process: this worker's counts are served by this process alone.
    server = None
    if port:
        try:
            server = metrics.serve(port, settings.host)
        except OSError as exc:
            fail(f"cannot serve metrics on {settings.host}:{port}: {exc}")
    try:
        asyncio.run(_run_worker(settings, metrics))
    finally:
        if server is not None:
            server.close()


async def _run_worker(settings: Settings, metrics: Metrics) -> None:
    database = Database(settings.database_url)
    fetcher = Fetcher(settings)
    worker = Worker(Queue(database, settings), fetcher, settings, utc_now)
    deliverer = Deliverer(DeliveryStore(database), JobStore(database, utc_now), settings, utc_now)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, worker.stop)
    sending = asyncio.create_task(deliverer.run(), name="webhooks")
    try:
        await asyncio.create_task(
            worker.run(), name="worker", context=observability.recording_into(metrics)
        )
    finally:
        # Stopped after the worker has drained; what is owed and unsent waits in the table.
        deliverer.stop()
        await sending
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


cli.add_typer(jobs_cli, name="jobs")
cli.command("stats")(stats)
cli.command("domains")(domains)


def main() -> None:
    cli()
