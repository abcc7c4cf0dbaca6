"""app.content: media types, charset choice, title and main text, JSON checks."""

import codecs

import pytest

from app.content.charsets import charset_of as charset_choice
from app.content.charsets import codec
from app.content.extract import PARSE_MAX_CHARS, extract
from app.content.html import TITLE_MAX_CHARS
from app.content.types import UnparseableContent, header_charset, is_allowed_type, media_type
from app.settings import DEFAULT_CONTENT_TYPES

HTML = "text/html"


def charset_of(body: bytes, content_type: str | None) -> str:
    return charset_choice(body, content_type).codec


# ---- media types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "media"),
    [
        ("text/html", "text/html"),
        ("TEXT/HTML; charset=UTF-8", "text/html"),
        (" text/html ;charset=utf-8", "text/html"),
        ("application/ld+json", "application/ld+json"),
        ("", ""),
        (None, ""),
    ],
)
def test_media_type(content_type: str | None, media: str) -> None:
    """The media type is the lower-cased part before any parameter."""
    assert media == media_type(content_type)


@pytest.mark.parametrize(
    ("media", "allowed"),
    [
        ("text/html", True),
        ("application/json", True),
        ("text/markdown", True),
        ("application/octet-stream", False),
        ("image/png", False),
        ("application/pdf", False),
        ("text/htmlx", False),
        ("text/csv", False),
        ("", False),
    ],
)
def test_default_allow_list(media: str, allowed: bool) -> None:
    """The default INGEST_ALLOWED_CONTENT_TYPES admits text formats only, and not a missing type."""
    assert allowed == is_allowed_type(media, DEFAULT_CONTENT_TYPES)


def test_wildcard_admits_a_whole_type() -> None:
    """`text/*` in the allow-list admits text/csv but not application/csv."""
    allowed = ("text/*",)
    assert (True, False) == (
        is_allowed_type("text/csv", allowed),
        is_allowed_type("application/csv", allowed),
    )


# ---- charsets -----------------------------------------------------------------------------


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
        ("koi8-r", "koi8-r"),
        ("ISO-8859-1", "cp1252"),  # what the web means by it (WHATWG)
        ("us-ascii", "cp1252"),
        ("shift_jis", "shift_jis"),
        ("x-no-such-charset", None),
        ("", None),
        ("base64", None),
        ("rot13", None),
        ("zlib", None),
        ("idna", None),
        ("punycode", None),
        ("undefined", None),
        ("utf-8\x00", None),
        (None, None),
        ("latin5", "iso8859-9"),
        ("ms932", "cp932"),
        ("x-mac-cyrillic", None),  # a web encoding's label that Python does not know
        ("utf-7", None),
        ("UTF7", None),
        ("hz-gb-2312", None),
        ("iso-2022-kr", None),
        ("cp037", None),
        ("utf-32", None),
        ("cp850", None),
    ],
)
def test_codec(label: str | None, name: str | None) -> None:
    """Labels of the web's encodings map to Python codecs; any other label (no text charset,
    or one that no web encoding is) maps to None."""
    assert name == codec(label)


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


def test_bom_wins_over_the_header() -> None:
    """A byte-order mark decides, whatever the header says."""
    body = codecs.BOM_UTF16_LE + "<title>café</title>".encode("utf-16-le")
    assert "utf-16" == charset_of(body, "text/html; charset=iso-8859-1")


def test_header_wins_over_meta() -> None:
    """The Content-Type charset comes before a <meta charset>."""
    body = b'<meta charset="koi8-r"><title>x</title>'
    assert "shift_jis" == charset_of(body, "text/html; charset=shift_jis")


@pytest.mark.parametrize(
    "head",
    [
        b'<meta charset="windows-1251">',
        b"<META CHARSET=windows-1251>",
        b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
    ],
)
def test_meta_charset_when_the_header_has_none(head: bytes) -> None:
    """Without a header charset, <meta charset> or its http-equiv form decides."""
    assert "cp1251" == charset_of(head + b"<title>x</title>", HTML)


