"""app.rules.crawl_options: which crawl options are refused, and the field each refusal names."""

import pytest

from app.model import CrawlOptions
from app.rules.crawl_options import CrawlLimits, refusal

LIMITS = CrawlLimits(max_pages=100, refresh_min_seconds=60, may_ignore_robots_txt=False)
SEEDS = ["https://example.com/"]


@pytest.mark.parametrize(
    ("options", "limits", "field"),
    [
        (CrawlOptions(limit=100, max_depth=3), LIMITS, None),
        (CrawlOptions(limit=101, max_depth=3), LIMITS, "limit"),
        (CrawlOptions(limit=10, max_depth=3, refresh_every=59), LIMITS, "refresh_every"),
        (CrawlOptions(limit=10, max_depth=3, refresh_every=60), LIMITS, None),
        (CrawlOptions(limit=10, max_depth=3, robots_txt=False), LIMITS, "robots_txt"),
        (
            CrawlOptions(limit=10, max_depth=3, robots_txt=False),
            CrawlLimits(100, 60, may_ignore_robots_txt=True),
            None,
        ),
        (CrawlOptions(limit=10, max_depth=3, include=("/*a*a*a*a*a*a*a*a*a",)), LIMITS, "include"),
        (CrawlOptions(limit=101, max_depth=3, robots_txt=False), LIMITS, "limit"),
    ],
)
def test_a_crawl_is_refused_for_the_first_option_past_what_is_allowed(
    options: CrawlOptions, limits: CrawlLimits, field: str | None
) -> None:
    found = refusal(SEEDS, options, limits)
    assert field == (None if found is None else found.field)
