"""A synthetic site for crawls: N pages linked as a real site links them, served by a
minimal HTTP/1.1 keep-alive server in its own process (as `bench.target`), which counts
what it is asked.

`python -m bench.site --port 0 --pages 10000` prints the port it listens on (127.0.0.1),
then serves until killed:

- /robots.txt: disallows /private/ and names /sitemap-index.xml, an index of
  /sitemap-0.xml .. /sitemap-2.xml, which list every /page/i (with lastmod) a third each;
  /sitemap.xml and /llms.txt are 404. /feed.xml: RSS of the 20 newest pages.
- / and /page/i (i from 0 to N-1): HTML with a nav (home, 10 sections), a main of text that
  varies with i, the previous and next page, 5 related pages (one again with tracking
  parameters), a canonical link, the feed, /private/i and /calendar/2026-01-01.
- /section/k (k 0-9): 20 links to the pages i with i mod 10 = k, `?page=p` the next 20.
- /calendar/YYYY-MM-DD: a day linking to the day before and the day after, forever: a trap.

Anything else is 404. GETs and HEADs are counted by class (`home`, `page`, `section`,
`calendar`, `private`, `listing`, `other`) and each /page/i apart; GET /__counts answers
the counts as JSON (itself uncounted). `start_site` runs the site for a benchmark.
"""

import argparse
import asyncio
import contextlib
import json
import random
import socket
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from html import escape
from urllib.parse import parse_qs, urlsplit

SECTIONS = 10
SECTION_LINKS = 20
"""Page links on each page of a section."""
SITEMAPS = 3
FEED_ITEMS = 20
RELATED = 5
CALENDAR_START = date(2026, 1, 1)
PAGES_A_DAY = 10
"""Pages published a day, the newest (the highest i) on CALENDAR_START: their lastmod."""
HEAD_MAX_BYTES = 16 * 1024
"""A request head longer than this is refused and its connection closed."""
REPEATS_LISTED = 100
"""Pages fetched more than once that /__counts lists by number, at most."""

HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
XML = "application/xml"
RSS = "application/rss+xml"
JSON = "application/json"

SECTION_NAMES = (
    "News",
    "Guides",
    "Reference",
    "Recipes",
    "Reviews",
    "Travel",
    "Science",
    "History",
    "Sport",
    "Letters",
)
WORDS = (
    "harbour morning council river station garden library market bridge winter summer "
    "engineer teacher farmer student visitor report season record project railway museum "
    "festival village valley coast island mountain forest weather storm harvest budget "
    "meeting committee volunteer bakery kitchen workshop gallery theatre concert archive "
    "measured announced opened repaired planted crossed studied described welcomed "
    "collected painted counted rebuilt discussed celebrated reported visited explained "
    "quietly early late together again slowly carefully nearly almost finally"
).split()


@dataclass(frozen=True)
class Answer:
    """What a request is answered with, and the class it is counted in."""

    status: int
    content_type: str
    body: bytes
    kind: str


def _not_found(kind: str = "other") -> Answer:
    return Answer(404, TEXT, b"not found\n", kind)


def lastmod(pages: int, i: int) -> date:
    """When page i was last changed: PAGES_A_DAY a day, the newest on CALENDAR_START."""
    return CALENDAR_START - timedelta(days=(pages - 1 - i) // PAGES_A_DAY)


def _title(i: int) -> str:
    rng = random.Random(-1 - i)
    return f"The {rng.choice(WORDS)} {rng.choice(WORDS)}, part {i}"


def _paragraphs(rng: random.Random) -> str:
    paragraphs = []
    for _ in range(rng.randint(3, 5)):
        sentences = []
        for _ in range(rng.randint(3, 5)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(8, 14))]
            sentences.append(" ".join(words).capitalize() + ".")
        paragraphs.append(f"<p>{' '.join(sentences)}</p>")
    return "\n".join(paragraphs)


