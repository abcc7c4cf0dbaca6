"""The job endpoints: submit, read, list, retry, cancel, delete.

A tenant's key is told what concerns its own jobs only (`shown`, `shown_attempt`): not why
a domain shared with other tenants is paused, nor which worker ran an attempt. Admin keys
and an open service (no keys) see everything.
"""

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import AwareDatetime

from app.api.auth import Caller, CallerDep
from app.api.deps import JobsDep, SubmittingDep
from app.api.problems import over_quota, requeue_over_quota, responses
from app.api.schemas import (
    AttemptList,
    BatchIn,
    BatchJobIn,
    JobIn,
    JobPage,
    Refreshed,
    Requeued,
    SubmittedJobOut,
    SubmittedList,
    SubmittedUrl,
)
from app.fetch.guard import BlockedDestination, Destinations
from app.fetch.urls import MAX_URL_LENGTH, job_url
from app.model import DEFAULT_TENANT, JobStatus, NewJob
from app.observability import events
from app.rules.url_key import domain_of, url_key
from app.settings import Settings
from app.store.jobs.submits import Submitted
from app.store.tables import Attempt, Job
from app.wire import AttemptOut, JobOut

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=responses(401))


Loc = tuple[str | int, ...]
"""Where a value sits in a request, as validation errors say it: ("body", "jobs", 3, "url")."""

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="The same key again (same tenant) returns the first job instead of a new one.",
    ),
]
StatusFilter = Annotated[
    str | None,
    Query(
        alias="status", description="Comma-separated statuses, e.g. `dead` or `pending,running`."
    ),
]


def shown(job: Job, caller: Caller) -> JobOut:
    """`job` as `caller` may see it (`JobOut.for_tenant` for a tenant's key)."""
    out = JobOut.of(job)
    return out if caller.is_admin else out.for_tenant()


def _submitted(answer: Submitted, caller: Caller) -> SubmittedJobOut:
    """`answer`'s job as `caller` may see it (`shown`), and whether the submit made it."""
    out = SubmittedJobOut.of(answer.job)
    out = out if caller.is_admin else out.for_tenant()
    out.created = answer.created
    return out


def shown_attempt(attempt: Attempt, caller: Caller) -> AttemptOut:
    """`attempt` as `caller` may see it (`AttemptOut.for_tenant` for a tenant's key)."""
    out = AttemptOut.of(attempt)
    return out if caller.is_admin else out.for_tenant()


def _new_job(
    body: JobIn,
    caller: Caller,
    settings: Settings,
    idempotency_key: str | None = None,
) -> NewJob:
    """The job `body` asks for, its URLs checked (`_check`)."""
    if caller.tenant is not None and body.tenant not in (None, caller.tenant):
        raise HTTPException(403, f"this API key submits for tenant {caller.tenant!r} only")
    if isinstance(body, BatchJobIn) and body.idempotency_key is not None:
        idempotency_key = body.idempotency_key
    fingerprint = None if idempotency_key is None else body.fingerprint()
    if body.refresh_every is not None and body.refresh_every < settings.refresh_min_seconds:
        raise RequestValidationError(
            [
                {
                    "type": "greater_than_equal",
                    "loc": ("body", "refresh_every"),
                    "input": body.refresh_every,
                    "msg": f"refresh_every must be at least {settings.refresh_min_seconds} "
                    "seconds (INGEST_REFRESH_MIN_SECONDS)",
                }
            ]
        )
    return NewJob(
        url=body.url,
        domain=domain_of(body.url.parsed),
        tenant=caller.tenant or body.tenant or DEFAULT_TENANT,
        max_attempts=body.max_attempts or settings.max_attempts,
        priority=body.priority,
        not_before=body.not_before,
        metadata=body.metadata,
        callback_url=body.callback_url,
        callback_content=body.callback_content,
        idempotency_key=idempotency_key,
        fingerprint=fingerprint,
        refresh_every=body.refresh_every,
        unique=body.unique,
        max_age=body.max_age,
        url_key=url_key(body.url.parsed),
    )


def _urls_of(job: JobIn, loc: Loc) -> dict[Loc, SubmittedUrl]:
    """The job's URLs by their place in the body: the one fetched, and the callback's."""
    urls = {(*loc, "url"): job.url}
    if job.callback_url is not None:
        urls[(*loc, "callback_url")] = job.callback_url
    return urls


def _check(urls: dict[Loc, SubmittedUrl], destinations: Destinations) -> None:
    """422 for the URLs (as the body's validation parsed them) that the SSRF guard refuses on
    sight: a blocked literal address, a port not allowed, a blocked host, userinfo. Names
    that resolve to blocked addresses are refused when fetched (the job dies with
    BlockedDestination, a callback's delivery is dead)."""
    errors = []
    for loc, url in urls.items():
        try:
            destinations.check_url(url.parsed)
        except BlockedDestination as exc:
            errors.append({"type": "value_error", "loc": loc, "input": url, "msg": str(exc)})
    if errors:
        raise RequestValidationError(errors)


