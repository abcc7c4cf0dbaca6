"""Fetch one URL: stream it within limits, and say what happened.

`Fetcher.fetch` never raises for a failure of the remote side: it returns a `FetchResult`
or a classified `Failure` (see `app.policy` for the classification). It keeps no state
about jobs and never sleeps for backoff.
"""

import asyncio
import hashlib
from dataclasses import dataclass

import httpx

from app.content import TITLE_SCAN_BYTES, extract_title
from app.policy import Failure, classify_exception, classify_status
from app.settings import Settings
from app.states import ErrorKind


class FetchTimeout(Exception):
    """The whole fetch took longer than `fetch_timeout_seconds`."""


@dataclass(frozen=True)
class FetchResult:
    http_status: int
    final_url: str
    content_type: str | None
    bytes: int
    sha256: str
    title: str | None


class Fetcher:
    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None):
        self.settings = settings
        self.client = httpx.AsyncClient(
            # Proxy variables must not route fetches elsewhere.
            trust_env=False,
            follow_redirects=True,
            max_redirects=settings.max_redirects,
            timeout=httpx.Timeout(
                connect=settings.connect_timeout_seconds,
                read=settings.read_timeout_seconds,
                write=settings.read_timeout_seconds,
                pool=settings.connect_timeout_seconds,
            ),
            limits=httpx.Limits(
                max_connections=settings.worker_concurrency,
                max_keepalive_connections=settings.worker_concurrency,
            ),
            # Retries are ours to decide, per classification; the transport makes none.
            transport=transport or httpx.AsyncHTTPTransport(retries=0),
            headers={"User-Agent": settings.user_agent},
        )

    async def fetch(self, url: str) -> FetchResult | Failure:
        settings = self.settings
        try:
            # httpx's read timeout is per read; this bounds the whole exchange.
            async with asyncio.timeout(settings.fetch_timeout_seconds):
                return await self._get(url)
        except TimeoutError:
            exc = FetchTimeout(f"no complete answer within {settings.fetch_timeout_seconds:g}s")
            return classify_exception(exc, settings.transient_errors)
        except Exception as exc:  # every failure becomes a classified outcome
            return classify_exception(exc, settings.transient_errors)

    async def _get(self, url: str) -> FetchResult | Failure:
        async with self.client.stream("GET", url) as response:
            failure = classify_status(
                response.status_code,
                self.settings.transient_status_codes,
                response.headers.get("retry-after"),
            )
            if failure is not None:
                return failure
            digest = hashlib.sha256()
            size = 0
            head = bytearray()
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.settings.max_body_bytes:
                    return Failure(
                        ErrorKind.FATAL,
                        "BodyTooLarge",
                        f"body exceeds {self.settings.max_body_bytes} bytes",
                    )
                digest.update(chunk)
                if len(head) < TITLE_SCAN_BYTES:
                    head += chunk[: TITLE_SCAN_BYTES - len(head)]
            content_type = response.headers.get("content-type")
            return FetchResult(
                http_status=response.status_code,
                final_url=str(response.url),
                content_type=content_type,
                bytes=size,
                sha256=digest.hexdigest(),
                title=extract_title(bytes(head), content_type, response.charset_encoding),
            )

    async def aclose(self) -> None:
        await self.client.aclose()
