"""The dashboard's status banner: one of a fixed set of sentences, never text from the URL.

A button's action (a POST) redirects back to the page with `?notice=<code>` and the values
its sentence needs (`job`, `count`, `name`, `status`, `left`: `Notice.query`); the page
builds the sentence from the code with those values (`Notice.read`, `sentence`), each
checked for its shape, and escapes it like any text. An unknown code, or a value missing or
of another shape, shows no banner: a link cannot make the dashboard say what it likes
("Session expired, re-enter the key at ..."), only name a job, a count or a domain in one
of these.

Pure. What holds a retried job back is said from the job as the page reads it, not from the
URL.
"""

import re
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Query

from app.api.dashboard.pages import waits_for
from app.api.schemas import TENANT_PATTERN
from app.model import JobStatus
from app.store.tables import Job, is_job_id


class Code(StrEnum):
    RETRIED = "retried"
    """A dead or cancelled job is pending again."""
    RUN_NOW = "run-now"
    """A pending job's wait for its next attempt is cleared."""
    NOT_RETRIED = "not-retried"
    REFRESHED = "refreshed"
    """A succeeded or dead job is pending again, as a refresh."""
    NOT_REFRESHED = "not-refreshed"
    OVER_QUOTA = "over-quota"
    """A retry or refresh refused: the job's tenant has as many pending jobs as it may."""
    CANCELLED = "cancelled"
    NOT_CANCELLED = "not-cancelled"
    DELETED = "deleted"
    NOT_DELETED = "not-deleted"
    NO_JOB = "no-job"
    NO_SUCH_JOB = "no-such-job"
    """An id that is not a job id's shape: not repeated."""
    REQUEUED_DEAD = "requeued-dead"
    REQUEUED_DEAD_OVER_QUOTA = "requeued-dead-over-quota"
    """Some dead jobs requeued; `left` stayed dead, their tenants at their quota."""
    DELETED_DEAD = "deleted-dead"
    RESUMED = "resumed"
    NO_DOMAIN = "no-domain"


STATES = frozenset({*(status.value for status in JobStatus), "changing", "no longer pending"})
"""What a job refused an action for was (`app.store.jobs.errors.StateConflict.status`)."""
_DOMAIN = re.compile(r"[a-z0-9.\[\]:_-]{1,300}")
"""A job's domain: a host in its ASCII form, with a port unless the scheme's."""
_TENANT = re.compile(TENANT_PATTERN)


@dataclass(frozen=True)
class Notice:
    """What an action says, as its code and the values of its sentence."""

    code: Code
    job: str | None = None
    """A job id (a UUID)."""
    count: int | None = None
    name: str | None = None
    """A domain."""
    status: str | None = None
    """One of STATES."""
    left: int | None = None
    """Jobs a bulk action left as they were."""

    def query(self) -> dict[str, str]:
        """The redirect's query parameters."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        values = {"notice": values.pop("code"), **values}
        return {name: str(value) for name, value in values.items() if value is not None}

    @classmethod
    def read(
        cls,
        code: str | None,
        job: str | None = None,
        count: str | None = None,
        name: str | None = None,
        status: str | None = None,
        left: str | None = None,
    ) -> "Notice | None":
        """The notice a page's query names; None if it names none, or a value it has is not of
        the shape its sentence takes."""
        try:
            known = Code(code or "")
        except ValueError:
            return None
        shapes = [
            job is None or is_job_id(job),
            count is None or _a_count(count),
            left is None or _a_count(left),
            name is None or _DOMAIN.fullmatch(name) is not None,
            status is None or status in STATES,
        ]
        if not all(shapes):
            return None
        number = None if count is None else int(count)
        return cls(known, job, number, name, status, None if left is None else int(left))


def _a_count(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 9


SENTENCES = {
    Code.CANCELLED: "Job {job} is cancelled.",
    Code.DELETED: "Job {job} is deleted.",
    Code.NOT_RETRIED: "Not retried: job {job} is {status}; cannot retry.",
    Code.REFRESHED: "Job {job} is pending again to refresh its page; its content is kept.",
    Code.NOT_REFRESHED: "Not refreshed: job {job} is {status}; cannot refresh.",
    Code.OVER_QUOTA: "Job {job} is left as it was: its tenant has as many pending jobs as "
    "INGEST_TENANT_MAX_PENDING allows.",
    Code.NOT_CANCELLED: "Not cancelled: job {job} is {status}; cannot cancel.",
    Code.NOT_DELETED: "Not deleted: job {job} is {status}; cannot delete.",
    Code.NO_JOB: "No job {job}.",
    Code.NO_SUCH_JOB: "No such job.",
    Code.REQUEUED_DEAD: "Requeued {count} dead job(s){scope}.",
    Code.REQUEUED_DEAD_OVER_QUOTA: "Requeued {count} dead job(s){scope}; {left} left dead: "
    "their tenants have as many pending jobs as INGEST_TENANT_MAX_PENDING allows.",
    Code.DELETED_DEAD: "Deleted {count} dead job(s){scope}.",
    Code.RESUMED: "Domain {name} resumed.",
    Code.NO_DOMAIN: "No domain {name}.",
}
"""The sentence of each code but those of a retry, which say what holds the job back now."""


async def notice_of(
    notice: Annotated[str | None, Query(max_length=40)] = None,
    job: Annotated[str | None, Query(max_length=100)] = None,
    count: Annotated[str | None, Query(max_length=20)] = None,
    name: Annotated[str | None, Query(max_length=300)] = None,
    status: Annotated[str | None, Query(max_length=40)] = None,
    left: Annotated[str | None, Query(max_length=20)] = None,
) -> Notice | None:
    return Notice.read(notice, job, count, name, status, left)


NoticeDep = Annotated[Notice | None, Depends(notice_of)]
RETRIES = frozenset({Code.RETRIED, Code.RUN_NOW})
"""The notices that say what holds their job back: the page reads the job for them."""


def sentence(notice: Notice, job: Job | None, domain: str | None, tenant: str | None) -> str | None:
    """The banner of `notice`, or None if a value its sentence needs is missing.

    `job`: the job it names, as read now (what still holds a retried job back); `domain` and
    `tenant`: the page's filters, which a bulk action covered (None if of another shape).
    """
    if notice.code in RETRIES:
        return _retried(notice, job)
    values = {field.name: getattr(notice, field.name) for field in fields(notice)}
    values["scope"] = _scope(domain, tenant)
    try:
        return SENTENCES[notice.code].format_map(
            {name: value for name, value in values.items() if value is not None}
        )
    except KeyError:
        return None


def _retried(notice: Notice, job: Job | None) -> str | None:
    if job is None or job.id != notice.job:
        return None
    clause = waits_for(job.blocked_by, job.domain) if job.blocked_by else None
    if notice.code == Code.RETRIED:
        return f"Job {job.id} is pending again{f', but {clause}' if clause else ''}."
    return f"Job {job.id} still waits: {clause}." if clause else f"Job {job.id} is due now."


def _scope(domain: str | None, tenant: str | None) -> str | None:
    """` of example.com, tenant shop`, "" without filters; None for a filter of another
    shape than a domain's or a tenant's."""
    if domain is not None and not _DOMAIN.fullmatch(domain):
        return None
    if tenant is not None and not _TENANT.fullmatch(tenant):
        return None
    parts = [domain] if domain else []
    parts += [f"tenant {tenant}"] if tenant else []
    return f" of {', '.join(parts)}" if parts else ""
