"""Pages cheap to recognise as hostile, refused before trafilatura reads them.

A page can cost the extractor far more than its size: libxml2 (2.14, as lxml ships it)
checks each attribute of an element against every one before it, a time quadratic in them
spent in one C call that only the extraction deadline stops, by killing the process; and
trafilatura's time grows with the elements and attributes of the tree. So a page is refused
(`UnparseableContent`, "hostile page: ...") when:

- an element has more than `attributes_per_element` attributes: counted before the parse
  (`check_markup`), tokenizing as libxml2 does (HTML5's attributes and comments, the raw
  text of script, style, title...), so that the parse never meets such an element;
- its tree has more than `elements` elements or `attributes` attributes (`check_tree`).

The limits are settings (INGEST_EXTRACT_MAX_*); what passes them meets `app.fetch.pool`'s deadline.
"""

import functools
import re
from dataclasses import dataclass

from lxml.html import HtmlElement

from app.content.types import UnparseableContent


@dataclass(frozen=True)
class PageCaps:
    """What a page may hold and still be extracted (INGEST_EXTRACT_MAX_ELEMENTS,
    INGEST_EXTRACT_MAX_ATTRIBUTES, INGEST_EXTRACT_MAX_ATTRIBUTES_PER_ELEMENT)."""

    elements: int = 50_000
    attributes: int = 100_000
    attributes_per_element: int = 1_000


def check_markup(document: str, caps: PageCaps) -> None:
    """Refuse a page with an element of more than `caps.attributes_per_element` attributes,
    before it is parsed; linear in the page."""
    scan = _scan(caps.attributes_per_element).match(document)
    if scan is None:  # the scan follows every `<` to the end or to an element past the cap
        raise AssertionError("the markup scan stopped short of the page's end")
    if scan["fat"] is not None:
        tag = _TAG.match(document, scan.start("fat"))
        assert tag is not None  # it matches whatever `fat` did
        count = len(_ATTRIBUTES.findall(document, tag.start("attributes"), tag.end()))
        raise UnparseableContent(
            f"hostile page: {count:,} attributes on one element"
            f" (limit {caps.attributes_per_element:,}, INGEST_EXTRACT_MAX_ATTRIBUTES_PER_ELEMENT)"
        )


def check_tree(tree: HtmlElement, document: str, caps: PageCaps) -> None:
    """Refuse a page parsed from `document` of more than `caps.elements` elements or
    `caps.attributes` attributes, before trafilatura walks it."""
    # Counted only past what the text allows: an element comes of a "<" or is implied (a
    # <p> before a tag or a text, <html>, <head>, <body>); an attribute takes 2 characters.
    elements = 3 * document.count("<") + 4
    if elements > caps.elements and (elements := int(tree.xpath("count(//*)"))) > caps.elements:
        raise UnparseableContent(
            f"hostile page: {elements:,} elements"
            f" (limit {caps.elements:,}, INGEST_EXTRACT_MAX_ELEMENTS)"
        )
    attributes = len(document) // 2
    if (
        attributes > caps.attributes
        and (attributes := int(tree.xpath("count(//@*)"))) > caps.attributes
    ):
        raise UnparseableContent(
            f"hostile page: {attributes:,} attributes"
            f" (limit {caps.attributes:,}, INGEST_EXTRACT_MAX_ATTRIBUTES)"
        )


# libxml2's tokenizing (HTMLparser.c, 2.14): its blanks; a tag or attribute name runs to a
# blank, "/" or ">" (an attribute's also to "="), its first character whatever it is; a
# value is quoted (to the same quote, or the end) or runs to a blank or ">"; a "/" not
# before ">" is skipped. Every pattern is possessive: one pass, no backtracking.
_BLANK = "\t\n\f\r "
_ATTRIBUTE = (
    rf"[^{_BLANK}/>][^{_BLANK}/>=]*+"
    rf"(?:[{_BLANK}]*+=[{_BLANK}]*+(?:\"[^\"]*+\"?|'[^']*+'?|[^{_BLANK}>]*+))?+"
)
_SEPARATOR = rf"(?:[{_BLANK}]|/(?!>))*+"
_LOOSE_SEPARATOR = rf"[{_BLANK}/]*+"
"""The same where "/>" and ">" end a tag alike (any but a raw text element's start tag)."""
_NAME = rf"[A-Za-z][^{_BLANK}/>]*+"
_AFTER_NAME = rf"(?=[{_BLANK}/>]|\Z)"
_TAG = re.compile(rf"<{_NAME}(?P<attributes>(?:{_SEPARATOR}{_ATTRIBUTE})*+)")
_ATTRIBUTES = re.compile(_SEPARATOR + _ATTRIBUTE)

