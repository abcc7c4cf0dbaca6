"""`ingest jobs ...` and `ingest stats`: the operators' commands, on the configured database.

They run the API's own store code (`JobStore` over `Database`, built by the composition root
as for the API: `app.cli.runner.operator_runtime`) with the same settings, so they work
while the server is down; `app.cli.runner` turns expected errors into one line.
A job is named by its id or the id's first characters (`JobStore.match_id`). `--json`
prints what the API answers, in the API's compact style: one object per line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.cli.runner import fail, run_on_runtime
from app.model import JobStatus

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.store.reads import Part, Version
    from app.store.tables import Attempt, Job

# Plain Click help: Typer's Rich help shows every flag as taking a value (`--json <bool>`).
jobs_cli = typer.Typer(
    help="Inspect jobs and their content versions; retry, refresh, cancel and delete them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="JSON (the API's model) for scripts.")]
WideFlag = Annotated[
    bool, typer.Option("--wide", help="Every column, whole ids and URLs, however wide.")
]
JobId = Annotated[
    str, typer.Argument(metavar="ID", help="A job id, or enough of its start to name one job.")
]
DomainOpt = Annotated[str | None, typer.Option(metavar="DOMAIN", help="Only jobs of this domain.")]


def echo_json(value: Any) -> None:
    """One line of JSON, as the API writes it (compact, UTF-8)."""
    typer.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _statuses(raw: str | None) -> list[JobStatus]:
    names = [name.strip().lower() for name in (raw or "").split(",") if name.strip()]
    try:
        return [JobStatus(name) for name in names]
    except ValueError:
        fail(f"--status takes {', '.join(JobStatus)} (comma-separated)", code=2)


@jobs_cli.command("list")
def list_jobs(
    status: Annotated[
        str | None, typer.Option(metavar="STATUS[,...]", help="e.g. dead, or pending,running.")
    ] = None,
    domain: DomainOpt = None,
    tenant: Annotated[
        str | None, typer.Option(metavar="TENANT", help="Only jobs of this tenant.")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Only jobs of this URL's key, as GET /jobs?url=."),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, metavar="N", help="At most this many, newest first.")
    ] = 50,
    json_lines: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Jobs, newest first: a table, or with --json one job per line (as GET /jobs/{id})."""
    from app.cli.output import jobs_table, new_console
    from app.clock import utc_now
    from app.fetch.urls import job_url
    from app.rules.url_key import url_key
    from app.wire import JobOut

    statuses = _statuses(status)
    try:
        key = None if url is None else url_key(job_url(url))
    except ValueError as exc:
        fail(f"--url: {exc}", code=2)
    page = run_on_runtime(
        lambda runtime: runtime.jobs.list(
            statuses, domain=domain, tenant=tenant, limit=limit, url_key=key
        )
    )
    if json_lines:
        for job in page.items:
            echo_json(JobOut.of(job).model_dump(mode="json"))
        return
    console = new_console(wide)
    console.print(jobs_table(page.items, utc_now(), None if wide else console.width))
    if page.next_cursor is not None:
        console.print(f"(the newest {limit}; more with --limit)", highlight=False)


@jobs_cli.command("show")
def show(
    job_id: JobId,
    json_out: JsonFlag = False,
    with_attempts: Annotated[
        bool, typer.Option("--attempts", help='With --json: {"job": ..., "attempts": [...]}.')
    ] = False,
    wide: WideFlag = False,
) -> None:
    """One job and its attempt history; with --json the job as GET /jobs/{id} answers it."""
    from app.cli.output import attempts_table, job_details, new_console
    from app.clock import utc_now
    from app.wire import AttemptOut, JobOut

    if with_attempts and not json_out:
        fail("--attempts goes with --json (the table always shows them)", code=2)

    async def read(runtime: Runtime) -> tuple[Job, list[Attempt]]:
        jobs = runtime.jobs
        job = await jobs.get(await jobs.match_id(job_id))
        history = await jobs.attempts(job.id) if with_attempts or not json_out else []
        return job, history

    job, history = run_on_runtime(read)
    if json_out:
        body: dict[str, Any] = JobOut.of(job).model_dump(mode="json")
        if with_attempts:
            # Beside the job, not inside it: the job's own `attempts` is their count.
            items = [AttemptOut.of(a).model_dump(mode="json") for a in history]
            body = {"job": body, "attempts": items}
        echo_json(body)
        return
    console = new_console(wide)
    console.print(job_details(job, utc_now()))
    console.print(attempts_table(history, None if wide else console.width))


