"""The `ingest` command: serve the API (with its worker), run workers alone, manage the schema,
and the operators' commands (`ingest submit`, `ingest jobs ...`, `ingest crawl`,
`ingest crawls ...`, `ingest stats`, `ingest domains`, `ingest workers`).

Start-up is part of the product: each command imports what it uses when it runs, so
`ingest --help` loads no web framework, ORM or template engine, and `ingest worker` none of
the API's.
"""

import sys
from pathlib import Path
from typing import Annotated

import typer

from app.cli.crawls import crawl, crawls_cli
from app.cli.domains import domains
from app.cli.jobs import jobs_cli, stats
from app.cli.submit import submit
from app.cli.workers import workers

# No local variables in a crash report: they hold settings, database URLs and their passwords.
# Plain Click help: Typer's Rich help shows every flag as taking a value (`--json <bool>`).
cli = typer.Typer(
    help="ingest: fetch URLs reliably.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
db_cli = typer.Typer(help="Database schema.", no_args_is_help=True, rich_markup_mode=None)
cli.add_typer(db_cli, name="db")
cli.add_typer(jobs_cli, name="jobs")
cli.add_typer(crawls_cli, name="crawls")
cli.command("crawl")(crawl)
cli.command("stats")(stats)
cli.command("submit")(submit)
cli.command("domains")(domains)
cli.command("workers")(workers)


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default: INGEST_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default: INGEST_PORT.")] = None,
) -> None:
    """Run the HTTP API; applies migrations first and runs a worker unless disabled."""
    from app.cli.run import serve_api

    serve_api(host, port)


@cli.command()
def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve GET /metrics here. Default: INGEST_METRICS_PORT."
        ),
    ] = None,
    # `ingest serve`'s own worker process (INGEST_WORKER_PROCESS): settings, wake-ups and
    # the stop come through standard input (`app.worker.process`).
    child: Annotated[bool, typer.Option(hidden=True)] = False,
) -> None:
    """Run one worker without the API (the schema must be migrated: `ingest db upgrade`)."""
    from app.cli.run import run_worker

    run_worker(metrics_port, child)


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply the migrations up to the latest schema; says which it applied."""
    from app.cli.run import upgrade

    upgrade()


@cli.command()
def openapi(
    output: Annotated[Path | None, typer.Option(help="File to write; stdout if omitted.")] = None,
) -> None:
    """Write the OpenAPI schema (what openapi.yaml holds)."""
    from app.cli.run import openapi_yaml

    text = openapi_yaml()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


@cli.command("reference")
def write_reference(
    output: Annotated[Path, typer.Option(help="Directory of the reference pages.")] = Path(
        "docs/reference"
    ),
    env_example: Annotated[
        Path, typer.Option(help="Where to write the settings' example file.")
    ] = Path(".env.example"),
) -> None:
    """Write the docs site's reference pages (settings, CLI, metrics, log lines, HTTP API)
    and .env.example from the code."""
    from app.cli.reference import write

    for path in write(output, env_example):
        typer.echo(f"wrote {path}")


def main() -> None:
    cli()
