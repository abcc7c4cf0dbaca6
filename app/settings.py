"""Settings: every knob of the service, read from `INGEST_*` variables or `.env`.

Built once by the CLI or by `create_app` and passed down as a plain value; there is no
module-level instance, so tests build their own. Each field's description is the user
documentation: docs/reference/settings.md and .env.example are generated from it.
"""

import ipaddress
import os
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_TRANSIENT_ERRORS = (
    "ConnectTimeout",
    "ReadTimeout",
    "WriteTimeout",
    "PoolTimeout",
    "ConnectError",
    "ReadError",
    "WriteError",
    "RemoteProtocolError",
    "FetchTimeout",
)


def parse_ranges(value: str, lowest: int, highest: int, what: str) -> frozenset[int]:
    """Parse `"408,500-599"` into the set of integers it names, each within [lowest, highest]."""
    numbers: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        bad = ValueError(
            f"bad {what} range {part!r}; expected numbers and ranges (low-high) from "
            f"{lowest} to {highest}, comma-separated"
        )
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise bad from None
        if not lowest <= first <= last <= highest:
            raise bad
        numbers.update(range(first, last + 1))
    return frozenset(numbers)


def parse_status_codes(value: str) -> frozenset[int]:
    """Parse `"408,500-599"` into the set of HTTP statuses it names."""
    return parse_ranges(value, 100, 599, "HTTP status")


def parse_ports(value: str) -> frozenset[int]:
    """Parse `"80,443,1024-65535"` into the set of TCP ports it names."""
    return parse_ranges(value, 1, 65535, "port")


DEFAULT_CONTENT_TYPES = (
    "text/html",
    "application/xhtml+xml",
    "text/plain",
    "text/markdown",
    "application/json",
    "application/xml",
    "text/xml",
    "application/pdf",
)

MIN_LEASE_SECONDS = 0.5
"""A worker renews its leases every third of the lease, each renewal a database write that
must land within the other two thirds. Below half a second that leaves under a third of a
second, which a write queued behind a claim on a busy host can miss: the job would be taken
back and fetched twice. The shutdown grace needs no such bound: leases are renewed through it.
"""

# A host entry of INGEST_ALLOWED_HOSTS / INGEST_BLOCKED_HOSTS that is not an address or network.
_HOST_PATTERN = re.compile(r"(\*\.)?[^\s*/:@\[\]]+")


def _host_entries(value: object) -> object:
    """Split and check `example.com, *.example.com, 10.1.2.3, 10.0.0.0/8`; lower-cased."""
    entries = _split_names(value)
    if not isinstance(entries, tuple):
        return entries
    checked = []
    for entry in entries:
        entry = entry.lower().rstrip(".")
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            if not _HOST_PATTERN.fullmatch(entry):
                raise ValueError(f"{entry!r} is not a host, *.domain, address or network") from None
        checked.append(entry)
    return tuple(checked)


# An entry of INGEST_ALLOWED_HOSTNAMES: `*`, a name, or `*.` and a name (ASCII: a browser
# sends an internationalized name in its xn-- form).
_HOSTNAME_PATTERN = re.compile(r"\*|(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*")


def _hostnames(value: object) -> object:
    """Split and check `ingest.example.com, *.example.com`; lower-cased, without a final dot."""
    entries = _split_names(value)
    if not isinstance(entries, tuple):
        return entries
    checked = tuple(entry.lower().rstrip(".") for entry in entries)
    for entry in checked:
        if not _HOSTNAME_PATTERN.fullmatch(entry):
            raise ValueError(
                f"{entry!r} is not a host name, *.domain or * (no port; an internationalized "
                "name in its xn-- form)"
            )
    return checked


def parse_api_keys(value: str) -> dict[str, str]:
    """Parse `"key1:tenant-a,key2:*"` into {key: tenant}."""
    keys: dict[str, str] = {}
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        key, sep, tenant = entry.rpartition(":")
        if not sep or not key or not tenant:
            raise ValueError("INGEST_API_KEYS entries are key:tenant")
        if len(key) < 16:
            raise ValueError("API keys must be at least 16 characters")
        keys[key] = tenant
    return keys