@jobs_cli.command("text")
def text(
    job_id: JobId,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Its Markdown rather than its plain text.")
    ] = False,
) -> None:
    """A succeeded job's main text (GET /jobs/{id}/text), or its Markdown; control
    characters escaped (ESC as \\x1b), lines and tabs kept."""
    from app.cli.output import printable_lines
    from app.store.reads import Content
    from app.wire import missing_content

    part: Part = "markdown" if markdown else "text"

    async def read(runtime: Runtime) -> tuple[str, Content]:
        full_id = await runtime.jobs.match_id(job_id)
        return full_id, await runtime.contents.get(full_id, part=part)

    full_id, content = run_on_runtime(read)
    if content.status is None:  # deleted since its id was matched
        fail(f"no job {full_id}")
    missing = missing_content(full_id, content, part)
    if missing is not None:
        fail(missing)
    assert isinstance(content.data, str)
    typer.echo(printable_lines(content.data))


@jobs_cli.command("retry")
def retry(
    job_id: Annotated[
        str | None, typer.Argument(metavar="ID", help="The job to retry (or its id's start).")
    ] = None,
    all_dead: Annotated[bool, typer.Option("--all-dead", help="Every dead job.")] = False,
    domain: Annotated[
        str | None, typer.Option(metavar="DOMAIN", help="With --all-dead: of this domain.")
    ] = None,
) -> None:
    """Dead or cancelled: pending with a fresh budget. Pending: due now."""
    if job_id is not None and all_dead:
        fail("give a job id or --all-dead, not both", code=2)
    if job_id is None and not all_dead:
        fail("give a job id or --all-dead", code=2)
    if domain is not None and not all_dead:
        fail("--domain goes with --all-dead", code=2)
    if job_id is None:
        done = run_on_runtime(
            lambda runtime: runtime.jobs.retry_all([JobStatus.DEAD], domain=domain)
        )
        count = done.requeued
        of = f" of {domain.lower()}" if domain else ""
        typer.echo(f"requeued {count} dead job{'' if count == 1 else 's'}{of}")
        return

    async def run(runtime: Runtime) -> Job:
        return await runtime.jobs.retry(await runtime.jobs.match_id(job_id))

    job = run_on_runtime(run)
    typer.echo(f"job {job.id}: {job.status}, due now, attempts {job.attempts}/{job.max_attempts}")


@jobs_cli.command("refresh")
def refresh(
    job_id: Annotated[
        str | None, typer.Argument(metavar="ID", help="The job to refresh (or its id's start).")
    ] = None,
    domain: Annotated[
        str | None, typer.Option(metavar="DOMAIN", help="Every succeeded job of this domain.")
    ] = None,
    all_succeeded: Annotated[bool, typer.Option("--all", help="Every succeeded job.")] = False,
) -> None:
    """Succeeded or dead: back to pending to fetch its page again, due now with a fresh
    budget, its content kept (a new version only if the text changed)."""
    given = [job_id is not None, domain is not None, all_succeeded]
    if not any(given):
        fail("give a job id, --domain or --all", code=2)
    if sum(given) > 1:
        fail("give only one of a job id, --domain and --all", code=2)
    if job_id is None:
        done = run_on_runtime(lambda runtime: runtime.jobs.refresh_all(domain=domain))
        count = done.requeued
        of = f" of {domain.lower()}" if domain else ""
        typer.echo(f"requeued {count} succeeded job{'' if count == 1 else 's'}{of} to refresh")
        return

    async def run(runtime: Runtime) -> Job:
        return await runtime.jobs.refresh(await runtime.jobs.match_id(job_id))

    job = run_on_runtime(run)
    kept = "" if job.content_version is None else f", content version {job.content_version} kept"
    typer.echo(
        f"job {job.id}: {job.status}, due now, attempts {job.attempts}/{job.max_attempts}{kept}"
    )


