"""`ingest submit URL...`: queue jobs on the configured database, as `POST /jobs/batch` does,
and with `--wait` follow them until each has finished.

Like the other operators' commands it runs the store's code itself (no API, no key): the
URLs are checked as the API checks them (their shape, and the SSRF guard's rules on sight),
and the jobs are inserted all or nothing. The workers of every process see them: woken on
PostgreSQL, at their next poll on SQLite.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.jobs import JsonFlag, echo_json
from app.cli.runner import fail, operator_runtime, run_on
from app.model import DEFAULT_TENANT

if TYPE_CHECKING:
    from app.fetch.guard import Destinations
    from app.runtime import Runtime
    from app.store.jobs import JobStore
    from app.store.tables import Job

WAIT_POLL_SECONDS = 0.5
"""How often `--wait` reads the jobs it follows."""


def submit(
    urls: Annotated[list[str], typer.Argument(metavar="URL...", help="http or https URLs.")],
    priority: Annotated[
        int, typer.Option(min=-1000, max=1000, metavar="N", help="Higher runs first.")
    ] = 0,
    tenant: Annotated[
        str, typer.Option(metavar="TENANT", help="The tenant the jobs are submitted for.")
    ] = DEFAULT_TENANT,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Follow the jobs until each has finished; exit 1 unless all succeeded."
        ),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0, metavar="SECONDS", help="With --wait: give up after this long (exit 1)."
        ),
    ] = None,
    unique: Annotated[
        bool,
        typer.Option(
            "--unique",
            help="A URL whose tenant has a job of it pending or running (of the same key, as "
            "POST /jobs with `unique`) is answered by that job, not queued again.",
        ),
    ] = False,
    max_age: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="A job of the URL that succeeded within this long answers too. Implies --unique.",
        ),
    ] = None,
    json_lines: JsonFlag = False,
) -> None:
    """Queue URLs to fetch; prints each job's id (with --json the job, as POST /jobs answers
    it), the id of the job that answers it with --unique. With --wait, then one line per
    job as it finishes: its status and title or error."""
    from app.model import NewJob

    if timeout is not None and not wait:
        fail("--timeout goes with --wait", code=2)
    unique = unique or max_age is not None
    runtime = operator_runtime()
    new_jobs = [
        NewJob(
            url=url,
            domain=_domain(url, runtime.destinations),
            tenant=tenant,
            max_attempts=runtime.settings.max_attempts,
            priority=priority,
            unique=unique,
            max_age=max_age,
        )
        for url in urls
    ]

    async def run(runtime: Runtime) -> bool:
        if unique:
            submitted = [answer.job for answer in await runtime.jobs.submit_each(new_jobs)]
        else:
            submitted = await runtime.jobs.submit(new_jobs)
        for job in submitted:
            _say(job, json_lines)
        if not wait:
            return True
        return await _follow(runtime.jobs, [job.id for job in submitted], timeout, json_lines)

    if not run_on(runtime, run):
        raise typer.Exit(1)


def _domain(url: str, destinations: Destinations) -> str:
    """The URL's domain; exit 2 for a URL the API would refuse (422)."""
    from app.cli.output import printable
    from app.fetch.guard import BlockedDestination
    from app.fetch.urls import job_url
    from app.rules.url_key import domain_of

    try:
        parsed = job_url(url)
        destinations.check_url(parsed)
    except (ValueError, BlockedDestination) as exc:
        fail(f"{printable(url)}: {exc}", code=2)
    return domain_of(parsed)


async def _follow(store: JobStore, ids: list[str], timeout: float | None, json_out: bool) -> bool:
    """Read the jobs until each has finished, saying each end once; whether all succeeded.
    Exit 1 when `timeout` passes first."""
    from app.model import FINISHED, JobStatus

    deadline = None if timeout is None else time.monotonic() + timeout
    waiting, succeeded = list(ids), True
    while True:
        for job_id in list(waiting):
            job = await store.get(job_id)
            if job.status in FINISHED:
                waiting.remove(job_id)
                succeeded = succeeded and job.status == JobStatus.SUCCEEDED
                _say(job, json_out)
        if not waiting:
            return succeeded
        if deadline is not None and time.monotonic() >= deadline:
            fail(f"{len(waiting)} of {len(ids)} jobs not finished after {timeout:g}s")
        await asyncio.sleep(WAIT_POLL_SECONDS)


def _say(job: Job, json_out: bool) -> None:
    """One line for the job: its JSON, or its id and how it stands."""
    from app.cli.output import printable
    from app.model import JobStatus
    from app.wire import JobOut

    if json_out:
        echo_json(JobOut.of(job).model_dump(mode="json"))
        return
    if job.status == JobStatus.PENDING:
        typer.echo(job.id)
        return
    line = f"{job.id} {job.status}"
    if job.dead_reason:
        line += f" ({job.dead_reason})"
    if job.status == JobStatus.SUCCEEDED and job.result_title:
        line += f" “{printable(job.result_title)}”"
    if job.status == JobStatus.DEAD and job.last_error_type:
        error = " ".join(
            str(part)
            for part in (job.last_error_type, job.last_error_http_status, job.last_error_message)
            if part
        )
        line += f": {printable(error)}"
    typer.echo(line)