def test_meta_after_the_first_1024_bytes_is_not_read() -> None:
    """Like browsers, only the first 1024 bytes are searched for <meta charset>."""
    body = b" " * 1024 + b'<meta charset="koi8-r">'
    assert "utf-8" == charset_of(body, HTML)


def test_unusable_header_charset_falls_through_to_meta() -> None:
    """A header charset Python cannot use is skipped, not fatal."""
    assert "cp1251" == charset_of(b'<meta charset="windows-1251">', "text/html; charset=bogus")


def test_xml_declaration() -> None:
    """XML without a header charset uses its declaration's encoding."""
    body = b'<?xml version="1.0" encoding="koi8-r"?><a/>'
    assert "koi8-r" == charset_of(body, "application/xml")


@pytest.mark.parametrize("encoding", ["koi8-r", "cp1251"])
def test_detection_when_nothing_is_declared(encoding: str) -> None:
    """Undeclared, non-UTF-8 text is detected (charset-normalizer)."""
    text = (
        "Привет, как дела? Это тест на кодировку. Мы пишем длинный текст, чтобы детектор "
        "мог понять, какая кодировка используется в документе. Москва - столица России. "
    ) * 3
    assert codec(encoding) == charset_of(text.encode(encoding), "text/plain")


def test_valid_utf8_is_utf8() -> None:
    """Undeclared bytes that are valid UTF-8 are UTF-8."""
    assert "utf-8" == charset_of("naïve café".encode(), "text/plain")


# ---- titles -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "title"),
    [
        ("<html><head><title>Hello</title></head></html>", "Hello"),
        ("<TITLE>Upper Case Tag</TITLE>", "Upper Case Tag"),
        ("<title>A &amp; B &lt;c&gt;</title>", "A & B <c>"),
        ("<title>&eacute;&#233;&#xe9; &quot;q&quot;</title>", 'ééé "q"'),
        ("<title>  lots \n\t of \r\n  space  </title>", "lots of space"),
        ("<title>a\xa0b</title>", "a b"),
        ("<title>first</title><title>second</title>", "first"),
        ("<title>x<b>y</b>z</title>", "x<b>y</b>z"),  # title is raw text in HTML
        ("<title>café ☕</title>", "café ☕"),
        ("<title>cut off at the end", "cut off at the end"),
        ("<body><p>x</p><title>late</title></body>", "late"),
    ],
)
def test_title_of_html(document: str, title: str) -> None:
    """The first title's text, entities decoded and whitespace collapsed to single spaces."""
    assert title == extract(document.encode(), "text/html").metadata.title


@pytest.mark.parametrize(
    "document",
    [
        "",
        "<html><head></head><body>no title</body></html>",
        "<title></title>",
        "<title>  \n\t </title>",
        "<meta name='title' content='not a title'>",
    ],
)
def test_no_title_is_none(document: str) -> None:
    """A document without a title, or with a blank one, has no title."""
    assert None is extract(document.encode(), "text/html").metadata.title


def test_long_title_is_truncated() -> None:
    """A title is cut to its first TITLE_MAX_CHARS characters."""
    document = "<title>" + "a" * 5000 + "</title>"
    assert "a" * TITLE_MAX_CHARS == extract(document.encode(), "text/html").metadata.title


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/json", "text/xml", "text/markdown"],
)
def test_only_html_has_a_title(content_type: str | None) -> None:
    """A <title> in any other type than HTML is not a title."""
    body = b'"<title>T</title>"' if content_type == "application/json" else b"<title>T</title>"
    assert None is extract(body, content_type).metadata.title


# ---- main text ----------------------------------------------------------------------------


PAGE = """<!doctype html><html><head><title>The page</title>
<style>body { color: red }</style><script>var tracking = 1;</script></head>
<body><header>Site name</header><nav><a href="/">Home</a> <a href="/a">About</a></nav>
<main><h1>Heading</h1><p>First <b>bold</b> paragraph.</p><div>Second<br>line</div>
<ul><li>one</li><li>two</li></ul><form><button>Subscribe</button></form></main>
<aside>Related links</aside><footer>(c) 2026</footer><noscript>enable js</noscript>
</body></html>"""