_COMMENT = r"<!--(?:-?>|(?:[^-]++|-(?!-!?>))*+(?:--!?>)?)"
"""Ends at "-->" or "--!>"; "<!-->" and "<!--->" are empty comments."""
_END_TAG = rf"</{_NAME}(?:{_LOOSE_SEPARATOR}{_ATTRIBUTE})*+{_LOOSE_SEPARATOR}>?"
"""Its attributes are read, then dropped: never compared."""
_OTHERS = (
    r"<![^>]*+>?",  # a DOCTYPE, or a bogus comment: to the next ">"
    r"<\?[^>]*+>?",
    r"</(?![A-Za-z])[^>]*+>?",
    r"<(?![A-Za-z!?/])",  # a "<" that is text
)

_RAW_TEXT = ("iframe", "noembed", "noframes", "style", "textarea", "title", "xmp")
"""Elements whose text libxml2 reads as text up to "</name" and a blank, "/" or ">"."""


def _text_until_end_tag(name: str) -> str:
    return rf"(?:[^<]++|<(?!/(?i:{name})[{_BLANK}/>]))*+"


# A script's text ends at "</script" unless escaped: "<!--" escapes it (and "-->" ends
# that), "<script" within the escape doubles it, "</script" undoes the doubling.
_SCRIPT_OPEN = rf"<(?i:script)(?=[{_BLANK}/>])"
_SCRIPT_CLOSE = rf"</(?i:script)(?=[{_BLANK}/>])"
_DATA = rf"(?:[^<]++|<(?!!--|/(?i:script)[{_BLANK}/>]))*+"
_ESCAPED = rf"(?:[^<-]++|<(?!/?(?i:script)[{_BLANK}/>])|-(?!->))*+"
_DOUBLE_ESCAPED = rf"(?:[^<-]++|<(?!/(?i:script)[{_BLANK}/>])|-(?!->))*+"
_SCRIPT_TEXT = (
    f"{_DATA}(?:<!(?=--){_ESCAPED}"
    f"(?:{_SCRIPT_OPEN}{_DOUBLE_ESCAPED}{_SCRIPT_CLOSE}{_ESCAPED})*+"
    f"(?:{_SCRIPT_OPEN}{_DOUBLE_ESCAPED})?+(?:-->)?+{_DATA})*+"
)


@functools.cache
def _scan(limit: int) -> re.Pattern[str]:
    """The whole page as libxml2 reads it, up to its end or to the first element of more
    than `limit` attributes (group `fat`)."""

    def up_to_limit(separator: str) -> str:
        return rf"(?:{separator}{_ATTRIBUTE}){{0,{limit}}}+(?!{separator}{_ATTRIBUTE})"

    contents = {name: _text_until_end_tag(name) for name in _RAW_TEXT}
    contents |= {"script": _SCRIPT_TEXT, "plaintext": r"[\s\S]*+"}
    initials = "".join(sorted({c for name in contents for c in name[0] + name[0].upper()}))
    raw_elements = "|".join(
        rf"<(?i:{name}){_AFTER_NAME}{up_to_limit(_SEPARATOR)}{_SEPARATOR}(?:/>|>{text})?+"
        for name, text in contents.items()
    )
    token = "|".join(  # the commonest first; a raw text element's tag before any other's
        (
            r"[^<]++",
            rf"(?=<[{initials}])(?:{raw_elements})",
            rf"<{_NAME}{up_to_limit(_LOOSE_SEPARATOR)}{_LOOSE_SEPARATOR}>?+",
            _END_TAG,
            _COMMENT,
            *_OTHERS,
        )
    )
    fat = rf"<{_NAME}(?:{_SEPARATOR}{_ATTRIBUTE}){{{limit + 1}}}"
    return re.compile(rf"(?:{token})*+(?:(?P<fat>{fat})|\Z)", re.ASCII)
