"""The values that cross module lines: a job's vocabulary, what a claim hands out, what a
fetch returns, what policy decides and what the store records.

Frozen dataclasses and string enums, nothing else: every other module may import this one,
and this one imports nothing of the service. Stored as plain strings in both databases,
hence `StrEnum`.
"""

import builtins
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar


class JobStatus(StrEnum):
    """Where a job is. Each member says who moves a job into and out of it."""

    PENDING = "pending"
    """In: submit, a retryable failure, a lease taken back, graceful shutdown, an operator's
    retry. Out: the worker's claim (once `retry_after` has passed) or an operator's cancel."""

    RUNNING = "running"
    """In: the claim. Out: the worker records the attempt's outcome, hands the job back on
    shutdown, or another worker takes back the expired lease."""

    SUCCEEDED = "succeeded"
    """In: the worker, after a 2xx answer (or a refresh's 304). Out: a refresh (an
    operator's, or the job's own `refresh_every` coming due), which keeps its content."""

    DEAD = "dead"
    """In: the worker (fatal error or budget spent) or the lease reaper (budget spent).
    Out: an operator's retry or refresh, which gives a fresh budget."""

    CANCELLED = "cancelled"
    """In: an operator cancels a pending job. Out: an operator's retry."""


DEFAULT_TENANT = "default"
"""The tenant of a job submitted without one, by an admin key or in open mode."""

FINISHED = (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED)
"""Statuses a job never leaves by itself: the ones an operator may delete."""


class ErrorKind(StrEnum):
    """How a failed attempt is treated; see `app.rules.policy.classify_exception`."""

    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    FATAL = "fatal"


class DeadReason(StrEnum):
    FATAL = "fatal"
    RETRIES_EXHAUSTED = "retries_exhausted"
    LEASE_EXPIRED = "lease_expired"
    RATE_LIMITED = "rate_limited"
    GONE = "gone"
    """A refresh of a page fetched before was answered 404 or 410: the page went (its last
    content is kept)."""
    ROBOTS = "robots"
    """The domain's robots.txt disallows the URL (INGEST_ROBOTS_TXT=obey): nothing was asked
    of the page itself."""
    STORAGE_QUOTA = "storage_quota"
    """A first fetch whose content would take its tenant's bytes kept past
    INGEST_TENANT_MAX_STORAGE_BYTES: nothing stored (`app.rules.policy.within_storage_quota`)."""


ROBOTS_DISALLOWED = "RobotsDisallowed"
"""The `Failure.type` of a URL its robots.txt disallows (`app.rules.robots`): policy makes the job
dead with `DeadReason.ROBOTS` at once."""


class AttemptOutcome(StrEnum):
    """How one attempt ended, in the job's history."""

    SUCCEEDED = "succeeded"
    NOT_MODIFIED = "not_modified"
    """A refresh answered 304 Not Modified: no body, the content kept."""
    UNCHANGED = "unchanged"
    """A refresh answered 200 with the body, or the text extracted from it, as before."""
    NOT_KEPT = "not_kept"
    """A refresh found the page changed, but the new version would take its tenant's bytes
    kept past INGEST_TENANT_MAX_STORAGE_BYTES: not stored, the last version kept."""
    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    FATAL = "fatal"
    INTERRUPTED = "interrupted"


class DomainSignal(StrEnum):
    """What an attempt's end says about its domain's health."""

    FAILING = "failing"
    """The server struggled (timeout, refused, 5xx, 429): one more consecutive failure."""
    ANSWERED = "answered"
    """The server answered: its failure streak is over."""
    SILENT = "silent"
    """Nothing learnt (a fatal error of the job's own, an interruption)."""


