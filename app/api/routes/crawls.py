"""The crawl endpoints: start a crawl or a map, read it with its counts, list its pages (its
jobs) and the URLs it found, cancel it. A tenant's key sees its own crawls only; a crawl's
pages are jobs, read and shown as every job is (`app.api.routes.jobs`)."""

from datetime import UTC
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import AwareDatetime

from app.api.auth import CallerDep
from app.api.crawl_schemas import CrawlIn
from app.api.deps import CrawlsDep, JobsDep, RuntimeDep
from app.api.problems import responses
from app.api.routes.jobs import StatusFilter, _check, _statuses, shown
from app.api.schemas import JobPage, SubmittedUrl
from app.model import DEFAULT_TENANT, CrawlOptions, NewCrawl
from app.part_settings import crawl_limits
from app.rules.crawl_options import refusal
from app.rules.url_key import url_key
from app.store.crawls import Crawl, CrawlEnded, CrawlNotFound, CrawlStore
from app.wire.crawls import CrawlList, CrawlOut, FoundUrlOut, FoundUrlPage, RoundOut

router = APIRouter(prefix="/crawls", tags=["crawls"], responses=responses(401))

CrawlId = Annotated[str, Path(max_length=36, description="The crawl's id.")]


async def _crawl(crawls: CrawlStore, crawl_id: str, tenant: str | None) -> Crawl:
    try:
        return await crawls.get(crawl_id, tenant)
    except CrawlNotFound:
        raise HTTPException(404, f"no crawl {crawl_id}") from None


def _refuse(loc: tuple[str, ...], value: object, message: str) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": loc, "input": value, "msg": message}]
    )


@router.post(
    "",
    name="start_crawl",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 403, 413),
)
async def start_crawl(
    body: CrawlIn,
    response: Response,
    crawls: CrawlsDep,
    runtime: RuntimeDep,
    caller: CallerDep,
) -> CrawlOut:
    """Start a crawl (or a map) of the sites of the start URLs: every page it finds in scope
    becomes an ordinary job of the tenant, with `crawl_id`, `depth` and `found_on`."""
    settings = runtime.settings
    if caller.tenant is not None and body.tenant not in (None, caller.tenant):
        raise HTTPException(403, f"this API key submits for tenant {caller.tenant!r} only")
    starts = body.start_urls
    urls: dict[tuple[str | int, ...], SubmittedUrl] = {
        ("body", "urls", i): url for i, url in enumerate(starts)
    }
    if body.callback_url is not None:
        urls[("body", "callback_url")] = body.callback_url
    _check(urls, runtime.destinations)
    seeds = tuple(dict.fromkeys(url_key(url.parsed) for url in starts))
    options = CrawlOptions(
        limit=body.limit or settings.crawl_max_pages,
        max_depth=body.max_depth,
        include=tuple(body.include),
        exclude=tuple(body.exclude),
        subdomains=body.subdomains,
        sitemap=body.sitemap,
        feeds=body.feeds,
        llms_txt=body.llms_txt,
        robots_txt=body.robots_txt,
        refresh_every=body.refresh_every,
        priority=body.priority,
        max_attempts=body.max_attempts or settings.max_attempts,
        metadata=body.metadata,
        callback_url=body.callback_url,
        callback_content=body.callback_content,
        callback_pages=body.callback_pages,
    )
    refused = refusal(seeds, options, crawl_limits(settings))
    if refused is not None:
        given = getattr(body, refused.field)
        raise _refuse(("body", refused.field), given, refused.message)
    tenant = caller.tenant or body.tenant or DEFAULT_TENANT
    crawl = await crawls.create(NewCrawl(tenant, seeds, body.mode, options))
    runtime.crawl_submitted()
    response.headers["Location"] = f"/crawls/{crawl.id}"
    return CrawlOut.of(crawl, await crawls.counts(crawl.id))


