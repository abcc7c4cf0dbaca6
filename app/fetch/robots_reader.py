"""robots.txt read and kept per origin (INGEST_ROBOTS_TXT=obey): the I/O beside `app.rules.robots`.

`RobotsTxt.check(url)` says whether a job may go on to fetch `url`. The origin's robots.txt
(scheme, host and port, as RFC 9309 keys it) is read at most once per
INGEST_ROBOTS_CACHE_SECONDS per process, through the fetcher's guarded clients, and parsed in
the extraction processes, never on the loop. What the answer means is `app.rules.robots`'s.

The rules are kept in this process's memory (`RobotsTxt`), not in the database; their
Crawl-delay, which every worker's claim needs, goes to the domains table when read (the
caller writes it: `RobotsCheck.read`). Never raises for a failure of the remote side.
"""

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx

from app.clock import Clock
from app.fetch.decoding import bounded_body
from app.fetch.fetcher import Fetcher
from app.fetch.pool import ExtractionFailed, ExtractionPool, ExtractionTimeout
from app.fetch.small_reads import read_small
from app.model import ErrorKind, Failure
from app.rules.policy import unexpected
from app.rules.robots import (
    ALLOW_ALL,
    RobotsRules,
    parse,
    product_token,
    refusal,
    rules_from_answer,
    rules_from_failure,
    rules_not_parsed,
    while_unreachable,
)
from app.rules.url_key import DEFAULT_PORTS, plain_url

log = logging.getLogger("ingest.worker")

CACHE_ORIGINS = 10_000
CACHE_BYTES = 64 * 1024 * 1024
"""What this process keeps of robots.txt at most, least recently used out first: the rules
parsed from it take several times its size in memory."""

MAX_REDIRECTS = 5
"""RFC 9309 2.3.1.2: follow at least five; past them robots.txt is unavailable."""


@dataclass(frozen=True)
class RobotsCheck:
    """What a job's check found."""

    refusal: Failure | None
    """The failure the job takes instead of its fetch (disallowed, or robots.txt not read
    now); None: fetch it."""
    read: RobotsRules | None = None
    """The rules, when this check read robots.txt afresh: the caller keeps its Crawl-delay
    where every claim sees it."""


@dataclass(frozen=True, slots=True)
class RobotsLimits:
    """How robots.txt is read and kept, built once from the settings by the composition root
    (`app.runtime`); the rest (timeouts, User-Agent, what is transient) is the fetcher's
    (`FetchLimits`)."""

    cache_seconds: float
    """How long a robots.txt read is kept (INGEST_ROBOTS_CACHE_SECONDS)."""
    max_bytes: int
    """Of a robots.txt, this many bytes are read (INGEST_ROBOTS_MAX_BYTES)."""
    unreachable_max_seconds: float
    """A robots.txt failing this long is taken as absent (INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS)."""
    obey: bool = True
    """Whether a tenant not named in `tenants` obeys robots.txt (INGEST_ROBOTS_TXT)."""
    tenants: Mapping[str, bool] = field(default_factory=dict)
    """The tenants whose rule differs: True obeys (INGEST_TENANT_ROBOTS_TXT)."""

    @property
    def anyone_obeys(self) -> bool:
        """Whether a tenant's jobs obey robots.txt (crawls' pages always may)."""
        return self.obey or any(self.tenants.values())

    def obeyed_by(self, tenant: str) -> bool:
        """Whether `tenant`'s jobs ask robots.txt before their fetch."""
        return self.tenants.get(tenant, self.obey)


@dataclass(frozen=True)
class _Kept:
    rules: RobotsRules
    size: int
    until: datetime