class DeliveryStatus(StrEnum):
    """A webhook delivery's state: pending until answered 2xx (delivered) or given up (dead)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


class DeliveryEvent(StrEnum):
    """What a callback announces."""

    JOB_SUCCEEDED = "job.succeeded"
    JOB_DEAD = "job.dead"
    JOB_CHANGED = "job.changed"
    """A refresh stored a new version of the content."""
    JOB_GONE = "job.gone"
    """A refresh found the page gone (404, 410): dead, its last content kept."""
    CRAWL_COMPLETED = "crawl.completed"
    """A crawl's round ended (its first, or a later one that found nothing new, changed or
    removed)."""
    CRAWL_CHANGED = "crawl.changed"
    """A re-crawl's round ended having found pages new, changed or removed."""


class BlockReason(StrEnum):
    """What holds a pending job back (`app.rules.scheduling.waiting_for`)."""

    NOT_DUE = "not_due"
    """Its `retry_after` (a backoff, a rate limit, a `not_before`) has not come."""
    DOMAIN_PAUSED = "domain_paused"
    DOMAIN_INTERVAL = "domain_interval"
    """Its domain started a fetch less than its minimum interval ago
    (INGEST_DOMAIN_MIN_INTERVAL_SECONDS, or its robots.txt's Crawl-delay when obeyed)."""
    DOMAIN_AT_LIMIT = "domain_at_limit"
    """Its domain runs INGEST_DOMAIN_MAX_IN_FLIGHT fetches already."""
    TENANT_AT_LIMIT = "tenant_at_limit"
    """Its tenant runs INGEST_TENANT_MAX_IN_FLIGHT jobs already."""


@dataclass(frozen=True)
class Blocked:
    """Why a pending job cannot start now, and until when (None: until a fetch ends)."""

    reason: BlockReason
    until: datetime | None = None
    detail: str | None = None
    """The domain's pause reason."""


class CallbackContent(StrEnum):
    """What a job's callback carries of what it fetched, besides the job (`app.worker.webhooks`)."""

    NONE = "none"
    TEXT = "text"
    MARKDOWN = "markdown"


class CrawlMode(StrEnum):
    CRAWL = "crawl"
    """Fetch and keep every page found, each an ordinary job."""
    MAP = "map"
    """List the URLs the site's listings name (sitemaps, feeds, llms.txt); fetch no page."""


class CrawlStatus(StrEnum):
    """Where a crawl is. In `running` from its submit; out by the crawl loop when nothing is
    left to find or fetch (`completed`), or by an operator (`cancelled`)."""

    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class SitemapUse(StrEnum):
    INCLUDE = "include"
    """Pages from the sitemaps and from links."""
    ONLY = "only"
    """Pages from the sitemaps (and the start URLs) alone: no link is followed."""
    SKIP = "skip"
    """No sitemap is read."""


class FoundVia(StrEnum):
    """How a crawl found a URL (`crawl_urls.source`)."""

    SEED = "seed"
    LINK = "link"
    SITEMAP = "sitemap"
    FEED = "feed"
    LLMS = "llms"
    ROBOTS = "robots"


class UrlKind(StrEnum):
    """What a crawl does with a URL it found: fetch it as a page (a job), or read it itself
    as a listing of more URLs."""

    PAGE = "page"
    ROBOTS = "robots"
    SITEMAP = "sitemap"
    FEED = "feed"
    LLMS = "llms"


class FrontierState(StrEnum):
    """Where a URL a crawl found is (`crawl_urls.state`)."""

    NEW = "new"
    """Found; in: a page's or a listing's record. Out: the crawl loop."""
    QUEUED = "queued"
    """A page made a job (`crawl_urls.job_id`): the job says the rest."""
    READ = "read"
    """A listing read, its URLs found."""
    FAILED = "failed"
    """A listing that could not be read (its error counted)."""
    CUT = "cut"
    """Left when the crawl reached its `limit`, or ended (cancelled)."""
    ROBOTS = "robots"
    """A page robots.txt disallows (as kept when its job was to be made): never made a job."""
    CANONICAL = "canonical"
    """Named canonical by a page fetched under another URL: that page is this one, and it is
    not fetched again."""


