"""A crawl's listings read: robots.txt, sitemaps, feeds and llms.txt, fetched through the
fetcher's guarded clients (the SSRF guard, its timeouts, the User-Agent of every fetch) and
parsed in the extraction processes under their deadline, never on the loop
(`app.content.sitemaps`). Bounded: at most `max_bytes` read (and inflated, for a gzipped
sitemap), `max_entries` kept. Never raises for a failure of the remote side: it is the
listing's `Failure`, which the crawl counts.
"""

import asyncio

from app.content.sitemaps import (
    FoundUrl,
    KindHint,
    SiteListing,
    read_listing,
    robots_sitemaps,
)
from app.fetch.decoding import bounded_body
from app.fetch.fetcher import Fetcher, FetchTimeout
from app.fetch.guard import BlockedDestination
from app.fetch.pool import ExtractionFailed, ExtractionTimeout
from app.model import ErrorKind, Failure, UrlKind
from app.rules.policy import classify_exception

MAX_REDIRECTS = 5

_HINTS: dict[UrlKind, KindHint] = {
    UrlKind.SITEMAP: "sitemap",
    UrlKind.FEED: "feed",
    UrlKind.LLMS: "llms_txt",
}


class ListingReader:
    def __init__(self, fetcher: Fetcher, max_bytes: int, max_entries: int) -> None:
        self.fetcher = fetcher
        self.max_bytes = max_bytes
        """INGEST_CRAWL_LISTING_MAX_BYTES: read and inflated, at most."""
        self.max_entries = max_entries
        """INGEST_CRAWL_LISTING_MAX_ENTRIES: URLs kept of one listing, at most."""

    async def read(self, url: str, kind: UrlKind) -> SiteListing | Failure:
        """What the listing at `url` names, or why it could not be read."""
        body = await self._get(url)
        if isinstance(body, Failure):
            return body
        try:
            if kind is UrlKind.ROBOTS:
                return await self.fetcher.extraction.call(_robots_listing, body, self.max_entries)
            listing: SiteListing = await self.fetcher.extraction.call(
                read_listing, body, url, self.max_entries, self.max_bytes, _HINTS[kind]
            )
            return listing
        except (ExtractionTimeout, ExtractionFailed) as exc:
            return Failure(ErrorKind.FATAL, type(exc).__name__, str(exc))

    async def _get(self, url: str) -> bytes | Failure:
        limits = self.fetcher.limits
        try:
            async with asyncio.timeout(limits.fetch_timeout_seconds):
                with self.fetcher.client() as client:
                    request = client.build_request("GET", url)
                    for _ in range(MAX_REDIRECTS + 1):
                        response = await client.send(request, stream=True)
                        try:
                            if response.next_request is None:
                                if not 200 <= response.status_code < 300:
                                    return _answered(response.status_code)
                                return (await bounded_body(response, self.max_bytes))[
                                    : self.max_bytes
                                ]
                            request = response.next_request
                        finally:
                            await response.aclose()
            return Failure(ErrorKind.FATAL, "TooManyRedirects", f"over {MAX_REDIRECTS} redirects")
        except TimeoutError:
            exc: Exception = FetchTimeout(
                f"no complete answer within {limits.fetch_timeout_seconds:g}s"
            )
            return classify_exception(exc, limits.transient_errors)
        except BlockedDestination as exc:
            return Failure(ErrorKind.FATAL, "BlockedDestination", str(exc))
        except Exception as exc:  # every failure becomes a classified outcome
            return classify_exception(exc, limits.transient_errors)


def _answered(status: int) -> Failure:
    kind = ErrorKind.TRANSIENT if status >= 500 or status == 429 else ErrorKind.FATAL
    return Failure(kind, "HTTPStatusError", f"HTTP {status}", http_status=status)


def _robots_listing(body: bytes, max_entries: int) -> SiteListing:
    """robots.txt's `Sitemap:` lines, as a listing of sitemaps."""
    text = body.decode("utf-8", "replace")
    found = tuple(FoundUrl(url, None) for url in robots_sitemaps(text, max_entries))
    return SiteListing("sitemapindex", sitemaps=found)
