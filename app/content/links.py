"""The links of an HTML page, for a crawl to follow, and the feeds it declares.

Every `<a href>` and `<area href>` of the page counts, navigation too. A link is resolved as
a browser resolves it (against the first `<base href>`, else the page's URL), kept only if it
is http(s), and normalized as a URL key is (`app.rules.url_key`): links are told apart by
that key, the first in document order kept with its text. A link to the page itself is none.
Feeds are the `<link rel="alternate">` of FEED_TYPES, resolved and normalized alike.

Pure, and linear in the page: each link's cost is bounded (its URL's length, the elements
read for its text), and past `max_links` links are counted, not kept. Must run before
anything is dropped from the tree (`app.content.html`).
"""

import functools
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

# lxml ships no type information: its elements are typed `Any` here, at our boundary.
from lxml import etree
from lxml.html import HtmlElement

from app.content.inline import BLOCK_TAGS
from app.content.metadata import field_text
from app.model import PageLink
from app.rules.url_key import url_key

URL_MAX_CHARS = 2048
"""A link longer than this, resolved or normalized, is dropped and counted in `cut`: as long
as a submitted URL may be (`app.fetch.urls.MAX_URL_LENGTH`)."""
TEXT_MAX_CHARS = 300
"""A link's text is cut here."""
TEXT_MAX_ELEMENTS = 200
"""A link's text is read from its first elements only: one that wraps a whole card shows
its words first."""
FEEDS_MAX = 20
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/feed+json"})

# Read up to a few times what is kept: whitespace and invisible characters collapse.
_TEXT_READ_MAX_CHARS = 4 * TEXT_MAX_CHARS
_HTML_WHITESPACE = " \t\n\f\r"
# A browser removes these from anywhere in a URL it parses.
_TABS_AND_NEWLINES = dict.fromkeys(map(ord, "\t\n\r"))


@dataclass(frozen=True)
class PageLinks:
    """What `page_links` found in a page."""

    links: tuple[PageLink, ...] = ()
    """The page's first distinct links, in document order, at most `max_links`."""
    feeds: tuple[str, ...] = ()
    """The feeds (RSS, Atom, JSON Feed) the page declares, normalized, at most FEEDS_MAX."""
    cut: int = 0
    """Distinct links dropped: past `max_links`, or longer than URL_MAX_CHARS."""


def page_links(tree: HtmlElement, url: str | None, max_links: int) -> PageLinks:
    """The links and feeds of `tree`, fetched from `url` (the final URL; None if unknown:
    then only absolute links are read, and none is internal)."""
    page = _normalized(url) if url else None
    page_site = _site(page[1]) if page else None
    base = _base(tree, url)
    # A link to the page itself is none: its key counts as seen.
    seen = {page[0]} if page else set()
    # An href met before was resolved to the same end: a page repeats its links.
    hrefs: set[str] = set()
    links: list[PageLink] = []
    feeds: dict[str, None] = {}
    cut = 0
    for element in tree.iter("a", "area", "link"):
        if element.tag == "link":
            if len(feeds) < FEEDS_MAX and _is_feed(element):
                feed = _target(element.get("href"), base)
                if feed is not None and len(feed[0]) <= URL_MAX_CHARS:
                    feeds[feed[0]] = None
            continue
        href = element.get("href")
        if href is None or href in hrefs:
            continue
        hrefs.add(href)
        target = _target(href, base)
        if target is None or target[0] in seen:
            continue
        key, host = target
        seen.add(key)
        if len(key) > URL_MAX_CHARS or len(links) >= max_links:
            cut += 1
            continue
        internal = page_site is not None and _site(host) == page_site
        links.append(PageLink(url=key, text=_text(element), internal=internal))
    return PageLinks(links=tuple(links), feeds=tuple(feeds), cut=cut)


def _base(tree: HtmlElement, url: str | None) -> str | None:
    """What the page's links are resolved against: its first `<base href>` if that resolves
    to an http(s) URL, else `url`."""
    for element in tree.iter("base"):
        href = element.get("href")
        if href is not None:
            return _resolved(href, url) or url
    return url


def _resolved(href: str | None, base: str | None) -> str | None:
    """`href` made absolute against `base`, if it is then an http(s) URL."""
    if href is None:
        return None
    href = href.strip(_HTML_WHITESPACE).translate(_TABS_AND_NEWLINES)
    try:
        absolute = _joined(base, href) if base else href
    except ValueError:  # a malformed authority (`http://[x`)
        return None
    return absolute if absolute[:8].lower().startswith(("http://", "https://")) else None


