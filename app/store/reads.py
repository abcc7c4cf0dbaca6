"""Reads besides the operators' listings: a job's stored body, text and Markdown, of its
last content version or an earlier one kept, and the list of its versions (for the API);
and what a metrics scrape reads besides `JobStore.stats`. Nothing here writes."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from app.model import JobStatus
from app.store.database import Database
from app.store.tables import DUE_SINCE, contents, domains, is_job_id, jobs, status_is


@dataclass(frozen=True)
class QueueState:
    oldest_due_at: datetime | None
    """When the longest-waiting due pending job became claimable; None if none is due."""
    paused_domains: int


async def queue_state(database: Database, now: datetime) -> QueueState:
    """When the longest-waiting due pending job became due (`DUE_SINCE`), and how many
    domains are paused, at `now`."""
    # Due: a `retry_after` passed, or none and `updated_at` (never in the future) is the
    # time; written on DUE_SINCE itself so the first row of ix_jobs_pending_due answers.
    oldest_due = sa.select(sa.func.min(DUE_SINCE)).where(
        status_is(JobStatus.PENDING), DUE_SINCE <= now
    )
    paused = sa.select(sa.func.count()).select_from(domains).where(domains.c.paused_until > now)
    async with database.read() as conn:
        due_at = (await conn.execute(oldest_due)).scalar()
        paused_count = (await conn.execute(paused)).scalar() or 0
    return QueueState(due_at, paused_count)


Part = Literal["content", "text", "markdown", "links"]
"""What of a job's content to read: the body's bytes, the main text, its Markdown, or the
page's links (a JSON object, `JobContent.links`)."""


_MARKDOWN = sa.case((contents.c.markdown_as_text, contents.c.text), else_=contents.c.markdown)
"""A version's Markdown, the text when it was kept as the text (`JobContent.markdown_as_text`)."""


@dataclass(frozen=True)
class Content:
    """What is stored for a job. `status` is None when there is no such job."""

    status: str | None
    content_type: str | None = None
    data: bytes | str | dict[str, Any] | None = None
    """The part asked for; None until the job succeeded, or when that part is not kept (the
    Markdown of a job fetched before migration 0008, or of a type with no text; the links
    of one fetched before migration 0019)."""
    stored: bool = False
    """Whether the job has a content row at all (a succeeded job's body)."""


@dataclass(frozen=True)
class Version:
    """One stored version of a job's content, as `GET /jobs/{id}/versions` lists it."""

    version: int
    text_sha256: str | None
    stored_at: datetime
    content_type: str | None
    bytes: int
    text_length: int
    title: str | None


class ContentStore:
    def __init__(self, database: Database) -> None:
        self.db = database

    async def get(
        self, job_id: str, tenant: str | None = None, *, part: Part, version: int | None = None
    ) -> Content:
        """The job's stored `part` of its last content version (or of `version`), with its
        status and content type.

        A job of another tenant than `tenant` (when given) is no job.
        """
        if not is_job_id(job_id):
            return Content(None)
        which = contents.c.version == (jobs.c.content_version if version is None else version)
        stmt = (
            sa.select(
                jobs.c.status,
                contents.c.content_type,
                _MARKDOWN if part == "markdown" else contents.c[part],
                contents.c.job_id.is_not(None),
            )
            .select_from(jobs.outerjoin(contents, sa.and_(contents.c.job_id == jobs.c.id, which)))
            .where(jobs.c.id == job_id)
        )
        if tenant is not None:
            stmt = stmt.where(jobs.c.tenant == tenant)
        async with self.db.read() as conn:
            row = (await conn.execute(stmt)).first()
        return Content(None) if row is None else Content(*row)

    async def versions(self, job_id: str, tenant: str | None = None) -> list[Version] | None:
        """The job's stored content versions, newest first; None when there is no such job
        (or it is another tenant's than `tenant`, when given)."""
        if not is_job_id(job_id):
            return None
        exists = sa.select(jobs.c.id).where(jobs.c.id == job_id)
        if tenant is not None:
            exists = exists.where(jobs.c.tenant == tenant)
        stmt = (
            sa.select(
                contents.c.version,
                contents.c.text_sha256,
                contents.c.stored_at,
                contents.c.content_type,
                sa.func.length(contents.c.content),
                contents.c.text_length,
                contents.c.title,
            )
            .where(contents.c.job_id == job_id)
            .order_by(contents.c.version.desc())
        )
        async with self.db.read() as conn:
            if (await conn.execute(exists)).first() is None:
                return None
            return [Version(*row) for row in await conn.execute(stmt)]
