"""The crawl loop's side of `CrawlStore` (`app.worker.crawler`): read a crawl's listings
into its frontier, make jobs of its pages a window at a time, begin and end its rounds."""

import builtins
import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from app.model import (
    CallbackContent,
    CrawlMode,
    CrawlStatus,
    DeliveryEvent,
    Finds,
    FrontierState,
    JobStatus,
    NewJob,
    UrlKind,
)
from app.rules.url_key import domain_of, url_hash
from app.store.crawls.commands import CrawlCommands, _cut_new, _end
from app.store.crawls.rounds import FOUND, report_round, start_round
from app.store.crawls.values import (
    Crawl,
    Listing,
)
from app.store.deliveries import owe_crawl
from app.store.jobs.rows import _row, _url_row
from app.store.record_rows import frontier_rows, tally_rows
from app.store.refreshes import REFRESHABLE, refreshed
from app.store.tables import (
    crawl_tallies,
    crawl_urls,
    crawls,
    domains,
    job_urls,
    jobs,
    new_domain,
    status_is,
    tenants,
)


class CrawlFrontier(CrawlCommands):
    """A crawl moved on by the crawl loop."""

    async def listings(self, crawl_id: str, limit: int) -> builtins.list[Listing]:
        stmt = (
            sa.select(crawl_urls.c.kind, crawl_urls.c.url, crawl_urls.c.depth)
            .where(
                crawl_urls.c.crawl_id == crawl_id,
                crawl_urls.c.kind != UrlKind.PAGE.value,
                crawl_urls.c.state == FrontierState.NEW.value,
            )
            .order_by(crawl_urls.c.kind, crawl_urls.c.depth)
            .limit(limit)
        )
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [Listing(crawl_id, UrlKind(kind), url, depth) for kind, url, depth in rows]

    async def listing_read(self, listing: Listing, finds: Finds, failed: bool) -> None:
        """The listing read (or `failed`), and the URLs it found added, in one transaction."""
        now = self.clock()
        state = FrontierState.FAILED if failed else FrontierState.READ
        mark = (
            sa.update(crawl_urls)
            .where(
                crawl_urls.c.crawl_id == listing.crawl_id,
                crawl_urls.c.kind == listing.kind.value,
                crawl_urls.c.url_hash == url_hash(listing.url),
            )
            .values(state=state.value)
        )
        found, tallies = frontier_rows(finds, now), tally_rows(finds)

        def write(conn: sa.Connection) -> None:
            conn.execute(mark)
            if found:
                self.db.backend.inserts(crawl_urls, found, skip_existing=True).run(conn)
                hashes = sorted({row["url_hash"] for row in found})
                conn.execute(FOUND, {"crawl": listing.crawl_id, "hashes": hashes})
                # A page a link found first is as near as a listing's pages once it names it.
                conn.execute(_NEARER, {"crawl": listing.crawl_id, "hashes": hashes})
            if tallies:
                conn.execute(sa.insert(crawl_tallies), tallies)

        await self.db.transact(write)

    async def expand(
        self, crawl: Crawl, window: int, disallowed: Callable[[str], bool] = lambda _: False
    ) -> int:
        """Make jobs of the crawl's next pages found, nearest first, until it has `window`
        pending or has made `limit`; a page made a job of in an earlier round is fetched
        again instead, as a refresh; one `disallowed` (by robots.txt) is left, `robots`. How
        many it queued. Under the crawl row's lock, so two loops never make a page twice."""
        now = self.clock()
        options = crawl.options
        backend = self.db.backend
        obeys = options.robots_txt

        def make(conn: sa.Connection) -> int:
            locked = conn.execute(
                sa.update(crawls)
                .where(crawls.c.id == crawl.id, crawls.c.status == CrawlStatus.RUNNING.value)
                .values(updated_at=now)
                .returning(crawls.c.made)
            ).first()
            if locked is None:
                return 0
            pending = conn.execute(_pending_of(crawl.id, window)).scalar_one()
            if pending >= window:
                return 0
            room = window - pending
            known = conn.execute(_next_pages(crawl.id, room, known=True)).all()
            room = min(room - len(known), options.limit - locked.made)
            fresh = conn.execute(_next_pages(crawl.id, room, known=False)).all() if room > 0 else []
            if obeys:
                refused = [page for page in [*known, *fresh] if disallowed(page.url)]
                if refused:
                    params = [{"c": crawl.id, "h": page.url_hash} for page in refused]
                    backend.updates(_DISALLOWED, params).run(conn)
                    out = {page.url_hash for page in refused}
                    known = [page for page in known if page.url_hash not in out]
                    fresh = [page for page in fresh if page.url_hash not in out]
            if not known and not fresh:
                return 0
            if known:
                ids = [page.job_id for page in known]
                conn.execute(
                    sa.update(jobs)
                    .where(jobs.c.id.in_(ids), jobs.c.status.in_(REFRESHABLE))
                    .values(**refreshed(now))
                )
            rows = [_page_row(crawl, page, now) for page in fresh]
            if rows:
                backend.inserts(jobs, rows).run(conn)
                keys = [_url_row(row, page.url) for row, page in zip(rows, fresh, strict=True)]
                backend.inserts(job_urls, keys).run(conn)
                new_domains = [new_domain(d) for d in sorted({row["domain"] for row in rows})]
                backend.inserts(domains, new_domains, skip_existing=True).run(conn)
                backend.inserts(tenants, [{"tenant": crawl.tenant}], skip_existing=True).run(conn)
            queued = [
                {"c": crawl.id, "h": page.url_hash, "j": row["id"]}
                for row, page in zip(rows, fresh, strict=True)
            ] + [{"c": crawl.id, "h": page.url_hash, "j": page.job_id} for page in known]
            backend.updates(_QUEUED, queued).run(conn)
            made = locked.made + len(rows)
            conn.execute(sa.update(crawls).where(crawls.c.id == crawl.id).values(made=made))
            backend.notify(conn)
            return len(queued)

        made = await self.db.transact(make)
        if made:
            self.on_submit(options.priority)
        return made

    async def start_due_rounds(self) -> int:
        """Begin the next round of each re-crawl whose round is due: how many began."""
        now = self.clock()
        due = sa.select(crawls.c.id).where(
            crawls.c.next_round_at <= now, crawls.c.status == CrawlStatus.COMPLETED.value
        )
        async with self.db.read() as conn:
            ids = list((await conn.execute(due)).scalars())
        begun = 0
        for crawl_id in ids:
            begun += await self.db.transact(
                functools.partial(start_round, crawl_id=crawl_id, now=now)
            )
        return begun

    async def finish_if_done(self, crawl: Crawl) -> bool:
        """Completed if nothing is left: no listing to read, no page pending or running, no
        known page to fetch again, and no page found to make a job of (or none may be made:
        its limit reached, or a map). The round's report is written; a re-crawl's next round
        is set."""
        now = self.clock()
        may_make = crawl.mode is CrawlMode.CRAWL and crawl.made < crawl.options.limit
        left = [
            sa.exists().where(
                crawl_urls.c.crawl_id == crawl.id,
                crawl_urls.c.kind != UrlKind.PAGE.value,
                crawl_urls.c.state == FrontierState.NEW.value,
            ),
            sa.exists().where(
                jobs.c.crawl_id == crawl.id,
                jobs.c.status.in_([JobStatus.PENDING.value, JobStatus.RUNNING.value]),
            ),
        ]
        if crawl.mode is CrawlMode.CRAWL:
            left.append(
                sa.exists().where(
                    crawl_urls.c.crawl_id == crawl.id,
                    crawl_urls.c.kind == UrlKind.PAGE.value,
                    crawl_urls.c.state == FrontierState.NEW.value,
                    # Pages known from an earlier round are fetched again, past the limit too.
                    sa.true() if may_make else crawl_urls.c.job_id.is_not(None),
                )
            )

        refresh_every = crawl.options.refresh_every
        callback, attempts = crawl.options.callback_url, self.webhook_max_attempts

        def finish(conn: sa.Connection) -> bool:
            if conn.execute(sa.select(sa.or_(*left))).scalar_one():
                return False
            ended = conn.execute(_end(crawl.id, CrawlStatus.COMPLETED, now)).rowcount
            if not ended:
                return False
            if crawl.mode is CrawlMode.CRAWL:
                conn.execute(_cut_new(crawl.id))
            started = crawl.round_started_at or crawl.created_at
            counts = report_round(conn, crawl.id, crawl.round, started, now)
            if callback is not None:
                changed = crawl.round > 1 and any(counts.values())
                event = DeliveryEvent.CRAWL_CHANGED if changed else DeliveryEvent.CRAWL_COMPLETED
                owe_crawl(conn, crawl.id, callback, event.value, now, attempts)
            if refresh_every is not None:
                next_round = now + timedelta(seconds=refresh_every)
                conn.execute(
                    sa.update(crawls)
                    .where(crawls.c.id == crawl.id)
                    .values(next_round_at=next_round)
                )
            return True

        return await self.db.transact(finish)