@dataclass(frozen=True)
class CrawlOptions:
    """What a crawl follows and what its pages are, as submitted (`crawls.options`)."""

    limit: int
    """Pages it makes jobs of, at most."""
    max_depth: int
    """Links followed from a start URL, at most (a listing's pages are at depth 0, as the
    start URLs are)."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    """Path patterns (`app.rules.crawl_scope`)."""
    subdomains: bool = False
    sitemap: SitemapUse = SitemapUse.INCLUDE
    feeds: bool = True
    llms_txt: bool = True
    robots_txt: bool = True
    """Obey robots.txt for its pages, whatever the tenant's rule."""
    priority: int = 0
    max_attempts: int = 5
    refresh_every: int | None = None
    metadata: dict[str, Any] | None = None
    callback_url: str | None = None
    """Told as each round ends (`crawl.completed`, `crawl.changed`)."""
    callback_content: CallbackContent = CallbackContent.NONE
    callback_pages: bool = False
    """Each page's job calls `callback_url` too, as a job submitted with it does."""


@dataclass(frozen=True)
class NewCrawl:
    tenant: str
    seeds: tuple[str, ...]
    mode: CrawlMode
    options: CrawlOptions


@dataclass(frozen=True)
class CrawlPage:
    """A claimed job's place in its crawl, carried by its lease."""

    crawl_id: str
    depth: int


@dataclass(frozen=True)
class FrontierUrl:
    """A URL a crawl found, to insert into its frontier (`crawl_urls`)."""

    url: str
    """Its key (`app.rules.url_key`)."""
    kind: UrlKind
    depth: int
    via: FoundVia
    found_on: str | None = None
    lastmod: str | None = None
    state: FrontierState = FrontierState.NEW


@dataclass(frozen=True)
class Finds:
    """What a crawl's page or listing found: the URLs to add to the crawl's frontier (those
    already there are skipped), and counts of those it left out, by reason."""

    crawl_id: str
    urls: tuple[FrontierUrl, ...] = ()
    left_out: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class NewJob:
    """A job to submit, validated by the caller (the API, the CLI, a benchmark)."""

    url: str
    domain: str
    tenant: str
    max_attempts: int
    priority: int = 0
    not_before: datetime | None = None
    metadata: dict[str, Any] | None = None
    callback_url: str | None = None
    callback_content: CallbackContent = CallbackContent.NONE
    idempotency_key: str | None = None
    fingerprint: str | None = None
    """sha256 of the submitted body, to tell "same request again" from "same key, other body"."""
    refresh_every: int | None = None
    """Seconds after each success when the job fetches its page again; None: never."""
    unique: bool = False
    """Answered by the tenant's job of the same URL key that is pending or running (or
    succeeded within `max_age`), if there is one, instead of a new job."""
    max_age: float | None = None
    """With `unique`: for how many seconds a success answers; None: none does."""
    url_key: str | None = None
    """The URL's key (`app.rules.url_key`), when the caller made it; None: the store does."""


@dataclass(frozen=True)
class Previous:
    """What a job's last success stored, for a refresh: the validators its conditional GET
    sends, and the hashes that tell an unchanged page from a changed one."""

    version: int
    """The content version stored (1 for the first success)."""
    etag: str | None
    last_modified: str | None
    body_sha256: str | None
    text_sha256: str | None


@dataclass(frozen=True)
class Lease:
    """A claimed job: what the worker needs to fetch it and to record the outcome."""

    id: str
    url: str
    domain: str
    tenant: str
    attempt: int
    max_attempts: int
    deferrals: int
    worker_id: str
    lease_id: str
    """The claim's fencing token: every later write of this attempt must match it."""
    claimed_at: datetime
    due_at: datetime | None = None
    """When the job became claimable, for the queue-lag metric; None if the claim did not say."""
    priority: int = 0
    """The job's priority when claimed: a queued lease of a lower one than a job submitted
    since is handed back (`app.worker.job_worker`)."""
    previous: Previous | None = None
    """Set when the job succeeded before: this attempt is a refresh."""
    refresh_every: int | None = None
    """The job's refresh schedule (seconds), for the next refresh's time on success."""
    crawl: CrawlPage | None = None
    """Set for a page of a crawl: its links are followed."""


