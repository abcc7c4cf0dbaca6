"""The operators' dashboard: server-rendered HTML over the stores the API uses.

Owns the `/dashboard` pages and their buttons: retry a job ("Run now" for a pending one),
refresh a succeeded or dead one, cancel a pending job, delete a finished one; retry or delete
every dead job of the filter (after a confirmation page); resume a paused domain. Each button
is a plain form POST that calls one store method and redirects back to its view with a
notice code (POST, redirect, GET: a reload never repeats an action; the sentences are in
`app.api.dashboard.notices`). No script and no external asset: Jinja2 templates in
`app/templates/`, inline CSS, the chart as inline SVG (`app.api.dashboard.chart`). Not in
the OpenAPI schema; issues no SQL. The overview reloads itself only when asked.

Access: open while no API keys are set, then admin keys only (tenant `*`), as HTTP Basic (the
key as password) or `Authorization: Bearer <key>`; a POST from another site is refused
(`app.api.middleware.cross_site`). Details: docs/operating/dashboard.md.
"""

import base64
import binascii
from collections.abc import Awaitable
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api.auth import Caller
from app.api.dashboard.chart import layout
from app.api.dashboard.notices import RETRIES, Code, Notice, NoticeDep, sentence
from app.api.dashboard.pages import View, ViewDep, templates
from app.api.deps import ContentsDep, JobsDep, RuntimeDep
from app.api.routes import content
from app.content.types import has_text, media_type
from app.keys import ADMIN
from app.model import JobStatus
from app.store.activity import finished_per_minute
from app.store.counts import TenantLoad
from app.store.domains import DomainOverview
from app.store.jobs import JobStore
from app.store.jobs.errors import JobNotFound, StateConflict
from app.store.quotas import QuotaExceeded
from app.store.tables import Job, is_job_id
from app.store.workers import silence
from app.text.wording import distinct_prefix
from app.wire import PageMetadataOut

PAGE_SIZE = 25
RECENT = 10
"""Succeeded jobs shown, the newest."""
CHART_MINUTES = 60
CHALLENGE = 'Basic realm="ingest dashboard", charset="UTF-8"'


def presented_key(authorization: str) -> str | None:
    """The key in an `Authorization` header: `Bearer <key>`, or Basic with the key as password."""
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


async def guard(request: Request, runtime: RuntimeDep) -> None:
    if not runtime.keys:
        return
    key = presented_key(request.headers.get("authorization", "")) or ""
    if runtime.keys.tenant_of(key) != ADMIN:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "the dashboard needs an admin API key",
            headers={"WWW-Authenticate": CHALLENGE},
        )


Back = Annotated[Literal["job"] | None, Query()]
"""`job`: an action pressed on the job's page goes back there, not to the overview."""

router = APIRouter(
    prefix="/dashboard",
    include_in_schema=False,
    dependencies=[Depends(guard)],
    default_response_class=HTMLResponse,
)


@router.get("", name="dashboard")
async def overview(
    request: Request, runtime: RuntimeDep, view: ViewDep, notice: NoticeDep
) -> HTMLResponse:
    """Counts, the last hour, workers, running jobs, domains, dead, waiting and recently
    succeeded jobs, and what the search found; each list of the filter."""
    jobs, now = runtime.jobs, runtime.clock()
    domains = await runtime.domains.overview(now, domain=view.domain)
    found = await jobs.search(view.q, view.domain, view.tenant, PAGE_SIZE) if view.q else None
    running = await jobs.running(view.domain, view.tenant, PAGE_SIZE)
    dead = await jobs.list([JobStatus.DEAD], view.domain, view.tenant, PAGE_SIZE, view.cursor)
    waiting = await jobs.waiting(view.domain, view.tenant, PAGE_SIZE)
    succeeded = await jobs.list([JobStatus.SUCCEEDED], view.domain, view.tenant, RECENT)
    listed = [*(found or []), *running, *dead.items, *waiting, *succeeded.items]
    context = {
        "view": view,
        "now": now,
        "notice": await _banner(notice, jobs, view),
        "stats": await jobs.stats(view.tenant, view.domain),
        "chart": layout(await finished_per_minute(runtime.database, now, CHART_MINUTES)),
        "workers": await runtime.workers.list(now, silence(runtime.settings.lease_seconds)),
        "running": running,
        "domains": _busiest_first(domains)[:PAGE_SIZE],
        "domain_count": len(domains),
        "domain_limit": runtime.settings.domain_max_in_flight,
        **await _tenants(jobs, view),
        "settings": runtime.settings,
        "dead": dead,
        "waiting": waiting,
        "succeeded": succeeded,
        "found": found,
        "page_size": PAGE_SIZE,
        # Every list links its jobs by as much of their ids as tells the page's jobs apart.
        "id_length": distinct_prefix([job.id for job in listed]),
    }
    return templates.TemplateResponse(request, "overview.html", context)