@router.get("", name="list_crawls")
async def list_crawls(
    crawls: CrawlsDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> CrawlList:
    """The newest crawls first (a tenant's key: its own)."""
    return CrawlList(
        items=[CrawlOut.of(crawl) for crawl in await crawls.list(caller.tenant, limit)]
    )


@router.get("/{crawl_id}", name="get_crawl", responses=responses(404))
async def get_crawl(crawl_id: CrawlId, crawls: CrawlsDep, caller: CallerDep) -> CrawlOut:
    """The crawl, with its counts: what it found, made jobs of, fetched and left out."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    return CrawlOut.of(crawl, await crawls.counts(crawl.id))


@router.get("/{crawl_id}/pages", name="list_crawl_pages", responses=responses(400, 404))
async def list_crawl_pages(
    crawl_id: CrawlId,
    crawls: CrawlsDep,
    jobs: JobsDep,
    caller: CallerDep,
    status_filter: StatusFilter = None,
    changed_since: Annotated[
        AwareDatetime | None,
        Query(description="Only pages whose content changed (or was first stored) since."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> JobPage:
    """The crawl's pages (its jobs), newest first, as `GET /jobs` lists jobs."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    since = None if changed_since is None else changed_since.astimezone(UTC)
    page = await jobs.list(
        _statuses(status_filter),
        tenant=caller.tenant,
        limit=limit,
        cursor=cursor,
        changed_since=since,
        crawl_id=crawl.id,
    )
    return JobPage(items=[shown(job, caller) for job in page.items], next_cursor=page.next_cursor)


@router.get("/{crawl_id}/urls", name="list_crawl_urls", responses=responses(400, 404))
async def list_crawl_urls(
    crawl_id: CrawlId,
    crawls: CrawlsDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    cursor: Annotated[str | None, Query(max_length=40)] = None,
) -> FoundUrlPage:
    """Every page URL the crawl found (a map's answer), with where it was found and its
    listing's `lastmod`, in no meaningful order, `limit` at a time."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    try:
        after = None if cursor is None else int(cursor)
    except ValueError:
        raise _refuse(("query", "cursor"), cursor, "not a cursor this list gave") from None
    found, next_after = await crawls.found(crawl.id, after, limit)
    return FoundUrlPage(
        items=[FoundUrlOut.of(page) for page in found],
        next_cursor=None if next_after is None else str(next_after),
    )


@router.get("/{crawl_id}/rounds/{round_number}", name="get_crawl_round", responses=responses(404))
async def get_crawl_round(
    crawl_id: CrawlId,
    round_number: Annotated[int, Path(ge=1, le=2**31 - 1, description="1 for the first.")],
    crawls: CrawlsDep,
    caller: CallerDep,
) -> RoundOut:
    """What a round of the crawl found once it ended: the pages new in it, those whose
    content changed (a refresh stored a new version), and those removed (not found again
    by any route, or gone: 404 or 410). 404 until the round has ended."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    report = await crawls.round(crawl.id, round_number)
    if report is None:
        raise HTTPException(404, f"crawl {crawl_id} has not ended a round {round_number}")
    return RoundOut.of(report)


@router.post("/{crawl_id}/refresh", name="refresh_crawl", responses=responses(404, 409))
async def refresh_crawl(
    crawl_id: CrawlId, crawls: CrawlsDep, runtime: RuntimeDep, caller: CallerDep
) -> CrawlOut:
    """Crawl a completed crawl's site again now, as a new round (its listings read again,
    its known pages fetched again as conditional refreshes, new links followed), whether or
    not it has `refresh_every`. 409 while it runs, or once cancelled."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    try:
        crawl = await crawls.refresh(crawl.id, caller.tenant)
    except CrawlEnded as exc:
        raise HTTPException(409, str(exc)) from None
    runtime.crawl_submitted()
    return CrawlOut.of(crawl, await crawls.counts(crawl.id))


@router.post("/{crawl_id}/cancel", name="cancel_crawl", responses=responses(404, 409))
async def cancel_crawl(crawl_id: CrawlId, crawls: CrawlsDep, caller: CallerDep) -> CrawlOut:
    """Cancel a running crawl (or a re-crawl between rounds): its pending pages are
    cancelled, the pages it found but had not made jobs of are cut, running pages finish,
    no round begins again. 409 once it has ended."""
    crawl = await _crawl(crawls, crawl_id, caller.tenant)
    try:
        crawl = await crawls.cancel(crawl.id, caller.tenant)
    except CrawlEnded as exc:
        raise HTTPException(409, str(exc)) from None
    return CrawlOut.of(crawl, await crawls.counts(crawl.id))