@dataclass(frozen=True)
class PageMetadata:
    """What a fetched page says about itself (meta tags, Open Graph, JSON-LD, a PDF's info),
    and the charset its text was decoded with. Every field is optional: pages say little."""

    title: str | None = None
    description: str | None = None
    authors: tuple[str, ...] = ()
    published: str | None = None
    """ISO 8601, a date or a date and time, as precise as the page says."""
    modified: str | None = None
    language: str | None = None
    """A BCP 47 tag as the page declares it (`en`, `pt-BR`)."""
    canonical_url: str | None = None
    site_name: str | None = None
    image: str | None = None
    keywords: tuple[str, ...] = ()
    page_count: int | None = None
    """A PDF's pages."""
    charset: str | None = None
    """The codec the text was decoded with (None for a PDF, which is no text)."""
    charset_source: str | None = None
    """How it was chosen: bom, header, meta, detected, or default (windows-1252 for HTML
    whose detection is unsure, as browsers do; UTF-8 otherwise)."""


@dataclass(frozen=True)
class PageLink:
    """A link of a fetched page (`app.content.links`): where it points and what it says."""

    url: str
    """Absolute, and normalized as a URL key is (`app.rules.url_key`)."""
    text: str
    """Its anchor text, one line; "" for a link that shows none."""
    internal: bool
    """Whether it points to the page's own host (`www.` aside)."""


@dataclass(frozen=True)
class Fetched:
    """A successful fetch: the answer, its body and the text extracted from it."""

    http_status: int
    final_url: str
    content_type: str | None
    bytes: int
    sha256: str
    title: str | None
    text_length: int = 0
    """Characters of the extracted main text."""
    body: builtins.bytes = field(default=b"", repr=False)
    """The decoded body, at most `max_body_bytes`."""
    text: str = field(default="", repr=False)
    """The extracted main text (`app.content.extract`)."""
    markdown: str | None = field(default=None, repr=False)
    """The main content as Markdown; None for a type with no text."""
    metadata: PageMetadata = field(default_factory=PageMetadata)
    etag: str | None = None
    last_modified: str | None = None
    """The answer's ETag and Last-Modified, which a refresh sends back."""
    text_sha256: str = ""
    """sha256 of the main text (UTF-8): what tells a changed page from one whose rotating ad
    or timestamp alone moved."""
    links: tuple[PageLink, ...] = field(default=(), repr=False)
    """The page's links (HTML), at most INGEST_LINKS_MAX_PER_PAGE."""
    feeds: tuple[str, ...] = field(default=(), repr=False)
    """The feeds the page links to (`<link rel=alternate>`)."""
    links_cut: int = 0
    """Links of the page past INGEST_LINKS_MAX_PER_PAGE, not kept."""


@dataclass(frozen=True)
class Unmodified:
    """A refresh's answer that says the content is as stored: a 304, or a 200 whose body is
    the very body stored (not extracted again)."""

    ended: AttemptOutcome
    """NOT_MODIFIED (a 304) or UNCHANGED (the same body, or the same text)."""
    http_status: int
    etag: str | None
    last_modified: str | None
    bytes: int | None = None
    sha256: str | None = None
    """The body's size and sha256 when one came (a 200): the job's result keeps them, so
    the same body next time is known without extracting it."""


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, as stored in `last_error` and the attempt's history."""

    kind: ErrorKind
    type: str
    message: str
    http_status: int | None = None
    retry_after: str | None = None
    """The answer's Retry-After header, as sent; `app.rules.policy.parse_retry_after` reads it."""
    unexpected: BaseException | None = field(default=None, compare=False, repr=False)
    """Set to the exception when it is not a known case, so its trace can be logged."""

    @property
    def spends_attempt(self) -> bool:
        """A rate-limited answer is the server's schedule, not the job's failure: it is a
        deferral, which gives the attempt back (whether the job is rescheduled or dies)."""
        return self.kind is not ErrorKind.RATE_LIMITED

    @property
    def label(self) -> str:
        """What a log line calls it: `HTTP 503` or `ReadTimeout`."""
        return f"HTTP {self.http_status}" if self.http_status else self.type


