"""`ingest jobs ...` and `ingest stats`: the operators' commands, on the configured database.

They run the API's own store code (`JobStore` over `Database`) with the same settings, so
they work while the server is down; `app.cli.runner` turns expected errors into one line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.runner import fail, run_on_store
from app.model import JobStatus

if TYPE_CHECKING:
    from app.store.jobs import JobStore
    from app.store.tables import Attempt, Job

jobs_cli = typer.Typer(help="Inspect jobs, retry, cancel and delete them.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="JSON (the API's job model) for scripts.")]
DomainOpt = Annotated[str | None, typer.Option(help="Only jobs of this domain.")]


def _statuses(raw: str | None) -> list[JobStatus]:
    names = [name.strip() for name in (raw or "").split(",") if name.strip()]
    try:
        return [JobStatus(name) for name in names]
    except ValueError:
        fail(f"--status takes {', '.join(JobStatus)} (comma-separated)", code=2)


@jobs_cli.command("list")
def list_jobs(
    status: Annotated[str | None, typer.Option(help="e.g. dead, or pending,running.")] = None,
    domain: DomainOpt = None,
    tenant: Annotated[str | None, typer.Option(help="Only jobs of this tenant.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 50,
    json_lines: JsonFlag = False,
) -> None:
    """Jobs, newest first: a table, or one JSON object per line with --json."""
    from app.cli.tables import jobs_table, new_console
    from app.clock import utc_now
    from app.wire import JobOut

    statuses = _statuses(status)
    page = run_on_store(
        lambda store: store.list(statuses, domain=domain, tenant=tenant, limit=limit)
    )
    if json_lines:
        for job in page.items:
            typer.echo(JobOut.of(job).model_dump_json())
        return
    console = new_console()
    console.print(jobs_table(page.items, utc_now()))
    if page.next_cursor is not None:
        console.print(f"(the newest {limit}; more with --limit)", highlight=False)


@jobs_cli.command("show")
def show(job_id: str, json_out: JsonFlag = False) -> None:
    """One job and its attempt history."""
    from app.cli.tables import attempts_table, job_details, new_console
    from app.clock import utc_now
    from app.wire import AttemptOut, JobOut

    async def read(store: JobStore) -> tuple[Job, list[Attempt]]:
        return await store.get(job_id), await store.attempts(job_id)

    job, history = run_on_store(read)
    if json_out:
        items = [AttemptOut.of(a).model_dump(mode="json") for a in history]
        body = JobOut.of(job).model_dump(mode="json")
        typer.echo(json.dumps({"job": body, "attempts": items}))
        return
    now = utc_now()
    console = new_console()
    console.print(job_details(job, now))
    console.print(attempts_table(history))


@jobs_cli.command("retry")
def retry(
    job_id: Annotated[str | None, typer.Argument(help="The job to retry.")] = None,
    all_dead: Annotated[bool, typer.Option("--all-dead", help="Every dead job.")] = False,
    domain: Annotated[str | None, typer.Option(help="With --all-dead: of this domain.")] = None,
) -> None:
    """Dead or cancelled: pending with a fresh budget. Pending: due now."""
    if all_dead == (job_id is not None):
        fail("give a job id or --all-dead", code=2)
    if domain is not None and not all_dead:
        fail("--domain goes with --all-dead", code=2)
    if all_dead:
        count = run_on_store(lambda store: store.retry_all([JobStatus.DEAD], domain=domain))
        of = f" of {domain.lower()}" if domain else ""
        typer.echo(f"requeued {count} dead job{'' if count == 1 else 's'}{of}")
        return
    assert job_id is not None
    job = run_on_store(lambda store: store.retry(job_id))
    typer.echo(f"job {job.id}: {job.status}, due now, attempts {job.attempts}/{job.max_attempts}")


@jobs_cli.command("cancel")
def cancel(job_id: str) -> None:
    """Cancel a pending job."""
    job = run_on_store(lambda store: store.cancel(job_id))
    typer.echo(f"job {job.id}: {job.status}")


@jobs_cli.command("delete")
def delete(job_id: str) -> None:
    """Delete a succeeded, dead or cancelled job with its attempts and content."""
    run_on_store(lambda store: store.delete(job_id))
    typer.echo(f"job {job_id}: deleted")


def stats(json_out: JsonFlag = False) -> None:
    """Jobs per status and the age of the oldest pending job."""
    from app.cli.tables import new_console, plain_table, span
    from app.wire import StatsOut, StatusCounts

    result = run_on_store(lambda store: store.stats())
    out = StatsOut(
        counts=StatusCounts(**result.counts),
        oldest_pending_age_seconds=result.oldest_pending_age_seconds,
    )
    if json_out:
        typer.echo(out.model_dump_json())
        return
    table = plain_table()
    table.add_column("STATUS")
    table.add_column("JOBS", justify="right")
    for name, count in out.counts.model_dump().items():
        table.add_row(name, str(count))
    console = new_console()
    console.print(table)
    age = out.oldest_pending_age_seconds
    console.print(
        f"oldest pending job: {'none' if age is None else span(age) + ' old'}", highlight=False
    )
