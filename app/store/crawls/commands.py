"""The verbs of `CrawlStore`: submit a crawl, cancel it, crawl it again now."""

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.model import (
    CrawlStatus,
    Finds,
    FrontierState,
    JobStatus,
    NewCrawl,
)
from app.store.crawls.reads import CrawlReads
from app.store.crawls.values import (
    Crawl,
    CrawlEnded,
    first_urls,
    options_json,
)
from app.store.record_rows import frontier_rows
from app.store.tables import (
    crawl_urls,
    crawls,
    jobs,
    new_job_id,
    status_is,
)


class CrawlCommands(CrawlReads):
    """A crawl submitted, cancelled, begun again."""

    async def create(self, new: NewCrawl) -> Crawl:
        now = self.clock()
        crawl_id = new_job_id()
        row: dict[str, Any] = {
            "id": crawl_id,
            "tenant": new.tenant,
            "mode": new.mode.value,
            "status": CrawlStatus.RUNNING.value,
            "seeds": list(new.seeds),
            "options": options_json(new.options),
            "made": 0,
            "refresh_every": new.options.refresh_every,
            "round": 1,
            "round_started_at": now,
            "created_at": now,
            "updated_at": now,
        }
        first = frontier_rows(Finds(crawl_id, tuple(first_urls(new))), now, round=1)

        def insert(conn: sa.Connection) -> None:
            conn.execute(sa.insert(crawls), row)
            self.db.backend.inserts(crawl_urls, first, skip_existing=True).run(conn)
            # Wakes the workers of other processes, whose crawl loops then look at once.
            self.db.backend.notify(conn)

        await self.db.transact(insert)
        return await self.get(crawl_id)

    async def cancel(self, crawl_id: str, tenant: str | None = None) -> Crawl:
        """Cancelled: its pending pages cancelled, what it had yet to fetch or read cut;
        its running pages finish; no round begins again. CrawlEnded unless it is running or
        waits for its next round."""
        crawl = await self.get(crawl_id, tenant)
        now = self.clock()

        def cancel(conn: sa.Connection) -> int:
            ended = conn.execute(_cancel(crawl_id, now)).rowcount
            if ended:
                conn.execute(
                    sa.update(jobs)
                    .where(jobs.c.crawl_id == crawl_id, status_is(JobStatus.PENDING))
                    .values(
                        status=JobStatus.CANCELLED.value,
                        retry_after=None,
                        finished_at=now,
                        updated_at=now,
                    )
                )
                conn.execute(_cut_new(crawl_id))
            return int(ended)

        if not await self.db.transact(cancel):
            raise CrawlEnded(f"crawl {crawl_id} is {crawl.status}; cannot cancel")
        return await self.get(crawl_id)

    async def refresh(self, crawl_id: str, tenant: str | None = None) -> Crawl:
        """Crawl a completed crawl's site again now: its next round is due at once, and the
        crawl loops begin it. CrawlEnded unless it is completed (a running one is crawling,
        a cancelled one is stopped)."""
        crawl = await self.get(crawl_id, tenant)
        now = self.clock()
        due = (
            sa.update(crawls)
            .where(crawls.c.id == crawl_id, crawls.c.status == CrawlStatus.COMPLETED.value)
            .values(next_round_at=now, updated_at=now)
        )

        def write(conn: sa.Connection) -> int:
            changed = int(conn.execute(due).rowcount)
            if changed:
                self.db.backend.notify(conn)
            return changed

        if not await self.db.transact(write):
            raise CrawlEnded(f"crawl {crawl_id} is {crawl.status}; cannot refresh")
        return await self.get(crawl_id)


def _end(crawl_id: str, status: CrawlStatus, now: datetime) -> sa.Update:
    return (
        sa.update(crawls)
        .where(crawls.c.id == crawl_id, crawls.c.status == CrawlStatus.RUNNING.value)
        .values(status=status.value, finished_at=now, updated_at=now)
    )


def _cancel(crawl_id: str, now: datetime) -> sa.Update:
    """Cancelled: a running crawl, or a re-crawl between rounds (no round begins again)."""
    return (
        sa.update(crawls)
        .where(
            crawls.c.id == crawl_id,
            sa.or_(
                crawls.c.status == CrawlStatus.RUNNING.value, crawls.c.next_round_at.is_not(None)
            ),
        )
        .values(
            status=CrawlStatus.CANCELLED.value,
            next_round_at=None,
            finished_at=sa.func.coalesce(crawls.c.finished_at, now),
            updated_at=now,
        )
    )


def _cut_new(crawl_id: str) -> sa.Update:
    return (
        sa.update(crawl_urls)
        .where(crawl_urls.c.crawl_id == crawl_id, crawl_urls.c.state == FrontierState.NEW.value)
        .values(state=FrontierState.CUT.value)
    )
