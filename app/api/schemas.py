"""Wire models: what the API accepts and returns. Timestamps are ISO-8601 UTC."""

from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.bodies import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, bounded_metadata, text_only
from app.states import AttemptOutcome, DeadReason, ErrorKind, JobStatus
from app.store.tables import Attempt, Delivery, Job
from app.urls import job_domain

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="http or https URL with a host, at most 2,048 characters.")
    priority: int = Field(0, ge=-1000, le=1000, description="Higher runs first.")
    max_attempts: int | None = Field(
        None, ge=1, le=100, description="Attempt budget; INGEST_MAX_ATTEMPTS when omitted."
    )
    not_before: AwareDatetime | None = Field(None, description="Do not fetch before this time.")
    metadata: dict[str, Any] | None = Field(
        None,
        description=f"Opaque JSON kept with the job: at most {METADATA_MAX_BYTES} bytes, "
        f"{METADATA_MAX_DEPTH} levels deep, finite numbers.",
    )
    callback_url: str | None = Field(None, description="Notified when the job finishes.")
    tenant: str | None = Field(None, pattern=TENANT_PATTERN, description="Defaults to `default`.")

    @model_validator(mode="before")
    @classmethod
    def _text(cls, body: Any) -> Any:
        return text_only(body)

    @field_validator("metadata", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        return bounded_metadata(value)

    @field_validator("not_before")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        # 9999-12-31T23:59:59-14:00 is past the last datetime once in UTC, as the store keeps it.
        try:
            return None if value is None else value.astimezone(UTC)
        except OverflowError:
            raise ValueError("not_before must fall within the years 1 to 9999 in UTC") from None

    @field_validator("url", "callback_url")
    @classmethod
    def _fetchable(cls, value: str | None) -> str | None:
        if value is not None:
            job_domain(value)
        return value


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobIn] = Field(min_length=1, max_length=1000)


class ErrorOut(BaseModel):
    kind: ErrorKind
    type: str
    message: str | None
    http_status: int | None
    at: datetime


class ResultOut(BaseModel):
    http_status: int
    final_url: str | None
    content_type: str | None
    bytes: int | None
    sha256: str | None
    title: str | None
    text_length: int | None = Field(description="Characters of the extracted main text.")


class JobOut(BaseModel):
    id: str
    url: str
    domain: str
    tenant: str
    status: JobStatus
    priority: int
    attempts: int = Field(description="Attempts that spent budget.")
    max_attempts: int
    deferrals: int = Field(description="Rate-limited answers that did not spend budget.")
    retry_after: datetime | None = Field(description="Set only while a pending job waits.")
    last_error: ErrorOut | None
    dead_reason: DeadReason | None
    result: ResultOut | None
    metadata: dict[str, Any] | None
    callback_url: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> "JobOut":
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
            )
        return cls(
            id=job.id,
            url=job.url,
            domain=job.domain,
            tenant=job.tenant,
            status=JobStatus(job.status),
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            deferrals=job.deferrals,
            retry_after=job.retry_after if job.status == JobStatus.PENDING else None,
            last_error=last_error,
            dead_reason=DeadReason(job.dead_reason) if job.dead_reason else None,
            result=result,
            metadata=job.meta,
            callback_url=job.callback_url,
            created_at=job.created_at,
            updated_at=job.updated_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class JobList(BaseModel):
    items: list[JobOut]


class AttemptOut(BaseModel):
    number: int
    worker_id: str
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


class AttemptList(BaseModel):
    items: list[AttemptOut]


class Requeued(BaseModel):
    requeued: int


class StatusCounts(BaseModel):
    pending: int
    running: int
    succeeded: int
    dead: int
    cancelled: int


class StatsOut(BaseModel):
    counts: StatusCounts
    oldest_pending_age_seconds: float | None


class Health(BaseModel):
    status: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None


class DeliveryOut(BaseModel):
    id: int
    event: str = Field(description="`job.succeeded` or `job.dead`.")
    url: str
    status: str = Field(description="`pending`, `delivered` or `dead`.")
    attempts: int = Field(description="POSTs made so far.")
    max_attempts: int
    retry_after: datetime | None = Field(description="When a pending delivery is next tried.")
    last_error: ErrorOut | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None

    @classmethod
    def of(cls, delivery: Delivery) -> "DeliveryOut":
        last_error = None
        if delivery.last_error_kind is not None and delivery.last_error_at is not None:
            last_error = ErrorOut(
                kind=ErrorKind(delivery.last_error_kind),
                type=delivery.last_error_type or "",
                message=delivery.last_error_message,
                http_status=delivery.last_error_http_status,
                at=delivery.last_error_at,
            )
        return cls(
            id=delivery.id or 0,
            event=delivery.event,
            url=delivery.url,
            status=delivery.status,
            attempts=delivery.attempts,
            max_attempts=delivery.max_attempts,
            retry_after=delivery.retry_after,
            last_error=last_error,
            created_at=delivery.created_at,
            updated_at=delivery.updated_at,
            delivered_at=delivery.delivered_at,
        )


class DeliveryList(BaseModel):
    items: list[DeliveryOut]
