"""`ingest crawl URL...` (start a crawl or a map, as `POST /crawls` does, and with `--wait`
follow it to its end) and `ingest crawls list|show|cancel`, on the configured database.

Like the other operators' commands they run the store's code itself (no API, no key): the
start URLs and patterns are checked as the API checks them. The crawl loops of the running
workers pick a new crawl up within seconds (`app.worker.crawler`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.jobs import JsonFlag, echo_json
from app.cli.runner import fail, operator_runtime, run_on, run_on_runtime
from app.model import DEFAULT_TENANT

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.wire.crawls import CrawlOut

WAIT_POLL_SECONDS = 0.5
"""How often `--wait` reads the crawl it follows."""

crawls_cli = typer.Typer(
    help="Inspect and cancel crawls.", no_args_is_help=True, rich_markup_mode=None
)

CrawlId = Annotated[str, typer.Argument(metavar="ID", help="A crawl's id.")]


def crawl(
    urls: Annotated[list[str], typer.Argument(metavar="URL...", help="Start URLs.")],
    limit: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="Pages made jobs of, at most (INGEST_CRAWL_MAX_PAGES)."
        ),
    ] = None,
    max_depth: Annotated[
        int, typer.Option(min=0, max=1000, metavar="N", help="Links followed from a start URL.")
    ] = 10,
    include: Annotated[
        list[str] | None,
        typer.Option(metavar="PATTERN", help="Follow only paths that match (repeatable)."),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(metavar="PATTERN", help="Never follow paths that match (repeatable)."),
    ] = None,
    refresh_every: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="SECONDS", help="Crawl the site again this long after each round."
        ),
    ] = None,
    map_only: Annotated[
        bool,
        typer.Option(
            "--map", help="List the URLs the site's sitemaps and llms.txt name; fetch no page."
        ),
    ] = False,
    tenant: Annotated[
        str, typer.Option(metavar="TENANT", help="The tenant its pages are jobs of.")
    ] = DEFAULT_TENANT,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Follow the crawl to its end, one line as its counts move."),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Start a crawl of the sites of URL... (with --map, a map); prints its id (with --json
    the crawl, as POST /crawls answers it). Patterns as the Crawls guide says."""
    from app.fetch.guard import BlockedDestination
    from app.fetch.urls import job_url
    from app.model import CrawlMode, CrawlOptions, NewCrawl
    from app.part_settings import crawl_limits
    from app.rules.crawl_options import refusal
    from app.rules.url_key import url_key

    runtime = operator_runtime()
    settings = runtime.settings
    seeds: list[str] = []
    for url in urls:
        try:
            parsed = job_url(url)
            runtime.destinations.check_url(parsed)
        except (ValueError, BlockedDestination) as exc:
            fail(f"{url}: {exc}", code=2)
        seeds.append(url_key(parsed))
    options = CrawlOptions(
        limit=limit or settings.crawl_max_pages,
        max_depth=max_depth,
        include=tuple(include or ()),
        exclude=tuple(exclude or ()),
        refresh_every=refresh_every,
        max_attempts=settings.max_attempts,
    )
    refused = refusal(seeds, options, crawl_limits(settings))
    if refused is not None:
        fail(refused.message, code=2)
    mode = CrawlMode.MAP if map_only else CrawlMode.CRAWL
    new = NewCrawl(tenant, tuple(dict.fromkeys(seeds)), mode, options)

    async def run(runtime: Runtime) -> bool:
        started = await runtime.crawls.create(new)
        if json_out:
            echo_json((await _out(runtime, started.id)).model_dump(mode="json"))
        else:
            typer.echo(started.id)
        return await _follow(runtime, started.id, json_out) if wait else True

    if not run_on(runtime, run):
        raise typer.Exit(1)


async def _out(runtime: Runtime, crawl_id: str) -> CrawlOut:
    from app.wire.crawls import CrawlOut

    found = await runtime.crawls.get(crawl_id)
    return CrawlOut.of(found, await runtime.crawls.counts(crawl_id))


async def _follow(runtime: Runtime, crawl_id: str, json_out: bool) -> bool:
    """Read the crawl until it ends, printing its counts each time they move; whether it
    completed."""
    said = ""
    while True:
        out = await _out(runtime, crawl_id)
        line = _progress(out)
        if line != said:
            if json_out:
                echo_json(out.model_dump(mode="json"))
            else:
                typer.echo(line)
            said = line
        if out.status != "running":
            return out.status == "completed"
        await asyncio.sleep(WAIT_POLL_SECONDS)


def _progress(out: CrawlOut) -> str:
    counts = out.counts
    assert counts is not None
    done = counts.succeeded + counts.dead + counts.cancelled
    return (
        f"{out.status}: found {counts.found}, fetched {done}/{counts.queued} "
        f"({counts.succeeded} succeeded, {counts.dead} dead), waiting {counts.waiting}, "
        f"left out {sum(counts.left_out.values())}"
    )


@crawls_cli.command("list")
def list_crawls(
    tenant: Annotated[
        str | None, typer.Option(metavar="TENANT", help="Only this tenant's.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="At most this many.")] = 50,
    json_out: JsonFlag = False,
) -> None:
    """Crawls, newest first: id, status, mode, start URL, when."""
    from app.wire.crawls import CrawlOut

    async def read(runtime: Runtime) -> list[CrawlOut]:
        return [CrawlOut.of(found) for found in await runtime.crawls.list(tenant, limit)]

    for out in run_on_runtime(read):
        if json_out:
            echo_json(out.model_dump(mode="json"))
        else:
            started = out.created_at.strftime("%Y-%m-%d %H:%M:%S")
            typer.echo(f"{out.id}  {out.status:<9}  {out.mode.value:<5}  {started}  {out.urls[0]}")


@crawls_cli.command("show")
def show_crawl(crawl_id: CrawlId, json_out: JsonFlag = False) -> None:
    """One crawl and its counts."""
    out = run_on_runtime(lambda runtime: _out(runtime, crawl_id))
    if json_out:
        echo_json(out.model_dump(mode="json"))
        return
    typer.echo(f"{out.id}  {out.mode.value}  {', '.join(out.urls)}")
    typer.echo(_progress(out))
    assert out.counts is not None
    for reason, count in sorted(out.counts.left_out.items()):
        typer.echo(f"  left out, {reason}: {count}")


@crawls_cli.command("cancel")
def cancel_crawl(crawl_id: CrawlId, json_out: JsonFlag = False) -> None:
    """Cancel a running crawl: its pending pages are cancelled; running ones finish."""

    async def cancel(runtime: Runtime) -> CrawlOut:
        await runtime.crawls.cancel(crawl_id)
        return await _out(runtime, crawl_id)

    out = run_on_runtime(cancel)
    if json_out:
        echo_json(out.model_dump(mode="json"))
    else:
        typer.echo(f"{out.id} {out.status}")