_DISALLOWED = (
    sa.update(crawl_urls)
    .where(
        crawl_urls.c.crawl_id == sa.bindparam("c"),
        crawl_urls.c.kind == UrlKind.PAGE.value,
        crawl_urls.c.url_hash == sa.bindparam("h"),
    )
    .values(state=FrontierState.ROBOTS.value)
)
_QUEUED = (
    sa.update(crawl_urls)
    .where(
        crawl_urls.c.crawl_id == sa.bindparam("c"),
        crawl_urls.c.kind == UrlKind.PAGE.value,
        crawl_urls.c.url_hash == sa.bindparam("h"),
    )
    .values(state=FrontierState.QUEUED.value, job_id=sa.bindparam("j"))
)


_NEARER = (
    sa.update(crawl_urls)
    .where(
        crawl_urls.c.crawl_id == sa.bindparam("crawl"),
        crawl_urls.c.kind == UrlKind.PAGE.value,
        crawl_urls.c.url_hash.in_(sa.bindparam("hashes", expanding=True)),
        crawl_urls.c.state == FrontierState.NEW.value,
        crawl_urls.c.depth > 0,
    )
    .values(depth=0)
)
"""Pages of a listing's (at depth 0) found before by links, not yet made jobs of."""


def _pending_of(crawl_id: str, window: int) -> sa.Select[Any]:
    """How many of the crawl's pages are pending, counted up to `window`."""
    some = (
        sa.select(sa.literal(1))
        .where(jobs.c.crawl_id == crawl_id, status_is(JobStatus.PENDING))
        .limit(window)
        .subquery()
    )
    return sa.select(sa.func.count()).select_from(some)


