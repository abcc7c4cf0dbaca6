"""What an HTML page declares about itself: meta tags, Open Graph, JSON-LD, `<link>` and `<html
lang>`. Read as declared, never guessed from the text: a date is the page's own
`article:published_time` or `datePublished`, not a date found in a sentence (which costs
more than the extraction and is often wrong).

Where sources disagree the most specific wins: JSON-LD's article object, then Open Graph
and its `article:` tags, then plain meta tags, then the document (`<title>`, `<html lang>`).

Every string is one line that is safe to print (`field_text`): no terminal escape sequence,
control character or invisible one is kept, as none is of a header.
"""

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

from lxml.html import HtmlElement

from app.content.inline import INVISIBLE
from app.model import PageMetadata

FIELD_MAX_CHARS = 1000
LIST_MAX_ITEMS = 50
JSON_LD_MAX_CHARS = 256 * 1024
"""A JSON-LD block longer than this is not read (some embed a whole catalogue)."""

_ARTICLE_TYPES = re.compile(r"Article|Posting|Report|WebPage|CreativeWork|Recipe|Review|Blog")


def page_metadata(tree: HtmlElement, url: str | None) -> PageMetadata:
    """The metadata `tree` declares; URLs resolved against `url` (the final URL)."""
    meta = _meta_tags(tree)
    ld = _json_ld_article(tree)
    title = (
        _text(ld.get("headline"))
        or _first(meta, "og:title", "twitter:title", "dc.title", "citation_title")
        or _title(tree)
    )
    description = _text(ld.get("description")) or _first(
        meta, "description", "og:description", "twitter:description", "dc.description"
    )
    authors = _people(ld.get("author")) or _unique(
        value
        for name in ("author", "article:author", "dc.creator", "citation_author", "parsely-author")
        for value in meta.get(name, ())
        if not value.startswith(("http://", "https://"))
    )
    published = _date(ld.get("datePublished")) or _first_date(
        meta,
        "article:published_time",
        "og:published_time",
        "datepublished",
        "citation_publication_date",
        "dc.date",
        "dc.date.issued",
        "date",
        "pubdate",
        "publishdate",
        "sailthru.date",
    )
    modified = _date(ld.get("dateModified")) or _first_date(
        meta, "article:modified_time", "og:updated_time", "datemodified", "last-modified"
    )
    language = (
        _language(tree.get("lang") or tree.get("{http://www.w3.org/XML/1998/namespace}lang"))
        or _language(_first(meta, "content-language", "dc.language", "language"))
        or _language(_text(ld.get("inLanguage")))
        or _language(_first(meta, "og:locale"))
    )
    canonical = _link(tree, "canonical") or _first(meta, "og:url")
    site_name = _first(meta, "og:site_name", "application-name") or _name(ld.get("publisher"))
    image = _image(ld.get("image")) or _first(meta, "og:image", "og:image:url", "twitter:image")
    keywords = _keywords(ld.get("keywords")) or _unique(
        word
        for name in ("keywords", "news_keywords", "article:tag")
        for value in meta.get(name, ())
        for word in value.split(",")
    )
    return PageMetadata(
        title=title,
        description=description,
        authors=authors,
        published=published,
        modified=modified,
        language=language,
        canonical_url=_absolute(canonical, url),
        site_name=site_name,
        image=_absolute(image, url),
        keywords=keywords,
    )


def _meta_tags(tree: HtmlElement) -> dict[str, list[str]]:
    """Every `<meta>`'s content by its lower-cased name, property, itemprop or http-equiv."""
    found: dict[str, list[str]] = {}
    for element in tree.iter("meta"):
        content = _clean(element.get("content"))
        if not content:
            continue
        for attribute in ("name", "property", "itemprop", "http-equiv"):
            key = element.get(attribute)
            if key:
                found.setdefault(key.strip().lower(), []).append(content)
    for element in tree.iter("time"):  # <time itemprop="datePublished" datetime="...">
        prop, value = element.get("itemprop"), _clean(element.get("datetime"))
        if prop and value:
            found.setdefault(prop.strip().lower(), []).append(value)
    return found


def _json_ld_article(tree: HtmlElement) -> dict[str, Any]:
    """The first JSON-LD object that describes the page itself (an article, a post, a web
    page), looking inside `@graph`; {} if none parses."""
    fallback: dict[str, Any] = {}
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json":
            continue
        source = script.text or ""
        if len(source) > JSON_LD_MAX_CHARS:
            continue
        try:
            data = json.loads(source)
        except (ValueError, RecursionError):
            continue
        for item in _objects(data):
            kind = item.get("@type")
            kinds = kind if isinstance(kind, list) else [kind]
            if any(isinstance(k, str) and _ARTICLE_TYPES.search(k) for k in kinds):
                if "WebPage" not in str(kind):
                    return item
                fallback = fallback or item
    return fallback


