"""A fetched body's text, Markdown and metadata: `extract` dispatches on its media type.

HTML: the main text (`html`). XML: the text between the tags. JSON must parse, all of it
(else `UnparseableContent`); its text is itself. Other text types are their own text. HTML
and XML are read up to PARSE_MAX_CHARS.
"""

import html
import json
import re

from app.content.charsets import charset_of, decode
from app.content.document import Document
from app.content.html import main_text
from app.content.types import UnparseableContent, is_html, is_json, is_xml, media_type
from app.model import PageMetadata

PARSE_MAX_CHARS = 2 * 1024 * 1024
"""HTML and XML are parsed for text up to here: a parse costs up to ~40 times its input
(10 MiB of tiny elements took ~400 MB and seconds), and real pages are far smaller."""


def extract(body: bytes, content_type: str | None) -> Document:
    """Decode a body and take its text, Markdown and metadata."""
    charset = charset_of(body, content_type)
    text = decode(body, charset.codec)
    media = media_type(content_type)
    title = None
    if is_html(media):
        title, text = main_text(text[:PARSE_MAX_CHARS])
    elif is_json(media):
        _check_json(text)
    elif is_xml(media):
        text = _xml_text(text[:PARSE_MAX_CHARS])
    metadata = PageMetadata(title=title, charset=charset.codec, charset_source=charset.source)
    return Document(text=text, markdown=text, metadata=metadata)


def _drop(_: object) -> None:
    return None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# Validates without building the document: objects, numbers are dropped as they are parsed,
# so a 10 MiB array of tiny objects costs little memory. NaN and Infinity are not JSON.
_JSON_CHECKER = json.JSONDecoder(
    object_pairs_hook=_drop, parse_float=_drop, parse_int=_drop, parse_constant=_refuse_constant
)


def _check_json(text: str) -> None:
    try:
        _JSON_CHECKER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise UnparseableContent(f"invalid JSON: {exc}") from None


_TAG = re.compile(r"<[^>]*>")
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.DOTALL)


def _xml_text(document: str) -> str:
    # Regular expressions, not an XML parser: no entity expansion, so no billion laughs.
    return _lines(html.unescape(_TAG.sub("\n", _CDATA.sub(r"\1", document))))


def _lines(text: str) -> str:
    """Whitespace collapsed within lines; blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
