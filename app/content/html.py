"""The main content of an HTML page, found by trafilatura, and what the page declares.

One parse (lxml), then trafilatura's fast mode (its own extractor, without the readability
and jusText fallbacks) on a copy of the tree. Only when that finds little of a page that
holds much text does the full mode run, with its fallbacks: on the evaluation set
(bench/extraction.py) this keeps the full mode's F1 at a lower cost
(docs/design/extraction.md). Comments are not main content. A page past the caps of
`app.content.hostile` is refused before trafilatura sees it. The page's links are read
from the whole tree, before anything is dropped from it (`app.content.links`).
"""

import logging
from dataclasses import dataclass
from urllib.parse import urljoin

import trafilatura
from lxml.etree import ParserError, _Element
from lxml.html import HtmlElement, HTMLParser, document_fromstring
from trafilatura.settings import Extractor, use_config

from app.content.hostile import PageCaps, check_markup, check_tree
from app.content.links import PageLinks, page_links
from app.content.metadata import page_metadata
from app.model import PageMetadata

# trafilatura warns of every page it finds nothing in ("discarding data"): that is an
# outcome here, not a fault, and one line a page would drown a worker's log.
logging.getLogger("trafilatura").setLevel(logging.ERROR)

NEVER_MAIN_CONTENT = ("script", "style")
"""Dropped before extraction, once metadata has read the JSON-LD scripts: trafilatura drops
them too, but only after copying the tree. (Not `noscript` or `iframe`: on the evaluation
set, dropping those too lost main text.)"""

FULL_MODE_BELOW_CHARS = 1000
FULL_MODE_BELOW_SHARE = 0.5
"""The full mode runs when the fast one found under FULL_MODE_BELOW_CHARS characters and
under this share of the page's visible text."""

_PARSER = HTMLParser(
    encoding="utf-8",
    remove_comments=True,
    remove_pis=True,
    collect_ids=False,
    default_doctype=False,
)
_CONFIG = use_config()
_CONFIG.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")  # no SIGALRM: the pool has its deadline


def _extractor(fast: bool) -> Extractor:
    """trafilatura's options for one mode, made once: given its keywords instead,
    `bare_extraction` makes them anew on every call, reading eight values through
    configparser (docs/design/extraction.md). It copies them before changing
    any (its recall retry), so one object serves every call."""
    return Extractor(
        config=_CONFIG,
        output_format="python",
        fast=fast,
        # No URL: trafilatura would resolve every link of the page (docs/design/extraction.md);
        # `_resolve_links` resolves the few left in the main content.
        url=None,
        comments=False,
        tables=True,
        # Bold and italics are not kept: on the evaluation set, trafilatura's formatting
        # mode lost 0.4 points of recall, and a knowledge base needs the words more.
        formatting=False,
        links=True,
    )


_EXTRACTORS = {fast: _extractor(fast) for fast in (True, False)}


@dataclass(frozen=True)
class MainContent:
    body: _Element | None
    """trafilatura's tree of the main content (`render` reads it), None if none was found."""
    metadata: PageMetadata
    links: PageLinks
    """The whole page's links and feeds, not only those of the main content."""


def main_content(document: str, url: str | None, caps: PageCaps, max_links: int) -> MainContent:
    """The main content of the HTML `document`, fetched from `url`, and its first `max_links`
    links; raises UnparseableContent for a page past `caps` (`app.content.hostile`)."""
    check_markup(document, caps)
    tree = _parse(document)
    if tree is None:
        return MainContent(None, PageMetadata(), PageLinks())
    check_tree(tree, document, caps)
    metadata = page_metadata(tree, url)
    # INGEST_LINKS_MAX_PER_PAGE=0 reads none: their cost is the operator's to decline.
    links = page_links(tree, url, max_links) if max_links else PageLinks()
    if tree.find("body") is None:
        reparsed = _without_head(document)
        tree = tree if reparsed is None else reparsed
    for element in list(tree.iter(*NEVER_MAIN_CONTENT)):
        element.drop_tree()
    body = _extract(tree, fast=True)
    found = _text_length(body)
    if found < FULL_MODE_BELOW_CHARS and found < FULL_MODE_BELOW_SHARE * _visible_length(tree):
        fuller = _extract(tree, fast=False)
        if _text_length(fuller) > found:
            body = fuller
    if body is None:
        # Nothing trafilatura calls main content (a bare page of one line): its baseline,
        # the page's paragraphs, rather than no text for a page that has some.
        baseline, _, length = trafilatura.baseline(tree)
        body = baseline if length else None
    if body is not None and url:
        _resolve_links(body, url)
    return MainContent(body, metadata, links)


def _parse(document: str) -> HtmlElement | None:
    """The document's tree, always with <html>, <head> and <body>: trafilatura's own loader
    refuses a page that does not start with <html> and holds one element (a bare fragment,
    a page of one <title>), and a page is what the server sent, whatever it starts with."""
    try:
        # As UTF-8 bytes: lxml refuses a str that holds an XML encoding declaration.
        return document_fromstring(document.encode("utf-8", "surrogatepass"), parser=_PARSER)
    except (ParserError, ValueError):  # nothing but whitespace or comments
        return None


def _without_head(document: str) -> HtmlElement | None:
    """A page without <body> whose first element libxml2 does not know (HTML5's <main>,
    <article>, <section>) is parsed into <head>, where no extractor looks: parsed again as a
    body, as a browser would, with what belongs in a head taken out."""
    tree = _parse("<body>" + document)
    if tree is not None:
        for element in list(tree.iter("title", "meta", "link", "base")):
            element.drop_tree()
    return tree


def _extract(tree: HtmlElement, fast: bool) -> _Element | None:
    document = trafilatura.bare_extraction(tree, options=_EXTRACTORS[fast])
    if document is None or isinstance(document, dict):
        return None
    body: _Element | None = document.body
    return body


def _resolve_links(body: _Element, url: str) -> None:
    for ref in body.iter("ref"):
        target = ref.get("target")
        if target:
            try:
                ref.set("target", urljoin(url, target))
            except ValueError:  # a link that is no URL: render keeps its text alone
                del ref.attrib["target"]


def _text_length(body: _Element | None) -> int:
    return 0 if body is None else len("".join(body.itertext()))


def _visible_length(tree: HtmlElement) -> int:
    body = tree.find("body")
    return len(" ".join((body if body is not None else tree).text_content().split()))
