"""Whether a crawl's options may be taken as asked (`POST /crawls`, `ingest crawl`): pure,
one answer for both, what the operator's settings allow passed in (`CrawlLimits`)."""

from collections.abc import Sequence
from dataclasses import dataclass

from app.model import CrawlOptions
from app.rules.crawl_finds import scope_of


@dataclass(frozen=True, slots=True)
class CrawlLimits:
    """What the settings allow a crawl."""

    max_pages: int
    """INGEST_CRAWL_MAX_PAGES: the largest `limit`."""
    refresh_min_seconds: int
    """INGEST_REFRESH_MIN_SECONDS: the shortest `refresh_every`."""
    may_ignore_robots_txt: bool
    """INGEST_CRAWL_MAY_IGNORE_ROBOTS_TXT."""


@dataclass(frozen=True, slots=True)
class Refusal:
    field: str
    """The option refused, as the API names it (`limit`, `refresh_every`, ...)."""
    message: str


def refusal(seeds: Sequence[str], options: CrawlOptions, limits: CrawlLimits) -> Refusal | None:
    """Why a crawl of `seeds` with `options` is refused, or None: a limit past the largest,
    a schedule shorter than the shortest, robots.txt ignored where it may not be, patterns
    past their caps (`app.rules.crawl_scope`)."""
    if options.limit > limits.max_pages:
        message = f"limit must be at most {limits.max_pages} (INGEST_CRAWL_MAX_PAGES)"
        return Refusal("limit", message)
    every = options.refresh_every
    if every is not None and every < limits.refresh_min_seconds:
        return Refusal(
            "refresh_every",
            f"refresh_every must be at least {limits.refresh_min_seconds} seconds "
            "(INGEST_REFRESH_MIN_SECONDS)",
        )
    if not options.robots_txt and not limits.may_ignore_robots_txt:
        return Refusal(
            "robots_txt", "crawls obey robots.txt here (INGEST_CRAWL_MAY_IGNORE_ROBOTS_TXT is off)"
        )
    try:
        scope_of(seeds, options)
    except ValueError as exc:
        return Refusal("include", str(exc))
    return None