@jobs_cli.command("versions")
def versions(job_id: JobId, json_lines: JsonFlag = False, wide: WideFlag = False) -> None:
    """The content versions a job keeps, newest first: a table, or with --json one version
    per line (as GET /jobs/{id}/versions lists them)."""
    from app.cli.output import new_console, versions_table

    async def read(runtime: Runtime) -> tuple[str, list[Version] | None]:
        full_id = await runtime.jobs.match_id(job_id)
        return full_id, await runtime.contents.versions(full_id)

    full_id, kept = run_on_runtime(read)
    if kept is None:  # deleted since its id was matched
        fail(f"no job {full_id}")
    if json_lines:
        from app.wire import VersionOut

        for version in kept:
            out = VersionOut.model_validate(version, from_attributes=True)
            echo_json(out.model_dump(mode="json"))
        return
    console = new_console(wide)
    if not kept:
        console.print(f"job {full_id} keeps no content version", highlight=False)
        return
    console.print(versions_table(kept, None if wide else console.width))


@jobs_cli.command("cancel")
def cancel(job_id: JobId) -> None:
    """Cancel a pending job."""

    async def run(runtime: Runtime) -> Job:
        return await runtime.jobs.cancel(await runtime.jobs.match_id(job_id))

    job = run_on_runtime(run)
    typer.echo(f"job {job.id}: {job.status}")


@jobs_cli.command("delete")
def delete(job_id: JobId) -> None:
    """Delete a succeeded, dead or cancelled job with its attempts and content."""

    async def run(runtime: Runtime) -> str:
        full_id = await runtime.jobs.match_id(job_id)
        await runtime.jobs.delete(full_id)
        return full_id

    typer.echo(f"job {run_on_runtime(run)}: deleted")


def stats(json_out: JsonFlag = False) -> None:
    """Jobs per status; how long the oldest due job has waited, how many are not due yet;
    each tenant's jobs pending and running, and the bytes of content it keeps."""
    from app.cli.output import new_console, plain_table, span
    from app.wire import StatsOut

    async def read(runtime: Runtime) -> StatsOut:
        jobs, settings = runtime.jobs, runtime.settings
        loads, kept = await jobs.tenant_loads(), await jobs.bytes_kept()
        return StatsOut.of(await jobs.stats(), loads, settings, kept)

    out = run_on_runtime(read)
    if json_out:
        echo_json(out.model_dump(mode="json"))
        return
    table = plain_table()
    table.add_column("STATUS")
    table.add_column("JOBS", justify="right")
    for name, count in out.counts.model_dump().items():
        table.add_row(name, str(count))
    console = new_console()
    console.print(table)
    due = out.oldest_due_age_seconds
    console.print(
        f"oldest due job: {'none' if due is None else 'due for ' + span(due)}", highlight=False
    )
    console.print(f"not due yet: {out.scheduled}", highlight=False)
    if out.tenants:
        tenants = plain_table()
        for name in ("TENANT", "WEIGHT", "PENDING", "RUNNING"):
            tenants.add_column(name, justify="left" if name == "TENANT" else "right")
        for tenant in out.tenants:
            tenants.add_row(
                tenant.tenant, str(tenant.weight), str(tenant.pending), str(tenant.running)
            )
        console.print(tenants)
    if out.storage:
        storage = plain_table()
        storage.add_column("TENANT")
        storage.add_column("BYTES KEPT", justify="right")
        for kept in out.storage:
            storage.add_row(kept.tenant, f"{kept.bytes_kept:,}")
        console.print(storage)
