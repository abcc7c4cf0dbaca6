"""The tables, their indexes, and the handles the store's SQL uses (`jobs`, `attempts`, ...):
declared here once, imported from here by every store module. A job as reads return it
(`Job`) shares its fields with its table's class (`JobRow`) but is a plain model.

Timestamps are stored as naive UTC in both databases (`UTCDateTime`) and come back aware,
so SQLite's text timestamps and PostgreSQL's compare the same way.
"""

import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import PrivateAttr
from sqlmodel import JSON, Column, Field, SQLModel

from app.model import Blocked, JobStatus
from app.store.dialect import only_on, partial_index


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    impl = sa.DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def new_job_id() -> str:
    """A new job's id: a UUID of version 7 (RFC 9562), its first 48 bits the time it was
    made in ms, its other 74 random. Ids made close in time sort close together, so the jobs
    a claim or a record touches at once (made within the same hours) share the primary
    key's pages, and their child rows' `job_id` pages. With random ids (version 4) each of
    a claim's jobs wrote to a page of its own, and each page's first write after a
    checkpoint put the whole page in the WAL (docs/design/store.md). Random below the
    millisecond, not a counter as some makers of version 7 use: jobs of one batch then differ
    by their 16th character, which keeps the CLI's short ids short (`app.cli.output`)."""
    bits = time.time_ns() // 1_000_000 << 80 | int.from_bytes(os.urandom(10))
    return str(uuid.UUID(int=bits & _VERSION_AND_VARIANT_CLEARED | _VERSION_7_VARIANT_RFC))


_VERSION_AND_VARIANT_CLEARED = ~(0xF << 76 | 0x3 << 62)
_VERSION_7_VARIANT_RFC = 0x7 << 76 | 0x2 << 62


def is_job_id(text: str) -> bool:
    """Job ids are UUIDs: any other text names no job, and need not reach a database that
    may refuse it (PostgreSQL fails on NUL)."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _ts(nullable: bool = True) -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable)


class JobFields(SQLModel):
    """A job's columns: declared once for the table (`JobRow`) and for what reads return
    (`Job`)."""

    id: str = Field(primary_key=True, max_length=36)
    url: str = Field(max_length=2048)
    domain: str = Field(max_length=300)
    tenant: str = Field(max_length=100)
    status: str = Field(max_length=16)
    priority: int = 0
    attempts: int = 0
    max_attempts: int
    deferrals: int = 0
    retry_after: datetime | None = _ts()
    lease_expires_at: datetime | None = _ts()
    worker_id: str | None = Field(default=None, max_length=100)
    # A random token per claim while running: every later write of the attempt must match it
    # (app.store.queue). Worker id and attempt number repeat after an operator's retry.
    lease_id: str | None = Field(default=None, max_length=32)
    last_error_kind: str | None = Field(default=None, max_length=16)
    last_error_type: str | None = Field(default=None, max_length=100)
    last_error_message: str | None = None
    last_error_http_status: int | None = None
    last_error_at: datetime | None = _ts()
    dead_reason: str | None = Field(default=None, max_length=32)
    result_http_status: int | None = None
    result_final_url: str | None = None
    result_content_type: str | None = Field(default=None, max_length=255)
    result_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)
    result_sha256: str | None = Field(default=None, max_length=64)
    result_title: str | None = None
    result_text_length: int | None = None
    # The page's metadata (`app.model.PageMetadata` as a JSON object, `app.store.record`);
    # null for jobs that succeeded before migration 0008.
    result_metadata: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    # The last success's validators (sent back by a refresh) and its main text's sha256
    # (what tells a changed page: `app.rules.policy.settle`).
    result_etag: str | None = Field(default=None, max_length=255)
    result_last_modified: str | None = Field(default=None, max_length=255)
    result_text_sha256: str | None = Field(default=None, max_length=64)
    content_version: int | None = None
    """The content version stored last (`job_contents.version`); null before a success."""
    changed_at: datetime | None = _ts()
    """When that version was stored: the first success, or a refresh that found a change."""
    refresh_every: int | None = None
    """Seconds after each success when the job is due to be fetched again; null: never."""
    refresh_at: datetime | None = _ts()
    """When a succeeded job with `refresh_every` goes back to pending (`app.store.refreshes`)."""
    meta: dict[str, Any] | None = None
    callback_url: str | None = Field(default=None, max_length=2048)
    # What the callback carries of the content (`app.model.CallbackContent`); null: none.
    callback_content: str | None = Field(default=None, max_length=16)
    unique_key: int | None = Field(default=None, sa_type=sa.BigInteger)
    """Its URL key's digest (`job_urls.url_hash`) when it was submitted `unique`: while it is
    pending or running, no other job of its tenant holds the same (`uq_jobs_unique_key`). A
    retry or a refresh clears it: back in pending, the job may meet one that holds it."""
    crawl_id: str | None = Field(default=None, max_length=36)
    """The crawl that found it (`crawls.id`); null for a job submitted on its own."""
    crawl_depth: int | None = None
    """Links followed from the crawl's start URLs to it (0 for a start URL or a listing's)."""
    found_on: str | None = None
    """The page or listing (sitemap, feed, llms.txt) its crawl found it on."""
    idempotency_key: str | None = Field(default=None, max_length=255)
    # sha256 of the submitted body, to tell "same request again" from "same key, other body".
    idempotency_fingerprint: str | None = Field(default=None, max_length=64)
    created_at: datetime = _ts(nullable=False)
    updated_at: datetime = _ts(nullable=False)
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts()


class Job(JobFields):
    """A job as the store reads it. A plain model, not the mapped table class: building one
    of those per row goes through SQLAlchemy's instrumented attributes, which made reads of
    many jobs slow (docs/design/store.md)."""

    url_key: str | None = None
    """Its URL's key (`job_urls.url_key`), read with the job; not a column of `jobs`."""

    # Not a column: set by the read that loaded the job with its domain's row.
    _blocked_by: Blocked | None = PrivateAttr(default=None)

    @property
    def blocked_by(self) -> Blocked | None:
        """What held this pending job back when it was read (`app.store.jobs` reads each job
        with its domain's row); None if nothing did, or it is not pending."""
        return self._blocked_by

    def held_back_by(self, blocked: Blocked | None) -> "Job":
        """This job, saying `blocked` is what holds it back (a read's business only)."""
        self._blocked_by = blocked
        return self