def _nav() -> str:
    sections = "".join(
        f'<li><a href="/section/{k}">{name}</a></li>' for k, name in enumerate(SECTION_NAMES)
    )
    return f'<header><nav><ul><li><a href="/">Home</a></li>{sections}</ul></nav></header>'


def _document(title: str, canonical: str, main: str, footer: str = "") -> bytes:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        f'<link rel="canonical" href="{canonical}">'
        '<link rel="alternate" type="application/rss+xml" title="Latest" href="/feed.xml">'
        f"</head>\n<body>{_nav()}\n<main>{main}</main>\n<footer>{footer}</footer></body></html>\n"
    ).encode()


class Site:
    """The site's answers (pure: a request target in, an `Answer` out); listings are built
    once, pages on each request."""

    def __init__(self, pages: int, base: str) -> None:
        if pages < RELATED + 2:
            raise ValueError(f"a site has at least {RELATED + 2} pages")
        self.pages = pages
        self.base = base
        self.listings = {
            "/robots.txt": (TEXT, self._robots()),
            "/sitemap-index.xml": (XML, self._sitemap_index()),
            "/feed.xml": (RSS, self._feed()),
            **{f"/sitemap-{k}.xml": (XML, self._sitemap(k)) for k in range(SITEMAPS)},
        }

    def answer(self, target: str) -> Answer:
        """The answer to a GET of `target` (a path and maybe a query)."""
        parts = urlsplit(target)
        path = parts.path
        if path == "/":
            return Answer(200, HTML, self.home(), "home")
        if (number := _number(path, "/page/")) is not None:
            return (
                Answer(200, HTML, self.page(number), "page")
                if number < self.pages
                else _not_found()
            )
        if (number := _number(path, "/section/")) is not None and number < SECTIONS:
            return self._section(number, parse_qs(parts.query).get("page", ["1"])[0])
        if path.startswith("/calendar/"):
            return self._calendar(path.removeprefix("/calendar/"))
        if path.startswith("/private/"):
            return Answer(200, HTML, _document("Private", path, "<h1>Private</h1>"), "private")
        if path in self.listings:
            content_type, body = self.listings[path]
            return Answer(200, content_type, body, "listing")
        if path in ("/sitemap.xml", "/llms.txt"):
            return _not_found("listing")
        return _not_found()

    def home(self) -> bytes:
        newest = range(self.pages - 1, max(-1, self.pages - 1 - FEED_ITEMS), -1)
        latest = "".join(f'<li><a href="/page/{i}">{escape(_title(i))}</a></li>' for i in newest)
        main = (
            "<h1>Welcome</h1><p>News, guides and letters from the valley, every day.</p>"
            f"<h2>Latest</h2><ul>{latest}</ul>"
        )
        footer = '<a href="/calendar/2026-01-01">Events calendar</a>'
        return _document("Home", "/", main, footer)

    def page(self, i: int) -> bytes:
        rng = random.Random(i)
        related = [r if r < i else r + 1 for r in rng.sample(range(self.pages - 1), RELATED)]
        items = "".join(f'<li><a href="/page/{j}">{escape(_title(j))}</a></li>' for j in related)
        pagination = "".join(
            [
                f'<a rel="prev" href="/page/{i - 1}">Previous</a> ' if i > 0 else "",
                f'<a rel="next" href="/page/{i + 1}">Next</a>' if i < self.pages - 1 else "",
            ]
        )
        main = (
            f"<article><h1>{escape(_title(i))}</h1>"
            f'<p class="byline">{SECTION_NAMES[i % SECTIONS]}, {lastmod(self.pages, i)}</p>\n'
            f"{_paragraphs(rng)}\n<h2>Related</h2><ul>{items}</ul>"
            f'<p>Readers also liked <a href="/page/{related[0]}?utm_source=x&amp;utm_medium=y">'
            f"{escape(_title(related[0]))}</a>.</p></article>"
            f'<nav class="pagination">{pagination}</nav>'
        )
        footer = (
            f'<a href="/private/{i}">Edit this page</a> '
            '<a href="/calendar/2026-01-01">Events calendar</a>'
        )
        return _document(_title(i), f"/page/{i}", main, footer)

    def _section(self, k: int, written: str) -> Answer:
        listed = range(k, self.pages, SECTIONS)
        last = max(1, -(-len(listed) // SECTION_LINKS))
        number = _whole(written)
        if number is None or not 1 <= number <= last:
            return _not_found("section")
        shown = listed[(number - 1) * SECTION_LINKS : number * SECTION_LINKS]
        items = "".join(f'<li><a href="/page/{i}">{escape(_title(i))}</a></li>' for i in shown)
        here = f"/section/{k}" if number == 1 else f"/section/{k}?page={number}"
        before = f"/section/{k}" if number == 2 else f"/section/{k}?page={number - 1}"
        pagination = "".join(
            [
                f'<a rel="prev" href="{before}">Newer</a> ' if number > 1 else "",
                f'<a rel="next" href="/section/{k}?page={number + 1}">Older</a>'
                if number < last
                else "",
            ]
        )
        main = f"<h1>{SECTION_NAMES[k]}</h1><ul>{items}</ul><nav>{pagination}</nav>"
        return Answer(200, HTML, _document(SECTION_NAMES[k], here, main), "section")

    def _calendar(self, written: str) -> Answer:
        try:
            day = date.fromisoformat(written) if len(written) == 10 else None
        except ValueError:
            day = None
        if day is None:
            return _not_found("calendar")
        links = [
            f'<a rel="prev" href="/calendar/{day - timedelta(days=1)}">Day before</a>'
            if day > date.min
            else "",
            f'<a rel="next" href="/calendar/{day + timedelta(days=1)}">Day after</a>'
            if day < date.max
            else "",
        ]
        main = f"<h1>Events on {day}</h1><p>No events.</p><nav>{' '.join(links)}</nav>"
        return Answer(
            200, HTML, _document(f"Events on {day}", f"/calendar/{day}", main), "calendar"
        )

    def _robots(self) -> bytes:
        return (
            f"User-agent: *\nDisallow: /private/\n\nSitemap: {self.base}/sitemap-index.xml\n"
        ).encode()

    def _sitemap_index(self) -> bytes:
        entries = "".join(
            f"<sitemap><loc>{self.base}/sitemap-{k}.xml</loc>"
            f"<lastmod>{CALENDAR_START}</lastmod></sitemap>\n"
            for k in range(SITEMAPS)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{entries}</sitemapindex>\n"
        ).encode()

    def _sitemap(self, k: int) -> bytes:
        listed = range(k * self.pages // SITEMAPS, (k + 1) * self.pages // SITEMAPS)
        entries = "".join(
            f"<url><loc>{self.base}/page/{i}</loc>"
            f"<lastmod>{lastmod(self.pages, i)}</lastmod></url>\n"
            for i in listed
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{entries}</urlset>\n"
        ).encode()

    def _feed(self) -> bytes:
        newest = range(self.pages - 1, max(-1, self.pages - 1 - FEED_ITEMS), -1)
        items = "".join(
            f"<item><title>{escape(_title(i))}</title><link>{self.base}/page/{i}</link>"
            f"<guid>{self.base}/page/{i}</guid><pubDate>{_rfc822(lastmod(self.pages, i))}"
            "</pubDate></item>\n"
            for i in newest
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
            f"<title>Latest</title><link>{self.base}/</link><description>The newest pages"
            f"</description>\n{items}</channel></rss>\n"
        ).encode()


def _number(path: str, prefix: str) -> int | None:
    """n of a path `prefix` + n."""
    return _whole(path[len(prefix) :]) if path.startswith(prefix) else None


def _whole(digits: str) -> int | None:
    """The number `digits` writes as Python writes it (no sign, no leading zero), if any."""
    if not digits.isascii() or not digits.isdigit() or len(digits) > 9:
        return None
    return int(digits) if str(int(digits)) == digits else None


def _rfc822(day: date) -> str:
    return format_datetime(datetime(day.year, day.month, day.day, 12, tzinfo=UTC))


class Counts:
    """The requests answered: by class, each page's, each listing's, the calendar's days."""

    def __init__(self, pages: int) -> None:
        self.kinds: Counter[str] = Counter()
        self.page_hits = bytearray(pages)
        self.listings: Counter[str] = Counter()
        self.days: set[str] = set()

    def count(self, target: str, answer: Answer) -> None:
        self.kinds[answer.kind] += 1
        path = urlsplit(target).path
        if answer.kind == "page":
            number = _number(path, "/page/")
            assert number is not None
            self.page_hits[number] = min(255, self.page_hits[number] + 1)
        elif answer.kind == "listing":
            self.listings[path] += 1
        elif answer.kind == "calendar":
            self.days.add(path)

    def as_json(self) -> bytes:
        repeated = {i: n for i, n in enumerate(self.page_hits) if n > 1}
        return json.dumps(
            {
                "requests": dict(self.kinds),
                "pages_fetched": sum(1 for n in self.page_hits if n),
                "pages_repeated": len(repeated),
                "repeats": {str(i): n for i, n in list(repeated.items())[:REPEATS_LISTED]},
                "listings": dict(self.listings),
                "calendar_days": len(self.days),
            }
        ).encode()


def response(answer: Answer, head_only: bool = False) -> bytes:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 400: "Bad Request"}
    head = (
        f"HTTP/1.1 {answer.status} {reason.get(answer.status, 'Error')}\r\n"
        f"Content-Type: {answer.content_type}\r\nContent-Length: {len(answer.body)}\r\n\r\n"
    )
    return head.encode() + (b"" if head_only else answer.body)


class SiteProtocol(asyncio.Protocol):
    """Answers each request of a connection in order (httpx does not pipeline)."""

    def __init__(self, site: Site, counts: Counts) -> None:
        self.site = site
        self.counts = counts
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            request, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            line = request.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(line) != 3:
                self.transport.write(response(Answer(400, TEXT, b"bad request\n", "other")))
                self.transport.close()
                return
            self.transport.write(self._answer(*line[:2]))
            if b"connection: close" in request.lower():
                self.transport.close()
                return
        if len(self.buffer) > HEAD_MAX_BYTES:
            self.transport.close()

    def _answer(self, method: str, target: str) -> bytes:
        if method not in ("GET", "HEAD"):
            return response(Answer(405, TEXT, b"GET or HEAD\n", "other"))
        if urlsplit(target).path == "/__counts":
            return response(Answer(200, JSON, self.counts.as_json(), "counts"), method == "HEAD")
        answer = self.site.answer(target)
        self.counts.count(target, answer)
        return response(answer, method == "HEAD")

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(port: int, pages: int) -> None:
    # Bound first: the site's listings name its port.
    sock = socket.create_server(("127.0.0.1", port), backlog=1024)
    port = sock.getsockname()[1]
    site, counts = Site(pages, f"http://127.0.0.1:{port}"), Counts(pages)
    server = await asyncio.get_running_loop().create_server(
        lambda: SiteProtocol(site, counts), sock=sock
    )
    print(port, flush=True)
    async with server:
        await server.serve_forever()


@dataclass(frozen=True)
class RunningSite:
    """A `bench.site` process: its port and number of pages."""

    process: subprocess.Popen[str]
    port: int
    pages: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def start_site(pages: int) -> RunningSite:
    """Start bench.site with `pages` pages in its own process, on a free port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.site", "--port", "0", "--pages", str(pages)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return RunningSite(process, int(process.stdout.readline()), pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--pages", type=int, default=10_000, help="pages /page/0 .. /page/N-1")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.pages))
    sys.exit(0)


if __name__ == "__main__":
    main()
