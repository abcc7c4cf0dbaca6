"""What the job worker does for a crawl's page beyond any job's: its crawl's options, read
once per crawl and kept (they never change after submit), for whether it obeys robots.txt
and for what its links add to the crawl (`app.rules.crawl_finds`), which the page's
success carries to the record (`Succeeded.finds`), so both are written in one transaction.
"""

from collections import OrderedDict
from dataclasses import replace

from app.model import Confirmed, CrawlOptions, Succeeded
from app.rules.crawl_finds import page_finds, scope_of
from app.rules.crawl_scope import Scope
from app.store.crawls import CrawlNotFound, CrawlStore

CRAWLS_KEPT = 1024
"""Crawls whose options a worker keeps, least recently used out first."""


class CrawlPages:
    def __init__(self, store: CrawlStore) -> None:
        self.store = store
        self._kept: OrderedDict[str, tuple[Scope, CrawlOptions] | None] = OrderedDict()

    async def options(self, crawl_id: str) -> tuple[Scope, CrawlOptions] | None:
        """The crawl's scope and options; None for a crawl deleted since."""
        if crawl_id in self._kept:
            self._kept.move_to_end(crawl_id)
            return self._kept[crawl_id]
        try:
            crawl = await self.store.get(crawl_id)
        except CrawlNotFound:
            kept = None
        else:
            kept = (scope_of(crawl.seeds, crawl.options), crawl.options)
        self._kept[crawl_id] = kept
        while len(self._kept) > CRAWLS_KEPT:
            self._kept.popitem(last=False)
        return kept

    async def obeys_robots(self, crawl_id: str) -> bool:
        kept = await self.options(crawl_id)
        return kept is not None and kept[1].robots_txt

    async def with_finds(self, outcome: Succeeded) -> Succeeded:
        """`outcome` of a crawl's page, carrying what its links add to the crawl."""
        page = outcome.lease.crawl
        kept = None if page is None else await self.options(page.crawl_id)
        if page is None or kept is None:
            return outcome
        scope, options = kept
        fetched = outcome.fetched
        finds = page_finds(
            page.crawl_id,
            scope,
            options,
            page,
            fetched.final_url,
            fetched.links,
            fetched.feeds,
            fetched.links_cut,
            fetched.metadata.canonical_url,
        )
        return replace(outcome, finds=finds)

    async def with_stored_finds(self, outcome: Confirmed) -> Confirmed:
        """`outcome` of a crawl's page found as stored (a re-crawl's refresh), carrying what
        its stored links find again: the round finds the URLs of an unchanged page too."""
        page = outcome.lease.crawl
        kept = None if page is None else await self.options(page.crawl_id)
        if page is None or kept is None:
            return outcome
        scope, options = kept
        links = await self.store.stored_links(outcome.lease.id)
        finds = page_finds(page.crawl_id, scope, options, page, outcome.lease.url, links)
        return replace(outcome, finds=finds)
