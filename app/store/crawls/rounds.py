"""A crawl's rounds: the statements that say which round found a URL, start the next round
of a re-crawl, and report a round as it ends (`crawl_rounds`).

A round finds URLs (`crawl_urls.round`: the last round that found one; `first_round`: the
first). A re-crawl's next round reads its listings again and fetches every page it knows
again, as refreshes (conditional GETs); the links of those pages find the site's URLs again.
As a round ends: new pages are those it found first; changed, those a refresh stored a new
version of during it; removed, those it did not find again, or whose refresh found gone
(404, 410). Run inside the caller's transaction; `app.store.crawls` calls them.
"""

from datetime import datetime

import sqlalchemy as sa

from app.model import CrawlStatus, DeadReason, FrontierState, JobStatus, UrlKind
from app.store.tables import crawl_rounds, crawl_urls, crawls, jobs

ROUND_PAGES_KEPT = 1000
"""URLs a round's report lists of each kind (new, changed, removed); all are counted."""

_CURRENT_ROUND = (
    sa.select(crawls.c.round).where(crawls.c.id == crawl_urls.c.crawl_id).scalar_subquery()
)

FOUND = (
    sa.update(crawl_urls)
    .where(
        crawl_urls.c.crawl_id == sa.bindparam("crawl"),
        crawl_urls.c.url_hash.in_(sa.bindparam("hashes", expanding=True)),
        sa.or_(crawl_urls.c.round.is_(None), crawl_urls.c.round < _CURRENT_ROUND),
    )
    .values(
        round=_CURRENT_ROUND,
        first_round=sa.func.coalesce(crawl_urls.c.first_round, _CURRENT_ROUND),
    )
)
"""The URLs of `hashes` (just inserted, or there before) found by the crawl's round under way."""


def start_round(conn: sa.Connection, crawl_id: str, now: datetime) -> bool:
    """Begin the next round of a re-crawl whose round is due: its listings to read again,
    its known pages to fetch again, its start URLs found. False if it is not due (another
    loop began it, or it was cancelled)."""
    begun = conn.execute(
        sa.update(crawls)
        .where(
            crawls.c.id == crawl_id,
            crawls.c.status == CrawlStatus.COMPLETED.value,
            crawls.c.next_round_at <= now,
        )
        .values(
            status=CrawlStatus.RUNNING.value,
            round=crawls.c.round + 1,
            round_started_at=now,
            next_round_at=None,
            finished_at=None,
            updated_at=now,
        )
    ).rowcount
    if not begun:
        return False
    of_crawl = crawl_urls.c.crawl_id == crawl_id
    conn.execute(
        sa.update(crawl_urls)
        .where(of_crawl, crawl_urls.c.kind != UrlKind.PAGE.value)
        .values(state=FrontierState.NEW.value)
    )
    conn.execute(
        sa.update(crawl_urls)
        .where(of_crawl, crawl_urls.c.kind == UrlKind.PAGE.value, crawl_urls.c.job_id.is_not(None))
        .values(state=FrontierState.NEW.value)
    )
    conn.execute(
        sa.update(crawl_urls)
        .where(of_crawl, crawl_urls.c.source == "seed")
        .values(round=_CURRENT_ROUND)
    )
    return True


def report_round(
    conn: sa.Connection, crawl_id: str, number: int, started_at: datetime, now: datetime
) -> dict[str, int]:
    """Write the report of the crawl's round `number` (begun `started_at`), ending now; its
    counts of pages new, changed and removed."""
    made = sa.and_(
        crawl_urls.c.crawl_id == crawl_id,
        crawl_urls.c.kind == UrlKind.PAGE.value,
        crawl_urls.c.job_id.is_not(None),
    )
    new = sa.select(crawl_urls.c.url).where(made, crawl_urls.c.first_round == number)
    known = sa.and_(made, crawl_urls.c.first_round < number)
    page_jobs = crawl_urls.join(jobs, jobs.c.id == crawl_urls.c.job_id)
    changed = (
        sa.select(crawl_urls.c.url)
        .select_from(page_jobs)
        .where(known, jobs.c.changed_at >= started_at)
    )
    removed = (
        sa.select(crawl_urls.c.url)
        .select_from(page_jobs)
        .where(
            known,
            sa.or_(
                crawl_urls.c.round < number,
                sa.and_(
                    jobs.c.status == JobStatus.DEAD.value,
                    jobs.c.dead_reason == DeadReason.GONE.value,
                ),
            ),
        )
    )
    counts: dict[str, int] = {}
    pages: dict[str, list[str]] = {}
    for name, query in (("new", new), ("changed", changed), ("removed", removed)):
        counts[name] = conn.execute(
            sa.select(sa.func.count()).select_from(query.subquery())
        ).scalar_one()
        listed = query.order_by(crawl_urls.c.url).limit(ROUND_PAGES_KEPT)
        pages[name] = list(conn.execute(listed).scalars())
    conn.execute(
        sa.insert(crawl_rounds).values(
            crawl_id=crawl_id,
            round=number,
            started_at=started_at,
            finished_at=now,
            counts=counts,
            pages=pages,
        )
    )
    return counts


REPORT = sa.select(
    crawl_rounds.c.round,
    crawl_rounds.c.started_at,
    crawl_rounds.c.finished_at,
    crawl_rounds.c.counts,
    crawl_rounds.c.pages,
).where(
    crawl_rounds.c.crawl_id == sa.bindparam("crawl"),
    crawl_rounds.c.round == sa.bindparam("round"),
)
"""The report of a crawl's round, as written when it ended."""
