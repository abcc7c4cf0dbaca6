"""Crawls as stored: a crawl's row, its frontier (`crawl_urls`) and the jobs it made.

Submit inserts the crawl with its first URLs (the start pages, and the listings of their
sites: robots.txt, /sitemap.xml, /llms.txt). The crawl loop (`app.worker.crawler`) then
reads the listings (`listings`, `listing_read`), makes jobs of the pages found, a window
at a time (`expand`), and ends the crawl when nothing is left (`finish_if_done`). A page's
links reach the frontier with its outcome (`app.store.record`). Every URL is found once:
the frontier's primary key is (crawl, kind, URL key digest), and an insert of a URL found
before is skipped. Pure values in and out; no fetch, no parse, no scope (the worker's).
"""

import builtins
import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from app.model import (
    CallbackContent,
    CrawlMode,
    CrawlOptions,
    CrawlStatus,
    DeadReason,
    DeliveryEvent,
    Finds,
    FoundVia,
    FrontierState,
    FrontierUrl,
    JobStatus,
    NewCrawl,
    NewJob,
    PageLink,
    SitemapUse,
    UrlKind,
)
from app.rules.url_key import domain_of, url_hash
from app.store.crawl_rounds import FOUND, REPORT, report_round, start_round
from app.store.database import Database
from app.store.deliveries import owe_crawl
from app.store.jobs.rows import _row, _url_row
from app.store.record_rows import frontier_rows, tally_rows
from app.store.refreshes import REFRESHABLE, refreshed
from app.store.tables import (
    contents,
    crawl_tallies,
    crawl_urls,
    crawls,
    domains,
    is_job_id,
    job_urls,
    jobs,
    new_domain,
    new_job_id,
    status_is,
    tenants,
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
    """A round of a crawl, as it ended (`app.store.crawl_rounds`)."""

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


_CRAWL_COLUMNS = (
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


def _crawl(row: Any) -> Crawl:
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


class CrawlStore:
    """Crawls for the API, the CLI and the crawl loop."""

    def __init__(
        self,
        database: Database,
        clock: Callable[[], datetime],
        on_submit: Callable[[int | None], None] = lambda _: None,
        webhook_max_attempts: int = 5,
    ) -> None:
        self.db = database
        self.clock = clock
        self.on_submit = on_submit
        """Called once jobs are made: wakes the worker in this process."""
        self.webhook_max_attempts = webhook_max_attempts
        """INGEST_WEBHOOK_MAX_ATTEMPTS: a crawl's callbacks' budget."""

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

    async def get(self, crawl_id: str, tenant: str | None = None) -> Crawl:
        if not is_job_id(crawl_id):
            raise CrawlNotFound(crawl_id)
        stmt = sa.select(*_CRAWL_COLUMNS).where(crawls.c.id == crawl_id)
        if tenant is not None:
            stmt = stmt.where(crawls.c.tenant == tenant)
        async with self.db.read() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            raise CrawlNotFound(crawl_id)
        return _crawl(row)

    async def list(self, tenant: str | None = None, limit: int = 50) -> builtins.list[Crawl]:
        """The newest crawls first (a tenant's, or everyone's)."""
        stmt = sa.select(*_CRAWL_COLUMNS).order_by(crawls.c.created_at.desc(), crawls.c.id.desc())
        if tenant is not None:
            stmt = stmt.where(crawls.c.tenant == tenant)
        async with self.db.read() as conn:
            return [_crawl(row) for row in await conn.execute(stmt.limit(limit))]

    async def running(self) -> builtins.list[Crawl]:
        stmt = sa.select(*_CRAWL_COLUMNS).where(crawls.c.status == CrawlStatus.RUNNING.value)
        async with self.db.read() as conn:
            return [_crawl(row) for row in await conn.execute(stmt.order_by(crawls.c.updated_at))]

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

    async def next_round_at(self) -> datetime | None:
        """When the next round of a re-crawl comes due, if one waits."""
        async with self.db.read() as conn:
            due: datetime | None = (
                await conn.execute(sa.select(sa.func.min(crawls.c.next_round_at)))
            ).scalar()
        return due

    async def round(self, crawl_id: str, number: int) -> RoundReport | None:
        """What the crawl's round `number` found new, changed and removed; None until it
        has ended."""
        async with self.db.read() as conn:
            row = (await conn.execute(REPORT, {"crawl": crawl_id, "round": number})).first()
        return None if row is None else RoundReport(*row)

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
