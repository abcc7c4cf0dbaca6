"""The operators' dashboard: server-rendered HTML over the stores the API uses.

Owns the `/dashboard` pages and their buttons: retry a job ("Run now" for a pending one),
cancel a pending job, delete a finished one; retry or delete every dead job of the filter
(after a confirmation page); resume a paused domain. Each button is a plain form POST that
calls one store method and redirects back to the view it was pressed on (POST, redirect,
GET), so a reload never repeats an action. No script and no external asset: Jinja2
templates in `app/templates/`, inline CSS, the chart as inline SVG (`app.api.chart`). The
pages are not in the OpenAPI schema. This module issues no SQL.

The overview reloads itself only when asked (`?refresh=5`, or its Refresh link): a timed
reload would wipe what an operator is typing.

Access: open while no API keys are set; once `INGEST_API_KEYS` is set, admin keys only
(tenant `*`), sent as HTTP Basic (any user name, the key as password, so a browser prompts
for it) or as `Authorization: Bearer <key>`. A POST from another site is refused, as for the
API (`app.api.cross_site`): the browser would attach the Basic credentials to it.
"""

import base64
import binascii
from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api import content
from app.api.auth import Caller
from app.api.chart import layout
from app.api.deps import ContentsDep, JobsDep, RuntimeDep
from app.api.pages import View, ViewDep, templates, when
from app.keys import ADMIN
from app.model import Blocked, BlockReason, JobStatus
from app.settings import Settings
from app.store.activity import finished_per_minute
from app.store.domains import DomainOverview
from app.store.jobs import JobNotFound, StateConflict
from app.store.tables import Job

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


async def _guard(request: Request, runtime: RuntimeDep) -> None:
    if not runtime.keys:
        return
    key = presented_key(request.headers.get("authorization", "")) or ""
    if runtime.keys.tenant_of(key) != ADMIN:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "the dashboard needs an admin API key",
            headers={"WWW-Authenticate": CHALLENGE},
        )


Notice = Annotated[str | None, Query(max_length=300)]
Back = Annotated[Literal["job"] | None, Query()]
"""`job`: an action pressed on the job's page goes back there, not to the overview."""

router = APIRouter(
    prefix="/dashboard",
    include_in_schema=False,
    dependencies=[Depends(_guard)],
    default_response_class=HTMLResponse,
)


def silence(settings: Settings) -> timedelta:
    """How long a worker may go unheard before it is shown as gone: two leases, six of its
    heartbeats."""
    return timedelta(seconds=2 * settings.lease_seconds)


@router.get("", name="dashboard")
async def overview(
    request: Request, runtime: RuntimeDep, view: ViewDep, notice: Notice = None
) -> HTMLResponse:
    """Counts, the last hour, workers, running jobs, domains, dead, waiting and recently
    succeeded jobs, and what the search found; each list of the filter."""
    jobs, now = runtime.jobs, runtime.clock()
    domains = await runtime.domains.overview(now, domain=view.domain)
    found = await jobs.search(view.q, view.domain, view.tenant, PAGE_SIZE) if view.q else None
    context = {
        "view": view,
        "now": now,
        "notice": notice,
        "stats": await jobs.stats(view.tenant, view.domain),
        "chart": layout(await finished_per_minute(runtime.database, now, CHART_MINUTES)),
        "workers": await runtime.workers.list(now, silence(runtime.settings)),
        "running": await jobs.running(view.domain, view.tenant, PAGE_SIZE),
        "domains": _busiest_first(domains)[:PAGE_SIZE],
        "domain_count": len(domains),
        "domain_limit": runtime.settings.domain_max_in_flight,
        "dead": await jobs.list([JobStatus.DEAD], view.domain, view.tenant, PAGE_SIZE, view.cursor),
        "waiting": await jobs.waiting(view.domain, view.tenant, PAGE_SIZE),
        "succeeded": await jobs.list([JobStatus.SUCCEEDED], view.domain, view.tenant, RECENT),
        "found": found,
        "page_size": PAGE_SIZE,
    }
    return templates.TemplateResponse(request, "overview.html", context)


def _busiest_first(domains: list[DomainOverview]) -> list[DomainOverview]:
    """Paused domains first, then those with the most work, then by name."""
    return sorted(
        domains, key=lambda d: (d.paused_until is None, -(d.pending + d.in_flight), d.domain)
    )


