"""What a crawl adds to its frontier from a fetched page (its links, its feeds, its
canonical URL) and from a listing it read (a sitemap, a feed, llms.txt, robots.txt): pure,
values in, `Finds` out. Which URLs are in scope is `app.rules.crawl_scope`'s; finding one
twice is the store's to skip (the frontier's key). What is left out is counted by reason.

Depths: a start URL and a page a listing names are at depth 0 (found without following a
link); a page's links one deeper than the page. A sitemap index's sitemaps are one index
level deeper than it, and past MAX_INDEX_DEPTH levels are not read.
"""

from collections import Counter
from collections.abc import Sequence

from app.model import (
    CrawlOptions,
    CrawlPage,
    Finds,
    FoundVia,
    FrontierState,
    FrontierUrl,
    PageLink,
    SitemapUse,
    UrlKind,
)
from app.rules.crawl_scope import Scope, Verdict, verdict
from app.rules.url_key import url_key

MAX_INDEX_DEPTH = 3
"""Sitemap indexes nested deeper than this are not followed (a loop of indexes ends here)."""

LINKS_CUT = "links_cut"
LISTING_CUT = "listing_cut"
INDEX_TOO_DEEP = "index_too_deep"
TRUNCATED = "truncated"
"""The names of the counts of what was left out besides the scope's verdicts."""

_VIA = {
    UrlKind.SITEMAP: FoundVia.SITEMAP,
    UrlKind.ROBOTS: FoundVia.ROBOTS,
    UrlKind.FEED: FoundVia.FEED,
    UrlKind.LLMS: FoundVia.LLMS,
}
_ON_SITE = (Verdict.IN_SCOPE, Verdict.EXCLUDED, Verdict.TOO_DEEP)
"""Verdicts of a URL on the crawl's site: where a feed it links to may be read from."""


def scope_of(seeds: Sequence[str], options: CrawlOptions) -> Scope:
    """The scope of a crawl of `seeds` with `options`."""
    return Scope.of(
        seeds,
        subdomains=options.subdomains,
        include=options.include,
        exclude=options.exclude,
        max_depth=options.max_depth,
    )


def page_finds(
    crawl_id: str,
    scope: Scope,
    options: CrawlOptions,
    page: CrawlPage,
    url: str,
    links: Sequence[PageLink],
    feeds: Sequence[str] = (),
    links_cut: int = 0,
    canonical: str | None = None,
) -> Finds:
    """What the crawl's page at `url` (the final URL) adds: its links in scope, one level
    deeper; the feeds it links to on the site (with `feeds`); its canonical URL, when it
    names another, as seen (so that URL is not fetched again). No link is followed with
    `sitemap: only`."""
    found: list[FrontierUrl] = []
    left_out: Counter[str] = Counter()
    if canonical is not None:
        named = _key(canonical)
        if named is not None and named != _key(url):
            found.append(
                FrontierUrl(
                    named,
                    UrlKind.PAGE,
                    page.depth,
                    FoundVia.LINK,
                    url,
                    None,
                    FrontierState.CANONICAL,
                )
            )
    if options.sitemap is not SitemapUse.ONLY:
        depth = page.depth + 1
        for link in links:
            judged = verdict(scope, link.url, depth)
            if judged is Verdict.IN_SCOPE:
                found.append(FrontierUrl(link.url, UrlKind.PAGE, depth, FoundVia.LINK, url))
            else:
                left_out[judged.value] += 1
        left_out[LINKS_CUT] += links_cut
    if options.feeds:
        for feed in feeds:
            if verdict(scope, feed, page.depth) in _ON_SITE:
                found.append(FrontierUrl(feed, UrlKind.FEED, page.depth, FoundVia.FEED, url))
    return Finds(crawl_id, tuple(found), _counts(left_out))


def listing_finds(
    crawl_id: str,
    scope: Scope,
    kind: UrlKind,
    url: str,
    depth: int,
    pages: Sequence[tuple[str, str | None]],
    sitemaps: Sequence[tuple[str, str | None]] = (),
    cut: int = 0,
    truncated: bool = False,
) -> Finds:
    """What the listing at `url` of `kind` (read at index `depth`) adds: its `pages` (URL,
    lastmod) in scope at depth 0, and the `sitemaps` it names one index level deeper."""
    via = _VIA[kind]
    found: list[FrontierUrl] = []
    left_out: Counter[str] = Counter({LISTING_CUT: cut, TRUNCATED: int(truncated)})
    for page, lastmod in pages:
        key = _key(page)
        judged = Verdict.NOT_HTTP if key is None else verdict(scope, key, 0)
        if key is not None and judged is Verdict.IN_SCOPE:
            found.append(FrontierUrl(key, UrlKind.PAGE, 0, via, url, lastmod))
        else:
            left_out[judged.value] += 1
    for sitemap, lastmod in sitemaps:
        key = _key(sitemap)
        if key is None:
            left_out[Verdict.NOT_HTTP.value] += 1
        elif depth + 1 > MAX_INDEX_DEPTH:
            left_out[INDEX_TOO_DEEP] += 1
        else:
            found.append(FrontierUrl(key, UrlKind.SITEMAP, depth + 1, via, url, lastmod))
    return Finds(crawl_id, tuple(found), _counts(left_out))


def _key(url: str) -> str | None:
    try:
        return url_key(url)
    except ValueError:
        return None


def _counts(left_out: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((name, n) for name, n in left_out.items() if n))
