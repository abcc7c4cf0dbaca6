"""app.content.charsets: labels as the Encoding Standard reads them, the charset's sources in
order, detection that believes the detector only when sure, decoding that never fails."""

import codecs
from pathlib import Path

import pytest

from app.content.charsets import WEB_CODECS, Charset, charset_of, codec, decode
from app.content.extract import extract
from app.content.types import header_charset

DATA = Path(__file__).parent.parent / "data"
HTML = "text/html"
RUSSIAN = (
    "Привет, как дела? Это тест на кодировку. Мы пишем длинный текст, чтобы детектор "
    "мог понять, какая кодировка используется в документе. Москва - столица России. "
) * 3


@pytest.mark.parametrize(
    ("content_type", "charset"),
    [
        ("text/html; charset=utf-8", "utf-8"),
        ('text/html; charset="ISO-8859-1"', "ISO-8859-1"),
        ("text/html; format=flowed; Charset=koi8-r", "koi8-r"),
        ("text/html", None),
        ("text/html; charset=", None),
        (None, None),
    ],
)
def test_header_charset(content_type: str | None, charset: str | None) -> None:
    """The charset parameter, unquoted; None when absent or empty."""
    assert charset == header_charset(content_type)


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        (" \tUnicode-1-1-UTF-8\n\f\r", "utf-8"),  # ASCII whitespace trimmed, case folded
        ("latin1", "cp1252"),  # the ISO-8859-1 and ASCII labels are windows-1252 on the web
        ("ISO-8859-1", "cp1252"),
        ("iso_8859-1:1987", "cp1252"),
        ("ascii", "cp1252"),
        ("US-ASCII", "cp1252"),
        ("windows-1252", "cp1252"),
        ("iso-8859-9", "cp1254"),
        ("latin5", "cp1254"),
        ("tis-620", "cp874"),
        ("iso-8859-11", "cp874"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("gb18030", "gb18030"),
        ("shift_jis", "cp932"),
        ("sjis", "cp932"),
        ("ms932", "cp932"),
        ("euc-jp", "euc_jp"),
        ("iso-2022-jp", "iso2022_jp"),
        ("euc-kr", "cp949"),
        ("ks_c_5601-1987", "cp949"),
        ("big5", "big5hkscs"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        ("macintosh", "mac-roman"),
        ("koi8-r", "koi8-r"),
        ("koi8-ru", "koi8-u"),
        ("iso-8859-8-i", "iso8859-8"),
        ("windows-1251", "cp1251"),
        ("utf-16", "utf-16-le"),
        ("UTF-16BE", "utf-16-be"),
        ("unicodefffe", "utf-16-be"),
    ],
)
def test_codec_of_a_label(label: str, name: str) -> None:
    """A label of the Encoding Standard resolves to the Python codec of its encoding."""
    assert name == codec(label)


@pytest.mark.parametrize(
    "label",
    [
        "utf-7",
        "UTF7",
        "x-user-defined",  # bytes into the Private Use Area: no text
        "replacement",
        "iso-2022-kr",
        "csiso2022kr",
        "hz-gb-2312",
        "iso-2022-cn",
        "iso-2022-cn-ext",
        "rot13",
        "cp037",
        "base64",
        "zlib",
        "idna",
        "undefined",
        "utf-32",
        "cp850",
        "latin_1",  # Python's name, no label
        "u8",
        "x-no-such-charset",
        "utf-8\x00",
        "utf-8\xa0",  # only ASCII whitespace is trimmed
        "\u212aoi8-r",  # only ASCII is lower-cased: the Kelvin sign is no K
        "",
        None,
    ],
)
def test_a_label_outside_the_standard_is_no_charset(label: str | None) -> None:
    """Labels the Encoding Standard lacks or refuses are no charset, whatever Python decodes."""
    assert None is codec(label)