@router.get("/jobs/{job_id}", name="dashboard_job")
async def job_page(
    request: Request, job_id: str, jobs: JobsDep, notice: Notice = None
) -> HTMLResponse:
    """One job, what holds it back, its attempt history (oldest first) and its buttons."""
    context = {"now": jobs.clock(), "job_id": job_id, "notice": notice}
    try:
        context |= {"job": await jobs.get(job_id), "attempts": await jobs.attempts(job_id)}
    except JobNotFound:
        return templates.TemplateResponse(request, "job.html", context | {"job": None}, 404)
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
        notice = _retried(before, await jobs.retry(job_id))
    except JobNotFound:
        notice = f"No job {job_id}."
    except StateConflict as exc:
        notice = f"Not retried: {exc}."
    return _redirect(_back(job_id, back, view), notice)


def _retried(before: Job, job: Job) -> str:
    if before.status != JobStatus.PENDING:
        waits = f", but {waits_for(job.blocked_by, job.domain)}" if job.blocked_by else ""
        return f"Job {job.id} is pending again{waits}."
    if job.blocked_by:
        return f"Job {job.id} still waits: {waits_for(job.blocked_by, job.domain)}."
    return f"Job {job.id} is due now."


def waits_for(blocked: Blocked, domain: str) -> str:
    """`its domain example.com is paused until ... (HTTP 429, ...)`: a reason as a clause."""
    until = when(blocked.until)
    match blocked.reason:
        case BlockReason.DOMAIN_PAUSED:
            why = f" ({blocked.detail})" if blocked.detail else ""
            return f"its domain {domain} is paused until {until}{why}"
        case BlockReason.DOMAIN_AT_LIMIT:
            return f"its domain {domain} runs as many fetches as it may at once"
        case BlockReason.DOMAIN_INTERVAL:
            return f"its domain {domain} may start its next fetch at {until}"
        case BlockReason.NOT_DUE:
            return f"it is not due until {until}"


templates.env.globals["waits_for"] = waits_for


@router.post("/jobs/{job_id}/cancel", name="dashboard_cancel_job")
async def cancel_job(
    job_id: str, jobs: JobsDep, view: ViewDep, back: Back = None
) -> RedirectResponse:
    """Cancel a pending job, then back."""
    try:
        notice = f"Job {(await jobs.cancel(job_id)).id} is cancelled."
    except JobNotFound:
        notice = f"No job {job_id}."
    except StateConflict as exc:
        notice = f"Not cancelled: {exc}."
    return _redirect(_back(job_id, back, view), notice)


@router.post("/jobs/{job_id}/delete", name="dashboard_delete_job")
async def delete_job(job_id: str, jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Delete a finished job with its attempts and content, then back to the overview."""
    try:
        await jobs.delete(job_id)
        notice = f"Job {job_id} is deleted."
    except JobNotFound:
        notice = f"No job {job_id}."
    except StateConflict as exc:
        notice = f"Not deleted: {exc}."
    return _redirect(view.action("/dashboard"), notice)


@router.post("/retry", name="dashboard_retry_dead")
async def retry_dead(jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Requeue every dead job of the filter with a fresh budget."""
    count = await jobs.retry_all([JobStatus.DEAD], view.domain, view.tenant)
    return _redirect(view.action("/dashboard"), f"Requeued {count} dead job(s){_of(view)}.")


@router.post("/delete", name="dashboard_delete_dead")
async def delete_dead(jobs: JobsDep, view: ViewDep) -> RedirectResponse:
    """Delete every dead job of the filter with its attempts."""
    count = await jobs.delete_all([JobStatus.DEAD], view.domain, view.tenant)
    return _redirect(view.action("/dashboard"), f"Deleted {count} dead job(s){_of(view)}.")


@router.post("/domains/{name}/resume", name="dashboard_resume_domain")
async def resume_domain(name: str, runtime: RuntimeDep, view: ViewDep) -> RedirectResponse:
    """Clear the domain's pause so its jobs can be claimed again, then back."""
    resumed = await runtime.domains.resume(name)
    notice = f"Domain {name} resumed." if resumed else f"No domain {name}."
    return _redirect(view.action("/dashboard"), notice)


def _of(view: View) -> str:
    return f" {view.scope}" if view.scope else ""


def _back(job_id: str, back: str | None, view: View) -> str:
    return f"/dashboard/jobs/{job_id}" if back == "job" else view.action("/dashboard")


def _redirect(target: str, notice: str) -> RedirectResponse:
    separator = "&" if "?" in target else "?"
    return RedirectResponse(
        target + separator + urlencode({"notice": notice}), status_code=status.HTTP_303_SEE_OTHER
    )