@dataclass(frozen=True)
class Deferral:
    """A rate-limited answer that gave the attempt back: the job's `number`th of `limit`."""

    number: int
    limit: int

    def __str__(self) -> str:
        return f"{self.number}/{self.limit}"


@dataclass(frozen=True)
class Reschedule:
    """`decide`'s answer to a failure after which the job is pending again, due at `retry_at`."""

    retry_at: datetime
    delay_seconds: float
    failure: Failure
    """Kept as the job's `last_error`."""
    spends_attempt: bool = True
    """False gives the attempt back: a deferral."""
    deferral: Deferral | None = None
    """Set when a rate-limited answer deferred the job (its `deferrals` grow by one)."""


@dataclass(frozen=True)
class MarkDead:
    """`decide`'s answer to a failure that ends the job: no attempt follows until an operator
    retries it."""

    reason: DeadReason
    failure: Failure
    spends_attempt: bool = True
    """False for a rate-limited answer: the budget stays as it was."""


# ---- outcomes -----------------------------------------------------------------------------
# A finished attempt as policy settled it (each maker in `app.rules.policy`): one class per
# transition, which says why its job moved where it did. The store, the log lines, the metrics
# and the domain pauses read it as it is, each `match`ing on the class: none works a transition
# out again from fields, and one added is a type error (`assert_never`) where it is not handled.


@dataclass(frozen=True)
class Settled:
    """What every outcome holds: the lease the attempt ran under, how long it took, and what
    it says of its domain's health. Each class says how the attempt ended (`ended`, its
    row's `outcome` in the job's history)."""

    lease: Lease
    duration_ms: int
    domain: DomainSignal = field(default=DomainSignal.SILENT, kw_only=True)


@dataclass(frozen=True)
class Succeeded(Settled):
    """Content stored: a first fetch, or a refresh that found the page changed. The job is
    `succeeded`, a new version kept."""

    fetched: Fetched
    refresh_at: datetime | None = None
    """When the job fetches its page again (its `refresh_every` on); None: never."""
    changed: bool = False
    """A refresh found the content changed: a new version (`job.changed`)."""
    finds: Finds | None = None
    """For a crawl's page: what its links add to the crawl, written with the success."""
    ended: ClassVar[AttemptOutcome] = AttemptOutcome.SUCCEEDED


@dataclass(frozen=True)
class Confirmed(Settled):
    """A refresh found the content as stored (`Unmodified`: a 304, the very body stored, or a
    200 whose text hashes the same): `succeeded` again, the version kept, nothing stored but
    the answer's validators."""

    unmodified: Unmodified
    refresh_at: datetime | None = None
    finds: Finds | None = None
    """For a crawl's page: what its links (as stored) add to the crawl's round."""

    @property
    def ended(self) -> AttemptOutcome:
        return self.unmodified.ended


@dataclass(frozen=True)
class NotKept(Settled):
    """A refresh found the page changed, but its tenant's storage quota let it keep no new
    version (`app.rules.policy.within_storage_quota`): `succeeded`, the last version and its
    validators kept, so the next refresh fetches the page whole."""

    http_status: int
    etag: str | None
    last_modified: str | None
    """The kept version's validators."""
    refresh_at: datetime | None
    message: str
    """The attempt's message: "changed, not kept: " and why."""
    ended: ClassVar[AttemptOutcome] = AttemptOutcome.NOT_KEPT