def _objects(data: Any) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-LD document: top level, in lists and in `@graph` (two levels)."""
    items = data if isinstance(data, list) else [data]
    for item in items[:LIST_MAX_ITEMS]:
        if isinstance(item, dict):
            yield item
            graph = item.get("@graph")
            if isinstance(graph, list):
                yield from (node for node in graph[:LIST_MAX_ITEMS] if isinstance(node, dict))


def _first(meta: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        values = meta.get(name)
        if values:
            return values[0]
    return None


def _first_date(meta: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        for value in meta.get(name, ()):
            date = _date(value)
            if date:
                return date
    return None


_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})")


def _date(value: Any) -> str | None:
    """An ISO 8601 date or date-time as precise as given (`2024-01-31`, or
    `2024-01-31T12:00:00+01:00`), or None if `value` is no such date."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    found = _DATE.match(value)
    if found is None:
        return None
    try:
        if len(value) > 10:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T", 1))
            return moment.isoformat()
        return _day(found)
    except ValueError:
        try:  # a time that does not parse: the date alone is still the page's
            return _day(found)
        except ValueError:
            return None


def _day(found: re.Match[str]) -> str:
    year, month, day = (int(part) for part in found.groups())
    return datetime(year, month, day).date().isoformat()


_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$")


def _language(value: str | None) -> str | None:
    """A BCP 47 tag (`en`, `pt-BR`): `en_US` as `en-US`; anything else None."""
    if not value:
        return None
    value = value.strip().split(",")[0].strip()
    if not _LANGUAGE.match(value):
        return None
    primary, *rest = value.replace("_", "-").split("-")
    return "-".join([primary.lower(), *(part.upper() if len(part) == 2 else part for part in rest)])


def _title(tree: HtmlElement) -> str | None:
    for element in tree.iter("title"):
        return _clean(element.text_content())
    return None


def _link(tree: HtmlElement, rel: str) -> str | None:
    for element in tree.iter("link"):
        if rel in (element.get("rel") or "").lower().split():
            return _clean(element.get("href"))
    return None


def _people(value: Any) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    return _unique(_name(item) or "" for item in values[:LIST_MAX_ITEMS])


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        return _text(value.get("name"))
    return _text(value)


def _image(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict):
        return _text(value.get("url") or value.get("contentUrl"))
    return _text(value)


def _keywords(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return _unique(value.split(","))
    if isinstance(value, list):
        return _unique(item for item in value[:LIST_MAX_ITEMS] if isinstance(item, str))
    return ()


def _absolute(link: str | None, base: str | None) -> str | None:
    if not link:
        return None
    try:
        absolute = urljoin(base, link) if base else link
    except ValueError:
        return None
    return absolute if absolute.startswith(("http://", "https://")) else None


def _text(value: Any) -> str | None:
    return _clean(value) if isinstance(value, str) else None


# What a terminal would act on: CSI (ESC [ or U+009B, to its final byte) and OSC (ESC ] or
# U+009D, to BEL or ST), dropped whole; any other ESC goes with the control characters.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c\x9d]*(?:\x07|\x1b\\|\x9c)"
)
# C0, DEL and C1 controls, but those `str.split` reads as whitespace (tab, line breaks), and
# the invisible characters the main text drops too (`inline.INVISIBLE`: bidi overrides...).
_DROPPED = INVISIBLE | {
    code: None for code in (*range(0x20), *range(0x7F, 0xA0)) if not chr(code).isspace()
}


def field_text(value: str) -> str:
    """`value` as one printable line: escape sequences, control and invisible characters
    dropped, whitespace (tabs, line breaks) collapsed to single spaces, cut at
    FIELD_MAX_CHARS. A PDF's info strings are cleaned by it too."""
    if not value.isprintable():  # else no control, invisible or line-breaking character
        value = _ESCAPE_SEQUENCE.sub("", value).translate(_DROPPED)
    return " ".join(value.split())[:FIELD_MAX_CHARS]


def _clean(value: str | None) -> str | None:
    """`value` as `field_text`; None if nothing is left."""
    if not value:
        return None
    return field_text(value) or None


def _unique(values: Iterator[str] | list[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        cleaned = _clean(value)
        if cleaned and cleaned.lower() not in (known.lower() for known in seen):
            seen[cleaned] = None
        if len(seen) >= LIST_MAX_ITEMS:
            break
    return tuple(seen)
