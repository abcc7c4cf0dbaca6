"""What the service says about its jobs to the outside: the JSON of a job, an attempt, the
counts and a worker, one shape for the API, the CLI's `--json` and the webhooks' bodies;
and why a job has no content to show, in the API's and the CLI's same words.

Built from the store's rows (`JobOut.of(job)`); timestamps are ISO-8601 UTC.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, Field

from app.content.types import has_text, media_type
from app.model import (
    AttemptOutcome,
    Blocked,
    BlockReason,
    CallbackContent,
    DeadReason,
    ErrorKind,
    JobStatus,
)
from app.settings import Settings
from app.store.counts import TENANTS_SHOWN, TenantLoad
from app.store.jobs.reads import SCHEDULED_COUNTED, Stats
from app.store.reads import Content, Part
from app.store.tables import Attempt, Job
from app.store.workers import WorkerSeen, WorkerState
from app.text.safe_strings import shown


def missing_content(job_id: str, content: Content, part: Part) -> str | None:
    """Why the job (which exists) has no `part` to serve, or None if it has one. The text
    and the Markdown of a type with no text (an image, an archive) are missing, whatever
    the row holds: the body is all there is. (Its links are there, and none.)"""
    if part in ("text", "markdown") and content.stored:
        media = media_type(content.content_type)
        if not has_text(media):
            return f"job {job_id} fetched {media}, which has no text"
    if content.data is not None:
        return None
    if content.status != JobStatus.SUCCEEDED:
        return f"job {job_id} is {content.status}; content exists once it succeeded"
    if part == "markdown" and content.stored:
        return f"no Markdown stored for job {job_id} (fetched before Markdown was kept)"
    if part == "links" and content.stored:
        return f"no links stored for job {job_id} (fetched before links were kept)"
    return f"job {job_id} succeeded but has no stored content"


class ErrorOut(BaseModel):
    kind: ErrorKind
    type: str
    message: str | None
    http_status: int | None
    at: datetime


class PageMetadataOut(BaseModel):
    """What the fetched page says about itself (`app.model.PageMetadata`)."""

    title: str | None = Field(description="The page's title (meta tags, Open Graph, a PDF's info).")
    description: str | None = Field(description="Its summary, as the page gives one.")
    authors: list[str] = Field(description="Its authors, as the page names them.")
    published: str | None = Field(
        description="When it was published: ISO 8601, a date or a date and time, as precise "
        "as the page says."
    )
    modified: str | None = Field(description="When it was last changed, as `published`.")
    language: str | None = Field(description="A BCP 47 tag as the page declares it (`pt-BR`).")
    canonical_url: str | None = Field(
        description="The URL the answer names as its own: its HTTP `Link: rel=canonical`, "
        "else the page's `<link rel=canonical>`, else `og:url`."
    )
    site_name: str | None = Field(description="The site it belongs to, as it names it.")
    image: str | None = Field(description="The URL of the image that stands for it.")
    keywords: list[str] = Field(description="Its keywords.")
    page_count: int | None = Field(description="A PDF's pages; null for other types.")
    charset: str | None = Field(
        description="The codec its text was decoded with (null for a PDF, which is no text)."
    )
    charset_source: str | None = Field(
        description="How that charset was chosen: `bom`, `header`, `meta`, `detected` or `default`."
    )

    @classmethod
    def of(cls, stored: dict[str, Any]) -> "PageMetadataOut":
        """From `jobs.result_metadata`: fields it lacks are empty, ones it does not know
        are left out (a row written by a newer version)."""
        values = shown(stored)
        return cls(
            **{
                name: values.get(name, [] if name in ("authors", "keywords") else None)
                for name in cls.model_fields
            }
        )


class ResultOut(BaseModel):
    http_status: int
    final_url: str | None
    content_type: str | None
    bytes: int | None
    sha256: str | None
    title: str | None
    text_length: int | None = Field(description="Characters of the extracted main text.")
    metadata: PageMetadataOut | None = Field(
        description="What the page says about itself; null for a job fetched before it was kept."
    )
    text_sha256: str | None = Field(
        description="sha256 of the main text as UTF-8: a refresh whose text hashes the same "
        "is unchanged, whatever else of the page moved."
    )
    etag: str | None = Field(description="The answer's ETag, which a refresh sends back.")
    last_modified: str | None = Field(
        description="The answer's Last-Modified, which a refresh sends back."
    )


class BlockedOut(BaseModel):
    reason: BlockReason = Field(
        description="`not_due` (its retry_after), `domain_paused`, `domain_interval` (the "
        "domain's minimum interval between starts), `domain_at_limit` (its in-flight limit) "
        "or `tenant_at_limit` (INGEST_TENANT_MAX_IN_FLIGHT)."
    )
    until: datetime | None = Field(
        description="When it ends; null for `domain_at_limit` and `tenant_at_limit`."
    )
    detail: str | None = Field(
        description="Why the domain is paused. Null for a tenant's API key: the pause may "
        "come from other tenants' fetches of the domain."
    )

    @classmethod
    def of(cls, blocked: Blocked) -> "BlockedOut":
        return cls(reason=blocked.reason, until=blocked.until, detail=blocked.detail)

    def for_tenant(self) -> "BlockedOut":
        """What a tenant's key is told: what holds its job back and until when, not why its
        domain is paused (another tenant's failures may have paused it)."""
        return self.model_copy(update={"detail": None})


class CrawlPageOut(BaseModel):
    id: str = Field(description="The crawl (`GET /crawls/{id}`).")
    depth: int = Field(description="Links followed from a start URL to it.")
    found_on: str | None = Field(description="The page or listing that named it.")


class JobOut(BaseModel):
    id: str
    url: str
    url_key: str | None = Field(
        description="The URL as `unique` submits and `GET /jobs?url=` compare it: normalized, "
        'tracking parameters dropped ("The same URL twice" in the docs).'
    )
    domain: str
    tenant: str
    status: JobStatus
    priority: int
    attempts: int = Field(description="Attempts that spent budget.")
    max_attempts: int
    deferrals: int = Field(description="Rate-limited answers that did not spend budget.")
    retry_after: datetime | None = Field(description="Set only while a pending job waits.")
    blocked_by: BlockedOut | None = Field(
        description="What holds a pending job back now (null: nothing, or not pending). "
        "The answer to a submit says `not_due` at most: it does not look at the domain."
    )
    last_error: ErrorOut | None
    dead_reason: DeadReason | None
    result: ResultOut | None
    metadata: dict[str, Any] | None
    callback_url: str | None
    callback_content: CallbackContent = Field(
        description="What the callback carries of the content besides the job."
    )
    refresh_every: int | None = Field(
        description="Seconds after each success when the job fetches its page again; "
        "null: only when asked (`POST /jobs/{id}/refresh`)."
    )
    next_refresh_at: datetime | None = Field(
        description="When a succeeded job with `refresh_every` is next fetched again."
    )
    version: int | None = Field(
        description="The content version stored last (`GET /jobs/{id}/versions`); null "
        "before a success."
    )
    changed_at: datetime | None = Field(
        description="When that version was stored: the first success, or the last refresh "
        "that found the text changed."
    )
    crawl: CrawlPageOut | None = Field(description="The crawl that found it; null: none.")
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> Self:
        last_error = None
        if job.last_error_kind is not None and job.last_error_at is not None:
            last_error = ErrorOut(
                kind=ErrorKind(job.last_error_kind),
                type=job.last_error_type or "",
                message=job.last_error_message,
                http_status=job.last_error_http_status,
                at=job.last_error_at,
            )
        result = None
        if job.result_http_status is not None:
            result = ResultOut(
                http_status=job.result_http_status,
                final_url=job.result_final_url,
                content_type=job.result_content_type,
                bytes=job.result_bytes,
                sha256=job.result_sha256,
                title=job.result_title,
                text_length=job.result_text_length,
                metadata=(
                    None if job.result_metadata is None else PageMetadataOut.of(job.result_metadata)
                ),
                text_sha256=job.result_text_sha256,
                etag=job.result_etag,
                last_modified=job.result_last_modified,
            )
        return cls(
            id=job.id,
            url=job.url,
            url_key=job.url_key,
            domain=job.domain,
            tenant=job.tenant,
            status=JobStatus(job.status),
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            deferrals=job.deferrals,
            retry_after=job.retry_after if job.status == JobStatus.PENDING else None,
            blocked_by=BlockedOut.of(job.blocked_by) if job.blocked_by else None,
            last_error=last_error,
            dead_reason=DeadReason(job.dead_reason) if job.dead_reason else None,
            result=result,
            metadata=job.meta,
            callback_url=job.callback_url,
            callback_content=CallbackContent(job.callback_content or CallbackContent.NONE),
            refresh_every=job.refresh_every,
            next_refresh_at=job.refresh_at,
            version=job.content_version,
            changed_at=job.changed_at,
            crawl=(
                None
                if job.crawl_id is None
                else CrawlPageOut(
                    id=job.crawl_id, depth=job.crawl_depth or 0, found_on=job.found_on
                )
            ),
            created_at=job.created_at,
            updated_at=job.updated_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )

    def for_tenant(self) -> Self:
        """The job as a tenant's key sees it (`BlockedOut.for_tenant`)."""
        blocked_by = self.blocked_by and self.blocked_by.for_tenant()
        return self.model_copy(update={"blocked_by": blocked_by})


class AttemptOut(BaseModel):
    number: int = Field(
        description="Its place in the job's history: 1, 2, 3 ... across retries and refreshes."
    )
    worker_id: str | None = Field(
        description="The worker process that ran it (`host:pid:...`, as `GET /workers` names "
        "it). Null for a tenant's API key: workers serve every tenant."
    )
    started_at: datetime
    finished_at: datetime | None
    outcome: AttemptOutcome | None = Field(description="null while the attempt runs.")
    error_type: str | None
    message: str | None
    http_status: int | None
    duration_ms: int | None
    next_retry_at: datetime | None

    @classmethod
    def of(cls, attempt: Attempt) -> "AttemptOut":
        return cls.model_validate(attempt, from_attributes=True)

    def for_tenant(self) -> "AttemptOut":
        """The attempt as a tenant's key sees it: without the worker that ran it."""
        return self.model_copy(update={"worker_id": None})


class VersionOut(BaseModel):
    version: int = Field(description="1 for the first success, one more per change found.")
    text_sha256: str | None = Field(
        description="sha256 of the main text as UTF-8: what tells a change."
    )
    stored_at: datetime = Field(description="When the fetch that found it ended.")
    content_type: str | None
    bytes: int = Field(description="Size of the body as fetched (decoded).")
    text_length: int = Field(description="Characters of the main text.")
    title: str | None


class StatusCounts(BaseModel):
    pending: int
    running: int
    succeeded: int
    dead: int
    cancelled: int


class TenantOut(BaseModel):
    tenant: str
    weight: int = Field(
        description="Its share of the claims (INGEST_TENANT_WEIGHTS; 1 if unnamed)."
    )
    pending: int = Field(description="Jobs pending, held to INGEST_TENANT_MAX_PENDING.")
    running: int = Field(description="Jobs running, held to INGEST_TENANT_MAX_IN_FLIGHT.")

    @classmethod
    def of(cls, load: TenantLoad, settings: Settings) -> "TenantOut":
        return cls(
            tenant=load.tenant,
            weight=settings.tenant_weight(load.tenant),
            pending=load.pending,
            running=load.running,
        )


class StorageOut(BaseModel):
    tenant: str
    bytes_kept: int = Field(
        description="Bytes of content it keeps: the body, text and Markdown (UTF-8) of every "
        "version kept, Markdown that is the text counted once; held to "
        "INGEST_TENANT_MAX_STORAGE_BYTES."
    )


class QuotasOut(BaseModel):
    """The limits every tenant and API key is held to; 0: none."""

    tenant_max_pending: int = Field(description="INGEST_TENANT_MAX_PENDING")
    tenant_max_in_flight: int = Field(description="INGEST_TENANT_MAX_IN_FLIGHT")
    key_submits_per_second: float = Field(
        description="INGEST_KEY_SUBMITS_PER_SECOND, in each API process"
    )
    key_submit_burst: int = Field(description="INGEST_KEY_SUBMIT_BURST (0: one second's worth)")
    tenant_max_storage_bytes: int = Field(description="INGEST_TENANT_MAX_STORAGE_BYTES")

    @classmethod
    def of(cls, settings: Settings) -> "QuotasOut":
        return cls(
            tenant_max_pending=settings.tenant_max_pending,
            tenant_max_in_flight=settings.tenant_max_in_flight,
            key_submits_per_second=settings.key_submits_per_second,
            key_submit_burst=settings.key_submit_burst,
            tenant_max_storage_bytes=settings.tenant_max_storage_bytes,
        )


class StatsOut(BaseModel):
    counts: StatusCounts
    oldest_pending_age_seconds: float | None = Field(
        description="Since the oldest pending job was created, whether due or not."
    )
    oldest_due_age_seconds: float | None = Field(
        description="How long the longest-waiting due pending job has been due: the backlog."
    )
    scheduled: int = Field(
        description="Pending jobs not due yet (a retry_after to come), counted up to"
        f" {SCHEDULED_COUNTED:,}: {SCHEDULED_COUNTED} means at least that many."
    )

    tenants: list[TenantOut] = Field(
        description=f"Each tenant with jobs pending or running (a tenant's key: its own), the "
        f"most pending first; at most {TENANTS_SHOWN:,}."
    )
    storage: list[StorageOut] = Field(
        description=f"Each tenant that keeps content (a tenant's key: its own), the most bytes "
        f"first; at most {TENANTS_SHOWN:,}."
    )
    quotas: QuotasOut

    @classmethod
    def of(
        cls,
        stats: Stats,
        tenants: Sequence[TenantLoad],
        settings: Settings,
        bytes_kept: Mapping[str, int],
    ) -> "StatsOut":
        """`bytes_kept`: of each tenant, the most first (`JobStore.bytes_kept`)."""
        return cls(
            counts=StatusCounts(**stats.counts),
            oldest_pending_age_seconds=stats.oldest_pending_age_seconds,
            oldest_due_age_seconds=stats.oldest_due_age_seconds,
            scheduled=stats.scheduled,
            tenants=[TenantOut.of(load, settings) for load in tenants],
            storage=[StorageOut(tenant=t, bytes_kept=n) for t, n in bytes_kept.items()],
            quotas=QuotasOut.of(settings),
        )


class WorkerOut(BaseModel):
    id: str = Field(description="As jobs' and attempts' `worker_id` name it.")
    host: str
    pid: int
    version: str
    state: WorkerState = Field(
        description="`live`; `stopped` (cleanly); `gone`: no heartbeat for twice the lease."
    )
    slots: int = Field(description="Fetches it runs at once.")
    running: int
    queued: int = Field(description="Claimed into its local queue, not started yet.")
    started_at: datetime
    last_heartbeat_at: datetime
    stopped_at: datetime | None

    @classmethod
    def of(cls, worker: WorkerSeen) -> "WorkerOut":
        return cls.model_validate(worker, from_attributes=True)
