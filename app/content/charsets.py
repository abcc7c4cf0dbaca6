"""Which charset a body is decoded with, and how that was chosen, as browsers decide it.

In order: a byte-order mark (UTF-8 or UTF-16); the Content-Type charset; for HTML a `<meta
charset>` in the first 1024 bytes, for XML its declaration; then, with nothing declared,
detection (`_detect`): bytes that are valid UTF-8 are UTF-8, else charset-normalizer's answer
when it is sure, else the default: windows-1252 for HTML, as browsers read an unlabelled
Western page (WHATWG), UTF-8 for any other type.

A label counts only if it is one of the Encoding Standard's (`codec`): Python's own codec
names are no fallback, since they take "rot13", "utf-7" or "cp037" for text encodings.
Decoding never fails: undecodable bytes become U+FFFD. Pure functions, no I/O.
"""

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes

from app.content.types import header_charset, is_html, is_xml, media_type

META_SCAN_BYTES = 1024
"""The HTML spec's prescan: a <meta charset> must sit in the first 1024 bytes."""
DETECT_SCAN_BYTES = 512 * 1024
"""How much of an undeclared, non-UTF-8 page is read for its text (markup left out)."""
DETECT_SAMPLE_BYTES = 64 * 1024
"""How much of that text the detector reads."""
MIN_EVIDENCE_BYTES = 16
"""Fewer non-ASCII bytes in that text tell no encoding from another: the detector reads
"Hällö wörld" as windows-1251 and "Smørrebrød" as Big5."""
OTHER_SCRIPT_SHARE = 0.3
"""A reading in a script other than Latin (Cyrillic, Greek, CJK, ...) is believed only when
non-ASCII bytes are at least this share of the letters: nearly all on a Russian or Chinese
page, a few in a hundred on a Western or Central European one."""

# The Python codec of each encoding of https://encoding.spec.whatwg.org/#names-and-labels,
# with all its labels. Where Python's codec differs from the standard's decoder, the closest:
# - windows-1252 has the ISO-8859-1 and ASCII labels: browsers decode those as windows-1252.
# - GBK decodes as gb18030, its superset, as the standard's GBK decoder does; Big5 as
#   big5hkscs, whose extensions the standard's Big5 index holds.
# - Shift_JIS as cp932 (Windows-31J): the standard's index holds the NEC and IBM extensions
#   (①, ㈱, 髙) that Python's shift_jis turns into U+FFFD; cp932 differs from it only in
#   the code points of a few look-alikes (U+FF5E for U+301C, U+FF0D for U+2212).
# - EUC-KR as cp949 (the standard's EUC-KR is Windows' UHC).
# - ISO-8859-8-I decodes as ISO-8859-8; UTF-16 means little-endian without a BOM.
# Left out: UTF-7 and every other label (no charset of the web), x-user-defined (its decoder
# puts bytes into the Private Use Area: no text), and the "replacement" labels (csiso2022kr,
# hz-gb-2312, iso-2022-cn, iso-2022-cn-ext, iso-2022-kr, replacement), which browsers refuse
# to decode because their escapes can hide markup.
_LABELS_OF_CODEC = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2"
    " iso_8859-2:1987 l2 latin2",
    "iso8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3"
    " iso_8859-3:1988 l3 latin3",
    "iso8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4"
    " iso_8859-4:1988 l4 latin4",
    "iso8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595"
    " iso_8859-5 iso_8859-5:1988",
    "iso8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114"
    " iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6"
    " iso_8859-6:1987",
    "iso8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126"
    " iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138"
    " iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual"
    " csiso88598i iso-8859-8-i logical",
    "iso8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "mac-roman": "csmacintosh mac macintosh x-mac-roman",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100"
    " iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252"
    " x-cp1252",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9"
    " iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gb18030": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58"
    " x-gbk gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022_jp": "csiso2022jp iso-2022-jp",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989"
    " ksc5601 ksc_5601 windows-949",
    "utf-16-be": "unicodefffe utf-16be",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
}
_CODEC_OF_LABEL = {
    label: name for name, labels in _LABELS_OF_CODEC.items() for label in labels.split()
}
WEB_CODECS = frozenset(_LABELS_OF_CODEC)
"""The Python codecs the web's encodings decode with, as `codecs.lookup` names them."""

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),  # no UTF-32: the web has none, FF FE 00 00 is UTF-16
)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([-\w.:]+)", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([-\w.:]+)[\"']")