HOLDS_KEY = (
    f"unique_key IS NOT NULL AND (status = '{JobStatus.PENDING}' OR status = '{JobStatus.RUNNING}')"
)
"""The jobs that hold their URL key against other unique submits (`uq_jobs_unique_key`)."""


class JobRow(JobFields, table=True):
    __tablename__ = "jobs"

    # `metadata` is reserved by SQLAlchemy's declarative base; the column keeps the name.
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON))

    __table_args__ = (
        # One job per tenant and idempotency key. On PostgreSQL an index of the jobs that
        # have a key (migration 0016): every update of a job row adds an entry to each of its
        # full indexes, and most jobs have none. SQLite touches no index whose columns an
        # update leaves alone: its constraint stays as created.
        only_on(
            "sqlite",
            sa.UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_tenant_idempotency_key"),
        ),
        only_on(
            "postgresql",
            sa.Index(
                "uq_jobs_tenant_given_idempotency_key",
                "tenant",
                "idempotency_key",
                unique=True,
                postgresql_where=sa.text("idempotency_key IS NOT NULL"),
            ),
        ),
        # Earliest retry_after, so an idle worker knows how long it may wait.
        partial_index(
            "ix_jobs_pending_retry_after",
            "retry_after",
            where=f"status = '{JobStatus.PENDING}' AND retry_after IS NOT NULL",
        ),
        # Expired leases are found without touching pending or terminal rows.
        partial_index(
            "ix_jobs_running_lease",
            "lease_expires_at",
            where=f"status = '{JobStatus.RUNNING}'",
        ),
        # GET /jobs?status=dead, what dashboards poll, newest first (read backwards).
        partial_index(
            "ix_jobs_dead_created",
            "created_at",
            "id",
            where=f"status = '{JobStatus.DEAD}'",
        ),
        # Other listings, newest first. There is deliberately no (status, ...) index: without
        # fresh statistics SQLite prefers it to ix_jobs_claim for the claim and then sorts
        # every pending row on each claim.
        sa.Index("ix_jobs_created", "created_at", "id"),
        sa.Index("ix_jobs_domain_created", "domain", "created_at", "id"),
        # Two unique submits of one URL make one job: the second insert fails on this.
        sa.Index(
            "uq_jobs_unique_key",
            "unique_key",
            "tenant",
            unique=True,
            postgresql_where=sa.text(HOLDS_KEY),
            sqlite_where=sa.text(HOLDS_KEY),
        ),
        # A crawl's pages by status (its counts, its pages, its cancel), no other job's.
        partial_index("ix_jobs_crawl", "crawl_id", "status", where="crawl_id IS NOT NULL"),
        # Scheduled refreshes coming due, without reading the jobs that never refresh.
        partial_index(
            "ix_jobs_refresh_at",
            "refresh_at",
            where=f"status = '{JobStatus.SUCCEEDED}' AND refresh_at IS NOT NULL",
        ),
        # GET /jobs?changed_since=T: the jobs whose content changed since T.
        partial_index("ix_jobs_changed", "changed_at", where="changed_at IS NOT NULL"),
    )


