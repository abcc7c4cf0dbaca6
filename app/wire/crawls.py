"""The crawls as the API answers and the CLI prints them (`GET /crawls/{id}` and the rest).
Timestamps are ISO-8601 UTC."""

from datetime import datetime

from pydantic import BaseModel, Field

from app.model import CrawlMode, SitemapUse
from app.store.crawls import Crawl, CrawlCounts, FoundPage, RoundReport


class CrawlOptionsOut(BaseModel):
    limit: int
    max_depth: int
    include: list[str]
    exclude: list[str]
    subdomains: bool
    sitemap: SitemapUse
    feeds: bool
    llms_txt: bool
    robots_txt: bool
    refresh_every: int | None


class CrawlCountsOut(BaseModel):
    found: int = Field(description="Distinct pages found (start URLs, listings, links).")
    queued: int = Field(description="Pages made jobs of.")
    waiting: int = Field(description="Pages found, not yet made jobs of (the crawl's window).")
    pending: int
    running: int
    succeeded: int
    dead: int
    cancelled: int
    cut: int = Field(description="Pages found but never made jobs of: past `limit`, or cancelled.")
    robots: int = Field(
        description="Pages robots.txt disallows: left out as it was known when they were to "
        "be made jobs of, or jobs that found it when fetched (dead, reason `robots`)."
    )
    canonical: int = Field(
        description="URLs a fetched page named as its canonical: the same page, not fetched again."
    )
    listings_read: int = Field(description="Sitemaps, feeds, llms.txt and robots.txt read.")
    listings_failed: int = Field(description="Listings that could not be read (absent, 404...).")
    left_out: dict[str, int] = Field(
        description="URLs not followed, by reason: `off_site`, `excluded`, `too_deep`, "
        "`too_long`, `not_http`, `links_cut` (past INGEST_LINKS_MAX_PER_PAGE), "
        "`listing_cut` (past INGEST_CRAWL_LISTING_MAX_ENTRIES), `truncated` (listings cut "
        "at INGEST_CRAWL_LISTING_MAX_BYTES), `index_too_deep`."
    )

    @classmethod
    def of(cls, crawl: Crawl, counts: CrawlCounts) -> "CrawlCountsOut":
        pages, found = counts.pages, counts.found
        return cls(
            found=sum(found.values()),
            queued=crawl.made,
            waiting=found.get("new", 0),
            pending=pages.get("pending", 0),
            running=pages.get("running", 0),
            succeeded=pages.get("succeeded", 0),
            dead=pages.get("dead", 0),
            cancelled=pages.get("cancelled", 0),
            cut=found.get("cut", 0),
            robots=found.get("robots", 0) + pages.get("dead_robots", 0),
            canonical=found.get("canonical", 0),
            listings_read=counts.listings.get("read", 0),
            listings_failed=counts.listings.get("failed", 0),
            left_out=counts.left_out,
        )


class CrawlOut(BaseModel):
    id: str
    tenant: str
    mode: CrawlMode
    status: str = Field(
        description="`running`, then `completed` (a re-crawl: until its next round) or `cancelled`."
    )
    urls: list[str] = Field(description="The start URLs.")
    options: CrawlOptionsOut
    counts: CrawlCountsOut | None = Field(description="Read with one crawl, not in lists.")
    round: int = Field(description="The round under way, or the last (1: the first crawl).")
    next_round_at: datetime | None = Field(
        description="A re-crawl's next round (`refresh_every`), once a round has ended."
    )
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, crawl: Crawl, counts: CrawlCounts | None = None) -> "CrawlOut":
        options = crawl.options
        return cls(
            id=crawl.id,
            tenant=crawl.tenant,
            mode=crawl.mode,
            status=crawl.status.value,
            urls=list(crawl.seeds),
            options=CrawlOptionsOut(
                limit=options.limit,
                max_depth=options.max_depth,
                include=list(options.include),
                exclude=list(options.exclude),
                subdomains=options.subdomains,
                sitemap=options.sitemap,
                feeds=options.feeds,
                llms_txt=options.llms_txt,
                robots_txt=options.robots_txt,
                refresh_every=options.refresh_every,
            ),
            counts=None if counts is None else CrawlCountsOut.of(crawl, counts),
            round=crawl.round,
            next_round_at=crawl.next_round_at,
            created_at=crawl.created_at,
            updated_at=crawl.updated_at,
            finished_at=crawl.finished_at,
        )


class CrawlList(BaseModel):
    items: list[CrawlOut]


class FoundUrlOut(BaseModel):
    url: str
    state: str = Field(
        description="`new` (not made a job of yet), `queued` (a job: `job_id`), `cut`, or "
        "`canonical` (named canonical by another page)."
    )
    depth: int
    source: str = Field(description="seed, link, sitemap, robots, feed or llms.")
    found_on: str | None = Field(description="The page or listing that named it.")
    lastmod: str | None = Field(description="Its listing's date for it, as written.")
    job_id: str | None

    @classmethod
    def of(cls, page: FoundPage) -> "FoundUrlOut":
        return cls(**page.__dict__)


class FoundUrlPage(BaseModel):
    items: list[FoundUrlOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class RoundPagesOut(BaseModel):
    new: list[str]
    changed: list[str]
    removed: list[str]


class RoundOut(BaseModel):
    round: int
    started_at: datetime
    finished_at: datetime
    counts: dict[str, int] = Field(description="`new`, `changed` and `removed` pages.")
    pages: RoundPagesOut = Field(
        description="Their URLs, at most 1,000 of each (sorted); `counts` counts them all."
    )

    @classmethod
    def of(cls, report: RoundReport) -> "RoundOut":
        return cls(
            round=report.round,
            started_at=report.started_at,
            finished_at=report.finished_at,
            counts=report.counts,
            pages=RoundPagesOut(**report.pages),
        )
