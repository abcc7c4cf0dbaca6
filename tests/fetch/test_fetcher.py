"""app.fetch.fetcher.Fetcher against mocked transports: results, classified failures, limits."""

import asyncio
import gzip
import hashlib
import inspect
import socket
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import h11
import httpx
import pytest
import respx

from app.content.extract import ExtractionLimits
from app.fetch.fetcher import Fetcher, FetchLimits
from app.fetch.guard import Destinations
from app.fetch.pool import ExtractionPool, PoolSettings
from app.model import (
    AttemptOutcome,
    ErrorKind,
    Failure,
    Fetched,
    PageMetadata,
    Previous,
    Unmodified,
)
from app.settings import DEFAULT_CONTENT_TYPES, DEFAULT_TRANSIENT_ERRORS

Handler = Callable[[httpx.Request], Any]
PAGE = b"<html><head><title>Hello  world</title></head><body>hi</body></html>"

LIMITS = FetchLimits(
    connections=32,
    connect_timeout_seconds=1.0,
    read_timeout_seconds=1.0,
    fetch_timeout_seconds=2.0,
    max_redirects=5,
    max_body_bytes=10 * 1024 * 1024,
    allowed_content_types=DEFAULT_CONTENT_TYPES,
    user_agent="ingest/0.1",
    transient_errors=DEFAULT_TRANSIENT_ERRORS,
    transient_status_codes=frozenset({408, *range(500, 600)}),
    extraction=PoolSettings(
        processes=1, timeout_seconds=15.0, memory_mb=1024, limits=ExtractionLimits()
    ),
)
PUBLIC = Destinations.parse(allow_private=False, ports=frozenset({80, 443, *range(1024, 65536)}))
"""The guard's default rules: public addresses, ports 80, 443 and 1024-65535."""


def limits(**changes: Any) -> FetchLimits:
    return replace(LIMITS, **changes)


class _Raw(httpx.AsyncByteStream):
    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.raw


def as_served(handler: Handler) -> Handler:
    """`handler`, its answers streamed as a server's are: httpx reads a Response built from
    bytes at once (decoded), so such an answer is sent again as its raw bytes, unread."""

    async def handle(request: httpx.Request) -> httpx.Response:
        response = handler(request)
        if inspect.isawaitable(response):
            response = await response
        if not response.is_stream_consumed:
            return response
        raw = b"".join(response.stream)
        return httpx.Response(response.status_code, headers=response.headers, stream=_Raw(raw))

    return handle


async def fetch(
    handler: Handler, url: str, previous: Previous | None = None, **overrides: Any
) -> Fetched | Unmodified | Failure:
    """Fetch `url` through a MockTransport that answers with `handler` (as a refresh of
    what `previous` says was stored, when given)."""
    transport = httpx.MockTransport(as_served(handler))
    fetcher = Fetcher(limits(**overrides), transport=transport)
    try:
        return await fetcher.fetch(url, previous)
    finally:
        await fetcher.aclose()


def html(body: bytes = PAGE, status: int = 200, charset: str = "utf-8") -> httpx.Response:
    return httpx.Response(
        status, content=body, headers={"Content-Type": f"text/html; charset={charset}"}
    )


