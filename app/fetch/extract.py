"""Pure functions about a fetched body: media types, charsets, title and main text. No I/O.

`extract(body, content_type)` is what the fetcher calls once the body is in: it decodes the
body and returns its title and main text. Decoding never fails: the charset comes from the
byte-order mark, then the Content-Type header, then `<meta charset>` (HTML) or the XML
declaration, then detection (charset-normalizer), each only if it names one of the web's
encodings (`WEB_CODECS`), and undecodable bytes become U+FFFD. The one content failure is
JSON that does not parse (`UnparseableContent`).
"""

import codecs
import html
import json
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes
from selectolax.lexbor import LexborHTMLParser

HTML_TYPES = ("text/html", "application/xhtml+xml")
TITLE_MAX_CHARS = 1000
META_SCAN_BYTES = 1024
"""The HTML spec's prescan: a <meta charset> must sit in the first 1024 bytes."""
DETECT_SAMPLE_BYTES = 64 * 1024
PARSE_MAX_CHARS = 2 * 1024 * 1024
"""HTML and XML are parsed for text up to here: a parse costs up to ~40 times its input
(10 MiB of tiny elements took ~400 MB and seconds), and real pages are far smaller."""

# Removed with their content before the main text is taken: code, chrome and navigation.
_NOT_MAIN_TEXT = [
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "canvas",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "select",
    "dialog",
]
# Tags that break a line, so a block's text does not run into the next one's. A marker is
# put before each in the source: one regular expression over the text is far cheaper than
# inserting a node per block into a large tree.
_BLOCK_TAG = re.compile(
    r"<(?=/?(?:address|article|blockquote|br|dd|details|div|dl|dt|figcaption|figure|h[1-6]|hr"
    r"|li|main|ol|p|pre|section|summary|table|td|th|tr|ul)[\s/>])",
    re.IGNORECASE,
)
_BREAK = "\ue000"  # a private-use character: never meaningful in fetched text
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([-\w.:]+)", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([-\w.:]+)[\"']")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE, whose BOM is its prefix
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Labels the web means as windows-1252 (WHATWG Encoding).
_WEB_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252"}
WEB_CODECS = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "cp866",
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        "tis-620",
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        *(f"cp125{n}" for n in range(9)),
        "gb2312",
        "gbk",
        "gb18030",
        "big5",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "shift_jis",
        "cp932",
        "euc_kr",
        "cp949",
    }
)
"""The Python codecs of the encodings of WHATWG's Encoding Standard, the only ones the web
has (https://encoding.spec.whatwg.org/#names-and-labels), as `codecs.lookup` names them.
Any other codec is no charset of a page: UTF-7 decodes to lone surrogates, EBCDIC (cp037)
and HZ are no web encodings, ISO-2022-KR and HZ are WHATWG's "replacement" (never decoded,
since they can hide markup), and rot13 or base64 are no text encodings at all."""


class UnparseableContent(ValueError):
    """A body that its content type says is JSON, but that does not parse."""


@dataclass(frozen=True)
class Extracted:
    title: str | None
    text: str
    charset: str
    """The codec the body was decoded with."""


def media_type(content_type: str | None) -> str:
    """`text/html` of `Text/HTML; charset=utf-8`; "" when there is none."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_allowed_type(media: str, allowed: tuple[str, ...]) -> bool:
    """Whether a media type is in the allow-list; `text/*` admits every text type."""
    if not media:
        return False
    kind = media.split("/", 1)[0]
    return media in allowed or f"{kind}/*" in allowed


def header_charset(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type, unquoted, or None."""
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def codec(label: str | None) -> str | None:
    """The Python codec for a charset label, or None unless it names a web encoding
    (`WEB_CODECS`): then the next source of the charset decides (`charset_of`)."""
    if not label:
        return None
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):  # ValueError: a label holding NUL
        return None
    name = _WEB_ALIASES.get(name, name)
    return name if name in WEB_CODECS else None


def charset_of(body: bytes, content_type: str | None) -> str:
    """The codec to decode `body` with: BOM, header, in-document declaration, detection."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    declared = codec(header_charset(content_type))
    if declared:
        return declared
    media = media_type(content_type)
    pattern = _META_CHARSET if media in HTML_TYPES else _XML_ENCODING if _is_xml(media) else None
    if pattern is not None:
        found = pattern.search(body[:META_SCAN_BYTES])
        declared = codec(found.group(1).decode("ascii")) if found else None
        if declared:
            return declared
    return _detect(body)


def _detect(body: bytes) -> str:
    try:
        body.decode("utf-8")
        return "utf-8"  # the common case, and cheaper than asking the detector
    except UnicodeDecodeError:
        pass
    best = from_bytes(body[:DETECT_SAMPLE_BYTES]).best()
    return (best and codec(best.encoding)) or "utf-8"


def decode(body: bytes, charset: str) -> str:
    """Decode with replacement characters."""
    try:
        text = body.decode(charset, errors="replace")
    except (LookupError, ValueError):
        text = body.decode("utf-8", errors="replace")
    return text


def extract(body: bytes, content_type: str | None) -> Extracted:
    """Decode a body and take its title (HTML only) and main text.

    HTML: the first <title>; the text of <main> (or the only <article>, or <body>) without
    scripts, styles, navigation, headers, footers and forms, one line per block. XML: the
    text between the tags. Both are read up to PARSE_MAX_CHARS. JSON must parse, all of it
    (else `UnparseableContent`); its text is itself. Other text types are their own text.
    """
    charset = charset_of(body, content_type)
    text = decode(body, charset)
    media = media_type(content_type)
    title = None
    if media in HTML_TYPES:
        title, text = _html(text[:PARSE_MAX_CHARS])
    elif _is_json(media):
        _check_json(text)
    elif _is_xml(media):
        text = _xml_text(text[:PARSE_MAX_CHARS])
    return Extracted(title, text, charset)


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


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _is_xml(media: str) -> bool:
    return media in ("application/xml", "text/xml") or media.endswith("+xml")


def _html(document: str) -> tuple[str | None, str]:
    tree = LexborHTMLParser(_BLOCK_TAG.sub(_BREAK + "<", document))
    node = tree.css_first("head > title") or tree.css_first("title")
    title = None
    if node is not None:
        title = " ".join(node.text().replace(_BREAK, " ").split())[:TITLE_MAX_CHARS] or None
    tree.strip_tags(_NOT_MAIN_TEXT)
    articles = tree.css("article")
    main = (
        tree.css_first("main, [role=main]")
        or (articles[0] if len(articles) == 1 else None)
        or tree.body
        or tree.root
    )
    if main is None:
        return title, ""
    # Whitespace in the source is not layout: only the block breaks make lines.
    lines = (" ".join(part.split()) for part in main.text().split(_BREAK))
    return title, "\n".join(line for line in lines if line)


_TAG = re.compile(r"<[^>]*>")
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.DOTALL)


def _xml_text(document: str) -> str:
    # Regular expressions, not an XML parser: no entity expansion, so no billion laughs.
    return _lines(html.unescape(_TAG.sub("\n", _CDATA.sub(r"\1", document))))


def _lines(text: str) -> str:
    """Whitespace collapsed within lines; blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
