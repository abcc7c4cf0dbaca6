"""The dashboard's crawls: `/dashboard/crawls` lists them with their progress, and
`/dashboard/crawls/{id}` shows one (its options, counts, last round, newest pages) with its
buttons: cancel a running crawl (or a re-crawl between rounds), crawl a completed one again.
Plain form POSTs that redirect back (a reload never repeats one); issues no SQL. Guarded as
every dashboard page is (`app.api.dashboard.routes`)."""

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.api.dashboard.pages import templates
from app.api.dashboard.routes import guard
from app.api.deps import CrawlsDep, JobsDep, RuntimeDep
from app.store.crawls import CrawlEnded, CrawlNotFound
from app.wire.crawls import CrawlOut

PAGES_SHOWN = 50
CRAWLS_SHOWN = 50

router = APIRouter(
    prefix="/dashboard/crawls",
    include_in_schema=False,
    dependencies=[Depends(guard)],
    default_response_class=HTMLResponse,
)


@router.get("", name="dashboard_crawls")
async def crawls_page(request: Request, crawls: CrawlsDep) -> HTMLResponse:
    """The newest crawls, each with its counts."""
    shown = [
        CrawlOut.of(crawl, await crawls.counts(crawl.id))
        for crawl in await crawls.list(None, CRAWLS_SHOWN)
    ]
    context = {"now": crawls.clock(), "crawls": shown}
    return templates.TemplateResponse(request, "crawls.html", context)


@router.get("/{crawl_id}", name="dashboard_crawl")
async def crawl_page(
    request: Request, crawl_id: str, crawls: CrawlsDep, jobs: JobsDep
) -> HTMLResponse:
    """One crawl: its options and counts, its last round's report, its newest pages."""
    context: dict[str, object] = {"now": crawls.clock()}
    try:
        crawl = await crawls.get(crawl_id)
    except CrawlNotFound:
        return templates.TemplateResponse(request, "crawl.html", context | {"crawl": None}, 404)
    ended = crawl.round - 1 if crawl.status == "running" else crawl.round
    context |= {
        "crawl": CrawlOut.of(crawl, await crawls.counts(crawl.id)),
        "report": await crawls.round(crawl.id, ended) if ended else None,
        "pages": (await jobs.list(crawl_id=crawl.id, limit=PAGES_SHOWN)).items,
    }
    return templates.TemplateResponse(request, "crawl.html", context)


@router.post("/{crawl_id}/cancel", name="dashboard_cancel_crawl")
async def cancel_crawl(crawl_id: str, crawls: CrawlsDep) -> RedirectResponse:
    """Cancel the crawl (if it can be), then back to its page."""
    try:
        await crawls.cancel(crawl_id)
    except (CrawlNotFound, CrawlEnded):
        pass  # its page says what it is
    return RedirectResponse(f"/dashboard/crawls/{crawl_id}", status_code=303)


@router.post("/{crawl_id}/refresh", name="dashboard_refresh_crawl")
async def refresh_crawl(crawl_id: str, crawls: CrawlsDep, runtime: RuntimeDep) -> RedirectResponse:
    """Crawl a completed crawl's site again now, then back to its page."""
    try:
        await crawls.refresh(crawl_id)
    except (CrawlNotFound, CrawlEnded):
        pass
    else:
        runtime.crawl_submitted()
    return RedirectResponse(f"/dashboard/crawls/{crawl_id}", status_code=303)