def _next_pages(crawl_id: str, limit: int, known: bool) -> sa.Select[Any]:
    """The crawl's next `limit` pages found to queue, nearest first: made jobs of in an
    earlier round (`known`), or not yet."""
    made = crawl_urls.c.job_id.is_not(None) if known else crawl_urls.c.job_id.is_(None)
    return (
        sa.select(
            crawl_urls.c.url_hash,
            crawl_urls.c.url,
            crawl_urls.c.depth,
            crawl_urls.c.found_on,
            crawl_urls.c.job_id,
        )
        .where(
            crawl_urls.c.crawl_id == crawl_id,
            crawl_urls.c.kind == UrlKind.PAGE.value,
            crawl_urls.c.state == FrontierState.NEW.value,
            made,
        )
        .order_by(crawl_urls.c.depth)
        .limit(limit)
    )


def _page_row(crawl: Crawl, page: Any, now: datetime) -> dict[str, Any]:
    """The job row of a page the crawl found."""
    options = crawl.options
    new = NewJob(
        url=page.url,
        domain=domain_of(httpx.URL(page.url)),
        tenant=crawl.tenant,
        max_attempts=options.max_attempts,
        priority=options.priority,
        metadata=options.metadata,
        callback_url=options.callback_url if options.callback_pages else None,
        callback_content=options.callback_content
        if options.callback_pages
        else CallbackContent.NONE,
    )
    return _row(new, now) | {
        "crawl_id": crawl.id,
        "crawl_depth": page.depth,
        "found_on": page.found_on,
    }