MAX_TENANT_WEIGHT = 100
"""The largest weight a tenant may have: past it, one tenant's share would round the
others' away within a claim of 32."""


def _tenant_values(value: str, what: str) -> dict[str, str]:
    """Split `"acme:x,globex:y"` into {tenant: "x"}: each entry tenant:`what`, each tenant once."""
    values: dict[str, str] = {}
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, given = entry.rpartition(":")
        tenant = tenant.strip()
        if not sep or not tenant:
            raise ValueError(f"{entry!r} is not tenant:{what}")
        if tenant in values:
            raise ValueError(f"tenant {tenant!r} is given two {what}s")
        values[tenant] = given.strip()
    return values


def parse_tenant_weights(value: str) -> dict[str, int]:
    """Parse `"acme:3,globex:1"` into {tenant: weight}, each weight a whole number from 1 to
    MAX_TENANT_WEIGHT."""
    weights: dict[str, int] = {}
    for tenant, weight in _tenant_values(value, "weight").items():
        try:
            number = int(weight)
        except ValueError:
            number = 0
        if not 1 <= number <= MAX_TENANT_WEIGHT:
            raise ValueError(
                f"{tenant}:{weight}: a weight is a whole number from 1 to {MAX_TENANT_WEIGHT}"
            )
        weights[tenant] = number
    return weights


RobotsRule = Literal["obey", "ignore"]
"""Whether robots.txt is read and obeyed before a fetch (INGEST_ROBOTS_TXT, per tenant
INGEST_TENANT_ROBOTS_TXT)."""


def parse_tenant_robots(value: str) -> dict[str, str]:
    """Parse `"acme:obey,globex:ignore"` into {tenant: rule}, each rule obey or ignore."""
    rules = _tenant_values(value, "rule")
    for tenant, rule in rules.items():
        if rule not in get_args(RobotsRule):
            raise ValueError(f"{tenant}:{rule}: a tenant's robots.txt rule is obey or ignore")
    return rules


def _split_names(value: object) -> object:
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