async def _tenants(jobs: JobStore, view: View) -> dict[str, Any]:
    """The Tenants table: each tenant with jobs pending or running (the most pending first),
    then each other that keeps content (the most bytes first); and the bytes each keeps."""
    loads = list(await jobs.tenant_loads(view.tenant))
    kept = await jobs.bytes_kept(view.tenant)
    named = {load.tenant for load in loads}
    loads += [TenantLoad(tenant, 0, 0) for tenant in kept if tenant not in named]
    return {"tenants": loads, "kept": kept}


async def _banner(notice: Notice | None, jobs: JobStore, view: View) -> str | None:
    """The overview's banner; a retry's says what holds its job back now."""
    if notice is None:
        return None
    job = None
    if notice.job is not None and notice.code in RETRIES:
        try:
            job = await jobs.get(notice.job)
        except JobNotFound:
            pass
    return sentence(notice, job, view.domain, view.tenant)


def _busiest_first(domains: list[DomainOverview]) -> list[DomainOverview]:
    """Paused domains first, then those with the most work, then by name."""
    return sorted(
        domains, key=lambda d: (d.paused_until is None, -(d.pending + d.in_flight), d.domain)
    )


@router.get("/jobs/{job_id}", name="dashboard_job")
async def job_page(
    request: Request, job_id: str, jobs: JobsDep, contents: ContentsDep, notice: NoticeDep
) -> HTMLResponse:
    """One job, what holds it back, what its page says of itself, the content versions it
    keeps (newest first), its attempt history (oldest first) and its buttons."""
    try:
        job = await jobs.get(job_id)
    except JobNotFound:
        job = None
    banner = sentence(notice, job, None, None) if notice else None
    context: dict[str, object] = {"now": jobs.clock(), "notice": banner}
    if job is None:
        # An id of another shape is not repeated: a link must not choose what the page says.
        missing = {"job": None, "job_id": job_id if is_job_id(job_id) else None}
        return templates.TemplateResponse(request, "job.html", context | missing, 404)
    page = None if job.result_metadata is None else PageMetadataOut.of(job.result_metadata)
    versions = await contents.versions(job_id) or []
    context |= {
        "job_id": job_id,
        "job": job,
        "page": page,
        "has_text": has_text(media_type(job.result_content_type)),
        "versions": versions,
        # A version of a type with no text (an image) has no text to show or compare.
        "with_text": {v.version for v in versions if has_text(media_type(v.content_type))},
        "attempts": await jobs.attempts(job_id),
    }
    return templates.TemplateResponse(request, "job.html", context)


@router.get("/jobs/{job_id}/content", name="dashboard_job_content", response_class=Response)
async def job_content(job_id: str, contents: ContentsDep) -> Response:
    """What `GET /jobs/{id}/content` serves (sandboxed), under the dashboard's sign-in: a
    browser signed in with HTTP Basic has no Bearer key for the API's route."""
    return await content.get_job_content(job_id, contents, Caller(None))


@router.get("/jobs/{job_id}/text", name="dashboard_job_text", response_class=Response)
async def job_text(job_id: str, contents: ContentsDep) -> Response:
    """What `GET /jobs/{id}/text` serves, under the dashboard's sign-in."""
    return await content.get_job_text(job_id, contents, Caller(None))


@router.get("/jobs/{job_id}/markdown", name="dashboard_job_markdown", response_class=Response)
async def job_markdown(job_id: str, contents: ContentsDep) -> Response:
    """What `GET /jobs/{id}/markdown` serves, under the dashboard's sign-in."""
    return await content.get_job_markdown(job_id, contents, Caller(None))