def text(content: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    """A 200 text/plain answer; `content` may be bytes or an async iterator of them."""
    return httpx.Response(
        200, content=content, headers={"Content-Type": "text/plain", **(headers or {})}
    )


def raising(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


async def test_success_result_fields_after_a_redirect() -> None:
    """A 200 after a redirect reports the final URL, type, size, digest and title of the body."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/start":
            return httpx.Response(302, headers={"Location": "/final?x=1"})
        return html()

    result = await fetch(handler, "https://example.test/start")

    expected = Fetched(
        http_status=200,
        final_url="https://example.test/final?x=1",
        content_type="text/html; charset=utf-8",
        bytes=len(PAGE),
        sha256=hashlib.sha256(PAGE).hexdigest(),
        title="Hello world",
        text_length=len("hi"),
        body=PAGE,
        text="hi",
        markdown="# Hello world\n\nhi",
        metadata=PageMetadata(title="Hello world", charset="utf-8", charset_source="header"),
        text_sha256=hashlib.sha256(b"hi").hexdigest(),
    )
    assert expected == result


async def test_success_without_html_has_no_title() -> None:
    """A non-HTML 2xx body succeeds with no title."""
    body = b'{"title": "not this"}'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    result = await fetch(handler, "http://example.test/api")

    expected = Fetched(
        200,
        "http://example.test/api",
        "application/json",
        len(body),
        hashlib.sha256(body).hexdigest(),
        None,
        text_length=len(body),
        body=body,
        text=body.decode(),
        markdown=f"```json\n{body.decode()}\n```",
        metadata=PageMetadata(charset="utf-8", charset_source="detected"),
        text_sha256=hashlib.sha256(body).hexdigest(),
    )
    assert expected == result


@pytest.mark.parametrize(
    ("link", "canonical"),
    [
        pytest.param('<https://example.test/doc>; rel="canonical"', "https://example.test/doc"),
        pytest.param("</doc?v=2>; rel=canonical", "https://example.test/doc?v=2", id="relative"),
        pytest.param(
            '<https://example.test/a>; rel="alternate", <https://example.test/b>; rel="canonical"',
            "https://example.test/b",
            id="among-others",
        ),
        pytest.param('<javascript:alert(1)>; rel="canonical"', None, id="not-http"),
        pytest.param('<https://example.test/a>; rel="alternate"', None, id="no-canonical"),
        pytest.param(
            f'<https://example.test/{"x" * 3000}>; rel="canonical"', None, id="past-url-limit"
        ),
    ],
)
async def test_a_link_header_names_the_canonical_url(link: str, canonical: str | None) -> None:
    """An answer's `Link: <...>; rel="canonical"` (RFC 6596: how a PDF or any answer names
    its canonical) is the page's `canonical_url`, absolute, over the page's own."""
    page = b'<link rel="canonical" href="https://example.test/page-says"><title>T</title>x'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=page, headers={"Content-Type": "text/html", "Link": link}
        )

    result = await fetch(handler, "https://example.test/start")
    assert isinstance(result, Fetched)
    assert (canonical or "https://example.test/page-says") == result.metadata.canonical_url


async def test_empty_204() -> None:
    """A 204 succeeds with zero bytes, the digest of nothing and no content type."""
    result = await fetch(lambda request: httpx.Response(204), "http://example.test/")

    expected = Fetched(
        204,
        "http://example.test/",
        None,
        0,
        hashlib.sha256().hexdigest(),
        None,
        markdown="",
        metadata=PageMetadata(charset="utf-8", charset_source="detected"),
        text_sha256=hashlib.sha256(b"").hexdigest(),
    )
    assert expected == result


async def test_body_streamed_in_chunks_is_hashed_whole() -> None:
    """Size, digest and title cover every chunk, including a title split across chunks."""
    chunks = [b"<html><head><ti", b"tle>Split", b" title</title></head>", b"<body>x</body>"]

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"Content-Type": "text/html"})

    result = await fetch(handler, "http://example.test/")
    assert isinstance(result, Fetched)

    whole = b"".join(chunks)
    assert (len(whole), hashlib.sha256(whole).hexdigest(), "Split title") == (
        result.bytes,
        result.sha256,
        result.title,
    )


async def test_title_is_found_anywhere_in_the_body() -> None:
    """The whole body is parsed, so a <title> after the first 64 KiB is still found."""
    body = b"<!-- " + b" " * 64 * 1024 + b" --><title>Late</title>"

    result = await fetch(lambda request: html(body), "http://example.test/")
    assert isinstance(result, Fetched)

    assert (len(body), "Late") == (result.bytes, result.title)


async def test_title_uses_the_declared_charset() -> None:
    """The Content-Type charset decodes the title."""
    body = "<title>café</title>".encode("latin-1")

    result = await fetch(lambda request: html(body, charset="iso-8859-1"), "http://example.test/")
    assert isinstance(result, Fetched)

    assert "café" == result.title


async def test_unusable_charset_still_succeeds() -> None:
    """A 200 whose charset Python cannot decode with is still a success, not a dead job."""
    result = await fetch(lambda request: html(charset="idna"), "http://example.test/")
    assert isinstance(result, Fetched)

    assert (Fetched, "Hello world") == (type(result), result.title)


async def test_user_agent_header_is_sent() -> None:
    """Every fetch carries the configured User-Agent."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["User-Agent"])
        return html()

    await fetch(handler, "http://example.test/", user_agent="test-agent/9")

    assert ["test-agent/9"] == seen


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (404, ErrorKind.FATAL),
        (410, ErrorKind.FATAL),
        (403, ErrorKind.FATAL),
        (304, ErrorKind.FATAL),
        (408, ErrorKind.TRANSIENT),
        (500, ErrorKind.TRANSIENT),
        (503, ErrorKind.TRANSIENT),
        (429, ErrorKind.RATE_LIMITED),
    ],
)
async def test_error_status_is_a_classified_failure(status: int, kind: ErrorKind) -> None:
    """A non-2xx answer becomes a Failure carrying its status."""
    result = await fetch(lambda request: html(status=status), "http://example.test/")

    assert Failure(kind, "HTTPStatus", f"HTTP {status}", status) == result


