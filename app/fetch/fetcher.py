"""Fetch one URL safely: through the SSRF guard, within hard limits, and say what happened.

`Fetcher.fetch` never raises for a failure of the remote side: it returns a `Fetched`
(with the body, its title and main text) or a classified `Failure`. Its own refusals are
fatal, and named:

- BlockedDestination: the SSRF guard refused a hop (`app.fetch.guard`); nothing was sent there.
- UnsupportedContentType: not in INGEST_ALLOWED_CONTENT_TYPES (decided on the headers).
- UnsupportedContentEncoding: a coding we did not offer, or more than one.
- BodyTooLarge: more than INGEST_MAX_BODY_BYTES once decoded, counted while streaming.
- HeadersTooLarge: response headers past h11's 100 KiB.
- DecodingError: a gzip or deflate body that does not inflate.
- UnparseableContent: JSON that does not parse (`app.fetch.extract`).

Everything else is classified by `app.policy`. The fetcher keeps no state about jobs and
never sleeps for backoff.

Memory stays bounded whatever the server sends: redirects are followed here, closing each
3xx without reading its body (httpx would read it whole); bodies are decoded here rather
than by httpx, with zlib allowed at most DECODE_STEP bytes of output per step, so a
compression bomb is counted and stopped before it inflates; and a body is kept in memory up
to SPOOL_BYTES, on disk beyond that, until it is known to fit.
"""

import asyncio
import hashlib
import tempfile
import zlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import h11
import httpx

from app.fetch.decoding import ACCEPT_ENCODING, Inflater, codings
from app.fetch.extract import (
    Extracted,
    UnparseableContent,
    extract,
    header_charset,
    is_allowed_type,
    media_type,
)
from app.fetch.guard import (
    BlockedDestination,
    Destinations,
    GuardedTransport,
    Resolver,
    no_cookies,
    system_resolver,
)
from app.model import ErrorKind, Failure, Fetched
from app.policy import classify_exception, classify_status
from app.settings import Settings

SPOOL_BYTES = 1024 * 1024
CONTENT_TYPE_MAX_CHARS = 255
"""The jobs table's limit; a longer Content-Type is cut to its media type and charset."""


class FetchTimeout(Exception):
    """The whole fetch took longer than `fetch_timeout_seconds`."""


@dataclass(frozen=True)
class _Body:
    """A body read and counted, waiting (on disk past SPOOL_BYTES) for its turn to be parsed."""

    http_status: int
    final_url: str
    content_type: str | None
    spool: IO[bytes]
    sha256: str


def _fatal(type_: str, message: str) -> Failure:
    return Failure(ErrorKind.FATAL, type_, message)


class Fetcher:
    def __init__(
        self,
        settings: Settings,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ):
        """`transport` replaces the guarded one (unit tests); `resolver` is the guard's DNS."""
        self.settings = settings
        limits = httpx.Limits(
            max_connections=settings.worker_concurrency,
            max_keepalive_connections=settings.worker_concurrency,
        )
        self.client = httpx.AsyncClient(
            # Proxy variables must not route fetches around the guard.
            trust_env=False,
            # Followed in `_get`, one checked hop at a time.
            follow_redirects=False,
            # Shared by every job and tenant: no cookie goes from one fetch to another.
            cookies=no_cookies(),
            timeout=httpx.Timeout(
                connect=settings.connect_timeout_seconds,
                read=settings.read_timeout_seconds,
                write=settings.read_timeout_seconds,
                pool=settings.connect_timeout_seconds,
            ),
            transport=transport
            or GuardedTransport(Destinations.from_settings(settings), limits, resolver),
            headers={"User-Agent": settings.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
        )
        # One parse at a time per process, always on the same thread: a large page parses
        # into many times its size, and every new thread would keep a malloc arena of its own.
        self._parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-parse")

    async def fetch(self, url: str) -> Fetched | Failure:
        settings = self.settings
        try:
            # httpx's read timeout is per read; this bounds the whole exchange.
            async with asyncio.timeout(settings.fetch_timeout_seconds):
                fetched = await self._get(url)
            if isinstance(fetched, Failure):
                return fetched
            return await self._extract(fetched)
        except TimeoutError:
            exc = FetchTimeout(f"no complete answer within {settings.fetch_timeout_seconds:g}s")
            return classify_exception(exc, settings.transient_errors)
        except BlockedDestination as exc:
            return _fatal("BlockedDestination", str(exc))
        except Exception as exc:  # every failure becomes a classified outcome
            if _headers_too_large(exc):
                return _fatal("HeadersTooLarge", "response headers are too large")
            return classify_exception(exc, settings.transient_errors)

    async def _get(self, url: str) -> _Body | Failure:
        request = self.client.build_request("GET", url)
        for _ in range(self.settings.max_redirects + 1):
            response = await self.client.send(request, stream=True)
            try:
                if response.next_request is None:
                    return await self._answer(response)
                request = response.next_request
            finally:
                await response.aclose()  # a 3xx body is never read
        raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.", request=request)

    async def _answer(self, response: httpx.Response) -> _Body | Failure:
        settings = self.settings
        failure = classify_status(
            response.status_code,
            settings.transient_status_codes,
            response.headers.get("retry-after"),
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
        content_type = _capped(response.headers.get("content-type"))
        return _Body(
            response.status_code, str(response.url), content_type, spool, digest.hexdigest()
        )

    async def _read(
        self, stream: AsyncIterator[bytes], inflater: Inflater, spool: IO[bytes], digest: Any
    ) -> Failure | None:
        """Decode, count, hash and spool the body; a Failure if it is too large or corrupt."""
        limit = self.settings.max_body_bytes
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
        media = media_type(headers.get("content-type"))
        if not empty and not is_allowed_type(media, self.settings.allowed_content_types):
            return _fatal(
                "UnsupportedContentType",
                f"content type {media or '(none)'} is not allowed (INGEST_ALLOWED_CONTENT_TYPES)",
            )
        coding = codings(headers.get("content-encoding"))
        if len(coding) > 1 or (coding and coding[0] not in Inflater.CODINGS):
            return _fatal(
                "UnsupportedContentEncoding",
                f"content encoding {headers['content-encoding']!r} was not offered",
            )
        if not coding and length.isdigit() and int(length) > self.settings.max_body_bytes:
            return _too_large(self.settings.max_body_bytes)
        return None

    async def _extract(self, fetched: _Body) -> Fetched | Failure:
        # The body stays spooled until its turn, so bodies waiting here cost little memory.
        loop = asyncio.get_running_loop()
        with fetched.spool as spool:
            try:
                body, extracted = await loop.run_in_executor(
                    self._parser, _read_and_extract, spool, fetched.content_type
                )
            except UnparseableContent as exc:
                return _fatal("UnparseableContent", str(exc))
        return Fetched(
            http_status=fetched.http_status,
            final_url=fetched.final_url,
            content_type=fetched.content_type,
            bytes=len(body),
            sha256=fetched.sha256,
            title=extracted.title,
            text_length=len(extracted.text),
            body=body,
            text=extracted.text,
        )

    async def aclose(self) -> None:
        await self.client.aclose()
        self._parser.shutdown(wait=False, cancel_futures=True)


def _read_and_extract(spool: IO[bytes], content_type: str | None) -> tuple[bytes, Extracted]:
    spool.seek(0)
    body = spool.read()
    return body, extract(body, content_type)


def _too_large(limit: int) -> Failure:
    return _fatal("BodyTooLarge", f"body exceeds {limit} bytes")


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
