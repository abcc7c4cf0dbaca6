"""app.content.extract_title: the first <title> of an HTML head, or None."""

import pytest

from app.content import extract_title

HTML = "text/html"


@pytest.mark.parametrize(
    ("head", "title"),
    [
        (b"<html><head><title>Hello</title></head></html>", "Hello"),
        (b"<TITLE>Upper Case Tag</TITLE>", "Upper Case Tag"),
        (b"<title>A &amp; B &lt;c&gt;</title>", "A & B <c>"),
        (b"<title>&eacute;&#233;&#xe9; &quot;q&quot;</title>", 'ééé "q"'),
        (b"<title>  lots \n\t of \r\n  space  </title>", "lots of space"),
        (b"<title>a\xc2\xa0b</title>", "a b"),
        (b"<title>first</title><title>second</title>", "first"),
        (b"<title>x<b>y</b>z</title>", "xyz"),
        ("<title>café ☕</title>".encode(), "café ☕"),
        (b"<title>cut off at the end of the head", "cut off at the end of the head"),
    ],
)
def test_title_of_html(head: bytes, title: str) -> None:
    """The first title's text, entities decoded and whitespace collapsed to single spaces."""
    assert title == extract_title(head, HTML, None)


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"<html><head></head><body>no title</body></html>",
        b"<title></title>",
        b"<title>  \n\t </title>",
        b"<meta name='title' content='not a title'>",
    ],
)
def test_no_title_is_none(head: bytes) -> None:
    """A document without a title, or with a blank one, has no title."""
    assert None is extract_title(head, HTML, None)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html",
        "text/html; charset=utf-8",
        "TEXT/HTML; charset=UTF-8",
        " text/html ;charset=utf-8",
        "application/xhtml+xml",
        "application/xhtml+xml; charset=utf-8",
    ],
)
def test_html_content_types(content_type: str) -> None:
    """text/html and application/xhtml+xml, with or without parameters, are searched."""
    assert "T" == extract_title(b"<title>T</title>", content_type, None)


@pytest.mark.parametrize(
    "content_type",
    [None, "", "text/plain", "application/json", "image/svg+xml", "text/xml", "text/htmlx"],
)
def test_non_html_content_type_is_none(content_type: str | None) -> None:
    """Only HTML is searched; a title in any other type is ignored."""
    assert None is extract_title(b"<title>T</title>", content_type, None)


@pytest.mark.parametrize(
    ("head", "charset", "title"),
    [
        ("<title>café</title>".encode("latin-1"), "iso-8859-1", "café"),
        ("<title>café</title>".encode("latin-1"), "ISO-8859-1", "café"),
        ("<title>привет</title>".encode("koi8-r"), "koi8-r", "привет"),
        ("<title>日本語</title>".encode("shift_jis"), "shift_jis", "日本語"),
        ("<title>café</title>".encode("utf-16"), "utf-16", "café"),
        ("<title>café</title>".encode(), "utf-8", "café"),
    ],
)
def test_charset_is_used_to_decode(head: bytes, charset: str, title: str) -> None:
    """The given charset decodes the head."""
    assert title == extract_title(head, f"text/html; charset={charset}", charset)


def test_utf8_is_the_default_charset() -> None:
    """Without a charset the head is decoded as UTF-8."""
    assert "café" == extract_title("<title>café</title>".encode(), HTML, None)


def test_undecodable_bytes_are_replaced() -> None:
    """Bytes invalid in the charset become U+FFFD instead of failing."""
    assert "caf\ufffd" == extract_title(b"<title>caf\xe9</title>", HTML, "utf-8")


@pytest.mark.parametrize(
    "charset",
    [
        "x-no-such-charset",
        "",
        "base64",
        "rot13",
        "zlib",
        "idna",
        "punycode",
        "undefined",
        "utf-8\x00",
    ],
)
def test_unusable_charset_does_not_raise(charset: str) -> None:
    """A charset Python does not know, or cannot use for text, falls back to UTF-8."""
    head = "<title>café</title>".encode()

    assert "café" == extract_title(head, HTML, charset)


def test_long_title_is_truncated_to_1000_characters() -> None:
    """A title is cut to its first 1000 characters."""
    title = extract_title(b"<title>" + b"a" * 5000 + b"</title>", HTML, None)

    assert "a" * 1000 == title