async def test_status_codes_come_from_settings() -> None:
    """A 500 is fatal when the configured transient codes leave it out."""
    result = await fetch(
        lambda request: html(status=500),
        "http://example.test/",
        transient_status_codes=frozenset({503}),
    )

    assert Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 500", 500) == result


async def test_error_status_body_is_not_read() -> None:
    """A failure status is decided before the body is streamed."""
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        read.append(b"x")
        yield b"x"

    result = await fetch(lambda request: httpx.Response(503, content=body()), "http://e.test/")
    assert isinstance(result, Failure)

    assert (ErrorKind.TRANSIENT, []) == (result.kind, read)


@pytest.mark.parametrize(
    ("size", "expected_type"),
    [(99, Fetched), (100, Fetched), (101, Failure)],
)
async def test_body_size_limit(size: int, expected_type: type) -> None:
    """A body of exactly max_body_bytes is fine; one byte more is a failure."""
    result = await fetch(
        lambda request: text(b"x" * size),
        "http://example.test/",
        max_body_bytes=100,
    )

    assert expected_type is type(result)


async def test_body_over_the_limit_is_fatal_body_too_large() -> None:
    """A body over max_body_bytes is a fatal BodyTooLarge failure."""
    result = await fetch(
        lambda request: text(b"x" * 101),
        "http://example.test/",
        max_body_bytes=100,
    )

    assert Failure(ErrorKind.FATAL, "BodyTooLarge", "body exceeds 100 bytes") == result


async def test_endless_body_stops_at_the_limit() -> None:
    """An endless body is abandoned once it passes the limit, not read to the end."""
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        while True:
            sent += 1000
            yield b"x" * 1000

    result = await fetch(
        lambda request: text(endless()),
        "http://example.test/",
        max_body_bytes=10_000,
    )
    assert isinstance(result, Failure)

    assert ("BodyTooLarge", 11_000) == (result.type, sent)


async def test_limit_applies_to_the_decoded_body() -> None:
    """A small gzip body that inflates past the limit is too large."""
    compressed = gzip.compress(b"\0" * 100_000)

    def handler(request: httpx.Request) -> httpx.Response:
        return text(compressed, {"Content-Encoding": "gzip"})

    result = await fetch(handler, "http://example.test/", max_body_bytes=10_000)
    assert isinstance(result, Failure)

    assert (True, "BodyTooLarge") == (len(compressed) < 10_000, result.type)


@pytest.mark.parametrize(
    ("exc", "kind", "type_"),
    [
        (httpx.ConnectTimeout("connect timed out"), ErrorKind.TRANSIENT, "ConnectTimeout"),
        (httpx.ReadTimeout("read timed out"), ErrorKind.TRANSIENT, "ReadTimeout"),
        (httpx.ConnectError("refused"), ErrorKind.TRANSIENT, "ConnectError"),
        (httpx.RemoteProtocolError("dropped"), ErrorKind.TRANSIENT, "RemoteProtocolError"),
        (httpx.ReadError("reset"), ErrorKind.TRANSIENT, "ReadError"),
        (httpx.LocalProtocolError("bad header"), ErrorKind.FATAL, "LocalProtocolError"),
    ],
)
async def test_transport_errors_are_classified(exc: Exception, kind: ErrorKind, type_: str) -> None:
    """An exception from the transport becomes a classified Failure, not a raise."""
    result = await fetch(raising(exc), "http://example.test/")

    assert Failure(kind, type_, str(exc)) == result