class JobUrl(SQLModel, table=True):
    """A job's URL key (`app.rules.url_key`), inserted with the job and never changed: what
    `GET /jobs?url=` and unique submits look a tenant's jobs up by. A table of its own, not
    columns of `jobs`: PostgreSQL adds an entry to each full index of a table for every new
    version of a row, and every claim and record makes one of a job's (see migration 0016)."""

    __tablename__ = "job_urls"

    job_id: str = Field(
        sa_column=Column(
            sa.String(36),
            # A job's id never changes; should an operator's SQL change one, its key follows.
            sa.ForeignKey("jobs.id", ondelete="CASCADE", onupdate="CASCADE"),
            primary_key=True,
        )
    )
    tenant: str = Field(max_length=100)
    url_hash: int = Field(sa_type=sa.BigInteger)
    """The key's digest (`app.rules.url_key.url_hash`): a key may be too long to index."""
    url_key: str = Field(sa_column=Column(sa.Text(), nullable=False))

    __table_args__ = (sa.Index("ix_job_urls_key", "url_hash", "tenant"),)


# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY (it is 64-bit there).
BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class Attempt(SQLModel, table=True):
    """One row per attempt, kept across retries and refreshes: the job's history.

    `number` is the attempt within the budget in force ("attempt 2/4"), so it restarts at 1
    after a retry or a refresh; `id` orders the whole history, and the history as read
    numbers its attempts by their place in that order (`app.store.jobs`).
    """

    __tablename__ = "attempts"

    id: int | None = Field(
        default=None, sa_column=Column(BigIntPK, primary_key=True, autoincrement=True)
    )
    job_id: str = Field(
        sa_column=Column(
            sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        )
    )
    number: int
    worker_id: str = Field(max_length=100)
    started_at: datetime = _ts(nullable=False)
    finished_at: datetime | None = _ts()
    outcome: str | None = Field(default=None, max_length=16)
    error_type: str | None = Field(default=None, max_length=100)
    message: str | None = None
    http_status: int | None = None
    duration_ms: int | None = None
    next_retry_at: datetime | None = _ts()
    """When the job was due again after this attempt (the attempt's end, for one due at once);
    null when the attempt ended the job (succeeded or dead)."""
    queue_lag_ms: int | None = Field(default=None, sa_type=sa.BigInteger)
    """How long the job had been due when this attempt started (null before migration 0007)."""

    __table_args__ = (
        sa.Index("ix_attempts_job", "job_id", "id"),
        # The dashboard's last hour: attempts finished since a time, without reading the rest.
        sa.Index("ix_attempts_finished", "finished_at"),
    )


class Domain(SQLModel, table=True):
    """What every worker knows about a domain: whether it is paused, and when it was last hit.

    A row exists for every domain that has jobs: inserted on submit (or by the claim that
    finds it missing, `app.store.claim`), deleted by retention once the domain has no job
    and its row no state to keep (`app.store.retention`).
    """

    __tablename__ = "domains"

    domain: str = Field(primary_key=True, max_length=300)
    paused_until: datetime | None = _ts()
    pause_reason: str | None = None
    consecutive_failures: int = 0
    in_flight: int = 0
    """Running jobs of this domain, kept by the queue's claim and finish."""
    last_started_at: datetime | None = _ts()
    next_start_at: datetime | None = _ts()
    """Before this, no fetch may start (INGEST_DOMAIN_MIN_INTERVAL_SECONDS, or Crawl-delay)."""
    crawl_delay_seconds: float | None = None
    """The Crawl-delay of its robots.txt when a worker last read it (INGEST_ROBOTS_TXT=obey):
    kept here, not in a worker's memory, because every worker's claim spaces the domain's
    starts by it (`app.rules.scheduling.min_interval`). None: none asked, or not read."""
    updated_at: datetime | None = _ts()


