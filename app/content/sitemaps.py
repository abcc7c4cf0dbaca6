"""What a site publishes about its URLs: sitemaps, RSS and Atom feeds, llms.txt, and the
Sitemap lines of robots.txt. Pure: bytes in, values out; fetching them is the caller's.

`read_listing` reads a body as the listing it was asked for (`kind_hint`): XML (the root
decides: a sitemap URL may serve a feed) or llms.txt's Markdown links. All of it hostile:
- at most `max_bytes` read (a gzip body inflated to at most that: a bomb is cut there); a
  longer body is read as far as it goes, its last entry dropped, and says `truncated`;
- XML parsed by libxml2 with recovery on, entities never expanded, nothing loaded;
- Markdown links found in one linear scan;
- every URL resolved against the listing's, kept if http(s), at most MAX_URL_CHARS and free
  of whitespace, deduplicated; at most `max_entries` kept, the rest counted.
Nothing raises: what is not a listing of its kind is "unknown", empty.
"""

import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

from lxml import etree

MAX_URL_CHARS = 2048
"""A URL longer than this, as written or resolved, is dropped."""
MAX_DATE_CHARS = 64
"""A date longer than this is no date."""
SITEMAP_FIELDS = frozenset({"sitemap", "sitemaps", "site-map"})
"""robots.txt's names of the Sitemap line, as Protego reads them."""

ListingKind = Literal["urlset", "sitemapindex", "feed", "llms_txt", "unknown"]
KindHint = Literal["sitemap", "feed", "llms_txt"]


@dataclass(frozen=True)
class FoundUrl:
    """A URL a listing names, absolute, and when it last changed as the listing says."""

    url: str
    lastmod: str | None
    """ISO 8601: a sitemap's `<lastmod>` or Atom's `<updated>` as written, an RSS `<pubDate>`
    converted; None when absent or not a date."""


@dataclass(frozen=True)
class SiteListing:
    """What one listing names."""

    kind: ListingKind
    urls: tuple[FoundUrl, ...] = ()
    """Pages: a urlset's, a feed's items, llms.txt's links."""
    sitemaps: tuple[FoundUrl, ...] = ()
    """The child sitemaps of a sitemap index."""
    cut: int = 0
    """Distinct URLs dropped past `max_entries` (of `urls` and `sitemaps` together)."""
    truncated: bool = False
    """The body went on past `max_bytes` (or its gzip stream stopped short): only its start
    was read."""


def read_listing(
    body: bytes, url: str, max_entries: int, max_bytes: int, kind_hint: KindHint
) -> SiteListing:
    """The URLs `body`, fetched from `url` as `kind_hint`, lists.

    "sitemap" and "feed" read XML alike, by its root: `<urlset>` (`<url><loc>`,
    `<lastmod>`), `<sitemapindex>` (`<sitemap><loc>`, `<lastmod>`), RSS 2.0 or 1.0 (`<item>`:
    `<link>`, else a permalink `<guid>`; `<pubDate>` or `<dc:date>`), Atom (`<entry>`: its
    `<link>` of rel "alternate" or none; `<updated>`, else `<published>`); names match
    in any namespace or none. "llms_txt" reads every Markdown link `[text](url)` but images.
    """
    data, truncated = _bounded(body, max_bytes)
    if data is None:
        return SiteListing("unknown", truncated=truncated)
    urls: list[_Entry] = []
    sitemaps: list[_Entry] = []
    kind: ListingKind
    if kind_hint == "llms_txt":
        kind, urls = "llms_txt", list(_markdown_links(data, truncated))
    else:
        kind, entries = _xml_entries(data, truncated)
        if kind == "sitemapindex":
            sitemaps = entries
        else:
            urls = entries
    kept_urls, cut_urls = _kept(urls, url, max_entries)
    kept_sitemaps, cut_sitemaps = _kept(sitemaps, url, max_entries)
    return SiteListing(kind, kept_urls, kept_sitemaps, cut_urls + cut_sitemaps, truncated)


