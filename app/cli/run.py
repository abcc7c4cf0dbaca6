"""What `ingest serve`, `ingest worker`, `ingest db upgrade` and `ingest openapi` run.

Imported by those commands only, when they run: `ingest worker` builds a `Runtime` with a
worker and no API, so it never imports FastAPI.
"""

import asyncio
import logging
import signal

import typer

from app.cli.runner import fail, load_settings
from app.metrics import Metrics
from app.observability import configure_logging
from app.settings import Settings

log = logging.getLogger("ingest.worker")


def serve_api(host: str | None, port: int | None) -> None:
    import uvicorn

    from app.api.app import create_app

    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) + 5,
    )


def run_worker(metrics_port: int | None) -> None:
    settings = load_settings()
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
        log.info(
            "worker metrics on http://%s:%d: /metrics, and /healthz (200 while the worker runs)",
            settings.host,
            server.port,
        )
    try:
        asyncio.run(_work(settings, metrics))
    finally:
        if server is not None:
            server.close()


async def _work(settings: Settings, metrics: Metrics) -> None:
    from app.runtime import Runtime

    runtime = Runtime.build(settings, run_worker=True)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, runtime.stop_worker)
    try:
        await runtime.start(metrics)
        await runtime.wait()
    finally:
        await runtime.stop()


def upgrade() -> None:
    from app.store.database import upgrade_to_head

    settings = load_settings()
    try:
        upgrade_to_head(settings.database_url)
    except Exception as exc:
        typer.echo(f"error: could not migrate {settings.database_url}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo("database is at the latest schema")


def openapi_yaml() -> str:
    import yaml

    from app.api.app import create_app

    schema = create_app(Settings(worker_enabled=False)).openapi()
    return yaml.safe_dump(schema, sort_keys=False, allow_unicode=True)