def new_domain(domain: str) -> dict[str, Any]:
    """The row of a domain no job named before: no pause, no streak, nothing in flight."""
    return {"domain": domain, "consecutive_failures": 0, "in_flight": 0}


def _counter(sa_type: Any = sa.Integer) -> Any:
    """A count that starts at 0, in the database too: a submit inserts a tenant's row with
    its name alone (`app.store.jobs`)."""
    return Field(default=0, sa_type=sa_type, sa_column_kwargs={"server_default": sa.text("0")})


class Tenant(SQLModel, table=True):
    """Each tenant's place in the fair share and its jobs in flight, read and written by the
    claim (`app.store.claim`, the passes as `app.rules.scheduling` explains them); its jobs in
    flight freed as their outcomes are recorded (`app.store.record`)."""

    __tablename__ = "tenants"

    tenant: str = Field(primary_key=True, max_length=100)
    last_served_at: datetime | None = _ts()
    """Breaks ties of pass: the tenant served least recently goes first."""
    next_pass: int = _counter(sa.BigInteger)
    """The virtual time at which its next job starts."""
    last_pass: int = _counter(sa.BigInteger)
    """The pass its last job served started at; the highest of all is the claims' floor."""
    in_flight: int = _counter()
    """Running jobs of this tenant, kept by the claim and the record of outcomes."""


class WorkerRow(SQLModel, table=True):
    """One row per worker process (`app.store.workers`): written when it starts, on each of
    its heartbeats, and when it stops cleanly (`stopped_at`). A row whose heartbeat is old
    and has no `stopped_at` is a worker that died or lost the database."""

    __tablename__ = "workers"

    id: str = Field(primary_key=True, max_length=100)
    """The worker id that its jobs' `worker_id` and attempts name."""
    host: str = Field(max_length=255)
    pid: int
    version: str = Field(max_length=32)
    slots: int
    """INGEST_WORKER_CONCURRENCY: fetches it runs at once."""
    running: int
    queued: int
    """Jobs claimed into its local queue, not started yet."""
    started_at: datetime = _ts(nullable=False)
    last_heartbeat_at: datetime = _ts(nullable=False)
    stopped_at: datetime | None = _ts()


class JobContent(SQLModel, table=True):
    """One version of a job's body and extracted text, written in the same transaction as
    the success that fetched it (`app.store.record`): version 1 by the first, one more by
    each refresh that finds the page changed; INGEST_CONTENT_VERSIONS are kept. Kept in the
    database, not in files, because several hosts share one PostgreSQL and none of them
    shares a disk."""

    __tablename__ = "job_contents"

    job_id: str = Field(
        sa_column=Column(
            sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
        )
    )
    version: int = Field(default=1, primary_key=True)
    tenant: str = Field(max_length=100)
    """Its job's tenant, whose bytes kept the triggers of migration 0017 count it in (a
    job's delete cascades here once its row is gone: the job can no longer say)."""
    text_sha256: str | None = Field(default=None, max_length=64)
    """sha256 of `text` as UTF-8; null for versions stored before migration 0009 that had
    no text to hash."""
    title: str | None = None
    page_metadata: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    """The page's metadata when this version was fetched (`jobs.result_metadata`)."""
    content: bytes = Field(sa_column=Column(sa.LargeBinary(), nullable=False))
    """The body exactly as decoded (Content-Encoding undone), at most INGEST_MAX_BODY_BYTES."""
    content_type: str | None = Field(default=None, max_length=255)
    text: str = Field(sa_column=Column(sa.Text(), nullable=False))
    """The extracted main text (app.content.extract)."""
    markdown: str | None = Field(default=None, sa_column=Column(sa.Text(), nullable=True))
    """The main content as Markdown; null for a type with no text, for jobs that
    succeeded before migration 0008, and when it is the text itself (`markdown_as_text`)."""
    markdown_as_text: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    """The Markdown is the very text (a plain-text page's): kept once, in `text`, and read
    back as the Markdown (`app.store.reads`)."""
    text_length: int
    stored_at: datetime = _ts(nullable=False)
    links: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    """The page's links: `items`, each an `app.model.PageLink` as an object, in the page's
    order, and `cut`, how many more it had; null for versions stored before migration 0019."""