@dataclass(frozen=True)
class Charset:
    codec: str
    """The Python codec the body is decoded with."""
    source: str
    """How it was chosen: bom, header, meta (HTML or XML declaration), detected or default."""


def codec(label: str | None) -> str | None:
    """The Python codec of an Encoding Standard label (`latin1` -> cp1252), or None for any
    other label: then the next source of the charset decides (`charset_of`). Like the
    standard's "get an encoding", the label is trimmed of ASCII whitespace and lower-cased
    (ASCII only: the Kelvin sign does not lower-case into a "k" of "koi8-r")."""
    if not label or not label.isascii():
        return None
    return _CODEC_OF_LABEL.get(label.strip("\t\n\f\r ").lower())


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
        declared = _in_document(found.group(1).decode("ascii")) if found else None
        if declared:
            return Charset(declared, "meta")
    return _detect(body, media)


def decode(body: bytes, codec: str) -> str:
    """`body` as text: undecodable bytes become U+FFFD, a leading BOM is dropped. Never
    raises; a codec Python does not know decodes as UTF-8."""
    try:
        text = body.decode(codec, errors="replace")
    except (LookupError, ValueError):  # ValueError: a name holding NUL
        text = body.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


def _in_document(label: str) -> str | None:
    """A charset a document names for itself, as HTML's prescan reads it: UTF-16 is UTF-8
    (the declaration was read as ASCII, so the bytes are not UTF-16), x-user-defined is
    windows-1252."""
    if label.strip().lower() == "x-user-defined":
        return "cp1252"
    name = codec(label)
    return "utf-8" if name in ("utf-16-le", "utf-16-be") else name


# The languages each encoding is written in, as charset-normalizer names them: its answer
# is believed only for a language its encoding is made for.
_WESTERN = "Danish Dutch English Finnish French German Indonesian Italian Norwegian Portuguese"
_WESTERN += " Spanish Swedish"
_CENTRAL_EUROPEAN = "Croatian Czech Hungarian Polish Romanian Slovak Slovene"
_CYRILLIC = "Bulgarian Russian Serbian Ukrainian"
_LANGUAGES_OF_CODEC = {
    "cp1252": _WESTERN,
    "cp1250": _CENTRAL_EUROPEAN,
    "iso8859-2": _CENTRAL_EUROPEAN,
    "cp1257": "Estonian Lithuanian",
    "iso8859-13": "Estonian Lithuanian",
    "cp1254": "Turkish",
    "cp1251": _CYRILLIC,
    "koi8-r": _CYRILLIC,
    "koi8-u": _CYRILLIC,
    "iso8859-5": _CYRILLIC,
    "cp866": _CYRILLIC,
    "mac-cyrillic": _CYRILLIC,
    "cp1253": "Greek",
    "iso8859-7": "Greek",
    "cp1255": "Hebrew",
    "iso8859-8": "Hebrew",
    "cp1256": "Arabic Farsi",
    "iso8859-6": "Arabic Farsi",
    "cp874": "Thai",
    "cp1258": "Vietnamese",
    "cp932": "Japanese",
    "euc_jp": "Japanese",
    "gb18030": "Chinese",
    "big5hkscs": "Chinese",
    "cp949": "Korean",
}
# charset-normalizer's codecs (Python's names) that the web reads with another codec.
_DETECTED_AS = {
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "iso8859-15": "cp1252",
    "shift_jis": "cp932",
    "euc_jis_2004": "euc_jp",
    "euc_jisx0213": "euc_jp",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "cp950": "big5hkscs",
    "euc_kr": "cp949",
    "tis-620": "cp874",
    "iso8859-11": "cp874",
    "iso8859-9": "cp1254",
}
_LATIN_CODECS = frozenset(
    {"cp1252", "cp1250", "iso8859-2", "cp1257", "iso8859-13", "cp1254", "cp1258"}
)
_NON_ASCII = bytes(range(0x80, 0x100))
_ASCII_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RAW_TEXT = re.compile(rb"<(script|style)\b")
_TAG = re.compile(rb"<[^<>]*>")  # up to the next < too, so an unclosed tag costs one pass