def robots_sitemaps(robots_txt: str, max_entries: int = 50) -> tuple[str, ...]:
    """The URLs of robots.txt's Sitemap lines (any case; Protego's spellings, with or
    without a colon), absolute http(s) only, deduplicated, the first `max_entries`."""
    # Not Protego's `sitemaps`: its parse builds every group's rules to read one line kind.
    found: dict[str, None] = {}
    for line in robots_txt.removeprefix("\ufeff").splitlines():
        if len(found) >= max_entries:
            break
        value = _sitemap_value(line.partition("#")[0].strip())
        absolute = None if value is None else _absolute(value, "")
        if absolute is not None:
            found[absolute] = None
    return tuple(found)


_Entry = tuple[str | None, str | None]
"""A URL as written (None: the entry names none) and its date, validated."""

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
# Possessive throughout, and no part but a title runs past a "[": each scan ends before the
# next link's, so the whole is linear. A destination may hold one level of parentheses.
_PLAIN = r"[^\[\]()\s]*+"
_MARKDOWN_LINK = re.compile(
    rf"(!?)\[[^\[\]\n]*+\]\(({_PLAIN}(?:\({_PLAIN}\){_PLAIN})*+)(?:[ \t]++\"[^\"\n]*+\")?\)"
)
_BARE_AMPERSAND_ERRORS = frozenset(
    {etree.ErrorTypes.ERR_ENTITYREF_SEMICOL_MISSING, etree.ErrorTypes.ERR_NAME_REQUIRED}
)
"""What libxml2 logs of an "&" that begins no reference (`?a=1&b=2`, `Q & A`)."""
# A CDATA section, kept as it is (to its end or the body's), or an "&" that begins no
# reference, escaped; possessive, so linear. An ASCII-compatible body only (no UTF-16).
_CDATA_OR_BARE_AMPERSAND = re.compile(
    rb"(<!\[CDATA\[(?:[^\]]++|\](?!\]>))*+(?:\]\]>)?)|&(?!#?[0-9A-Za-z]{1,32};)"
)
_UTF_16_BOMS = (b"\xfe\xff", b"\xff\xfe")


def _bounded(body: bytes, max_bytes: int) -> tuple[bytes | None, bool]:
    """The first `max_bytes` of `body`, gunzipped if it is gzip (None: corrupt), and
    whether the document went on past them."""
    if max_bytes <= 0:  # zlib reads a max_length of 0 as no bound
        return b"", bool(body)
    if not body.startswith(_GZIP_MAGIC):
        return body[:max_bytes], len(body) > max_bytes
    inflater = zlib.decompressobj(_GZIP_WBITS)
    try:
        data = inflater.decompress(body, max_bytes)
    except zlib.error:
        return None, False
    return data, not inflater.eof


def _kept(entries: list[_Entry], base: str, max_entries: int) -> tuple[tuple[FoundUrl, ...], int]:
    kept: list[FoundUrl] = []
    seen: set[str] = set()
    cut = 0
    for written, lastmod in entries:
        url = None if written is None else _absolute(written, base)
        if url is None or url in seen:
            continue
        seen.add(url)
        if len(kept) < max_entries:
            kept.append(FoundUrl(url, lastmod))
        else:
            cut += 1
    return tuple(kept), cut


def _absolute(written: str, base: str) -> str | None:
    """`written` resolved against `base`, if that is an http(s) URL of a host."""
    text = written.strip()
    if not text or len(text) > MAX_URL_CHARS or _UNSAFE.search(text):
        return None
    try:
        url = urljoin(base, text)
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # no URL (an unclosed "[" of an IPv6 host)
        return None
    if parts.scheme not in ("http", "https") or not host or len(url) > MAX_URL_CHARS:
        return None
    return url


def _sitemap_value(line: str) -> str | None:
    name, colon, value = line.partition(":")
    if colon and name.strip().lower() in SITEMAP_FIELDS:
        return value
    words = line.split(maxsplit=1)  # "Sitemap https://...", which Protego reads too
    if len(words) == 2 and words[0].lower() in SITEMAP_FIELDS:
        return words[1]
    return None


def _markdown_links(data: bytes, truncated: bool) -> Iterator[_Entry]:
    text = data.decode("utf-8-sig", "replace")
    if truncated:
        text = text[: text.rfind("\n") + 1]
    for link in _MARKDOWN_LINK.finditer(text):
        if not link[1]:
            destination = link[2]
            if destination.startswith("<") and destination.endswith(">"):
                destination = destination[1:-1]
            yield destination, None