class JobCount(SQLModel, table=True):
    """A change in how many jobs a tenant has in a status (+n or -n); a count is the sum of
    its rows. Written by triggers on `jobs` (migration 0012) in the transaction that changes
    the jobs, whatever statement does it; folded into one row per tenant and status by
    `app.store.counts`, so GET /stats sums a few hundred rows, not every job."""

    __tablename__ = "job_counts"

    id: int | None = Field(
        default=None, sa_column=Column(BigIntPK, primary_key=True, autoincrement=True)
    )
    tenant: str = Field(max_length=100)
    status: str = Field(max_length=16)
    jobs: int = Field(sa_type=sa.BigInteger)


class BytesKept(SQLModel, table=True):
    """A change in the bytes a tenant keeps (+n or -n); its bytes kept are the sum of its
    rows. Written by triggers on `job_contents` (migration 0017) in the transaction that
    stores or deletes versions, whatever statement does it (a record, retention, a job's
    delete); folded into one row per tenant by `app.store.counts`. A version's bytes: its
    body's, its text's and its Markdown's as stored (UTF-8), none for Markdown kept as the
    text."""

    __tablename__ = "bytes_kept"

    id: int | None = Field(
        default=None, sa_column=Column(BigIntPK, primary_key=True, autoincrement=True)
    )
    tenant: str = Field(max_length=100)
    bytes: int = Field(sa_type=sa.BigInteger)


class Delivery(SQLModel, table=True):
    """One callback POST owed for a job that reached `succeeded` or `dead` (`app.worker.webhooks`).

    Inserted in the transaction that finishes the job; `pending` until a POST is answered
    2xx (`delivered`) or the budget is spent or the answer is fatal (`dead`). While a
    sender holds it, `lease_expires_at` is in the future; a lapsed lease makes it due again.
    """

    __tablename__ = "deliveries"

    id: int | None = Field(
        default=None, sa_column=Column(BigIntPK, primary_key=True, autoincrement=True)
    )
    job_id: str | None = Field(
        default=None,
        sa_column=Column(
            sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True
        ),
    )
    """The job whose callback it is; null for a crawl's."""
    crawl_id: str | None = Field(
        default=None,
        sa_column=Column(
            sa.String(36),
            sa.ForeignKey("crawls.id", name="fk_deliveries_crawl", ondelete="CASCADE"),
            nullable=True,
        ),
    )
    """The crawl whose callback it is (`crawl.completed`, `crawl.changed`); null for a job's."""
    event: str = Field(max_length=32)
    url: str = Field(max_length=2048)
    status: str = Field(max_length=16)
    attempts: int = 0
    max_attempts: int
    retry_after: datetime | None = _ts()
    lease_expires_at: datetime | None = _ts()
    last_error_kind: str | None = Field(default=None, max_length=16)
    last_error_type: str | None = Field(default=None, max_length=100)
    last_error_message: str | None = None
    last_error_http_status: int | None = None
    last_error_at: datetime | None = _ts()
    created_at: datetime = _ts(nullable=False)
    updated_at: datetime = _ts(nullable=False)
    delivered_at: datetime | None = _ts()

    __table_args__ = (
        sa.Index("ix_deliveries_job", "job_id", "id"),
        # The sender's claim reads only pending rows, however many delivered ones pile up.
        partial_index(
            "ix_deliveries_pending",
            "retry_after",
            where="status = 'pending'",
        ),
    )