class RobotsTxt:
    """Each origin's robots.txt, read through the fetcher's own guarded clients (the SSRF
    guard, its timeouts, the User-Agent of every fetch), at most INGEST_ROBOTS_MAX_BYTES of it
    and up to MAX_REDIRECTS redirects. Jobs of one origin that ask while it is being read
    wait for that one read; a 2xx's rules are parsed in the extraction processes, under their
    deadline (`ExtractionPool.call`).

    The rules are kept in an LRU of at most CACHE_ORIGINS origins and CACHE_BYTES of
    robots.txt. Every fetch needs them before it starts: a database read per fetch would
    outweigh the claim, and up to INGEST_ROBOTS_MAX_BYTES a domain does not belong in its
    row. So each worker process reads an origin's robots.txt once per
    INGEST_ROBOTS_CACHE_SECONDS; a process that starts reads it again.

    A robots.txt that cannot be read is not kept: the next job of the origin asks again (its
    domain's failures pause it as any fetch's do). When the first of an unbroken run of such
    failures was is kept (bounded like the rules), for INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        limits: RobotsLimits,
        clock: Clock,
        parsing: ExtractionPool | None = None,
    ) -> None:
        self.fetcher = fetcher
        self.limits = limits
        self.clock = clock
        self.parsing = fetcher.extraction if parsing is None else parsing
        """Where a robots.txt is parsed: the fetcher's extraction processes (tests give another)."""
        self.token = product_token(fetcher.limits.user_agent)
        """How robots.txt groups name this crawler: the User-Agent's product token."""
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._kept_bytes = 0
        self._failing_since: OrderedDict[str, datetime] = OrderedDict()
        self._reading: dict[str, asyncio.Task[RobotsRules | Failure]] = {}

    async def check(self, url: str) -> RobotsCheck:
        """May `url` be fetched now, by its origin's robots.txt?"""
        try:
            robots_url = _robots_url(url)
        except (httpx.InvalidURL, ValueError):
            return RobotsCheck(None)  # the page's own fetch says what is wrong with its URL
        kept = self._kept.get(robots_url)
        if kept is not None and kept.until > self.clock():
            self._kept.move_to_end(robots_url)
            return RobotsCheck(refusal(kept.rules, url, self.token))
        task = self._reading.get(robots_url)
        fresh = task is None
        if task is None:
            task = asyncio.create_task(self._read_and_keep(robots_url))
            self._reading[robots_url] = task
        # Shielded: a job cancelled while waiting does not cancel the others' read.
        rules = await asyncio.shield(task)
        if isinstance(rules, Failure):
            return RobotsCheck(rules)
        return RobotsCheck(refusal(rules, url, self.token), rules if fresh else None)

    def known_to_disallow(self, url: str) -> bool:
        """Whether the robots.txt kept for `url`'s origin disallows it; False when none is
        kept (not read yet by this process, or expired: the fetch asks). A read only: safe
        from another thread than the loop's (a crawl's expansion runs in SQLite's writer)."""
        try:
            kept = self._kept.get(_robots_url(url))
        except (httpx.InvalidURL, ValueError):
            return False
        if kept is None or kept.until <= self.clock():
            return False
        return not kept.rules.allows(url, self.token)

    async def _read_and_keep(self, robots_url: str) -> RobotsRules | Failure:
        try:
            try:
                answer, size = await self._read(robots_url)
                if isinstance(answer, bytes):
                    answer = await self._parse(robots_url, answer)
            except Exception as exc:  # a bug: the jobs waiting fail (fatal, traced)
                return unexpected(exc)
            now = self.clock()
            if isinstance(answer, Failure):
                if answer.kind is not ErrorKind.TRANSIENT:
                    return answer
                since = self._failing_since.setdefault(robots_url, now)
                _bound(self._failing_since, CACHE_ORIGINS)
                answer = while_unreachable(answer, since, now, self.limits.unreachable_max_seconds)
                if isinstance(answer, Failure):
                    return answer
            self._failing_since.pop(robots_url, None)
            self._keep(robots_url, answer, size, now)
            return answer
        finally:
            self._reading.pop(robots_url, None)

    def _keep(self, robots_url: str, rules: RobotsRules, size: int, now: datetime) -> None:
        until = now + timedelta(seconds=self.limits.cache_seconds)
        old = self._kept.pop(robots_url, None)
        self._kept_bytes += size - (old.size if old else 0)
        self._kept[robots_url] = _Kept(rules, size, until)
        while len(self._kept) > CACHE_ORIGINS or self._kept_bytes > CACHE_BYTES:
            _, dropped = self._kept.popitem(last=False)
            self._kept_bytes -= dropped.size

    async def _parse(self, robots_url: str, body: bytes) -> RobotsRules | Failure:
        """A 2xx's rules for this crawler, parsed off the loop; not parsed within the deadline
        (or its process died), robots.txt is unreachable."""
        try:
            rules = await self.parsing.call(parse, body, self.token)
        except (ExtractionTimeout, ExtractionFailed) as exc:
            log.warning("robots.txt %s not parsed: %s", robots_url, exc)
            return rules_not_parsed(str(exc))
        if rules.cut:
            log.warning("robots.txt %s: %s", robots_url, rules.cut)
        return rules

    async def _read(self, robots_url: str) -> tuple[bytes | RobotsRules | Failure, int]:
        """GET robots.txt: a 2xx's body (its rules not yet parsed) or the rules any other
        answer gives, and the bytes read; or the failure it makes."""
        limit = self.limits.max_bytes
        read = await read_small(
            self.fetcher, robots_url, lambda r: _answer(r, limit), MAX_REDIRECTS
        )
        if read is None:
            return ALLOW_ALL, 0
        if isinstance(read, Failure):
            return rules_from_failure(read), 0
        return read


def _robots_url(url: str) -> str:
    """The robots.txt of `url`'s origin (its scheme, host and port): also the cache's key."""
    plain = plain_url(url)  # read from the text where httpx would read the same: every job asks
    if plain is not None:
        default = plain.port is None or plain.port == DEFAULT_PORTS[plain.scheme]
        port = "" if default else f":{plain.port}"
        return f"{plain.scheme}://{plain.host}{port}/robots.txt"
    return str(
        httpx.URL(url).copy_with(path="/robots.txt", query=None, fragment=None, userinfo=b"")
    )


async def _answer(
    response: httpx.Response, limit: int
) -> tuple[bytes | RobotsRules | Failure, int]:
    if 200 <= response.status_code < 300:
        body = await _body(response, limit)
        return body, len(body)
    retry_after = response.headers.get("retry-after")
    if retry_after is not None and not (retry_after.isascii() and retry_after.isprintable()):
        retry_after = None
    return rules_from_answer(response.status_code, b"", retry_after), 0


async def _body(response: httpx.Response, limit: int) -> bytes:
    """The body decoded, up to `limit` bytes; cut there, the last line (cut short) is dropped,
    so that no rule is read shorter than written."""
    body = await bounded_body(response, limit)
    return _cut(body, limit) if len(body) > limit else body


def _cut(body: bytes, limit: int) -> bytes:
    kept = body[:limit]
    return kept[: kept.rfind(b"\n") + 1]


def _bound(entries: OrderedDict[str, datetime], most: int) -> None:
    while len(entries) > most:
        entries.popitem(last=False)
