"""The reads of `CrawlStore`: a crawl, its counts, what it found, its rounds' reports. Never
changes a row."""

import builtins
from collections import Counter
from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa

from app.model import (
    CrawlStatus,
    DeadReason,
    PageLink,
    UrlKind,
)
from app.store.crawls.rounds import REPORT
from app.store.crawls.values import (
    CRAWL_COLUMNS,
    Crawl,
    CrawlCounts,
    CrawlNotFound,
    FoundPage,
    RoundReport,
    crawl_of,
)
from app.store.database import Database
from app.store.tables import (
    contents,
    crawl_tallies,
    crawl_urls,
    crawls,
    is_job_id,
    jobs,
)


class CrawlReads:
    """Crawls as read: for the API, the CLI, the dashboard and the crawl loop."""

    db: Database
    clock: Callable[[], datetime]
    on_submit: Callable[[int | None], None]
    webhook_max_attempts: int

    async def get(self, crawl_id: str, tenant: str | None = None) -> Crawl:
        if not is_job_id(crawl_id):
            raise CrawlNotFound(crawl_id)
        stmt = sa.select(*CRAWL_COLUMNS).where(crawls.c.id == crawl_id)
        if tenant is not None:
            stmt = stmt.where(crawls.c.tenant == tenant)
        async with self.db.read() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            raise CrawlNotFound(crawl_id)
        return crawl_of(row)

    async def list(self, tenant: str | None = None, limit: int = 50) -> builtins.list[Crawl]:
        """The newest crawls first (a tenant's, or everyone's)."""
        stmt = sa.select(*CRAWL_COLUMNS).order_by(crawls.c.created_at.desc(), crawls.c.id.desc())
        if tenant is not None:
            stmt = stmt.where(crawls.c.tenant == tenant)
        async with self.db.read() as conn:
            return [crawl_of(row) for row in await conn.execute(stmt.limit(limit))]

    async def running(self) -> builtins.list[Crawl]:
        stmt = sa.select(*CRAWL_COLUMNS).where(crawls.c.status == CrawlStatus.RUNNING.value)
        async with self.db.read() as conn:
            return [crawl_of(row) for row in await conn.execute(stmt.order_by(crawls.c.updated_at))]

    async def counts(self, crawl_id: str) -> CrawlCounts:
        pages = (
            sa.select(jobs.c.status, jobs.c.dead_reason, sa.func.count())
            .where(jobs.c.crawl_id == crawl_id)
            .group_by(jobs.c.status, jobs.c.dead_reason)
        )
        found = (
            sa.select(crawl_urls.c.kind, crawl_urls.c.state, sa.func.count())
            .where(crawl_urls.c.crawl_id == crawl_id)
            .group_by(crawl_urls.c.kind, crawl_urls.c.state)
        )
        left_out = (
            sa.select(crawl_tallies.c.name, sa.func.sum(crawl_tallies.c.n))
            .where(crawl_tallies.c.crawl_id == crawl_id)
            .group_by(crawl_tallies.c.name)
        )
        async with self.db.read() as conn:
            by_status: Counter[str] = Counter()
            for status, reason, n in await conn.execute(pages):
                by_status[status] += n
                if reason == DeadReason.ROBOTS.value:
                    by_status["dead_robots"] += n
            states = (await conn.execute(found)).all()
            tallies = {name: int(n) for name, n in await conn.execute(left_out)}
        pages_found: Counter[str] = Counter()
        listings: Counter[str] = Counter()
        for kind, state, n in states:
            (pages_found if kind == UrlKind.PAGE.value else listings)[state] += n
        return CrawlCounts(dict(by_status), dict(pages_found), dict(listings), tallies)

    async def found(
        self, crawl_id: str, after: int | None = None, limit: int = 1000
    ) -> tuple[builtins.list[FoundPage], int | None]:
        """The pages a crawl found, in key order, `limit` at a time after the digest `after`;
        and the digest to pass for the next ones (None at the end)."""
        stmt = (
            sa.select(
                crawl_urls.c.url_hash,
                crawl_urls.c.url,
                crawl_urls.c.state,
                crawl_urls.c.depth,
                crawl_urls.c.source,
                crawl_urls.c.found_on,
                crawl_urls.c.lastmod,
                crawl_urls.c.job_id,
            )
            .where(crawl_urls.c.crawl_id == crawl_id, crawl_urls.c.kind == UrlKind.PAGE.value)
            .order_by(crawl_urls.c.url_hash)
            .limit(limit + 1)
        )
        if after is not None:
            stmt = stmt.where(crawl_urls.c.url_hash > after)
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        more = len(rows) > limit
        pages = [FoundPage(*row[1:]) for row in rows[:limit]]
        return pages, rows[limit - 1].url_hash if more else None

    async def round(self, crawl_id: str, number: int) -> RoundReport | None:
        """What the crawl's round `number` found new, changed and removed; None until it
        has ended."""
        async with self.db.read() as conn:
            row = (await conn.execute(REPORT, {"crawl": crawl_id, "round": number})).first()
        return None if row is None else RoundReport(*row)

    async def next_round_at(self) -> datetime | None:
        """When the next round of a re-crawl comes due, if one waits."""
        async with self.db.read() as conn:
            due: datetime | None = (
                await conn.execute(sa.select(sa.func.min(crawls.c.next_round_at)))
            ).scalar()
        return due

    async def stored_links(self, job_id: str) -> tuple[PageLink, ...]:
        """The links of the job's last content version, as stored (none before 0019)."""
        stmt = (
            sa.select(contents.c.links)
            .select_from(
                jobs.join(
                    contents,
                    sa.and_(
                        contents.c.job_id == jobs.c.id,
                        contents.c.version == jobs.c.content_version,
                    ),
                )
            )
            .where(jobs.c.id == job_id)
        )
        async with self.db.read() as conn:
            stored = (await conn.execute(stmt)).scalar()
        items = stored["items"] if isinstance(stored, dict) else []
        return tuple(PageLink(link["url"], link["text"], link["internal"]) for link in items)
