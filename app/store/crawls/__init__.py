"""Crawls as stored: a crawl's row, its frontier (`crawl_urls`) and the jobs it made.

Submit inserts the crawl with its first URLs (the start pages, and the listings of their
sites: robots.txt, /sitemap.xml, /llms.txt). The crawl loop (`app.worker.crawler`) then
reads the listings (`listings`, `listing_read`), makes jobs of the pages found, a window
at a time (`expand`), and ends the crawl when nothing is left (`finish_if_done`). A page's
links reach the frontier with its outcome (`app.store.record`). Every URL is found once:
the frontier's primary key is (crawl, kind, URL key digest), and an insert of a URL found
before is skipped. Pure values in and out; no fetch, no parse, no scope (the worker's).
"""

from collections.abc import Callable
from datetime import datetime

from app.store.crawls.frontier import CrawlFrontier
from app.store.crawls.values import (
    Crawl,
    CrawlCounts,
    CrawlEnded,
    CrawlNotFound,
    FoundPage,
    Listing,
    RoundReport,
)
from app.store.database import Database

__all__ = [
    "Crawl",
    "CrawlCounts",
    "CrawlEnded",
    "CrawlNotFound",
    "CrawlStore",
    "FoundPage",
    "Listing",
    "RoundReport",
]


class CrawlStore(CrawlFrontier):
    """Crawls for the API, the CLI, the dashboard and the crawl loop: `CrawlReads`' reads,
    `CrawlCommands`' verbs and `CrawlFrontier`'s moves of the loop."""

    def __init__(
        self,
        database: Database,
        clock: Callable[[], datetime],
        on_submit: Callable[[int | None], None] = lambda _: None,
        webhook_max_attempts: int = 5,
    ) -> None:
        self.db = database
        self.clock = clock
        self.on_submit = on_submit
        """Called once jobs are made: wakes the worker in this process."""
        self.webhook_max_attempts = webhook_max_attempts
        """INGEST_WEBHOOK_MAX_ATTEMPTS: a crawl's callbacks' budget."""
