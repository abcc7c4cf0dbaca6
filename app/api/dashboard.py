"""The operators' dashboard: server-rendered HTML over the stores the API uses.

Owns the `/dashboard` pages and their buttons (retry a job, retry every dead job of the
filter, resume a paused domain). Each button is a plain form POST that calls one store
method and redirects back (POST, redirect, GET), so a reload never repeats an action. No
script and no external asset: Jinja2 templates in `app/templates/` with inline CSS. The pages
are not in the OpenAPI schema. This module issues no SQL.

Access: open while no API keys are set; once `INGEST_API_KEYS` is set, admin keys only
(tenant `*`), sent as HTTP Basic (any user name, the key as password, so a browser prompts
for it) or as `Authorization: Bearer <key>`. A POST from another site is refused, as for the
API (`app.api.cross_site`): the browser would attach the Basic credentials to it.
"""

import base64
import binascii
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.api.auth import ADMIN, tenant_of
from app.api.deps import DomainsDep, JobsDep, SettingsDep
from app.model import JobStatus
from app.store.jobs import JobNotFound, StateConflict

REFRESH_SECONDS = 5
PAGE_SIZE = 50
CHALLENGE = 'Basic realm="ingest dashboard", charset="UTF-8"'

templates = Jinja2Templates(directory=Path(__file__).resolve().parent.parent / "templates")


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


async def _guard(request: Request, settings: SettingsDep) -> None:
    if not settings.api_keys:
        return
    key = presented_key(request.headers.get("authorization", "")) or ""
    if tenant_of(key, settings.api_keys) != ADMIN:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "the dashboard needs an admin API key",
            headers={"WWW-Authenticate": CHALLENGE},
        )


DomainFilter = Annotated[str | None, Query(max_length=300)]
Notice = Annotated[str | None, Query(max_length=300)]

router = APIRouter(
    prefix="/dashboard",
    include_in_schema=False,
    dependencies=[Depends(_guard)],
    default_response_class=HTMLResponse,
)


@router.get("", name="dashboard")
async def overview(
    request: Request,
    jobs: JobsDep,
    domains: DomainsDep,
    domain: DomainFilter = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    notice: Notice = None,
) -> HTMLResponse:
    """Counts, dead jobs newest first, jobs waiting for their retry_after, paused domains."""
    now = jobs.clock()
    domain = (domain or "").strip().lower() or None
    context = {
        "now": now,
        "domain": domain,
        "notice": notice,
        "refresh_seconds": REFRESH_SECONDS,
        "refresh_url": _overview_url(domain, cursor),
        "stats": await jobs.stats(),
        "dead": await jobs.list([JobStatus.DEAD], domain, limit=PAGE_SIZE, cursor=cursor),
        "cursor": cursor,
        "waiting": await jobs.waiting(domain, limit=PAGE_SIZE),
        "paused": await domains.paused(now),
        "page_size": PAGE_SIZE,
    }
    return templates.TemplateResponse(request, "overview.html", context)


@router.get("/jobs/{job_id}", name="dashboard_job")
async def job_page(
    request: Request, job_id: str, jobs: JobsDep, notice: Notice = None
) -> HTMLResponse:
    """One job and its attempt history, oldest attempt first."""
    context: dict[str, Any] = {"now": jobs.clock(), "job_id": job_id, "notice": notice}
    try:
        context |= {"job": await jobs.get(job_id), "attempts": await jobs.attempts(job_id)}
    except JobNotFound:
        return templates.TemplateResponse(request, "job.html", context | {"job": None}, 404)
    return templates.TemplateResponse(request, "job.html", context)


@router.post("/jobs/{job_id}/retry", name="dashboard_retry_job")
async def retry_job(
    job_id: str,
    jobs: JobsDep,
    domain: DomainFilter = None,
    back: Annotated[str | None, Query(pattern="^job$")] = None,
) -> RedirectResponse:
    """The store's retry (dead or cancelled: fresh budget; pending: due now), then back."""
    try:
        job = await jobs.retry(job_id)
        notice = f"Job {job.id} is {job.status} again."
    except JobNotFound:
        notice = f"No job {job_id}."
    except StateConflict as exc:
        notice = f"Not retried: {exc}."
    target = f"/dashboard/jobs/{job_id}" if back == "job" else _overview_url(domain)
    return _redirect(target, notice)


@router.post("/retry", name="dashboard_retry_dead")
async def retry_dead(jobs: JobsDep, domain: DomainFilter = None) -> RedirectResponse:
    """Requeue every dead job of the filter (one domain, or all) with a fresh budget."""
    count = await jobs.retry_all([JobStatus.DEAD], domain)
    scope = f" of {domain}" if domain else ""
    return _redirect(_overview_url(domain), f"Requeued {count} dead job(s){scope}.")


@router.post("/domains/{name}/resume", name="dashboard_resume_domain")
async def resume_domain(
    name: str, domains: DomainsDep, domain: DomainFilter = None
) -> RedirectResponse:
    """Clear the domain's pause so its jobs can be claimed again, then back."""
    notice = f"Domain {name} resumed." if await domains.resume(name) else f"No domain {name}."
    return _redirect(_overview_url(domain), notice)


def _overview_url(domain: str | None, cursor: str | None = None) -> str:
    query = urlencode(
        {name: value for name, value in [("domain", domain), ("cursor", cursor)] if value}
    )
    return f"/dashboard?{query}" if query else "/dashboard"


def _redirect(target: str, notice: str) -> RedirectResponse:
    separator = "&" if "?" in target else "?"
    return RedirectResponse(target + separator + urlencode({"notice": notice}), status_code=303)


def when(moment: datetime | None) -> str:
    """`2026-11-30 03:12:04 UTC`."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime | None, now: datetime) -> str:
    """`in 42s`, `3m 5s ago`, `now`: how far `moment` is from `now`."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    if round(seconds) == 0:
        return "now"
    return f"in {duration(seconds)}" if seconds > 0 else f"{duration(seconds)} ago"


def duration(seconds: float) -> str:
    """`42s`, `3m 5s`, `2d 4h`: the two largest units of a span, rounded to the second."""
    minutes, secs = divmod(round(abs(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    units = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    largest = next((i for i, (value, _) in enumerate(units) if value), len(units) - 1)
    return (
        " ".join(f"{value}{unit}" for value, unit in units[largest : largest + 2] if value) or "0s"
    )


templates.env.filters["when"] = when
templates.env.filters["duration"] = duration
templates.env.globals["relative"] = relative