def _joined(base: str, href: str) -> str:
    """`urljoin(base, href)`, without its parse for the links most pages hold: absolute ones
    and those from the root (their dot segments are removed by the key, as urljoin would)."""
    # An IP literal, which urljoin checks; dot segments, which it removes as httpx does not.
    if "[" in href or "]" in href or "/." in href:
        return urljoin(base, href)
    if href[:8].lower().startswith(("http://", "https://")):
        return href
    if href.startswith("/"):
        scheme, origin = _origin(base)
        if href.startswith("//"):
            # Without a host after it (`//`, `///x`), urljoin reads it otherwise.
            return (
                f"{scheme}:{href}" if href[2:3] not in ("", "/", "?", "#") else urljoin(base, href)
            )
        if origin:
            return origin + href
    return urljoin(base, href)


@functools.lru_cache(maxsize=64)
def _origin(base: str) -> tuple[str, str]:
    """The scheme of `base`, and its origin (`scheme://authority`, "" without one)."""
    parts = urlsplit(base)
    return parts.scheme, f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""


def _target(href: str | None, base: str | None) -> tuple[str, bytes] | None:
    """The URL key `href` resolves to against `base`, and its host; None if that is no http(s)
    URL with a host. A URL past URL_MAX_CHARS is given as resolved, not normalized."""
    absolute = _resolved(href, base)
    if absolute is None:
        return None
    if len(absolute) > URL_MAX_CHARS:
        return absolute, b""
    return _normalized(absolute)


def _normalized(absolute: str) -> tuple[str, bytes] | None:
    """The URL key of `absolute` and its host (IDNA, lower case); None if it names no host."""
    try:
        key = url_key(absolute)
    except ValueError:
        return None
    host = _host_of(key)
    return (key, host.encode("ascii")) if host else None


def _host_of(key: str) -> str:
    """The host of a URL key (`scheme://[user@]host[:port]/...`), as the key writes it."""
    authority = key.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.partition(":")[0]


def _site(host: bytes) -> bytes:
    return host.removeprefix(b"www.")


def _is_feed(element: HtmlElement) -> bool:
    rel = (element.get("rel") or "").lower().split()
    media = (element.get("type") or "").split(";", 1)[0].strip().lower()
    return "alternate" in rel and media in FEED_TYPES


def _text(element: HtmlElement) -> str:
    """The link's text, else its title, else the first alt text of an image in it (an
    `<area>`: its alt text, else its title); "" if none."""
    if element.tag == "area":
        return _line(element.get("alt")) or _line(element.get("title"))
    shown, image = _shown_text(element)
    return _line(shown) or _line(element.get("title")) or _line(image)


def _shown_text(element: HtmlElement) -> tuple[str, str | None]:
    """The text in `element`'s first TEXT_MAX_ELEMENTS elements, up to _TEXT_READ_MAX_CHARS,
    blocks set apart by spaces; and the alt text of the first image there that has one."""
    parts: list[str] = []
    size = 0
    image = None
    elements = 0
    for event, node in etree.iterwalk(element, events=("start", "end", "comment", "pi")):
        if size >= _TEXT_READ_MAX_CHARS:
            break
        if event == "start":
            elements += 1
            if elements > TEXT_MAX_ELEMENTS:
                break
            tag = node.tag
            if tag in BLOCK_TAGS or tag == "br":
                parts.append(" ")
            if tag == "img" and image is None:
                image = node.get("alt") or None
            piece = node.text if tag not in ("script", "style") else None
        elif node is element:  # its tail follows the link
            break
        else:  # a block's end, or the text after an element, a comment or a PI
            if event == "end" and node.tag in BLOCK_TAGS:
                parts.append(" ")
            piece = node.tail
        if piece:
            parts.append(piece[: _TEXT_READ_MAX_CHARS - size])
            size += len(parts[-1])
    return "".join(parts), image


def _line(value: str | None) -> str:
    """`value` as one printable line (`metadata.field_text`), cut at TEXT_MAX_CHARS."""
    if not value:
        return ""
    return field_text(value[:_TEXT_READ_MAX_CHARS])[:TEXT_MAX_CHARS].rstrip()
