"""Fetch one URL safely: through the SSRF guard, within hard limits, and say what happened.

`Fetcher.fetch` never raises for a failure of the remote side: it returns a `Fetched` (the
body, its title and main text), an `Unmodified`, or a `Failure`; its own refusals are fatal
and listed on `Fetcher.fetch`, everything else is classified by `app.rules.policy`. It keeps
no state about jobs and never sleeps for backoff.

Memory stays bounded whatever the server sends: redirects are followed here, each 3xx closed
unread; bodies are decoded here (`app.fetch.decoding`), so a compression bomb is counted
before it inflates; a body waits on disk past SPOOL_BYTES until it is known to fit. What it
keeps of the answer's headers and its final URL is printable ASCII (`_printable_ascii`).
"""

import asyncio
import contextlib
import hashlib
import tempfile
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import IO, Any
from urllib.parse import urljoin

import h11
import httpx

from app.content.types import UnparseableContent, header_charset, is_allowed_type, media_type
from app.fetch.decoding import ACCEPT_ENCODING, Inflater, codings
from app.fetch.guard import (
    BlockedDestination,
    Destinations,
    GuardedTransport,
    Resolver,
    guarded_client,
    system_resolver,
)
from app.fetch.pool import ExtractionFailed, ExtractionPool, ExtractionTimeout, PoolSettings
from app.fetch.urls import MAX_URL_LENGTH, check_redirect
from app.model import (
    DEFAULT_TENANT,
    AttemptOutcome,
    ErrorKind,
    Failure,
    Fetched,
    Previous,
    Unmodified,
)
from app.rules.policy import classify_exception, classify_status

SPOOL_BYTES = 1024 * 1024
CONTENT_TYPE_MAX_CHARS = 255
"""The jobs table's limit; a longer Content-Type is cut to its media type and charset."""


class FetchTimeout(Exception):
    """The whole fetch took longer than `fetch_timeout_seconds`."""


class InvalidRedirect(Exception):
    """A redirect's Location is no URL a fetch can go to. (httpx says RemoteProtocolError for
    one that does not parse, as for a dropped connection; others would fail on the way to
    connecting, some as transient failures: faults of the page's, counted against its domain.)"""


LOCATION_SHOWN_CHARS = 200
"""Of a Location refused, this much is kept in the job's error."""


async def _check_location(response: httpx.Response) -> None:
    """Raise InvalidRedirect for a redirect whose Location is no URL a fetch can go to (a
    response hook: it runs before httpx builds the next request from the Location)."""
    if not response.has_redirect_location:
        return
    location = response.headers["location"]
    try:
        target = response.request.url.join(location)
    except httpx.InvalidURL as exc:
        why = f"which is no URL: {exc}"
    else:
        try:
            check_redirect(target)
            return
        except ValueError as exc:  # IDNA's errors among them
            why = f"which is no URL to fetch: {exc}"
    shown = _printable_ascii(location[:LOCATION_SHOWN_CHARS], response.headers.encoding)
    raise InvalidRedirect(f"HTTP {response.status_code} to Location {shown!r}, {why}")


@dataclass(frozen=True)
class _Body:
    """A body read and counted, waiting (on disk past SPOOL_BYTES) for its turn to be parsed."""

    http_status: int
    final_url: str
    content_type: str | None
    spool: IO[bytes]
    sha256: str
    etag: str | None
    last_modified: str | None
    canonical_url: str | None
    """The answer's `Link: <...>; rel="canonical"`, which wins over the page's own."""


POOL_SIZE = 8
"""Connections per HTTP pool. httpcore scans its whole pool, with a readability syscall per
idle connection, whenever a request starts or ends, so a request's CPU grows with the pool
(docs/design/fetch.md). The fetcher spreads its slots over pools of at most this many."""


