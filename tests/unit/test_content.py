"""app.content: media types, title and main text, JSON checks (charsets: test_charsets)."""

import copy
from pathlib import Path

import pytest

from app.content import html
from app.content.charsets import charset_of, decode
from app.content.extract import PARSE_MAX_CHARS, extract
from app.content.metadata import FIELD_MAX_CHARS as TITLE_MAX_CHARS
from app.content.types import UnparseableContent, is_allowed_type, media_type
from app.settings import DEFAULT_CONTENT_TYPES

HTML = "text/html"


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
        ("application/pdf", True),
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


DATA = Path(__file__).resolve().parents[1] / "data"


def page(name: str) -> str:
    """The main text of the hand-written page tests/data/NAME.html."""
    return extract((DATA / f"{name}.html").read_bytes(), HTML, url="https://courier.example/").text


def test_an_articles_main_text_is_the_story_alone() -> None:
    """A news article's text keeps its headline, paragraphs and list, in order, and drops the
    site's chrome, the share links, the advert, the tags, the comments and the sidebar."""
    text = page("article")
    kept = [
        "Harbour town votes to keep its tidal mill",
        "Residents of Brackwater voted on Saturday",
        "What happens next",
        "2027: repairs to the sluice gates and the mill pond",
        "the highest for a local ballot in the town's history.",
    ]
    dropped = [
        "Your harbour, your news",
        "Share on Facebook",
        "Advertisement",
        "Tags:",
        "seagull_watcher",
        "My grandfather worked at that mill",
        "Post comment",
        "Most read",
        "Ferry timetable",
        "All rights reserved",
        "Subscribe",
    ]
    positions = [text.find(snippet) for snippet in kept]
    assert ([], sorted(positions)) == (
        [snippet for snippet in dropped if snippet in text],
        positions,
    )
    assert -1 not in positions


def options_now() -> dict[bool, dict[str, object]]:
    """Each mode's shared trafilatura options, field by field (copies of the dicts)."""
    return {
        fast: {name: copy.copy(getattr(options, name)) for name in options.__slots__}
        for fast, options in html._EXTRACTORS.items()
    }


def test_trafilaturas_shared_options_are_left_as_made() -> None:
    """Every extraction shares one set of trafilatura's options a mode (app.content.html):
    a page that runs both modes (the fast one finds a line among forty sidebar items) leaves
    them as they were, and reads the same again after another page."""
    side = "".join(
        f"<div class='sidebar-item'><p>Related story {i}: a headline about another thing.</p></div>"
        for i in range(40)
    )
    short = (
        "<html><body><article><p>The one short paragraph of this page says what it is about."
        f"</p></article><aside class='sidebar'>{side}</aside></body></html>"
    ).encode()
    made = options_now()

    first = extract(short, HTML)
    page("article")
    again = extract(short, HTML)

    assert (made, "The one short paragraph of this page says what it is about.") == (
        options_now(),
        first.text,
    )
    assert first == again


def test_a_docs_pages_main_text_drops_its_navigation() -> None:
    """A documentation page keeps its prose, code and table and drops the sidebar and footer."""
    text = page("docs")
    assert (True, True, True, False, False) == (
        "tidelog reads its settings from TOML files." in text,
        "merged.update(load_config(path))" in text,
        "Rotated files kept before the oldest is deleted" in text,
        "Table of contents" in text,
        "Created using Sphinx" in text,
    )


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
    """NUL characters are kept: the store replaces them (app.safe_strings.storable_text)."""
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
    charset = charset_of(body, "application/json").codec
    assert decode(body, charset) == extract(body, "application/json").text


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


@pytest.mark.parametrize(
    ("document", "text"),
    [
        (b"<title>T</title><main>Body text</main>", "Body text"),
        (b"<title>T</title><section><p>A paragraph.</p></section>", "A paragraph."),
        (b"<p>Only a fragment.</p>", "Only a fragment."),
    ],
)
def test_a_page_without_body_has_its_text(document: bytes, text: str) -> None:
    """A page with no <body> (libxml2 would put an HTML5 <main> into <head>) or a bare
    fragment still gives its text, as a browser shows it."""
    assert text == extract(document, HTML).text


def test_an_empty_page_has_no_text() -> None:
    """A page of nothing, or of a title alone, has empty text and Markdown, not a failure."""
    documents = [extract(body, HTML) for body in (b"", b"  \n", b"<title>only</title>")]
    assert [("", "")] * 3 == [(d.text, d.markdown) for d in documents]