class Settings(BaseSettings):
    # No error repeats the value it refused: settings hold passwords and keys.
    model_config = SettingsConfigDict(
        env_prefix="INGEST_",
        env_file=".env",
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,
    )

    # Storage
    database_url: str = Field(
        "sqlite:///data/ingest.db",
        description=(
            "Storage: sqlite:///path/to.db (relative to the working directory) or "
            "postgresql://user@host:5432/db; the driver is chosen for you. Through PgBouncer "
            "in transaction mode add ?pooler=transaction (no statement stays prepared)."
        ),
    )

    listen_database_url: str | None = Field(
        None,
        description="PostgreSQL behind a transaction pooler (PgBouncer, pool_mode = "
        "transaction; INGEST_DATABASE_URL ends in ?pooler=transaction): the server's own "
        "URL, for the one connection per worker that LISTENs for new jobs. Empty: LISTEN on "
        "INGEST_DATABASE_URL, or, through a transaction pooler, none (workers poll).",
    )
    database_pool_size: int = Field(
        5,
        ge=1,
        le=100,
        description="PostgreSQL connections per pool (one more for LISTEN): `ingest serve` "
        "has two pools (its API's and its embedded worker's), `ingest worker` one; claims "
        "and records are batched, so a worker needs few.",
    )

    # HTTP API
    host: str = Field(
        "127.0.0.1", description="Address `ingest serve` listens on (--host overrides it)."
    )
    port: int = Field(
        8000, ge=1, le=65535, description="Port `ingest serve` listens on (--port overrides it)."
    )
    allowed_hostnames: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Comma-separated names the API answers to besides IP addresses, "
        "localhost and INGEST_HOST: ingest.example.com, *.example.com for any name under "
        "it, * for any (behind a proxy that checks Host). A request for any other Host is "
        "refused with 421, against DNS rebinding.",
    )
    max_request_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="Largest request body read (413 beyond it). 4 MiB holds a full batch of "
        "1,000 jobs with 2 KiB URLs and 1 KiB of metadata each (about 3.3 MB of JSON), and "
        "bounds what one request can make a process buffer and parse.",
    )

    # Worker
    worker_enabled: bool = Field(
        True,
        description=(
            "Run the worker inside `ingest serve` (false: API only; run `ingest worker` "
            "processes instead)."
        ),
    )
    worker_process: bool = Field(
        False,
        description="Run `ingest serve`'s worker in a process of its own, which serve starts, "
        "wakes on each submit, starts again if it exits, and stops with itself: requests "
        "then never wait for the interpreter lock behind the worker's fetches. Its metrics "
        "are served on INGEST_METRICS_PORT, not on serve's /metrics.",
    )
    worker_concurrency: int = Field(
        32,
        ge=1,
        le=1000,
        description="In-flight fetches per process (worker slots, and the HTTP connection "
        "pool size).",
    )
    poll_interval_seconds: float = Field(
        2.0,
        gt=0,
        description="Longest idle wait, in seconds, before the worker looks for due jobs again.",
    )
    lease_seconds: float = Field(
        60.0,
        ge=MIN_LEASE_SECONDS,
        description=(
            "Lease of a running job, in seconds (at least 0.5); heartbeats renew it every "
            "third of it, and an expired lease is taken back."
        ),
    )
    shutdown_grace_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "Seconds in-flight fetches get to finish on shutdown (their leases still renewed)"
            " before they are handed back."
        ),
    )
    worker_prefetch: int | None = Field(
        None,
        ge=0,
        le=1000,
        description="Jobs a worker claims ahead of its free slots (its local queue, leased "
        "like running ones); empty: twice INGEST_WORKER_CONCURRENCY.",
    )
    worker_prefetch_seconds: float = Field(
        0.25,
        ge=0,
        le=10,
        description="The most work the local queue holds (queued jobs × recent mean fetch "
        "time ÷ slots), so a higher-priority job submitted later, or one just due, waits at "
        "most about this long behind queued ones; 0: claim only for free slots.",
    )
    record_delay_seconds: float = Field(
        0.01,
        ge=0,
        le=1,
        description="While other fetches still run, a finished job waits at most this "
        "long to be recorded with them in one transaction (at once when it is the last one "
        "running or a slot's worth is waiting).",
    )

    # Retry policy
    max_attempts: int = Field(
        4,
        ge=1,
        le=100,
        description="Default attempt budget of a job (4 = the first try and 3 retries).",
    )
    backoff_base_seconds: float = Field(
        30.0,
        gt=0,
        description=(
            "Backoff delay, in seconds, after the first failure; it doubles with each further"
            " failure."
        ),
    )
    backoff_max_seconds: float = Field(
        300.0, gt=0, description="Cap of the backoff delay, in seconds, before jitter."
    )
    backoff_jitter: float = Field(
        0.2,
        ge=0,
        lt=1,
        description="Jitter j: the delay is multiplied by a uniform factor in [1-j, 1+j].",
    )
    transient_errors: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_TRANSIENT_ERRORS,
        description=(
            "Comma-separated exception names that are retried (transient); other exceptions "
            "are fatal."
        ),
    )
    transient_status_codes: Annotated[frozenset[int], NoDecode] = Field(
        parse_status_codes("408,500-599"),
        description="HTTP statuses that are retried (transient): comma-separated codes and ranges.",
    )

    # Rate limits
    retry_after_max_seconds: float = Field(
        3600.0,
        gt=0,
        description="Longest Retry-After honoured, in seconds; a server asking for more is capped.",
    )
    max_deferrals: int = Field(
        20,
        ge=0,
        description=(
            "Rate-limited answers (429, 503 with Retry-After) a job may get before it is dead"
            " (rate_limited)."
        ),
    )

    # Domains: politeness and pauses, shared by every worker
    domain_max_in_flight: int = Field(
        8, ge=1, description="Concurrent fetches per domain across all workers."
    )
    domain_min_interval_seconds: float = Field(
        0.0,
        ge=0,
        description="Least time in seconds between two fetch starts on one domain "
        "(0 = no minimum).",
    )
    domain_failure_threshold: int = Field(
        3,
        ge=1,
        description="Consecutive timeouts, connect errors or 5xx that pause a domain "
        "(429 and 503 pause it at once).",
    )

    # robots.txt (app/rules/robots.py, app/fetch/robots_reader.py): opt-in, since users submit the
    # URLs they want fetched
    robots_txt: RobotsRule = Field(
        "ignore",
        description="obey: read each domain's robots.txt (RFC 9309) before fetching from it; a "
        "URL it disallows is dead (robots), its Crawl-delay spaces the domain's fetches. "
        "ignore: never ask for robots.txt.",
    )
    tenant_robots_txt: Annotated[dict[str, RobotsRule], NoDecode] = Field(
        {},
        description="Tenants whose robots.txt rule differs from INGEST_ROBOTS_TXT, as "
        "tenant:obey|ignore,... (acme:obey obeys robots.txt for acme's jobs only).",
    )
    robots_cache_seconds: float = Field(
        86400.0,
        gt=0,
        le=86400,
        description="How long a worker process keeps a robots.txt it read before asking again "
        "(RFC 9309: at most 24 hours).",
    )
    robots_max_bytes: int = Field(
        512 * 1024,
        ge=500 * 1024,
        description="Of a robots.txt, this many bytes are read and parsed; the rest is ignored "
        "(RFC 9309: at least 500 KiB).",
    )
    robots_crawl_delay_max_seconds: float = Field(
        60.0,
        ge=0,
        description="Longest Crawl-delay honoured, in seconds; a robots.txt asking for more is "
        "capped, so it cannot freeze a domain.",
    )
    robots_unreachable_max_seconds: float = Field(
        86400.0,
        ge=0,
        description="A robots.txt that failed (5xx, network errors) for this long is taken as "
        "absent (everything allowed); until then the domain's jobs are retried as transient.",
    )

    # Fetching
    connect_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="TCP/TLS connect timeout in seconds (also the wait for a pooled connection).",
    )
    read_timeout_seconds: float = Field(
        20.0, gt=0, description="Longest wait in seconds for one read (also for one write)."
    )
    fetch_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Deadline in seconds for the whole fetch, redirects and body included.",
    )
    max_redirects: int = Field(
        5,
        ge=0,
        le=30,
        description="Redirects followed per fetch; one more makes the job dead (fatal).",
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1,
        description="Bodies larger than this many decoded bytes make the job dead (fatal).",
    )
    user_agent: str = Field("ingest/0.1", description="User-Agent header of every fetch.")

    # Extraction: main text, Markdown and metadata, in processes of their own (app/fetch/pool.py)
    extract_processes: int | None = Field(
        None,
        ge=0,
        description="Processes that parse fetched bodies (HTML and PDF, and any text past a "
        "few KB), per worker (empty: one per core); 0 parses in a thread of the worker, "
        "without deadline or memory cap.",
    )
    extract_timeout_seconds: float = Field(
        15.0,
        gt=0,
        description=(
            "A body not extracted within this many seconds has its process killed; the job is"
            " dead (ExtractionTimeout)."
        ),
    )
    extract_memory_mb: int = Field(
        1024,
        ge=128,
        description="Address space of each extraction process; a body that needs more makes "
        "the job dead (ExtractionFailed).",
    )
    pdf_max_pages: int = Field(
        200, ge=1, description="A PDF's pages past this are not read (its page count is kept)."
    )
    extract_max_elements: int = Field(
        50_000,
        ge=1,
        description="An HTML page of more elements is refused before its text is extracted; "
        "the job is dead (UnparseableContent, hostile page).",
    )
    extract_max_attributes: int = Field(
        100_000,
        ge=1,
        description="An HTML page of more attributes, all elements together, is refused before "
        "its text is extracted; the job is dead (UnparseableContent, hostile page).",
    )
    extract_max_attributes_per_element: int = Field(
        1_000,
        ge=1,
        description="An HTML page with an element of more attributes is refused before it is "
        "parsed; the job is dead (UnparseableContent, hostile page).",
    )

    # Safe fetching: the SSRF guard (app/fetch/guard.py) and what is kept of a fetched body
    allow_private_networks: bool = Field(
        False,
        description="Let fetches reach loopback, private, link-local and every other "
        "non-public address (turns the guard's address check off; for local use and tests).",
    )
    allowed_ports: Annotated[frozenset[int], NoDecode] = Field(
        parse_ports("80,443,1024-65535"),
        description="Ports a fetch may connect to: ports and ranges, e.g. 80,443,1024-65535.",
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Comma-separated hosts (intranet.example, *.corp.example), addresses or "
        "networks (10.1.2.3, 10.0.0.0/8) that may be fetched although their address is private.",
    )
    blocked_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description=(
            "Hosts, addresses or networks never fetched, public or not (same forms as "
            "INGEST_ALLOWED_HOSTS)."
        ),
    )
    allowed_content_types: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_CONTENT_TYPES,
        description="Comma-separated media types kept (type/* for a whole type); any other "
        "makes the job dead (UnsupportedContentType).",
    )
    retention_days: float = Field(
        30.0,
        ge=0,
        description="Days after they finish that succeeded and cancelled jobs (with their "
        "attempts and content) are deleted; dead jobs stay, and so do jobs that refresh "
        "on a schedule. 0 keeps them forever.",
    )

    # Refreshes
    content_versions: int = Field(
        5,
        ge=1,
        le=1000,
        description="Versions of a job's content kept: a refresh that finds the page changed "
        "stores a new one and deletes the oldest beyond this many.",
    )
    refresh_min_seconds: int = Field(
        60,
        ge=1,
        description="The shortest refresh_every a submit may ask for (seconds).",
    )

    # Crawls (app/worker/crawler.py) and the links of pages
    links_max_per_page: int = Field(
        1000,
        ge=0,
        le=100_000,
        description="Distinct links kept of a page (GET /jobs/{id}/links, and what a crawl "
        "follows); the rest are counted, not kept. 0: no link is read (crawls then follow "
        "none, and extraction saves their cost).",
    )
    crawl_max_pages: int = Field(
        10_000,
        ge=1,
        description="The largest `limit` a crawl may ask for (pages made jobs of), and the "
        "limit of a crawl that gives none.",
    )
    crawl_window: int = Field(
        500,
        ge=1,
        le=100_000,
        description="Pending jobs a crawl keeps in the queue at once: its other pages wait "
        "in its frontier, out of the claim's way.",
    )
    crawl_listing_max_bytes: int = Field(
        50 * 1024 * 1024,
        ge=1024,
        description="Bytes read of a sitemap, feed, llms.txt or robots.txt a crawl reads "
        "(after gzip is undone); the rest is cut, and counted.",
    )
    crawl_listing_max_entries: int = Field(
        50_000,
        ge=1,
        description="URLs kept of one sitemap, feed or llms.txt (the sitemap protocol's own "
        "limit); the rest are counted.",
    )
    crawl_may_ignore_robots_txt: bool = Field(
        False,
        description="Whether a crawl may ask `robots_txt: false` (its pages then obey the "
        "tenant's rule, INGEST_ROBOTS_TXT); crawls obey robots.txt otherwise.",
    )

    # Diffs of two versions, `?diff=` (app/api/routes/diffs.py)
    diff_max_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Largest text or Markdown (UTF-8 bytes, each side) a diff compares; a "
        "larger version answers 422.",
    )
    diff_max_lines: int = Field(
        20_000,
        ge=1,
        description="Most lines (each side) a diff compares; more answer 422.",
    )
    diff_timeout_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="A diff not done within this many seconds has its process killed and "
        "answers 422.",
    )
    diff_per_key: int = Field(
        2,
        ge=1,
        description="Diffs an API key may have in flight, in each API process; one more "
        "answers 429 with Retry-After.",
    )
    diff_processes: int = Field(
        2,
        ge=1,
        le=64,
        description="Processes that compute diffs, per API process, started on the first diff.",
    )

    # Tenants
    tenant_max_pending: int = Field(
        0,
        ge=0,
        description="Pending jobs a tenant may have: a submit that would pass it answers 429 "
        "(with Retry-After) and stores nothing. 0: no limit.",
    )
    key_submits_per_second: float = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Jobs an API key may submit per second, in each API process (a token "
        "bucket: a batch passes while one token is left, then the key waits it off); beyond it "
        "a submit answers 429 with Retry-After and stores nothing. Without API keys all "
        "callers share one bucket. 0: no limit.",
    )
    key_submit_burst: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Jobs an API key may submit at once before INGEST_KEY_SUBMITS_PER_SECOND "
        "holds it back (the bucket's size). 0: one second's worth.",
    )
    tenant_max_in_flight: int = Field(
        0,
        ge=0,
        description="Running jobs a tenant may have across all workers: the claim leases it "
        "no more. 0: no limit.",
    )
    tenant_max_storage_bytes: int = Field(
        0,
        ge=0,
        description="Bytes of content a tenant may keep: the body, text and Markdown of every "
        "version kept (Markdown that is the text counted once). A refresh's change that would "
        "pass it is not kept (the attempt ends not_kept, the last version stays); a first "
        "fetch that would is dead (storage_quota). 0: no limit.",
    )
    tenant_weights: Annotated[dict[str, int], NoDecode] = Field(
        {},
        description="Tenants' shares of the fetches as tenant:weight,... (whole numbers from "
        f"1 to {MAX_TENANT_WEIGHT}); a tenant not named weighs 1. acme:3 gets three jobs "
        "for each one of a tenant of weight 1 while both have jobs waiting.",
    )
    api_keys: Annotated[dict[str, str], NoDecode] = Field(
        {},
        description=(
            "API keys as key:tenant,... (keys of 16+ characters; tenant * is an admin key). "
            "Empty: open API."
        ),
    )
    allow_open_api: bool = Field(
        False,
        description="Let `ingest serve` listen on an address other than loopback without "
        "INGEST_API_KEYS: anyone who reaches it may then read, retry and delete every job. "
        "Without it, serve refuses to start so.",
    )

    # Logs and metrics
    log_level: str = Field(
        "INFO", description="Python logging level name (DEBUG, INFO, WARNING, ERROR)."
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description=(
            "Log format: text (one sentence per line) or json (one object per line, with each"
            " job, delivery or request event's fields)."
        ),
    )
    access_log: bool = Field(
        False,
        description="One log line per HTTP request answered by `ingest serve` "
        "(logger ingest.access: method, target, status, duration).",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Port on which `ingest worker` (and serve's worker process) serves "
        "GET /metrics and GET /healthz (0: none); `ingest serve` serves /metrics on its own "
        "port.",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        description="Address a worker's metrics port listens on (0.0.0.0 to be scraped from "
        "other hosts, or in a container); not INGEST_HOST, which is the API's.",
    )
    metrics_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="A connection to a worker's metrics port that sends nothing for this "
        "long (before or within its request) is closed.",
    )

    # Webhooks: a POST to a job's callback_url when it succeeds or dies (app/worker/webhooks.py)
    webhook_secret: SecretStr = Field(
        SecretStr(""),
        description=(
            "Key of the callbacks' HMAC-SHA256 Ingest-Signature header; empty: callbacks are "
            "sent unsigned."
        ),
    )
    webhook_max_attempts: int = Field(
        8,
        ge=1,
        le=100,
        description="POSTs a callback gets (2xx ends it) before its delivery is dead.",
    )
    webhook_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "Deadline in seconds for one callback POST: connect, send and the answer's "
            "headers (its body is never read)."
        ),
    )
    webhook_content_max_bytes: int = Field(
        1_048_576,
        ge=1,
        description="At most this many bytes (UTF-8) of a job's text or Markdown in its "
        "callback (a job's callback_content); longer is cut on a character boundary and "
        "says truncated.",
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        from app.text.database_url import parsed  # here: SQLAlchemy is no import of `ingest --help`

        parsed(value)
        return value

    @field_validator("transient_errors", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        return _split_names(value)

    @field_validator("worker_prefetch", "listen_database_url", mode="before")
    @classmethod
    def _unset(cls, value: object) -> object:
        return None if value == "" else value  # `INGEST_WORKER_PREFETCH=`: the default

    @field_validator("listen_database_url")
    @classmethod
    def _listen_url(cls, value: str | None) -> str | None:
        from app.text.database_url import parsed

        if value is not None and parsed(value).get_backend_name() not in ("postgresql", "postgres"):
            raise ValueError("INGEST_LISTEN_DATABASE_URL must be a postgresql:// URL")
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, value: object) -> object:
        return parse_api_keys(value) if isinstance(value, str) else value

    @field_validator("tenant_weights", mode="before")
    @classmethod
    def _weights(cls, value: object) -> object:
        return parse_tenant_weights(value) if isinstance(value, str) else value

    @field_validator("tenant_robots_txt", mode="before")
    @classmethod
    def _tenant_robots(cls, value: object) -> object:
        return parse_tenant_robots(value) if isinstance(value, str) else value

    @field_validator("tenant_weights")
    @classmethod
    def _weights_in_range(cls, value: dict[str, int]) -> dict[str, int]:
        # Given as a mapping (a test, `from_values`), not through the parse above.
        for tenant, weight in value.items():
            if not tenant or not 1 <= weight <= MAX_TENANT_WEIGHT:
                raise ValueError(
                    f"{tenant}:{weight}: a weight is a whole number from 1 to {MAX_TENANT_WEIGHT}"
                )
        return value

    def tenant_weight(self, tenant: str) -> int:
        """`tenant`'s weight (INGEST_TENANT_WEIGHTS; 1 for a tenant not named)."""
        return self.tenant_weights.get(tenant, 1)

    @field_validator("transient_status_codes", mode="before")
    @classmethod
    def _codes(cls, value: object) -> object:
        return parse_status_codes(value) if isinstance(value, str) else value

    @field_validator("allowed_ports", mode="before")
    @classmethod
    def _ports(cls, value: object) -> object:
        return parse_ports(value) if isinstance(value, str) else value

    @field_validator("allowed_hosts", "blocked_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: object) -> object:
        return _host_entries(value)

    @field_validator("allowed_hostnames", mode="before")
    @classmethod
    def _hostnames(cls, value: object) -> object:
        return _hostnames(value)

    @field_validator("extract_processes", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def extraction_processes(self) -> int:
        """INGEST_EXTRACT_PROCESSES, or one per core when it is not set."""
        return (os.cpu_count() or 1) if self.extract_processes is None else self.extract_processes

    @field_validator("allowed_content_types", mode="before")
    @classmethod
    def _content_types(cls, value: object) -> object:
        value = _split_names(value)
        return tuple(name.lower() for name in value) if isinstance(value, tuple) else value

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("INGEST_BACKOFF_MAX_SECONDS must be >= INGEST_BACKOFF_BASE_SECONDS")
        if self.fetch_timeout_seconds < self.connect_timeout_seconds:
            raise ValueError(
                "INGEST_FETCH_TIMEOUT_SECONDS must be >= INGEST_CONNECT_TIMEOUT_SECONDS"
            )
        return self

    def to_values(self) -> dict[str, Any]:
        """Every setting as JSON values, secrets included, for `from_values` in a process
        this one starts."""
        values = self.model_dump(mode="json")
        values["webhook_secret"] = self.webhook_secret.get_secret_value()
        return values

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "Settings":
        """The settings `to_values` gave, whatever this process's environment says."""
        return cls(_env_file=None, **values)

    @property
    def prefetch(self) -> int:
        """Jobs claimed ahead of the free slots: INGEST_WORKER_PREFETCH, by default two per
        slot, so a claim can take a slot's worth while as many still wait in the queue."""
        if self.worker_prefetch is None:
            return 2 * self.worker_concurrency
        return self.worker_prefetch