def test_main_text_of_html() -> None:
    """Main text: one line per block, without scripts, styles, navigation, chrome or forms."""
    expected = "Heading\nFirst bold paragraph.\nSecond\nline\none\ntwo"
    assert ("The page", expected) == (
        extract(PAGE.encode(), HTML).metadata.title,
        extract(PAGE.encode(), HTML).text,
    )


def test_without_main_the_body_is_the_main_text() -> None:
    """No <main>: the body's text, chrome removed."""
    body = b"<body><nav>menu</nav><p>Only this.</p><footer>foot</footer></body>"
    assert "Only this." == extract(body, HTML).text


def test_single_article_is_the_main_text() -> None:
    """Without <main>, a page's only <article> is its main text."""
    body = b"<body><div>sidebar text</div><article><p>The story.</p></article></body>"
    assert "The story." == extract(body, HTML).text


def test_html_is_decoded_with_its_meta_charset() -> None:
    """The body is decoded with the charset found, title and text alike."""
    body = '<meta charset="koi8-r"><title>Привет</title><p>мир</p>'.encode("koi8-r")
    extracted = extract(body, HTML)
    assert ("Привет", "мир", "koi8-r") == (
        extracted.metadata.title,
        extracted.text,
        extracted.metadata.charset,
    )


def test_undecodable_bytes_are_replaced() -> None:
    """Bytes invalid in the declared charset become U+FFFD instead of failing."""
    assert "caf\ufffd" == extract(b"caf\xe9", "text/plain; charset=utf-8").text


def test_nul_is_kept() -> None:
    """NUL characters are kept: the store replaces them (app.strings.storable_text)."""
    assert "a\x00b" == extract(b"a\x00b", "text/plain").text


def test_plain_text_is_its_own_text() -> None:
    """text/plain and text/markdown keep their lines as they are."""
    body = b"# Title\n\n  indented *line*\n"
    assert body.decode() == extract(body, "text/markdown").text


def test_xml_text_is_between_the_tags() -> None:
    """XML: the text of its elements, CDATA unwrapped and entities decoded, no tags."""
    body = (
        b'<?xml version="1.0"?><rss><channel><title>News &amp; more</title>'
        b"<item><description><![CDATA[<p>Body</p>]]></description></item></channel></rss>"
    )
    assert "News & more\nBody" == extract(body, "application/rss+xml").text


@pytest.mark.parametrize(
    "body",
    [b'{"a": [1, 2, {"b": null}]}', b"[]", b'"just a string"', '{"é": "ü"}'.encode("utf-16")],
)
def test_json_that_parses(body: bytes) -> None:
    """Valid JSON is kept, its text being the document itself."""
    assert (
        body.decode(charset_of(body, "application/json")) == extract(body, "application/json").text
    )


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        (b"<html>oops</html>", "application/json; charset=utf-8"),
        (b'{"a": 1} trailing', "application/problem+json"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
    ],
)
def test_json_that_does_not_parse_is_unparseable(body: bytes, content_type: str) -> None:
    """JSON that does not parse (or nests past the parser) raises UnparseableContent."""
    with pytest.raises(UnparseableContent):
        extract(body, content_type)


@pytest.mark.parametrize("body", [b"NaN", b"[Infinity]", b'{"a": -Infinity}'])
def test_json_constants_python_accepts_are_not_json(body: bytes) -> None:
    """NaN and Infinity, which Python's json reads, are not JSON: UnparseableContent."""
    with pytest.raises(UnparseableContent):
        extract(body, "application/json")


def test_large_json_is_checked_whole() -> None:
    """An array of a million small objects parses (checked without building it)."""
    body = b"[" + b",".join([b'{"k": 1.5}'] * 1_000_000) + b"]"
    assert len(body) == len(extract(body, "application/json").text)


def test_html_is_parsed_for_text_up_to_the_parse_limit() -> None:
    """Text after PARSE_MAX_CHARS of markup is not extracted; the title before it is."""
    body = b"<title>T</title><p>early</p>" + b" " * PARSE_MAX_CHARS + b"<p>late</p>"
    extracted = extract(body, HTML)
    assert ("T", "early") == (extracted.metadata.title, extracted.text)