def test_every_web_codec_is_a_python_codec_by_its_own_name() -> None:
    """Each codec a label resolves to is Python's canonical name of a codec it has."""
    assert sorted(WEB_CODECS) == sorted(codecs.lookup(name).name for name in WEB_CODECS)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (codecs.BOM_UTF8 + b"x", "text/html; charset=koi8-r", Charset("utf-8", "bom")),
        (codecs.BOM_UTF16_LE + b"x\x00", HTML, Charset("utf-16-le", "bom")),
        (codecs.BOM_UTF16_BE + b"\x00x", HTML, Charset("utf-16-be", "bom")),
        (b"\xff\xfe\x00\x00", None, Charset("utf-16-le", "bom")),  # the web has no UTF-32
        (b"<meta charset=koi8-r>", "text/html; charset=Shift_JIS", Charset("cp932", "header")),
        (b"x", "text/plain; charset=latin1", Charset("cp1252", "header")),
        (b"<meta charset=koi8-r>", HTML, Charset("koi8-r", "meta")),
        (b"<META CHARSET='windows-1251'>", HTML, Charset("cp1251", "meta")),
        (
            b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
            HTML,
            Charset("cp1251", "meta"),
        ),
        (b'<meta charset="utf-16">', HTML, Charset("utf-8", "meta")),  # read as ASCII: not it
        (b'<meta charset="x-user-defined">', HTML, Charset("cp1252", "meta")),  # HTML's rule
        (b'<?xml version="1.0" encoding="koi8-r"?><a/>', "text/xml", Charset("koi8-r", "meta")),
        (b"<meta charset=koi8-r>", "text/plain", Charset("utf-8", "detected")),  # HTML's only
        ("naïve café".encode(), "text/plain", Charset("utf-8", "detected")),
        (b"", None, Charset("utf-8", "detected")),
        (RUSSIAN.encode("cp1251"), "text/plain", Charset("cp1251", "detected")),
        (RUSSIAN.encode("koi8-r"), "text/plain", Charset("koi8-r", "detected")),
        ("<p>Grüße aus München</p>".encode("cp1252"), HTML, Charset("cp1252", "default")),
        ("Grüße aus München".encode("cp1252"), "text/plain", Charset("utf-8", "default")),
    ],
)
def test_the_source_of_a_charset(body: bytes, content_type: str | None, expected: Charset) -> None:
    """BOM, then header, then <meta> or XML declaration, then detection, then the default
    (windows-1252 for HTML, UTF-8 otherwise)."""
    assert expected == charset_of(body, content_type)


def test_meta_after_the_first_1024_bytes_is_not_read() -> None:
    """Like browsers, only the first 1024 bytes are searched for <meta charset>."""
    body = b" " * 1024 + b'<meta charset="koi8-r">'
    assert Charset("utf-8", "detected") == charset_of(body, HTML)


@pytest.mark.parametrize(
    "label", ["bogus", "utf-7", "x-user-defined", "iso-2022-kr", "hz-gb-2312", "cp037"]
)
def test_a_header_charset_outside_the_standard_falls_through_to_meta(label: str) -> None:
    """A header charset that is no web encoding is skipped, not fatal: <meta> decides."""
    body = b'<meta charset="windows-1251">'
    assert Charset("cp1251", "meta") == charset_of(body, f"text/html; charset={label}")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain; charset=utf-7",
        "text/plain; charset=hz",
        "text/plain; charset=cp037",
        "text/plain; charset=iso-2022-kr",
    ],
)
def test_a_charset_that_is_no_web_encoding_is_ignored(content_type: str) -> None:
    """Declared UTF-7, HZ, EBCDIC or ISO-2022-KR is not believed: detection decides (UTF-8
    here), so UTF-7's `+2AA-` stays as it is, not a lone surrogate."""
    extracted = extract(b"+2AA- ~{<:Ky2;S{#,~}", content_type)
    assert ("utf-8", "+2AA- ~{<:Ky2;S{#,~}") == (extracted.metadata.charset, extracted.text)


def test_a_meta_charset_that_is_no_web_encoding_is_ignored() -> None:
    """<meta charset="utf-7"> is not believed either."""
    body = b'<meta charset="utf-7"><title>+2AA-</title>'
    extracted = extract(body, HTML)
    assert ("utf-8", "+2AA-") == (extracted.metadata.charset, extracted.metadata.title)


def test_an_undeclared_french_windows_1252_page_is_windows_1252() -> None:
    """The reported page (charset-normalizer says cp1250: "crčme", "ŕ la") is windows-1252,
    its words intact."""
    extracted = extract((DATA / "french-cp1252.html").read_bytes(), HTML)
    words = ("crème", "à la", "œuvre", "d’œufs", "9,50 €", "café…", "Étienne")  # noqa: RUF001
    assert ("cp1252", "detected", [True] * len(words)) == (
        extracted.metadata.charset,
        extracted.metadata.charset_source,
        [word in extracted.text for word in words],
    )