@dataclass(frozen=True)
class Retried(Settled):
    """Failed, and `pending` again at its `retry_at`, after the backoff; the attempt counts."""

    failure: Failure
    """Kept as the job's `last_error`, as is every failure of an outcome."""
    retry_at: datetime
    delay_seconds: float

    @property
    def ended(self) -> AttemptOutcome:
        return AttemptOutcome(self.failure.kind)


@dataclass(frozen=True)
class Deferred(Settled):
    """Rate-limited: `pending` again when the server asked (or after the backoff, if longer);
    the attempt given back, the job's `deferrals` one more."""

    failure: Failure
    retry_at: datetime
    delay_seconds: float
    deferral: Deferral

    @property
    def ended(self) -> AttemptOutcome:
        return AttemptOutcome(self.failure.kind)


@dataclass(frozen=True)
class Died(Settled):
    """Failed for good: `dead`, its `reason` says why; no attempt follows until an operator
    retries it."""

    reason: DeadReason
    failure: Failure
    spends_attempt: bool = True
    """False for a rate-limited answer: the budget stays as it was."""

    @property
    def ended(self) -> AttemptOutcome:
        return AttemptOutcome(self.failure.kind)


@dataclass(frozen=True)
class HandedBack(Settled):
    """Its worker gave it back unfetched or unfinished (shutdown, a higher priority):
    `pending`, due now, the attempt given back, its last error kept."""

    message: str
    """Why, the attempt's message."""
    ended: ClassVar[AttemptOutcome] = AttemptOutcome.INTERRUPTED


@dataclass(frozen=True)
class Expired(Settled):
    """Taken back from a worker gone silent (its lease ran out): the lost attempt counts, and
    the job is `pending`, due now, or `dead` (`lease_expired`) with no attempt left."""

    failure: Failure
    dead: bool
    """No attempt was left: dead (`lease_expired`), not due again."""
    ended: ClassVar[AttemptOutcome] = AttemptOutcome.INTERRUPTED


Outcome = Succeeded | Confirmed | NotKept | Retried | Deferred | Died | HandedBack | Expired
"""A finished attempt as policy settled it: what the store records, as given."""


@dataclass(frozen=True)
class DomainPause:
    """A whole domain waits until `until`, because of `reason`."""

    until: datetime
    reason: str


@dataclass(frozen=True)
class ClaimedDelivery:
    """A webhook delivery leased to one sender for one POST."""

    id: int
    job_id: str | None
    """None for a crawl's (`crawl_id`)."""
    event: str
    url: str
    attempt: int
    max_attempts: int
    crawl_id: str | None = None


@dataclass(frozen=True)
class WorkerPresence:
    """What a worker process says of itself on each heartbeat (`app.store.workers`)."""

    id: str
    host: str
    pid: int
    version: str
    slots: int
    running: int
    queued: int
    """Claimed into its local queue, not started yet."""
    started_at: datetime


# ---- wake-ups -----------------------------------------------------------------------------
# A submit wakes the workers (in this process, a worker process through its pipe, others by
# NOTIFY), telling them the highest priority submitted: a worker holding queued jobs of a
# lower one hands them back, so the new job is not held behind them (`app.worker.job_worker`).


def wake_payload(priority: int | None) -> str:
    """A wake-up's text (a NOTIFY payload, a line to a worker process): the highest
    priority submitted, or empty when the waker does not say (a requeue)."""
    return "" if priority is None else str(priority)


def woken_for(*payloads: str) -> int | None:
    """The highest priority the wake-ups' texts carry (`wake_payload`); None if none does."""
    priorities = [int(p) for p in payloads if p.strip().lstrip("-").isdigit()]
    return max(priorities, default=None)
