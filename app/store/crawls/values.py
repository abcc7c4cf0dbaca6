"""A crawl as the store reads it, and the values its reads give: pure, no SQL run."""

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from app.model import (
    CallbackContent,
    CrawlMode,
    CrawlOptions,
    CrawlStatus,
    FoundVia,
    FrontierUrl,
    NewCrawl,
    SitemapUse,
    UrlKind,
)
from app.store.tables import (
    crawls,
)


class CrawlNotFound(LookupError):
    """No crawl of that id (or another tenant's)."""


class CrawlEnded(Exception):
    """The crawl is completed or cancelled already."""


@dataclass(frozen=True)
class Crawl:
    id: str
    tenant: str
    mode: CrawlMode
    status: CrawlStatus
    seeds: tuple[str, ...]
    options: CrawlOptions
    made: int
    """Jobs made of its pages."""
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    """When its last round ended (None while one runs)."""
    round: int = 1
    round_started_at: datetime | None = None
    next_round_at: datetime | None = None
    """A re-crawl's next round, once a round has ended."""


@dataclass(frozen=True)
class CrawlCounts:
    pages: dict[str, int]
    """Its jobs by status, and `dead_robots`: of the dead, those robots.txt disallowed."""
    found: dict[str, int]
    """Pages found, by `FrontierState`."""
    listings: dict[str, int]
    """Listings (robots.txt, sitemaps, feeds, llms.txt) found, by `FrontierState`."""
    left_out: dict[str, int]
    """URLs not added, by reason (`app.rules.crawl_scope.Verdict`, `cut`, `robots`...)."""


@dataclass(frozen=True)
class FoundPage:
    """A page a crawl found, as `GET /crawls/{id}/urls` lists it."""

    url: str
    state: str
    depth: int
    source: str
    found_on: str | None
    lastmod: str | None
    job_id: str | None


@dataclass(frozen=True)
class RoundReport:
    """A round of a crawl, as it ended (`app.store.crawls.rounds`)."""

    round: int
    started_at: datetime
    finished_at: datetime
    counts: dict[str, int]
    """new, changed and removed pages."""
    pages: dict[str, list[str]]
    """Their URLs, at most `ROUND_PAGES_KEPT` of each."""


@dataclass(frozen=True)
class Listing:
    """A listing for the crawl loop to read."""

    crawl_id: str
    kind: UrlKind
    url: str
    depth: int


def options_json(options: CrawlOptions) -> dict[str, Any]:
    values = asdict(options)
    for name in ("include", "exclude"):
        values[name] = list(values[name])
    return values


def options_of(values: dict[str, Any]) -> CrawlOptions:
    given = dict(values)
    given["include"] = tuple(given.get("include", ()))
    given["exclude"] = tuple(given.get("exclude", ()))
    given["sitemap"] = SitemapUse(given.get("sitemap", SitemapUse.INCLUDE))
    given["callback_content"] = CallbackContent(given.get("callback_content", "none"))
    return CrawlOptions(**given)


def first_urls(new: NewCrawl) -> list[FrontierUrl]:
    """A new crawl's frontier: its start pages, and the listings of their sites it reads."""
    found = [FrontierUrl(seed, UrlKind.PAGE, 0, FoundVia.SEED) for seed in new.seeds]
    options = new.options
    for origin in dict.fromkeys(_origin(seed) for seed in new.seeds):
        if options.sitemap is not SitemapUse.SKIP:
            found.append(FrontierUrl(f"{origin}/robots.txt", UrlKind.ROBOTS, 0, FoundVia.SEED))
            found.append(FrontierUrl(f"{origin}/sitemap.xml", UrlKind.SITEMAP, 0, FoundVia.SEED))
        if options.llms_txt:
            found.append(FrontierUrl(f"{origin}/llms.txt", UrlKind.LLMS, 0, FoundVia.SEED))
    return found


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}"


CRAWL_COLUMNS = (
    crawls.c.id,
    crawls.c.tenant,
    crawls.c.mode,
    crawls.c.status,
    crawls.c.seeds,
    crawls.c.options,
    crawls.c.made,
    crawls.c.created_at,
    crawls.c.updated_at,
    crawls.c.finished_at,
    crawls.c.round,
    crawls.c.round_started_at,
    crawls.c.next_round_at,
)


def crawl_of(row: Any) -> Crawl:
    return Crawl(
        row.id,
        row.tenant,
        CrawlMode(row.mode),
        CrawlStatus(row.status),
        tuple(row.seeds),
        options_of(row.options),
        row.made,
        row.created_at,
        row.updated_at,
        row.finished_at,
        row.round,
        row.round_started_at,
        row.next_round_at,
    )