async def test_name_not_found_from_the_transport_is_fatal() -> None:
    """A ConnectError caused by NXDOMAIN is fatal NameNotFound."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no such name") from socket.gaierror(socket.EAI_NONAME, "nx")

    result = await fetch(handler, "http://no-such-host.test/")

    assert Failure(ErrorKind.FATAL, "NameNotFound", "no such name") == result


async def test_unexpected_error_is_returned_not_raised() -> None:
    """A bug-like exception inside the fetch is a fatal Failure carrying the exception."""
    exc = RuntimeError("bug")

    result = await fetch(raising(exc), "http://example.test/")
    assert isinstance(result, Failure)

    assert (Failure(ErrorKind.FATAL, "RuntimeError", "bug"), exc) == (result, result.unexpected)


@pytest.mark.parametrize("max_redirects", [0, 2])
async def test_too_many_redirects_is_fatal(max_redirects: int) -> None:
    """A redirect chain longer than max_redirects is a fatal TooManyRedirects failure."""
    hits: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hits.append(request.url.path)
        return httpx.Response(302, headers={"Location": f"/hop{len(hits)}"})

    result = await fetch(handler, "http://example.test/hop0", max_redirects=max_redirects)
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "TooManyRedirects", None, max_redirects + 1) == (
        result.kind,
        result.type,
        result.unexpected,
        len(hits),
    )


async def test_redirects_within_the_limit_are_followed() -> None:
    """Exactly max_redirects redirects still end in success."""

    def handler(request: httpx.Request) -> httpx.Response:
        hop = int(request.url.path.removeprefix("/hop"))
        if hop < 2:
            return httpx.Response(301, headers={"Location": f"/hop{hop + 1}"})
        return html()

    result = await fetch(handler, "http://example.test/hop0", max_redirects=2)
    assert isinstance(result, Fetched)

    assert (200, "http://example.test/hop2") == (result.http_status, result.final_url)


async def test_total_deadline_turns_a_hung_server_into_fetch_timeout() -> None:
    """A server that never answers is cut off at fetch_timeout_seconds as transient FetchTimeout."""

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return html()

    started = time.monotonic()
    result = await fetch(
        handler, "http://example.test/", connect_timeout_seconds=0.1, fetch_timeout_seconds=0.2
    )
    elapsed = time.monotonic() - started

    expected = Failure(ErrorKind.TRANSIENT, "FetchTimeout", "no complete answer within 0.2s")
    # Not before the deadline; and cut off, not left to the handler's 30 s (the upper bound
    # leaves a busy machine seconds of slack).
    assert (expected, True) == (result, 0.15 < elapsed < 10.0)


async def test_total_deadline_covers_a_slow_body() -> None:
    """A body that trickles past the deadline is a FetchTimeout, even though reads keep coming."""

    async def trickle() -> AsyncIterator[bytes]:
        while True:
            yield b"x"
            await asyncio.sleep(0.05)

    started = time.monotonic()
    result = await fetch(
        lambda request: text(trickle()),
        "http://example.test/",
        connect_timeout_seconds=0.1,
        fetch_timeout_seconds=0.2,
    )
    elapsed = time.monotonic() - started

    # The body never ends: any end at all is the deadline's (a loose bound for a busy machine).
    assert isinstance(result, Failure)
    assert ("FetchTimeout", True) == (result.type, elapsed < 10.0)


# ---- through the default transport, mocked by respx --------------------------------------


@respx.mock
async def test_default_transport_success() -> None:
    """Without a transport argument the Fetcher uses httpx's own, and succeeds on a 200."""
    respx.get("https://example.test/page").mock(return_value=html())
    fetcher = Fetcher(LIMITS, destinations=PUBLIC)
    try:
        result = await fetcher.fetch("https://example.test/page")
    finally:
        await fetcher.aclose()

    assert isinstance(result, Fetched)
    assert (200, "Hello world", len(PAGE)) == (result.http_status, result.title, result.bytes)


