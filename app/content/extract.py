"""A fetched body's text, Markdown and metadata: `extract` dispatches on its media type.

HTML: the main content (`html`, rendered by `render`). PDF: its pages' text (`pdf`). XML:
the text between the tags. JSON must parse, all of it (else `UnparseableContent`); its text
is itself, its Markdown a fenced block. Other text types are their own text. A type with no
text (an image, an archive) gives none. HTML and XML are read up to PARSE_MAX_CHARS.
"""

import html
import json
import re
from dataclasses import dataclass, field, replace

from app.content.charsets import charset_of, decode
from app.content.document import Document
from app.content.hostile import PageCaps
from app.content.html import main_content
from app.content.pdf import pdf_document
from app.content.render import render
from app.content.types import (
    UnparseableContent,
    has_text,
    is_html,
    is_json,
    is_pdf,
    is_xml,
    media_type,
)
from app.model import PageMetadata

PARSE_MAX_CHARS = 2 * 1024 * 1024
"""HTML and XML are parsed for text up to here: a parse takes many times its input in memory
(docs/design/extraction.md), and real pages are far smaller."""


@dataclass(frozen=True)
class ExtractionLimits:
    pdf_max_pages: int = 200
    """A PDF's pages past this are not read (INGEST_PDF_MAX_PAGES)."""
    page: PageCaps = field(default_factory=PageCaps)
    """An HTML page past these is refused as hostile (`app.content.hostile`)."""
    max_links: int = 1000
    """An HTML page's links past this many are counted, not kept (INGEST_LINKS_MAX_PER_PAGE)."""


def extract(
    body: bytes,
    content_type: str | None,
    url: str | None = None,
    limits: ExtractionLimits = ExtractionLimits(),
) -> Document:
    """Take a body's text, Markdown and metadata; `url` (the final URL) resolves its links.

    Raises UnparseableContent for JSON or a PDF that does not parse, or a hostile page."""
    media = media_type(content_type)
    if is_pdf(media):
        return pdf_document(body, limits.pdf_max_pages)
    if not has_text(media):
        return Document(text="", markdown=None, metadata=PageMetadata())
    charset = charset_of(body, content_type)
    text = decode(body, charset.codec)
    found = PageMetadata(charset=charset.codec, charset_source=charset.source)
    if is_html(media):
        return _html(text[:PARSE_MAX_CHARS], url, found, limits)
    markdown = text
    if is_json(media):
        _check_json(text)
        markdown = _fenced(text, "json")
    elif is_xml(media):
        text = markdown = _xml_text(text[:PARSE_MAX_CHARS])
    return Document(text=text, markdown=markdown, metadata=found)


def _html(
    document: str, url: str | None, found: PageMetadata, limits: ExtractionLimits
) -> Document:
    main = main_content(document, url, limits.page, limits.max_links)
    metadata = replace(main.metadata, charset=found.charset, charset_source=found.charset_source)
    text, markdown = "", ""
    if main.body is not None:
        rendered = render(main.body, metadata.title)
        text, markdown = rendered.text, rendered.markdown
    return Document(
        text=text,
        markdown=markdown,
        metadata=metadata,
        links=main.links.links,
        feeds=main.links.feeds,
        links_cut=main.links.cut,
    )


def _fenced(text: str, language: str) -> str:
    """`text` as a fenced code block, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _drop(_: object) -> None:
    return None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# Validates without building the document: objects, numbers are dropped as they are parsed,
# so a large array of tiny objects takes little memory. NaN and Infinity are not JSON.
_JSON_CHECKER = json.JSONDecoder(
    object_pairs_hook=_drop, parse_float=_drop, parse_int=_drop, parse_constant=_refuse_constant
)


def _check_json(text: str) -> None:
    try:
        _JSON_CHECKER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise UnparseableContent(f"invalid JSON: {exc}") from None


# Up to the next < too: `<[^>]*>` rescanned to the end from each unclosed <, quadratic.
_TAG = re.compile(r"<[^<>]*>")
_CDATA_OPEN = "<![CDATA["
_CDATA_CLOSE = "]]>"


def _xml_text(document: str) -> str:
    # Not an XML parser: no entity expansion, so no billion laughs. One pass each, linear.
    return _lines(html.unescape(_TAG.sub("\n", _unwrapped(document))))


def _unwrapped(document: str) -> str:
    """Each CDATA section as its content (its tags then dropped as the document's are); an
    unclosed one left as it is. A `.*?` pattern rescanned the rest from every opening."""
    parts: list[str] = []
    at = 0
    while (start := document.find(_CDATA_OPEN, at)) >= 0:
        end = document.find(_CDATA_CLOSE, start + len(_CDATA_OPEN))
        if end < 0:  # no close after this opening, so none after any later one
            break
        parts += (document[at:start], document[start + len(_CDATA_OPEN) : end])
        at = end + len(_CDATA_CLOSE)
    parts.append(document[at:])
    return "".join(parts)


def _lines(text: str) -> str:
    """Whitespace collapsed within lines; blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