def _xml_entries(data: bytes, truncated: bool) -> tuple[ListingKind, list[_Entry]]:
    root, bare_ampersands = _parsed(data)
    if bare_ampersands and not data.startswith(_UTF_16_BOMS) and b"\x00" not in data[:4]:
        root, _ = _parsed(_CDATA_OR_BARE_AMPERSAND.sub(_escaped, data))
    if root is None:
        return "unknown", []
    listing = _ROOTS.get(etree.QName(root).localname)
    if listing is None:
        return "unknown", []
    kind, entry, read = listing
    elements = list(root.iter("{*}" + entry))
    if truncated:
        elements = elements[:-1]
    return kind, [read(element) for element in elements]


def _parsed(data: bytes) -> tuple[Any | None, bool]:
    """The root of `data` as XML, recovered as far as libxml2 can (None: no element), and
    whether it met a bare "&", which recovery drops with what follows it."""
    # A parser per call: lxml's parsers are not to be shared between threads.
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        huge_tree=False,
        recover=True,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        root = etree.fromstring(data, parser)
    except (etree.LxmlError, ValueError):
        return None, False
    # libxml2 logs only its first errors: a bare "&" past them is lost, as recovery loses it.
    return root, any(error.type in _BARE_AMPERSAND_ERRORS for error in parser.error_log)


def _escaped(match: re.Match[bytes]) -> bytes:
    return match[1] or b"&amp;"


def _sitemap_entry(element: Any) -> _Entry:
    return _child_text(element, "loc"), _iso(_child_text(element, "lastmod"))


def _feed_entry(element: Any) -> _Entry:
    return _feed_link(element), _feed_date(element)


_ROOTS: dict[str, tuple[ListingKind, str, Callable[[Any], _Entry]]] = {
    "urlset": ("urlset", "url", _sitemap_entry),
    "sitemapindex": ("sitemapindex", "sitemap", _sitemap_entry),
    "rss": ("feed", "item", _feed_entry),
    "RDF": ("feed", "item", _feed_entry),
    "feed": ("feed", "entry", _feed_entry),
}
"""A root's local name: the listing's kind, the local name of its entries, how one is read."""


def _feed_link(element: Any) -> str | None:
    """An RSS item's `<link>` text or an Atom entry's alternate `<link href>`; else an RSS
    `<guid>` that is a permalink."""
    for link in element.iterchildren("{*}link"):
        href = link.get("href")
        if href is None:
            text = "".join(link.itertext())
            if text.strip():
                return text
        elif link.get("rel", "alternate").strip() == "alternate":
            return str(href)
    for guid in element.iterchildren("{*}guid"):
        if guid.get("isPermaLink", "true").strip().lower() != "false":
            return "".join(guid.itertext())
    return None


def _feed_date(element: Any) -> str | None:
    """Atom's `<updated>`, else its `<published>`; RSS 2.0's `<pubDate>`; RSS 1.0's `<dc:date>`."""
    return (
        _iso(_child_text(element, "updated"))
        or _iso(_child_text(element, "published"))
        or _rfc822(_child_text(element, "pubDate"))
        or _iso(_child_text(element, "date"))
    )


def _child_text(element: Any, name: str) -> str | None:
    """The text of `element`'s first child named `name`; entities left as written."""
    for child in element.iterchildren("{*}" + name):
        return "".join(child.itertext())
    return None


def _iso(text: str | None) -> str | None:
    """`text` stripped, if it is an ISO 8601 date or date and time."""
    if text is None or len(text := text.strip()) > MAX_DATE_CHARS:
        return None
    try:
        datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return text


def _rfc822(text: str | None) -> str | None:
    """An RFC 822 date (RSS's) in ISO 8601; one already ISO 8601 as it is."""
    if text is None or len(text := text.strip()) > MAX_DATE_CHARS:
        return None
    try:
        return parsedate_to_datetime(text).isoformat()
    except (TypeError, ValueError, OverflowError):
        return _iso(text)