@respx.mock
@pytest.mark.parametrize("exc_type", [httpx.ConnectTimeout, httpx.ReadTimeout, httpx.ConnectError])
async def test_default_transport_errors_are_transient(exc_type: type[Exception]) -> None:
    """Timeouts and connect errors raised by the default transport are transient."""
    respx.get("https://example.test/page").mock(side_effect=exc_type)
    fetcher = Fetcher(LIMITS, destinations=PUBLIC)
    try:
        result = await fetcher.fetch("https://example.test/page")
    finally:
        await fetcher.aclose()

    assert isinstance(result, Failure)
    assert (ErrorKind.TRANSIENT, exc_type.__name__) == (result.kind, result.type)


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("ftp://example.test/file", "URL scheme must be http or https"),
        ("javascript:alert(1)", "URL scheme must be http or https"),
        ("http://0x7f.1:99999999/", "URL port must be between 1 and 65535"),
        ("//e.test:65536/", "URL port must be between 1 and 65535"),
        ("http://2130706433:0/", "URL port must be between 1 and 65535"),
        ("http://user:pw@e.test/", "URL must not contain a user name or password"),
        ("http://a..b/", "URL host 'a..b' is no DNS name"),
        ("http://exa mple.test/", "URL host 'exa%20mple.test' is no DNS name"),
        ("http://1.2.3.4.5/", "URL host '1.2.3.4.5' is no IPv4 address"),
        ("http://xn--zz/", "Invalid A-label"),
    ],
)
async def test_a_redirect_to_no_url_to_fetch_is_a_fatal_invalid_redirect(
    location: str, why: str
) -> None:
    """A Location that parses but is no URL a fetch can go to (another scheme, a port out
    of range in any host form, userinfo, a host that is no name or address) is the page's
    fault, fatal InvalidRedirect, before any request to it."""
    requested: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requested.append(str(request.url))
        return httpx.Response(302, headers={"Location": location})

    result = await fetch(handler, "http://e.test/")
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "InvalidRedirect", None, ["http://e.test/"]) == (
        result.kind,
        result.type,
        result.unexpected,
        requested,
    )
    assert f"HTTP 302 to Location {location!r}, which is no URL to fetch: {why}" == result.message


@pytest.mark.parametrize("location", ["http://[::1", "http://\x1b[31m/"])
async def test_a_redirect_to_no_url_is_a_fatal_invalid_redirect(location: str) -> None:
    """A Location that does not parse is the page's fault, fatal InvalidRedirect (httpx says
    RemoteProtocolError, which is transient); the error shows it in printable ASCII."""
    result = await fetch(
        lambda request: httpx.Response(302, headers={"Location": location}), "http://e.test/"
    )
    assert isinstance(result, Failure)

    shown = location.replace("\x1b", "")
    assert (ErrorKind.FATAL, "InvalidRedirect", None) == (
        result.kind,
        result.type,
        result.http_status,
    )
    assert result.message.startswith(f"HTTP 302 to Location {shown!r}, which is no URL: ")


# ---- limits and refusals ------------------------------------------------------------------


