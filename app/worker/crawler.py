"""The crawl loop: moves every running crawl on, beside the worker, on a loop of its own.

Each tick begins the rounds of re-crawls that came due, then, for each running crawl:
reads a few of the listings it found (robots.txt, sitemaps, feeds, llms.txt:
`app.fetch.listing_reader`) and adds what they name to its frontier
(`app.rules.crawl_finds`); makes jobs of its next pages, up to a window of pending ones
(`CrawlStore.expand`: however large a crawl, the claim sees its window, the rest waits in
its frontier); ends its round once nothing is left. The pages are ordinary jobs, claimed,
fetched and recorded by the worker; their links reach the frontier with their outcomes.
Every worker runs one; the crawl row's lock keeps two from making a page twice. It issues
no SQL (`app.store.crawls`).
"""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from app.content.sitemaps import SiteListing
from app.fetch.listing_reader import ListingReader
from app.fetch.robots_reader import RobotsTxt
from app.model import CrawlMode, Failure, Finds
from app.rules.crawl_finds import listing_finds, scope_of
from app.rules.crawl_scope import Scope
from app.store.crawls import Crawl, CrawlStore, Listing
from app.text.wording import counted
from app.worker.loop import Loop

log = logging.getLogger("ingest.worker")

CRAWL_INTERVAL_SECONDS = 0.25
"""How often running crawls are moved on (at most; INGEST_POLL_INTERVAL_SECONDS if shorter)."""
CRAWL_IDLE_SECONDS = 5.0
"""How often a loop with no running crawl looks for one: a crawl submitted to this process
(or to the `ingest serve` whose worker process this is) wakes it at once; one submitted
to another host's API is found within this."""

LISTINGS_PER_TICK = 4
"""Listings of one crawl read at once, per tick: a site's sitemaps are read a few at a time."""


@dataclass(frozen=True, slots=True)
class CrawlRules:
    """The crawl loop's settings, built once from the settings by the composition root."""

    window: int
    """Pending jobs a crawl keeps in the queue, at most (INGEST_CRAWL_WINDOW)."""
    interval_seconds: float
    """How often running crawls are moved on."""
    idle_seconds: float
    """How often an idle loop looks for a new crawl."""
    listing_max_bytes: int
    """INGEST_CRAWL_LISTING_MAX_BYTES."""
    listing_max_entries: int
    """INGEST_CRAWL_LISTING_MAX_ENTRIES."""


class Crawler:
    def __init__(
        self,
        store: CrawlStore,
        reader: ListingReader,
        rules: CrawlRules,
        worker_id: str,
        clock: Callable[[], datetime],
        robots: RobotsTxt | None = None,
    ) -> None:
        """`robots`: the worker's robots.txt reader, whose rules kept leave a crawl's pages
        they disallow out of its jobs (none when absent: each fetch asks)."""
        self.store = store
        self.clock = clock
        self.robots = robots
        self.reader = reader
        self.rules = rules
        self.worker_id = worker_id
        self.loop = Loop(f"crawler {worker_id}", self.tick, log, reports=False)

    async def run(self) -> None:
        await self.loop.run()

    def stop(self) -> None:
        self.loop.stop()

    def notify(self) -> None:
        """A crawl was submitted: move it on now."""
        self.loop.notify()

    async def tick(self) -> float:
        if begun := await self.store.start_due_rounds():
            log.info("crawler %s: %s of re-crawls begun", self.worker_id, counted(begun, "round"))
        running = await self.store.running()
        for crawl in running:
            if self.loop.stopping.is_set():
                break
            await self._advance(crawl)
        if running:
            return self.rules.interval_seconds
        next_round = await self.store.next_round_at()
        if next_round is None:
            return self.rules.idle_seconds
        until = (next_round - self.clock()).total_seconds()
        return min(self.rules.idle_seconds, max(until, 0.0))

    async def _advance(self, crawl: Crawl) -> None:
        listings = await self.store.listings(crawl.id, LISTINGS_PER_TICK)
        if listings:
            scope = scope_of(crawl.seeds, crawl.options)
            await asyncio.gather(*(self._read(crawl, scope, listing) for listing in listings))
        if crawl.mode is CrawlMode.CRAWL:
            robots = self.robots
            disallowed = robots.known_to_disallow if robots is not None else _never
            await self.store.expand(crawl, self.rules.window, disallowed)
        if await self.store.finish_if_done(crawl):
            log.info("crawler %s: crawl %s completed", self.worker_id, crawl.id)

    async def _read(self, crawl: Crawl, scope: Scope, listing: Listing) -> None:
        read = await self.reader.read(listing.url, listing.kind)
        if isinstance(read, Failure):
            log.info(
                "crawler %s: crawl %s: %s %s not read (%s)",
                self.worker_id,
                crawl.id,
                listing.kind.value,
                listing.url,
                read.label,
            )
            await self.store.listing_read(listing, Finds(crawl.id), failed=True)
            return
        finds = _finds(crawl, scope, listing, read)
        if finds.urls:
            log.info(
                "crawler %s: crawl %s: %s %s named %s",
                self.worker_id,
                crawl.id,
                listing.kind.value,
                listing.url,
                counted(len(finds.urls), "URL"),
            )
        await self.store.listing_read(listing, finds, failed=False)


def _never(_: str) -> bool:
    return False


def _finds(crawl: Crawl, scope: Scope, listing: Listing, read: SiteListing) -> Finds:
    return listing_finds(
        crawl.id,
        scope,
        listing.kind,
        listing.url,
        listing.depth,
        [(found.url, found.lastmod) for found in read.urls],
        [(found.url, found.lastmod) for found in read.sitemaps],
        read.cut,
        read.truncated,
    )