def _statuses(raw: str | None) -> list[JobStatus]:
    if not raw:
        return []
    names = [name.strip() for name in raw.split(",") if name.strip()]
    try:
        return [JobStatus(name) for name in names]
    except ValueError:
        allowed = ", ".join(s.value for s in JobStatus)
        raise RequestValidationError(
            [
                {
                    "type": "enum",
                    "loc": ("query", "status"),
                    "input": raw,
                    "msg": f"status must be a comma-separated list of: {allowed}",
                }
            ]
        ) from None


@router.post(
    "",
    name="submit_job",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {
            "model": JobOut,
            "description": "Same Idempotency-Key again: the first job; `unique` and a job of "
            "the same URL pending or running (or succeeded within `max_age`): that job",
        },
        # 400: a body that cannot be read as text (not UTF-8); FastAPI answers it itself.
        **responses(400, 403, 409, 413),
        **over_quota(),
    },
)
async def submit_job(
    body: JobIn,
    response: Response,
    submitting: SubmittingDep,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> JobOut:
    """Queue a URL to fetch: 201 with the new job, or 200 with the job that answers it (its
    Idempotency-Key's, or with `unique` one of the same URL)."""
    _check(_urls_of(body, ("body",)), submitting.destinations)
    new = _new_job(body, caller, submitting.settings, idempotency_key)
    submitting.rate.admit(caller.key, 1)
    if idempotency_key is None and not new.unique:
        job, created = (await submitting.jobs.submit([new]))[0], True
    else:
        answer = (await submitting.jobs.submit_each([new]))[0]
        job, created = answer.job, answer.created
    response.headers["Location"] = f"/jobs/{job.id}"
    if created:
        events.jobs_submitted(1)
    else:
        response.status_code = status.HTTP_200_OK
    return shown(job, caller)


@router.post(
    "/batch",
    name="submit_batch",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {
            "model": SubmittedList,
            "description": "Every job answered by one made before (`created` false)",
        },
        **responses(400, 403, 409, 413),
        **over_quota(),
    },
)
async def submit_batch(
    body: BatchIn,
    response: Response,
    submitting: SubmittingDep,
    caller: CallerDep,
) -> SubmittedList:
    """Queue 1 to 1,000 URLs at once, all or nothing. Each job says whether it was made
    (`created`) or answered by one made before (its `idempotency_key`'s, or with `unique`
    one of the same URL, maybe of this very batch); 200 when none was made."""
    _check(
        {
            loc: url
            for i, job in enumerate(body.jobs)
            for loc, url in _urls_of(job, ("body", "jobs", i)).items()
        },
        submitting.destinations,
    )
    new = [_new_job(item, caller, submitting.settings) for item in body.jobs]
    submitting.rate.admit(caller.key, len(new))
    if any(job.unique or job.idempotency_key is not None for job in new):
        answers = await submitting.jobs.submit_each(new)
    else:
        answers = [Submitted(job, True) for job in await submitting.jobs.submit(new)]
    made = sum(answer.created for answer in answers)
    events.jobs_submitted(made)
    if not made:
        response.status_code = status.HTTP_200_OK
    return SubmittedList(items=[_submitted(answer, caller) for answer in answers])


@router.get("", name="list_jobs", responses=responses(400))
async def list_jobs(
    jobs: JobsDep,
    caller: CallerDep,
    status_filter: StatusFilter = None,
    domain: Annotated[str | None, Query(max_length=300)] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    changed_since: Annotated[
        AwareDatetime | None,
        Query(
            description="Only jobs that stored a content version at or after this time: a "
            "first success, or a refresh that found the text changed (`changed_at`)."
        ),
    ] = None,
    url: Annotated[
        str | None,
        Query(
            max_length=MAX_URL_LENGTH,
            description="Only jobs of this URL: of the same key (`url_key`), so "
            "`HTTP://Example.com/?utm_source=x` finds the jobs of `http://example.com/`.",
        ),
    ] = None,
) -> JobPage:
    """Jobs, newest first, filtered; `GET /jobs?status=dead` lists the dead, `GET
    /jobs?url=...` the jobs of a URL."""
    if caller.tenant is not None:
        tenant = caller.tenant
    key = None if url is None else _key_of_query(url)
    page = await jobs.list(
        _statuses(status_filter), domain, tenant, limit, cursor, _in_utc(changed_since), key
    )
    return JobPage(items=[shown(job, caller) for job in page.items], next_cursor=page.next_cursor)