class CrawlRow(SQLModel, table=True):
    """A crawl (`app.store.crawls`): its start URLs and options as submitted, and how many
    jobs it made. Its pages are jobs (`jobs.crawl_id`); what it found, `crawl_urls`."""

    __tablename__ = "crawls"

    id: str = Field(primary_key=True, max_length=36)
    tenant: str = Field(max_length=100)
    mode: str = Field(max_length=8)
    """`crawl` (fetch and keep every page) or `map` (list the URLs found, fetch no page)."""
    status: str = Field(max_length=16)
    """running, then completed or cancelled."""
    seeds: list[str] = Field(sa_type=JSON)
    options: dict[str, Any] = Field(sa_type=JSON)
    """The crawl's options as the API took them (`app.model.CrawlOptions`)."""
    made: int = _counter()
    """Jobs it made of its pages: written by the expansion alone, under the row's lock."""
    refresh_every: int | None = None
    """Seconds after a round ends when the next begins (a re-crawl); null: one round."""
    round: int = Field(default=1, sa_column_kwargs={"server_default": sa.text("1")})
    """The round under way, or the last one (1 for the first crawl of the site)."""
    round_started_at: datetime = _ts(nullable=False)
    next_round_at: datetime | None = _ts()
    """When the next round begins: set as a round of a re-crawl ends."""
    created_at: datetime = _ts(nullable=False)
    updated_at: datetime = _ts(nullable=False)
    finished_at: datetime | None = _ts()

    __table_args__ = (
        sa.Index("ix_crawls_tenant_created", "tenant", "created_at", "id"),
        # What the crawl loop visits: the running crawls, however many have ended.
        partial_index("ix_crawls_running", "updated_at", where="status = 'running'"),
        # Re-crawls whose next round comes due.
        partial_index("ix_crawls_next_round", "next_round_at", where="next_round_at IS NOT NULL"),
    )


class CrawlUrl(SQLModel, table=True):
    """One URL a crawl found: a page (made a job when the crawl's turn comes, `state`
    `new` -> `queued`) or a listing it reads itself (a sitemap, a feed, llms.txt, robots.txt).
    Found once: the primary key (crawl, kind, URL key digest) makes a URL found again by
    another page or route no new row. Written with the outcome of the page whose links
    found it (`app.store.record`), so a crash loses none."""

    __tablename__ = "crawl_urls"

    crawl_id: str = Field(
        sa_column=Column(
            sa.String(36), sa.ForeignKey("crawls.id", ondelete="CASCADE"), primary_key=True
        )
    )
    kind: str = Field(primary_key=True, max_length=8)
    url_hash: int = Field(primary_key=True, sa_type=sa.BigInteger)
    """The URL key's digest (`app.rules.url_key.url_hash`)."""
    url: str = Field(sa_column=Column(sa.Text(), nullable=False))
    """The URL's key (`app.rules.url_key`): what is fetched."""
    state: str = Field(max_length=12)
    depth: int
    source: str = Field(max_length=8)
    """How it was found: seed, link, sitemap, feed, llms, robots."""
    found_on: str | None = Field(default=None, sa_column=Column(sa.Text(), nullable=True))
    lastmod: str | None = Field(default=None, max_length=40)
    """A sitemap's or a feed's date for it, as the site wrote it."""
    job_id: str | None = Field(default=None, max_length=36)
    first_round: int | None = None
    """The round that found it first (a page new in that round)."""
    round: int | None = None
    """The last round that found it: a page a round did not find again was removed."""
    created_at: datetime = _ts(nullable=False)

    __table_args__ = (
        # The crawl's next URLs to make jobs of or to read, nearest first, without the rest.
        partial_index("ix_crawl_urls_new", "crawl_id", "kind", "depth", where="state = 'new'"),
    )


class CrawlRound(SQLModel, table=True):
    """A round of a crawl, written as it ends (`app.store.crawls.rounds`): how many pages it
    found new, changed and removed, and which (bounded)."""

    __tablename__ = "crawl_rounds"

    crawl_id: str = Field(
        sa_column=Column(
            sa.String(36), sa.ForeignKey("crawls.id", ondelete="CASCADE"), primary_key=True
        )
    )
    round: int = Field(primary_key=True)
    started_at: datetime = _ts(nullable=False)
    finished_at: datetime = _ts(nullable=False)
    counts: dict[str, int] = Field(sa_type=JSON)
    pages: dict[str, list[str]] = Field(sa_type=JSON)
    """The URLs of each: `new`, `changed`, `removed`, each at most ROUND_PAGES_KEPT."""


