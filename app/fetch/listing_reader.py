"""A crawl's listings read: robots.txt, sitemaps, feeds and llms.txt, fetched through the
fetcher's guarded clients (the SSRF guard, its timeouts, the User-Agent of every fetch) and
parsed in the extraction processes under their deadline, never on the loop
(`app.content.sitemaps`). Bounded: at most `max_bytes` read (and inflated, for a gzipped
sitemap), `max_entries` kept. Never raises for a failure of the remote side: it is the
listing's `Failure`, which the crawl counts.
"""

import httpx

from app.content.sitemaps import (
    FoundUrl,
    KindHint,
    SiteListing,
    read_listing,
    robots_sitemaps,
)
from app.fetch.decoding import bounded_body
from app.fetch.fetcher import Fetcher
from app.fetch.pool import ExtractionFailed, ExtractionTimeout
from app.fetch.small_reads import read_small
from app.model import ErrorKind, Failure, UrlKind
from app.rules.policy import classify_status

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
        read = await read_small(self.fetcher, url, self._body, MAX_REDIRECTS)
        if read is None:
            return Failure(ErrorKind.FATAL, "TooManyRedirects", f"over {MAX_REDIRECTS} redirects")
        return read

    async def _body(self, response: httpx.Response) -> bytes | Failure:
        """A 2xx's body, at most `max_bytes`; any other answer, the failure it makes."""
        # A listing not read is counted, not tried again: no Retry-After to keep.
        failure = classify_status(response.status_code, self.fetcher.limits.transient_status_codes)
        if failure is not None:
            return failure
        return (await bounded_body(response, self.max_bytes))[: self.max_bytes]


def _robots_listing(body: bytes, max_entries: int) -> SiteListing:
    """robots.txt's `Sitemap:` lines, as a listing of sitemaps."""
    text = body.decode("utf-8", "replace")
    found = tuple(FoundUrl(url, None) for url in robots_sitemaps(text, max_entries))
    return SiteListing("sitemapindex", sitemaps=found)