async def stream(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def streamed(body: bytes, **headers: str) -> httpx.Response:
    """A 200 whose body streams (not read in advance, as a network answer)."""
    headers = {"Content-Type": "text/plain"} | {
        name.replace("_", "-").title(): value for name, value in headers.items()
    }
    return httpx.Response(200, content=stream(body), headers=headers)


async def test_only_bounded_encodings_are_offered() -> None:
    """Accept-Encoding offers gzip and deflate only: no encoding we cannot inflate in steps."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Accept-Encoding"])
        return html()

    await fetch(handler, "http://example.test/")

    assert ["gzip, deflate"] == seen


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, zlib.compress, lambda data: zlib.compress(data, wbits=-zlib.MAX_WBITS)],
    ids=["gzip", "deflate", "raw-deflate"],
)
async def test_encoded_bodies_are_decoded_and_hashed_decoded(compress: Callable) -> None:
    """gzip and deflate (zlib-wrapped or raw) bodies are stored, counted and hashed decoded."""
    body = b"hello " * 1000
    coding = "gzip" if compress is gzip.compress else "deflate"

    result = await fetch(
        lambda request: streamed(compress(body), content_encoding=coding), "http://e.test/"
    )
    assert isinstance(result, Fetched)

    assert (len(body), hashlib.sha256(body).hexdigest(), body) == (
        result.bytes,
        result.sha256,
        result.body,
    )


async def test_gzip_bomb_is_stopped_without_inflating_it() -> None:
    """100 MB of zeros in ~100 KB of gzip stops at the cap; memory never holds the inflation."""
    bomb = gzip.compress(b"\0" * 100_000_000, compresslevel=9)
    tracemalloc.start()
    try:
        result = await fetch(
            lambda request: streamed(bomb, content_encoding="gzip"),
            "http://e.test/",
            max_body_bytes=1_000_000,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert isinstance(result, Failure)
    assert ("BodyTooLarge", True) == (result.type, peak < 5_000_000), peak


@pytest.mark.parametrize("coding", ["gzip, gzip", "br", "zstd", "compress", "gzip, br"])
async def test_unoffered_or_chained_encodings_are_refused(coding: str) -> None:
    """An encoding we did not offer, or more than one layer, is fatal before reading."""
    result = await fetch(lambda request: streamed(b"x", content_encoding=coding), "http://e.test/")
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "UnsupportedContentEncoding") == (result.kind, result.type)


async def test_identity_encoding_is_no_encoding() -> None:
    """`Content-Encoding: identity` is the body as is."""
    result = await fetch(
        lambda request: streamed(b"plain", content_encoding="identity"), "http://e.test/"
    )
    assert isinstance(result, Fetched)

    assert b"plain" == result.body


async def test_corrupt_gzip_is_a_decoding_error() -> None:
    """A body that claims gzip but does not inflate is fatal DecodingError."""
    result = await fetch(
        lambda request: streamed(b"not gzip at all", content_encoding="gzip"), "http://e.test/"
    )
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "DecodingError", None) == (result.kind, result.type, result.unexpected)


async def test_content_length_over_the_cap_is_refused_unread() -> None:
    """A declared Content-Length over the cap is BodyTooLarge before a byte is read."""
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        read.append(b"x")
        yield b"x" * 200

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": "text/plain", "Content-Length": "200"}
        return httpx.Response(200, content=body(), headers=headers)

    result = await fetch(handler, "http://e.test/", max_body_bytes=100)
    assert isinstance(result, Failure)

    assert ("BodyTooLarge", []) == (result.type, read)


@pytest.mark.parametrize(
    "content_type", ["application/octet-stream", "image/png", "application/zip", None]
)
async def test_content_type_outside_the_allow_list_is_refused_unread(
    content_type: str | None,
) -> None:
    """A type not in INGEST_ALLOWED_CONTENT_TYPES (or none) is fatal before reading the body."""
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        read.append(b"x")
        yield b"\x89PNG"

    headers = {} if content_type is None else {"Content-Type": content_type}
    result = await fetch(
        lambda r: httpx.Response(200, content=body(), headers=headers), "http://e.test/"
    )
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "UnsupportedContentType", []) == (result.kind, result.type, read)


async def test_allowed_content_types_come_from_settings() -> None:
    """image/* in the allow-list lets an image through."""
    result = await fetch(
        lambda request: streamed(b"\x89PNG", content_type="image/png"),
        "http://e.test/",
        allowed_content_types=("image/*",),
    )
    assert isinstance(result, Fetched)

    assert (Fetched, b"\x89PNG") == (type(result), result.body)


async def test_invalid_json_is_unparseable() -> None:
    """A JSON answer that does not parse is fatal UnparseableContent."""
    result = await fetch(
        lambda request: streamed(b"{oops", content_type="application/json"), "http://e.test/"
    )
    assert isinstance(result, Failure)

    assert (ErrorKind.FATAL, "UnparseableContent") == (result.kind, result.type)


async def test_redirect_bodies_are_never_read() -> None:
    """An endless body on a 302 does not hold up (or fill up) the fetch: it is not read."""

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/start":
            return httpx.Response(302, headers={"Location": "/end"}, content=endless())
        return html()

    result = await fetch(handler, "http://e.test/start", max_body_bytes=1000)
    assert isinstance(result, Fetched)

    assert (200, "http://e.test/end") == (result.http_status, result.final_url)


async def test_headers_too_large_is_fatal() -> None:
    """h11's refusal of an oversized response head is fatal HeadersTooLarge, not unexpected."""

    def handler(request: httpx.Request) -> httpx.Response:
        cause = h11.RemoteProtocolError("Receive buffer too long", error_status_hint=431)
        raise httpx.RemoteProtocolError("Receive buffer too long") from cause

    result = await fetch(handler, "http://e.test/")

    assert Failure(ErrorKind.FATAL, "HeadersTooLarge", "response headers are too large") == result


async def test_overlong_content_type_is_cut_to_media_type_and_charset() -> None:
    """A Content-Type past 255 characters keeps its media type and charset only."""
    content_type = "text/plain; charset=utf-8; x=" + "a" * 300

    result = await fetch(
        lambda request: streamed(b"hi", content_type=content_type), "http://e.test/"
    )
    assert isinstance(result, Fetched)

    assert "text/plain; charset=utf-8" == result.content_type


async def test_header_strings_kept_are_printable_ascii() -> None:
    """What is kept of the headers (Content-Type, Retry-After) is printable ASCII: control
    characters dropped, each byte outside ASCII percent-encoded as it was sent (the UTF-8
    of `€`, though another header's byte 0xB2 is no UTF-8)."""

    def answer(request: httpx.Request) -> httpx.Response:
        status = 429 if request.url.path == "/limited" else 200
        headers = [
            (b"Content-Type", "text/plain; x=€\x1b[2J".encode()),
            (b"Retry-After", b"\x1b]0;x\x07\xb2"),
        ]
        return httpx.Response(status, headers=headers, content=b"hi")

    page = await fetch(answer, "http://e.test/page")
    limited = await fetch(answer, "http://e.test/limited")

    assert isinstance(page, Fetched) and isinstance(limited, Failure)
    assert ("text/plain; x=%E2%82%AC[2J", "]0;x%B2") == (page.content_type, limited.retry_after)


async def test_blocked_destination_is_fatal_and_sends_nothing() -> None:
    """With the default guard, a URL naming loopback is refused: fatal BlockedDestination."""
    fetcher = Fetcher(LIMITS, destinations=PUBLIC)
    try:
        result = await fetcher.fetch("http://127.0.0.1:9/")
    finally:
        await fetcher.aclose()

    assert (
        Failure(
            ErrorKind.FATAL, "BlockedDestination", "port 9 is not allowed (INGEST_ALLOWED_PORTS)"
        )
        == result
    )


# ---- refreshes ------------------------------------------------------------------------------

STORED = Previous(
    1, '"abc"', "Tue, 01 Dec 2026 08:00:00 GMT", hashlib.sha256(PAGE).hexdigest(), "t"
)


async def test_a_refresh_sends_the_stored_validators_on_every_hop() -> None:
    """If-None-Match and If-Modified-Since go with the GET and with the redirect's GET."""
    sent: list[tuple[str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(
            (request.headers.get("if-none-match"), request.headers.get("if-modified-since"))
        )
        if request.url.path == "/start":
            return httpx.Response(301, headers={"Location": "/final"})
        return httpx.Response(304)

    result = await fetch(handler, "https://example.test/start", STORED)
    assert [(STORED.etag, STORED.last_modified)] * 2 == sent
    assert Unmodified(AttemptOutcome.NOT_MODIFIED, 304, None, None) == result


async def test_a_304_keeps_the_validators_it_sends() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(304, headers={"ETag": '"abd"', "Last-Modified": "x"})

    result = await fetch(handler, "https://example.test/", STORED)
    assert Unmodified(AttemptOutcome.NOT_MODIFIED, 304, '"abd"', "x") == result


async def test_a_first_fetch_sends_no_validators_and_a_304_is_fatal() -> None:
    """Unasked, a 304 is no answer to use: fatal, as any other non-2xx that is not transient."""
    sent: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("if-none-match"))
        return httpx.Response(304)

    result = await fetch(handler, "https://example.test/")
    assert [None] == sent
    assert isinstance(result, Failure) and (ErrorKind.FATAL, 304) == (
        result.kind,
        result.http_status,
    )


async def test_the_very_body_stored_is_unchanged_and_not_extracted(monkeypatch) -> None:
    """A 200 with the body whose sha256 the last success stored: `Unmodified` (unchanged),
    with its size and hash, and the extraction never asked."""

    async def no_extraction(*_: object) -> None:
        raise AssertionError("extracted")

    monkeypatch.setattr(ExtractionPool, "extract", no_extraction)
    result = await fetch(lambda request: html(), "https://example.test/", STORED)
    digest = hashlib.sha256(PAGE).hexdigest()
    assert Unmodified(AttemptOutcome.UNCHANGED, 200, None, None, len(PAGE), digest) == result


@pytest.mark.parametrize(
    ("etag", "kept"),
    [
        (b'"ok"', '"ok"'),
        (b'W/"weak"', 'W/"weak"'),
        (b"x" * 256, None),
        ("caf\u00e9".encode(), None),
    ],
    ids=["strong", "weak", "too long", "not ascii"],
)
async def test_only_an_etag_fit_to_send_back_is_kept(etag: bytes, kept: str | None) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        headers = [(b"Content-Type", b"text/html; charset=utf-8"), (b"ETag", etag)]
        return httpx.Response(200, content=PAGE, headers=headers)

    result = await fetch(handler, "https://example.test/")
    assert isinstance(result, Fetched) and kept == result.etag