@router.get(
    "/jobs/{job_id}/versions/{version}/text",
    name="dashboard_version_text",
    response_class=Response,
)
async def version_text(
    request: Request,
    job_id: str,
    version: content.VersionNumber,
    contents: ContentsDep,
    diff: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    """What `GET /jobs/{id}/versions/{n}/text` serves (with `?diff=m`, the diff from version
    m), under the dashboard's sign-in."""
    return await content.get_version_text(job_id, version, contents, Caller(None), request, diff)


@router.get("/confirm/{what}", name="dashboard_confirm")
async def confirm(
    request: Request,
    what: Literal["retry-dead", "delete-dead"],
    jobs: JobsDep,
    view: ViewDep,
) -> HTMLResponse:
    """Ask before retrying or deleting every dead job of the filter: how many, and a button."""
    count = (await jobs.stats(view.tenant, view.domain)).counts[JobStatus.DEAD]
    context = {"now": jobs.clock(), "view": view, "what": what, "count": count}
    return templates.TemplateResponse(request, "confirm.html", context)


@router.post("/jobs/{job_id}/retry", name="dashboard_retry_job")
async def retry_job(
    job_id: str, jobs: JobsDep, view: ViewDep, back: Back = None
) -> RedirectResponse:
    """The store's retry (dead or cancelled: a fresh budget; pending: due now), then back,
    saying whether the job can start now or what still holds it back."""
    try:
        before = await jobs.get(job_id)
        await jobs.retry(job_id)
        done = Code.RUN_NOW if before.status == JobStatus.PENDING else Code.RETRIED
        notice = Notice(done, job_id)
    except JobNotFound:
        notice = _no_job(job_id)
    except StateConflict as exc:
        notice = Notice(Code.NOT_RETRIED, job_id, status=exc.status)
    except QuotaExceeded:
        notice = Notice(Code.OVER_QUOTA, job_id)
    return _redirect(_back(job_id, back, view), notice)


@router.post("/jobs/{job_id}/refresh", name="dashboard_refresh_job")
async def refresh_job(
    job_id: str, jobs: JobsDep, view: ViewDep, back: Back = None
) -> RedirectResponse:
    """The store's refresh (succeeded or dead: pending again to fetch its page anew, its
    content kept), then back."""
    notice = await _acted(job_id, jobs.refresh(job_id), Code.REFRESHED, Code.NOT_REFRESHED)
    return _redirect(_back(job_id, back, view), notice)


async def _acted(job_id: str, action: Awaitable[Job], done: Code, refused: Code) -> Notice:
    """What a button's store action on one job did: `done`, or why not (no such job, a
    state that refuses it: `refused`, or its tenant's pending quota)."""
    try:
        return Notice(done, (await action).id)
    except JobNotFound:
        return _no_job(job_id)
    except StateConflict as exc:
        return Notice(refused, job_id, status=exc.status)
    except QuotaExceeded:
        return Notice(Code.OVER_QUOTA, job_id)


def _no_job(job_id: str) -> Notice:
    return Notice(Code.NO_JOB, job_id) if is_job_id(job_id) else Notice(Code.NO_SUCH_JOB)


@router.post("/jobs/{job_id}/cancel", name="dashboard_cancel_job")
async def cancel_job(
    job_id: str, jobs: JobsDep, view: ViewDep, back: Back = None
) -> RedirectResponse:
    """Cancel a pending job, then back."""
    notice = await _acted(job_id, jobs.cancel(job_id), Code.CANCELLED, Code.NOT_CANCELLED)
    return _redirect(_back(job_id, back, view), notice)


@router.post("/jobs/{job_id}/delete", name="dashboard_delete_job")
async def delete_job(job_id: str, jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Delete a finished job with its attempts and content, then back to the overview."""
    try:
        await jobs.delete(job_id)
        notice = Notice(Code.DELETED, job_id)
    except JobNotFound:
        notice = _no_job(job_id)
    except StateConflict as exc:
        notice = Notice(Code.NOT_DELETED, job_id, status=exc.status)
    return _redirect(view.action("/dashboard"), notice)


@router.post("/retry", name="dashboard_retry_dead")
async def retry_dead(jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Requeue every dead job of the filter with a fresh budget (of each tenant, as many as
    its pending quota leaves room for)."""
    done = await jobs.retry_all([JobStatus.DEAD], view.domain, view.tenant)
    notice = Notice(Code.REQUEUED_DEAD, count=done.requeued)
    if done.left_over_quota:
        notice = Notice(
            Code.REQUEUED_DEAD_OVER_QUOTA, count=done.requeued, left=done.left_over_quota
        )
    return _redirect(view.action("/dashboard"), notice)


@router.post("/delete", name="dashboard_delete_dead")
async def delete_dead(jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Delete every dead job of the filter with its attempts."""
    count = await jobs.delete_all([JobStatus.DEAD], view.domain, view.tenant)
    return _redirect(view.action("/dashboard"), Notice(Code.DELETED_DEAD, count=count))


@router.post("/domains/{name}/resume", name="dashboard_resume_domain")
async def resume_domain(name: str, runtime: RuntimeDep, view: ViewDep) -> RedirectResponse:
    """Clear the domain's pause so its jobs can be claimed again, then back."""
    resumed = await runtime.domains.resume(name)
    return _redirect(
        view.action("/dashboard"), Notice(Code.RESUMED if resumed else Code.NO_DOMAIN, name=name)
    )


def _back(job_id: str, back: str | None, view: View) -> str:
    return f"/dashboard/jobs/{job_id}" if back == "job" else view.action("/dashboard")


def _redirect(target: str, notice: Notice) -> RedirectResponse:
    separator = "&" if "?" in target else "?"
    return RedirectResponse(
        target + separator + urlencode(notice.query()), status_code=status.HTTP_303_SEE_OTHER
    )