def pool_sizes(slots: int) -> list[int]:
    """How `slots` connections are split into pools of at most POOL_SIZE, as evenly as can be."""
    pools = -(-slots // POOL_SIZE)
    return [slots // pools + (1 if i < slots % pools else 0) for i in range(pools)]


def _limits(size: int) -> httpx.Limits:
    return httpx.Limits(max_connections=size, max_keepalive_connections=size)


def _fatal(type_: str, message: str) -> Failure:
    return Failure(ErrorKind.FATAL, type_, message)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """What a fetch may take and keep, built once from the settings by the composition root
    (`app.runtime`); robots.txt is read within the same (`app.fetch.robots_reader`)."""

    connections: int
    """HTTP connections, one per worker slot (INGEST_WORKER_CONCURRENCY)."""
    connect_timeout_seconds: float
    read_timeout_seconds: float
    fetch_timeout_seconds: float
    max_redirects: int
    max_body_bytes: int
    allowed_content_types: tuple[str, ...]
    user_agent: str
    transient_errors: tuple[str, ...]
    """Exception names that are transient (`app.rules.policy.classify_exception`)."""
    transient_status_codes: frozenset[int]
    """HTTP statuses that are transient (`app.rules.policy.classify_status`)."""
    extraction: PoolSettings
    """The extraction processes' number and bounds (`app.fetch.pool`)."""


class Fetcher:
    def __init__(
        self,
        limits: FetchLimits,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
        destinations: Destinations | None = None,
    ):
        """`transport` replaces the guarded one (unit tests); `resolver` is the guard's DNS;
        `destinations` the guard's rules, as the composition root parsed them (needed
        unless `transport` is given)."""
        self.limits = limits
        if transport is not None:
            self.clients = [self._client(transport)]
        else:
            if destinations is None:
                raise ValueError("a guarded fetcher needs the destinations it may reach")
            self.clients = [
                self._client(GuardedTransport(destinations, _limits(size), resolver))
                for size in pool_sizes(limits.connections)
            ]
        self._busy = [0] * len(self.clients)
        self.extraction = ExtractionPool(limits.extraction)

    def _client(self, transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
        limits = self.limits
        # Redirects are followed in `_get`, one checked hop at a time (httpx reads a 3xx body).
        return guarded_client(
            transport,
            timeout=httpx.Timeout(
                connect=limits.connect_timeout_seconds,
                read=limits.read_timeout_seconds,
                write=limits.read_timeout_seconds,
                pool=limits.connect_timeout_seconds,
            ),
            headers={"User-Agent": limits.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
            event_hooks={"response": [_check_location]},
        )

    async def fetch(
        self, url: str, previous: Previous | None = None, tenant: str = DEFAULT_TENANT
    ) -> Fetched | Unmodified | Failure:
        """GET `url`. A refresh passes what the job's last success stored (`previous`): the
        GET is conditional on its validators, and a 304, or a body the very same as the one
        stored, is `Unmodified` (no body kept, nothing extracted). The body takes its turn at
        the extraction processes as `tenant`'s (the job's).

        The fetcher's own refusals, each a fatal `Failure` of that name:

        - BlockedDestination: the SSRF guard refused a hop (`app.fetch.guard`); nothing was
          sent there.
        - InvalidRedirect: a redirect whose Location is no URL a fetch can go to (does not
          parse, is not http(s), or has a bad port, userinfo or a host that is no address or
          DNS name: `app.fetch.urls.check_redirect`). The server answered: its domain is not
          failing.
        - UnsupportedContentType: not in INGEST_ALLOWED_CONTENT_TYPES (decided on the headers).
        - UnsupportedContentEncoding: a coding we did not offer, or more than one.
        - BodyTooLarge: more than INGEST_MAX_BODY_BYTES once decoded, counted while streaming.
        - HeadersTooLarge: response headers past h11's 100 KiB.
        - DecodingError: a gzip or deflate body that does not inflate.
        - UnparseableContent: JSON or a PDF that does not parse, a hostile page
          (`app.content`).
        - ExtractionTimeout, ExtractionFailed: a body that took too long or too much memory to
          extract (`app.fetch.pool`).
        """
        limits = self.limits
        try:
            # httpx's read timeout is per read; this bounds the whole exchange.
            async with asyncio.timeout(limits.fetch_timeout_seconds):
                fetched = await self._get(url, _conditional(previous))
            if isinstance(fetched, Failure | Unmodified):
                return fetched
            if previous is not None and fetched.sha256 == previous.body_sha256:
                with fetched.spool as spool:
                    size = spool.tell()
                return Unmodified(
                    AttemptOutcome.UNCHANGED,
                    fetched.http_status,
                    fetched.etag,
                    fetched.last_modified,
                    size,
                    fetched.sha256,
                )
            return await self._extract(fetched, tenant)
        except TimeoutError:
            exc = FetchTimeout(f"no complete answer within {limits.fetch_timeout_seconds:g}s")
            return classify_exception(exc, limits.transient_errors)
        except BlockedDestination as exc:
            return _fatal("BlockedDestination", str(exc))
        except InvalidRedirect as exc:
            return _fatal("InvalidRedirect", str(exc))
        except Exception as exc:  # every failure becomes a classified outcome
            if _headers_too_large(exc):
                return _fatal("HeadersTooLarge", "response headers are too large")
            return classify_exception(exc, limits.transient_errors)

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.AsyncClient]:
        """The guarded client of the least busy pool, counted busy while held: with no more
        fetches than slots, no pool has more than its size. (`app.fetch.robots_reader` reads
        robots.txt through it too: same guard, timeouts and User-Agent.)"""
        shard = self._busy.index(min(self._busy))
        self._busy[shard] += 1
        try:
            yield self.clients[shard]
        finally:
            self._busy[shard] -= 1

    async def _get(self, url: str, conditions: dict[str, str]) -> _Body | Unmodified | Failure:
        with self.client() as client:
            # The validators go on every hop: they belong to the URL the job names, whose
            # redirects the last success followed too.
            request = client.build_request("GET", url, headers=conditions)
            for _ in range(self.limits.max_redirects + 1):
                response = await client.send(request, stream=True)
                try:
                    if response.status_code == 304 and conditions:
                        return Unmodified(
                            AttemptOutcome.NOT_MODIFIED,
                            304,
                            _validator(response, "etag"),
                            _validator(response, "last-modified"),
                        )
                    if response.next_request is None:
                        return await self._answer(response)
                    request = response.next_request
                finally:
                    await response.aclose()  # a 3xx body is never read
            raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.", request=request)

    async def _answer(self, response: httpx.Response) -> _Body | Failure:
        failure = classify_status(
            response.status_code,
            self.limits.transient_status_codes,
            _header(response, "retry-after"),
        )
        if failure is None:
            failure = self._refuse_headers(response)
        if failure is not None:
            return failure
        coding = codings(response.headers.get("content-encoding"))
        inflater = Inflater(coding[0] if coding else None)
        stream = response.aiter_raw()
        digest = hashlib.sha256()
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        try:
            failure = await self._read(stream, inflater, spool, digest)
        except BaseException:
            spool.close()
            raise
        if failure is not None:
            spool.close()
            return failure
        content_type = _capped(_header(response, "content-type"))
        final_url = _printable_ascii(str(response.url))
        return _Body(
            response.status_code,
            final_url,
            content_type,
            spool,
            digest.hexdigest(),
            _validator(response, "etag"),
            _validator(response, "last-modified"),
            _canonical(response, final_url),
        )

    async def _read(
        self, stream: AsyncIterator[bytes], inflater: Inflater, spool: IO[bytes], digest: Any
    ) -> Failure | None:
        """Decode, count, hash and spool the body; a Failure if it is too large or corrupt."""
        limit = self.limits.max_body_bytes
        size = 0
        try:
            async for raw in stream:
                for chunk in inflater.feed(raw):
                    size += len(chunk)
                    if size > limit:
                        return _too_large(limit)
                    digest.update(chunk)
                    spool.write(chunk)
            rest = inflater.flush()
        except zlib.error as exc:
            return _fatal("DecodingError", f"{inflater.coding} body does not inflate: {exc}")
        if size + len(rest) > limit:
            return _too_large(limit)
        digest.update(rest)
        spool.write(rest)
        return None

    def _refuse_headers(self, response: httpx.Response) -> Failure | None:
        """Refuse on the headers alone, before reading a byte of the body."""
        headers = response.headers
        length = headers.get("content-length", "")
        empty = response.status_code in (204, 205) or length == "0"
        media = media_type(_header(response, "content-type"))
        if not empty and not is_allowed_type(media, self.limits.allowed_content_types):
            return _fatal(
                "UnsupportedContentType",
                f"content type {media or '(none)'} is not allowed (INGEST_ALLOWED_CONTENT_TYPES)",
            )
        coding = codings(headers.get("content-encoding"))
        if len(coding) > 1 or (coding and coding[0] not in Inflater.CODINGS):
            return _fatal(
                "UnsupportedContentEncoding",
                f"content encoding {_header(response, 'content-encoding')!r} was not offered",
            )
        if not coding and length.isdigit() and int(length) > self.limits.max_body_bytes:
            return _too_large(self.limits.max_body_bytes)
        return None

    async def _extract(self, fetched: _Body, tenant: str) -> Fetched | Failure:
        try:
            with fetched.spool as spool:
                async with self.extraction.turn(spool.tell(), tenant):
                    spool.seek(0)
                    body = spool.read()
                    extracted = await self.extraction.extract(
                        body, fetched.content_type, fetched.final_url, tenant
                    )
        except UnparseableContent as exc:
            return _fatal("UnparseableContent", str(exc))
        except ExtractionTimeout as exc:
            return _fatal("ExtractionTimeout", str(exc))
        except ExtractionFailed as exc:
            return _fatal("ExtractionFailed", str(exc))
        return Fetched(
            http_status=fetched.http_status,
            final_url=fetched.final_url,
            content_type=fetched.content_type,
            bytes=len(body),
            sha256=fetched.sha256,
            title=extracted.metadata.title,
            text_length=len(extracted.text),
            body=body,
            text=extracted.text,
            markdown=extracted.markdown,
            metadata=(
                replace(extracted.metadata, canonical_url=fetched.canonical_url)
                if fetched.canonical_url
                else extracted.metadata
            ),
            etag=fetched.etag,
            last_modified=fetched.last_modified,
            text_sha256=text_sha256(extracted.text),
            links=extracted.links,
            feeds=extracted.feeds,
            links_cut=extracted.links_cut,
        )

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
        self.extraction.close()


def text_sha256(text: str) -> str:
    """The content hash that tells a changed page: sha256 of its main text as UTF-8."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


VALIDATOR_MAX_CHARS = 255
"""An ETag or Last-Modified longer than this is not kept (nor sent back): no real one is."""


def _validator(response: httpx.Response, name: str) -> str | None:
    """The answer's ETag or Last-Modified, to send back on a refresh; None if absent or
    unfit to send back as it came (too long, or not printable ASCII)."""
    raw = response.headers.get(name)
    if raw is None or len(raw) > VALIDATOR_MAX_CHARS:
        return None
    value = _header(response, name)
    return value if value == raw and value else None


def _canonical(response: httpx.Response, base: str) -> str | None:
    """The URL an HTTP `Link` header names as the answer's canonical (RFC 6596), absolute;
    None if there is none, or it is no http(s) URL of at most MAX_URL_LENGTH."""
    if "link" not in response.headers:
        return None
    link = response.links.get("canonical", {}).get("url")
    if not link:
        return None
    try:
        absolute = _printable_ascii(urljoin(base, link))
    except ValueError:
        return None
    if len(absolute) > MAX_URL_LENGTH or not absolute.startswith(("http://", "https://")):
        return None
    return absolute


def _conditional(previous: Previous | None) -> dict[str, str]:
    """The headers that make a refresh's GET conditional on what its last success stored."""
    if previous is None:
        return {}
    headers = {}
    if previous.etag:
        headers["If-None-Match"] = previous.etag
    if previous.last_modified:
        headers["If-Modified-Since"] = previous.last_modified
    return headers


def _too_large(limit: int) -> Failure:
    return _fatal("BodyTooLarge", f"body exceeds {limit} bytes")


def _header(response: httpx.Response, name: str) -> str | None:
    """The header `name` of `response` as printable ASCII (`_printable_ascii`), or None."""
    value = response.headers.get(name)
    if value is None:
        return None
    # Encoded back to the bytes sent: httpx decodes every header of an answer alike, as
    # UTF-8 unless one of them is no UTF-8, then as Latin-1.
    return _printable_ascii(value, response.headers.encoding)


def _printable_ascii(value: str, encoding: str = "utf-8") -> str:
    """`value` in printable ASCII: control characters dropped, each byte outside ASCII of
    its `encoding` percent-encoded: `text/plain; x=€` is `text/plain; x=%E2%82%AC`. What the
    fetcher keeps of headers and URLs goes through here: those strings are served again as
    headers (which must be Latin-1) and printed on operators' terminals (where an ESC starts
    a command)."""
    if value.isascii() and value.isprintable():
        return value
    return "".join(
        chr(byte) if 0x20 <= byte < 0x7F else f"%{byte:02X}" if byte >= 0x80 else ""
        for byte in value.encode(encoding, "replace")
    )


def _capped(content_type: str | None) -> str | None:
    if content_type is None or len(content_type) <= CONTENT_TYPE_MAX_CHARS:
        return content_type
    charset = header_charset(content_type)
    capped = media_type(content_type) + (f"; charset={charset}" if charset else "")
    return capped[:CONTENT_TYPE_MAX_CHARS]


def _headers_too_large(exc: BaseException) -> bool:
    """h11 refuses a response head past its buffer limit with a 431 hint (httpcore: 100 KiB)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, h11.RemoteProtocolError) and current.error_status_hint == 431:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