@pytest.mark.parametrize(
    ("page", "expected", "words"),
    [
        ("german-cp1252", "cp1252", "außergewöhnlich „Wir 12 €"),
        ("spanish-cp1252", "cp1252", "¿Buscas montaña ¡No"),
        ("italian-cp1252", "cp1252", "lunedì «È un’attesa più"),  # noqa: RUF001
        ("portuguese-cp1252", "cp1252", "Não pastéis estaladiça"),
        ("english-cp1252", "cp1252", "that’s “temporary” — five years…"),  # noqa: RUF001
        ("polish-cp1250", "cp1250", "Październik Kościeliska żurek Świnicę"),
        ("czech-cp1250", "cp1250", "Břehy tržiště Dvořáková čtvrtek"),
        ("hungarian-cp1250", "cp1250", "befejeződik felújításának budapestieké"),
        ("turkish-cp1254", "cp1254", "İstanbul'da Boğaz kıyısında Beşiktaş"),  # noqa: RUF001
        ("russian-cp1251", "cp1251", "Петербург Эрмитаже Чайковского"),
        ("russian-koi8-r", "koi8-r", "Петербург Эрмитаже Чайковского"),
        ("greek-cp1253", "cp1253", "Ναύπλιο Πελοποννήσου 8 €"),
        ("japanese-shift_jis", "cp932", "京都の紅葉 ㈱関西ニュース"),
        ("japanese-euc-jp", "euc_jp", "京都の紅葉 永観堂"),
        ("chinese-gbk", "gb18030", "杭州西湖 龙井村"),
        ("chinese-big5", "big5hkscs", "大稻埕 迪化街"),
    ],
)
def test_an_undeclared_page_in_its_language_s_encoding(
    page: str, expected: str, words: str
) -> None:
    """Undeclared pages in their language's legacy encoding decode to their words: Western
    ones as windows-1252 (detected or by default), others as the detector reads them."""
    body = (DATA / f"{page}.html").read_bytes()
    charset = charset_of(body, HTML)
    text = decode(body, charset.codec)
    assert (expected, []) == (charset.codec, [word for word in words.split() if word not in text])


@pytest.mark.parametrize(
    "text",
    [
        "Meet me at the café tomorrow.",  # the detector: windows-1251
        "Hällö wörld",  # windows-1251
        "Über uns",  # x-mac-cyrillic
        "¿Qué pasó? ¡Olé!",  # windows-1253
        "Smørrebrød og rødgrød med fløde",  # Big5
    ],
)
def test_a_short_western_page_is_windows_1252(text: str) -> None:
    """A few accented letters tell the detector too little: the page is windows-1252."""
    body = f"<p>{text}</p>".encode("cp1252")
    assert ("cp1252", text) == (
        charset_of(body, HTML).codec,
        decode(body, charset_of(body, HTML).codec)[3:-4],
    )


@pytest.mark.parametrize(
    ("page", "expected"), [("czech-cp1250", "cp1250"), ("chinese-big5", "big5hkscs")]
)
def test_scripts_and_styles_do_not_hide_a_page_s_text(page: str, expected: str) -> None:
    """The detector reads a page's text: 100 KiB of inline script and style before it
    (past the 64 KiB sample) leave it detected."""
    script = b"<script>var config = {theme: 'light', lazy: true};</script>\n" * 1200
    style = b"<style>nav a { color: #333; padding: 0.5rem 1rem; }</style>\n" * 600
    body = (DATA / f"{page}.html").read_bytes().replace(b"</head>", script + style + b"</head>")
    assert Charset(expected, "detected") == charset_of(body, HTML)


def test_a_long_multi_byte_page_is_cut_between_characters() -> None:
    """A Big5 page longer than the sample is cut between characters, not inside one (the
    detector drops an encoding a cut character fails to decode)."""
    page = (DATA / "chinese-big5.html").read_bytes()
    head, _, rest = page.partition(b"<article>")
    article, _, tail = rest.partition(b"</article>")
    body = head + article * (100_000 // len(article)) + tail
    assert Charset("big5hkscs", "detected") == charset_of(body, HTML)


@pytest.mark.parametrize(
    ("body", "name", "expected"),
    [
        (codecs.BOM_UTF8 + "café".encode(), "utf-8", "café"),
        (codecs.BOM_UTF16_LE + "café".encode("utf-16-le"), "utf-16-le", "café"),
        (codecs.BOM_UTF16_BE + "café".encode("utf-16-be"), "utf-16-be", "café"),
        (b"caf\xe9", "utf-8", "caf\ufffd"),
        (b"a\x00b", "utf-16-le", "a\ufffd"),  # an odd byte at the end
        (b"\x81\x40\x81", "cp932", "\u3000\ufffd"),  # a character cut short
        (b"caf\xc3\xa9", "no-such-codec", "café"),  # UTF-8 then
        (b"caf\xc3\xa9", "utf-8\x00", "café"),
    ],
)
def test_decode_never_fails(body: bytes, name: str, expected: str) -> None:
    """Decoding drops a leading BOM, turns undecodable bytes into U+FFFD and never raises."""
    assert expected == decode(body, name)


def test_a_byte_order_mark_is_not_in_the_text() -> None:
    """A BOM chooses the charset and is no part of the text (no U+FEFF)."""
    body = codecs.BOM_UTF16_LE + "<title>café</title>".encode("utf-16-le")
    extracted = extract(body, "text/html; charset=iso-8859-1")
    assert ("utf-16-le", "bom", "café") == (
        extracted.metadata.charset,
        extracted.metadata.charset_source,
        extracted.metadata.title,
    )
