"""Which charset a body is decoded with, and how that was chosen.

The charset comes from the byte-order mark, then the Content-Type header, then `<meta
charset>` (HTML) or the XML declaration, then detection (charset-normalizer), each only if
it names one of the web's encodings (`WEB_CODECS`). Decoding never fails: undecodable bytes
become U+FFFD.
"""

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes

from app.content.types import header_charset, is_html, is_xml, media_type

META_SCAN_BYTES = 1024
"""The HTML spec's prescan: a <meta charset> must sit in the first 1024 bytes."""
DETECT_SAMPLE_BYTES = 64 * 1024

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


@dataclass(frozen=True)
class Charset:
    codec: str
    """The Python codec the body is decoded with."""
    source: str
    """How it was chosen: bom, header, meta (HTML or XML declaration), detected or default."""


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


def charset_of(body: bytes, content_type: str | None) -> Charset:
    """The charset to decode `body` with: BOM, header, in-document declaration, detection."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return Charset(name, "bom")
    declared = codec(header_charset(content_type))
    if declared:
        return Charset(declared, "header")
    media = media_type(content_type)
    pattern = _META_CHARSET if is_html(media) else _XML_ENCODING if is_xml(media) else None
    if pattern is not None:
        found = pattern.search(body[:META_SCAN_BYTES])
        declared = codec(found.group(1).decode("ascii")) if found else None
        if declared:
            return Charset(declared, "meta")
    return _detect(body)


def _detect(body: bytes) -> Charset:
    try:
        body.decode("utf-8")
        return Charset("utf-8", "detected")  # the common case, cheaper than the detector
    except UnicodeDecodeError:
        pass
    best = from_bytes(body[:DETECT_SAMPLE_BYTES]).best()
    found = best and codec(best.encoding)
    return Charset(found, "detected") if found else Charset("utf-8", "default")


def decode(body: bytes, charset: str) -> str:
    """Decode with replacement characters."""
    try:
        text = body.decode(charset, errors="replace")
    except (LookupError, ValueError):
        text = body.decode("utf-8", errors="replace")
    return text