def _detect(body: bytes, media: str) -> Charset:
    """Valid UTF-8 is UTF-8. Else charset-normalizer's reading, when sure (`_believed`), else
    the default: windows-1252 for HTML, UTF-8 for any other type."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return Charset("utf-8", "detected")  # the common case, cheaper than the detector
    found = _believed(_sample(body, media))
    if found:
        return Charset(found, "detected")
    return Charset("cp1252" if is_html(media) else "utf-8", "default")


def _believed(sample: bytes) -> str | None:
    """The first of the detector's readings whose encoding is written in the language that
    reading looks like (Czech in windows-1250, Russian in KOI8-R), windows-1252 tried first
    as browsers default to it; None when the sample says too little (`MIN_EVIDENCE_BYTES`),
    or for a script other than Latin, when too few of its letters are non-ASCII.

    The detector calls a German page windows-1250 (alike but for a few letters), a French one
    windows-1250 too ("crème" read as "crčme"), a Danish one Big5: none is believed."""
    non_ascii = len(sample) - len(sample.translate(None, _NON_ASCII))
    if non_ascii < MIN_EVIDENCE_BYTES:
        return None
    ascii_letters = len(sample) - len(sample.translate(None, _ASCII_LETTERS))
    other_script = non_ascii >= OTHER_SCRIPT_SHARE * (non_ascii + ascii_letters)
    readings = sorted(
        ((_web_codec(match.encoding), match.language) for match in from_bytes(sample)),
        key=lambda reading: reading[0] != "cp1252",
    )
    for name, language in readings:
        if name is None or (name not in _LATIN_CODECS and not other_script):
            continue
        # "English—": charset-normalizer marks a variant of a language with dashes.
        if language.rstrip("\u2014") in _LANGUAGES_OF_CODEC.get(name, "").split():
            return name
    return None


def _web_codec(python_name: str) -> str | None:
    """The web's codec for a Python codec name charset-normalizer gives (not a label)."""
    name = codecs.lookup(python_name).name
    name = _DETECTED_AS.get(name, name)
    return name if name in WEB_CODECS else None


def _sample(body: bytes, media: str) -> bytes:
    """What the detector reads: for HTML and XML their text, without scripts, styles and
    tags, whose ASCII would outweigh the few bytes that tell encodings apart."""
    window = body[:DETECT_SCAN_BYTES]
    text = _text_of(window) if is_html(media) or is_xml(media) else window
    sample = text[:DETECT_SAMPLE_BYTES]
    if len(window) == len(body) and len(sample) == len(text):
        return sample  # the whole text
    # Cut after a space, which is no part of a multi-byte character: a character cut in two
    # makes the detector give up its encoding (a Big5 page read as nothing).
    cut = max(sample.rfind(b" "), sample.rfind(b"\n"))
    return sample[: cut + 1] if cut > 0 else sample


def _text_of(markup: bytes) -> bytes:
    """The text of markup: scripts and styles dropped with their content, tags dropped,
    whitespace collapsed. One pass: an unclosed <script> ends the text."""
    lowered = markup.lower()
    parts = []
    at = 0
    while (raw := _RAW_TEXT.search(lowered, at)) is not None:
        parts.append(markup[at : raw.start()])
        end = lowered.find(b"</" + raw.group(1), raw.end())
        at = len(markup) if end < 0 else end
    parts.append(markup[at:])
    return b" ".join(_TAG.sub(b" ", b"".join(parts)).split())
