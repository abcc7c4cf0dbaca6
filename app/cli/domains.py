"""`ingest domains`: the per-domain state every worker shares, and resuming a paused domain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.runner import fail, run_on_runtime

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.store.domains import DomainOverview


def domains(
    resume: Annotated[
        str | None,
        typer.Option(help="Clear this domain's pause and failure streak now, then list."),
    ] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, whole, however wide.")
    ] = False,
) -> None:
    """Domains with pending or running jobs, a pause or a failure streak."""
    from app.cli.output import domains_table, new_console
    from app.clock import utc_now

    async def run(runtime: Runtime) -> tuple[bool, list[DomainOverview]]:
        domains = runtime.domains
        resumed = await domains.resume(resume) if resume else True
        return resumed, await domains.overview(utc_now())

    resumed, items = run_on_runtime(run)
    if not resumed:
        fail(f"no domain {resume}")
    console = new_console(wide)
    if resume:
        console.print(f"resumed {resume.lower()}", highlight=False)
    console.print(domains_table(items, utc_now(), None if wide else console.width))
