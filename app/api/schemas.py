"""Wire models: what the API accepts and returns. Timestamps are ISO-8601 UTC."""

import hashlib
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

from app.api.bodies import (
    METADATA_MAX_BYTES,
    METADATA_MAX_DEPTH,
    bounded_metadata,
    few_keys,
    text_only,
)
from app.fetch.urls import job_url
from app.model import CallbackContent, ErrorKind
from app.store.tables import Delivery
from app.text.safe_strings import storable
from app.wire import AttemptOut, ErrorOut, JobOut, VersionOut, WorkerOut

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"

REFRESH_EVERY_MAX = 366 * 86_400
"""A year and a day: the longest refresh schedule (a longer one is a typo)."""

MAX_AGE_MAX = 3660 * 86_400
"""Ten years and then some: the longest `max_age` (the cut-off stays a date)."""


class SubmittedUrl(str):
    """A URL a body gave, as given, once `app.fetch.urls.job_url` accepted it, with what that
    parsed (`parsed`): the API's SSRF check and the job's domain read it, not parsing the
    URL again (parsing is most of what a submitted job costs the API). A string in the
    schema and on the wire."""

    parsed: httpx.URL

    @classmethod
    def check(cls, url: str) -> "SubmittedUrl":
        """`url`, kept parsed; ValueError (for the submitter) for one `job_url` refuses."""
        submitted = cls(url)
        submitted.parsed = job_url(url)
        return submitted

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(cls.check, handler(str))


# Each request body's first example is what Swagger UI fills in for "Try it out" (without
# one it builds `{"url": "string"}`, a 422); tests/api/test_api.py submits every one. The URL
# alone: pydantic sorts an example's keys, which would put it last.
class JobIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"url": "https://example.com/"}]}
    )

    url: SubmittedUrl = Field(
        description="http or https URL with a host, at most 2,048 characters."
    )
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
    callback_url: SubmittedUrl | None = Field(None, description="Notified when the job finishes.")
    callback_content: CallbackContent = Field(
        CallbackContent.NONE,
        description="What the callback carries of the content besides the job: `none`, "
        "`text` or `markdown` (as `content`, at most INGEST_WEBHOOK_CONTENT_MAX_BYTES of "
        "UTF-8). Only with `callback_url`.",
    )
    tenant: str | None = Field(None, pattern=TENANT_PATTERN, description="Defaults to `default`.")
    refresh_every: int | None = Field(
        None,
        ge=1,
        le=REFRESH_EVERY_MAX,
        description="Fetch the page again this many seconds after each success (at least "
        "INGEST_REFRESH_MIN_SECONDS, default 60): a conditional GET, and a new content "
        "version with a `job.changed` callback when the text changed. Omitted: never.",
    )

    unique: bool = Field(
        False,
        description="Answer with the tenant's job of the same URL (as its key tells: see "
        '"The same URL twice" in the docs) that is pending or running, with 200, instead '
        "of making a new one.",
    )
    max_age: int | None = Field(
        None,
        ge=0,
        le=MAX_AGE_MAX,
        description="Seconds: a job of the same URL that succeeded within them answers too. "
        "Implies `unique`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _text(cls, body: Any) -> Any:
        return text_only(few_keys(body))

    @model_validator(mode="after")
    def _content_with_callback(self) -> "JobIn":
        if self.callback_content is not CallbackContent.NONE and self.callback_url is None:
            raise ValueError("callback_content goes with callback_url")
        if self.max_age is not None and not self.unique:
            if "unique" in self.model_fields_set:
                raise ValueError("max_age goes with unique")
            self.unique = True
        return self

    def fingerprint(self) -> str:
        """sha256 of the body as given, to tell "same request again" from "same key, other
        body". Without the fields that came later when they hold their defaults
        (`callback_content` none, `refresh_every`, `unique` and `max_age`), nor a batch
        item's `idempotency_key`: the fingerprints of jobs submitted before they existed
        stay what they were, and an item's is the fingerprint of the same body sent alone."""
        unset = {"idempotency_key"}
        if self.callback_content is CallbackContent.NONE:
            unset.add("callback_content")
        if self.refresh_every is None:
            unset.add("refresh_every")
        if not self.unique:
            unset.add("unique")
        if self.max_age is None:
            unset.add("max_age")
        return hashlib.sha256(self.model_dump_json(exclude=unset).encode()).hexdigest()

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


class BatchJobIn(JobIn):
    """A job of a batch: a job's body, and the key the Idempotency-Key header gives alone."""

    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="As the Idempotency-Key header of `POST /jobs`: the same key again (same "
        "tenant) is answered by the first job, 409 with another body.",
    )

    @field_validator("idempotency_key")
    @classmethod
    def _storable(cls, key: str | None) -> str | None:
        if key is not None and not storable(key):
            raise ValueError("idempotency_key must not contain NUL")
        return key


class BatchIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"jobs": [{"url": "https://example.com/"}, {"url": "https://example.org/"}]}
            ]
        },
    )

    jobs: list[BatchJobIn] = Field(min_length=1, max_length=1000)

    @model_validator(mode="before")
    @classmethod
    def _few_keys(cls, body: Any) -> Any:
        return few_keys(body)


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class SubmittedJobOut(JobOut):
    # Required in the schema all the same: the default lets `JobOut.of` build one.
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    created: bool = Field(
        True,
        description="Made by this batch; false: an earlier job answered (its idempotency "
        "key's, or for a `unique` job one of its URL).",
    )


class SubmittedList(BaseModel):
    items: list[SubmittedJobOut] = Field(description="In the order of the batch's jobs.")


class AttemptList(BaseModel):
    items: list[AttemptOut]


class WorkerList(BaseModel):
    items: list[WorkerOut]


class Requeued(BaseModel):
    requeued: int = Field(description="Jobs pending again with a fresh budget.")
    left_over_quota: int = Field(
        description="Jobs of the filter left as they were: their tenant's pending jobs were "
        "at INGEST_TENANT_MAX_PENDING (the oldest go first; ask again as they drain)."
    )


class Refreshed(BaseModel):
    refreshed: int = Field(description="Succeeded jobs now pending again as refreshes.")
    left_over_quota: int = Field(
        description="Succeeded jobs of the filter left as they were: their tenant's pending "
        "jobs were at INGEST_TENANT_MAX_PENDING (those fetched longest ago go first; ask "
        "again as they drain)."
    )


class LinkOut(BaseModel):
    url: str = Field(description="Absolute, normalized as a URL key is.")
    text: str = Field(description="Its anchor text (or title, or image alt), one line.")


class LinksOut(BaseModel):
    internal: list[LinkOut] = Field(description="To the page's own host (`www.` aside).")
    external: list[LinkOut]
    cut: int = Field(description="Links past INGEST_LINKS_MAX_PER_PAGE, not kept.")


class VersionList(BaseModel):
    items: list[VersionOut] = Field(description="Newest first; INGEST_CONTENT_VERSIONS kept.")


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
    event: str = Field(
        description="`job.succeeded`, `job.dead`, `job.changed` (a refresh stored a new "
        "version) or `job.gone` (a refresh found the page gone)."
    )
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