@router.post("/retry", name="retry_jobs")
async def retry_jobs(
    jobs: JobsDep,
    caller: CallerDep,
    status_filter: StatusFilter = "dead",
    domain: Annotated[str | None, Query(max_length=300)] = None,
) -> Requeued:
    """Requeue every dead (or cancelled) job, optionally of one domain, with a fresh budget:
    of each tenant, as many as INGEST_TENANT_MAX_PENDING leaves room for, the oldest first;
    the answer says how many were left."""
    statuses = _statuses(status_filter)
    if not statuses or not set(statuses) <= {JobStatus.DEAD, JobStatus.CANCELLED}:
        raise RequestValidationError(
            [
                {
                    "type": "enum",
                    "loc": ("query", "status"),
                    "input": status_filter,
                    "msg": "only dead and cancelled jobs can be requeued in bulk",
                }
            ]
        )
    done = await jobs.retry_all(statuses, domain, caller.tenant)
    return Requeued(requeued=done.requeued, left_over_quota=done.left_over_quota)


@router.post("/refresh", name="refresh_jobs")
async def refresh_jobs(
    jobs: JobsDep,
    caller: CallerDep,
    domain: Annotated[str | None, Query(max_length=300)] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    finished_before: Annotated[
        AwareDatetime | None,
        Query(description="Only jobs whose last fetch ended before this time."),
    ] = None,
) -> Refreshed:
    """Fetch every succeeded job's page again (of one domain or tenant, fetched before a
    time, when given): each goes back to pending as a refresh, its content kept. Of each
    tenant, as many as INGEST_TENANT_MAX_PENDING leaves room for, those fetched longest
    ago first; the answer says how many were left."""
    if caller.tenant is not None:
        tenant = caller.tenant
    done = await jobs.refresh_all(domain, tenant, _in_utc(finished_before))
    return Refreshed(refreshed=done.requeued, left_over_quota=done.left_over_quota)


def _key_of_query(url: str) -> str:
    """The key of a URL a query gave (`app.rules.url_key`); 422 for one a submit refuses."""
    try:
        return url_key(job_url(url))
    except ValueError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "url"), "input": url, "msg": str(exc)}]
        ) from None


def _in_utc(moment: datetime | None) -> datetime | None:
    """A query's time in UTC, as the store compares them; refused (422) past year 9999."""
    try:
        return None if moment is None else moment.astimezone(UTC)
    except OverflowError:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("query",),
                    "input": str(moment),
                    "msg": "times must fall within the years 1 to 9999 in UTC",
                }
            ]
        ) from None


@router.get("/{job_id}", name="get_job", responses=responses(404))
async def get_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JobOut:
    return shown(await jobs.get(job_id, caller.tenant), caller)


@router.get("/{job_id}/attempts", name="list_attempts", responses=responses(404))
async def list_attempts(job_id: str, jobs: JobsDep, caller: CallerDep) -> AttemptList:
    """The job's history: one entry per attempt, oldest first."""
    history = await jobs.attempts(job_id, caller.tenant)
    return AttemptList(items=[shown_attempt(a, caller) for a in history])


@router.post(
    "/{job_id}/retry",
    name="retry_job",
    responses={**responses(404, 409), **requeue_over_quota()},
)
async def retry_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JobOut:
    """Dead or cancelled: pending with a fresh budget (429 if its tenant's pending jobs are
    at INGEST_TENANT_MAX_PENDING). Pending: due now. Otherwise 409."""
    return shown(await jobs.retry(job_id, caller.tenant), caller)


@router.post(
    "/{job_id}/refresh",
    name="refresh_job",
    responses={**responses(404, 409), **requeue_over_quota()},
)
async def refresh_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JobOut:
    """Succeeded or dead: fetch the page again. The job goes back to pending as a refresh,
    keeping its id, history and content: a conditional GET (its ETag, Last-Modified), and
    a new content version only if the text changed. Otherwise 409; 429 if its tenant's
    pending jobs are at INGEST_TENANT_MAX_PENDING."""
    return shown(await jobs.refresh(job_id, caller.tenant), caller)


@router.post("/{job_id}/cancel", name="cancel_job", responses=responses(404, 409))
async def cancel_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> JobOut:
    """Pending: cancelled. Otherwise 409."""
    return shown(await jobs.cancel(job_id, caller.tenant), caller)


@router.delete(
    "/{job_id}",
    name="delete_job",
    status_code=status.HTTP_204_NO_CONTENT,
    # A plain Response: the default JSONResponse would label the empty 204 application/json.
    response_class=Response,
    responses=responses(404, 409),
)
async def delete_job(job_id: str, jobs: JobsDep, caller: CallerDep) -> None:
    """Succeeded, dead or cancelled: deleted with its attempts and content. Otherwise 409."""
    await jobs.delete(job_id, caller.tenant)