class CrawlTally(SQLModel, table=True):
    """A count of URLs a crawl left out (`name`: out_of_scope, too_deep, cut, ...), appended
    by each record and listing read and summed on read: no writer waits on another's."""

    __tablename__ = "crawl_tallies"

    id: int | None = Field(
        default=None, sa_column=Column(BigIntPK, primary_key=True, autoincrement=True)
    )
    crawl_id: str = Field(
        sa_column=Column(
            sa.String(36), sa.ForeignKey("crawls.id", ondelete="CASCADE"), nullable=False
        )
    )
    name: str = Field(max_length=16)
    n: int

    __table_args__ = (sa.Index("ix_crawl_tallies_crawl", "crawl_id"),)


# The handles every store module writes its SQL with.
jobs: sa.Table = JobRow.__table__  # type: ignore[attr-defined]
attempts: sa.Table = Attempt.__table__  # type: ignore[attr-defined]
job_urls: sa.Table = JobUrl.__table__  # type: ignore[attr-defined]
domains: sa.Table = Domain.__table__  # type: ignore[attr-defined]
tenants: sa.Table = Tenant.__table__  # type: ignore[attr-defined]
contents: sa.Table = JobContent.__table__  # type: ignore[attr-defined]
job_counts: sa.Table = JobCount.__table__  # type: ignore[attr-defined]
bytes_kept: sa.Table = BytesKept.__table__  # type: ignore[attr-defined]
deliveries: sa.Table = Delivery.__table__  # type: ignore[attr-defined]
workers: sa.Table = WorkerRow.__table__  # type: ignore[attr-defined]
crawls: sa.Table = CrawlRow.__table__  # type: ignore[attr-defined]
crawl_urls: sa.Table = CrawlUrl.__table__  # type: ignore[attr-defined]
crawl_tallies: sa.Table = CrawlTally.__table__  # type: ignore[attr-defined]
crawl_rounds: sa.Table = CrawlRound.__table__  # type: ignore[attr-defined]


READY = f"status = '{JobStatus.PENDING}' AND retry_after IS NULL"
"""A pending job with no `retry_after`: claimable as soon as its domain lets it. A retry, a
deferral or a `not_before` waits outside the claim's indexes until it comes due and the
claim moves it in (`app.store.claim`, step 0): waiting jobs at the head of a tenant's list
made each claim step over them (docs/design/store.md)."""

# The claim scans only ready rows in claim order, however many terminal or waiting rows pile
# up. (Declared here, not in __table_args__, because the column must exist to sort it DESC.)
partial_index("ix_jobs_claim", jobs.c.priority.desc(), jobs.c.created_at, where=READY)

# Running jobs per domain, for the per-domain in-flight limit.
partial_index(
    "ix_jobs_running_domain",
    jobs.c.domain,
    where=f"status = '{JobStatus.RUNNING}'",
)
# A tenant's ready jobs in claim order, for fair share.
partial_index(
    "ix_jobs_tenant_claim",
    jobs.c.tenant,
    jobs.c.priority.desc(),
    jobs.c.created_at,
    where=READY,
)
# A tenant's waiting jobs by when they come due: its stats count those not due yet.
partial_index(
    "ix_jobs_tenant_retry_after",
    jobs.c.tenant,
    jobs.c.retry_after,
    where=f"status = '{JobStatus.PENDING}' AND retry_after IS NOT NULL",
)


DUE_SINCE = sa.func.coalesce(jobs.c.retry_after, jobs.c.updated_at)
"""When a pending job became claimable: its `retry_after`, else when it last became pending
(every move into pending sets `updated_at`). For the queue-lag metric."""

# GET /stats and the metrics' oldest pending and longest due jobs: the first row of each,
# where a min() read every pending row (docs/design/store.md).
partial_index("ix_jobs_pending_created", jobs.c.created_at, where=f"status = '{JobStatus.PENDING}'")
partial_index("ix_jobs_pending_due", DUE_SINCE, where=f"status = '{JobStatus.PENDING}'")


def status_is(status: JobStatus) -> sa.ColumnElement[bool]:
    """`status = '<literal>'`: a literal, not a bound parameter, so both databases match
    the query to the partial indexes declared on that very predicate."""
    return jobs.c.status == sa.literal_column(f"'{status}'")


def ready() -> sa.ColumnElement[bool]:
    """`READY` as a query's filter, matched by both databases to the claim's indexes."""
    return sa.and_(status_is(JobStatus.PENDING), jobs.c.retry_after.is_(None))
