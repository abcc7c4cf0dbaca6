"""app.content: media types, title and main text, JSON checks (charsets: test_charsets)."""

import copy
import time
from pathlib import Path

import pytest

from app.content import html
from app.content.charsets import charset_of, decode
from app.content.extract import PARSE_MAX_CHARS, extract
from app.content.metadata import FIELD_MAX_CHARS as TITLE_MAX_CHARS
from app.content.metadata import field_text
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


HOSTILE_HEAD = (
    "<title>\x1b[31mRed\x1b[0m alert\x07 \x85now\x9b2J \u202eevil\u202c\x7f</title>"
    '<meta name="author" content="Ann \x1b]8;;https://x.test/\x07Smith\x1b]8;;\x1b\\">'
    '<meta name="description" content="one\ntwo\tthree \x1bc\x08\x01">'
    '<meta property="og:site_name" content="\x9d0;title\x9cCourier\u2066">'
    '<meta name="keywords" content="mills\x1b[1m, \x1b[Ktides\x9f">'
    "<p>Text.</p>"
)


def test_metadata_keeps_no_control_characters() -> None:
    """Escape sequences (CSI and OSC, by ESC or by their C1 codes) are dropped whole; other
    C0 and C1 controls, DEL, and bidi overrides and isolates are dropped; tabs and line
    breaks are spaces: in the title, authors, description, site name and keywords."""
    metadata = extract(HOSTILE_HEAD.encode(), HTML).metadata
    assert (
        "Red alert now evil",
        ("Ann Smith",),
        "one two three c",
        "Courier",
        ("mills", "tides"),
    ) == (
        metadata.title,
        metadata.authors,
        metadata.description,
        metadata.site_name,
        metadata.keywords,
    )


def test_json_ld_strings_keep_no_control_characters() -> None:
    """JSON-LD escapes (`\\u001b`, `\\u0000`) decode to controls, which are dropped too."""
    ld = r'{"@type": "Article", "headline": "Head\u001b[2Jline\u0000 one", "author": "A\u0090B"}'
    document = f'<script type="application/ld+json">{ld}</script><p>Text.</p>'
    metadata = extract(document.encode(), HTML).metadata
    assert ("Headline one", ("AB",)) == (metadata.title, metadata.authors)


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
    """NUL characters are kept: the store replaces them (app.text.safe_strings.storable_text)."""
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
    ("document", "text"),
    [
        (
            '<?xml version="1.0"?><!-- a note --><feed><title>A &lt;b&gt; title</title></feed>',
            "A <b> title",
        ),
        (
            "<r>\n <a><![CDATA[one\ntwo]]></a>\n <b><![CDATA[three & <i>four</i>]]></b>\n</r>",
            "one\ntwo\nthree &\nfour",
        ),
        ("<d><![CDATA[x ]] y > z]]>tail</d><e><![CDATA[]]></e>", "x ]] y > ztail"),
        ('<a href="x?a=1&amp;b=2">link</a> &#233;t&#xE9; &copy;', "link\nété ©"),
        ("<!DOCTYPE r SYSTEM \"r.dtd\"><r a='1'><e/>text<e /></r>", "text"),
        ("a < b <c>d</c>", "a < b\nd"),  # a stray < is text, not the start of a tag to the next >
        ("<r><![CDATA[open</r>", "<![CDATA[open"),  # an unclosed CDATA is text
    ],
)
def test_xml_text_of_each_document(document: str, text: str) -> None:
    """Tags, comments and declarations dropped, each CDATA section's content kept (its tags
    dropped too), entities decoded, blank lines dropped."""
    assert text == extract(document.encode(), "application/xml").text


@pytest.mark.parametrize("unit", ["<", "<![CDATA[", "<![CDATA[<", "<a", "&amp"])
def test_a_megabyte_of_unclosed_xml_is_read_in_linear_time(unit: str) -> None:
    """A megabyte of `<` or of `<![CDATA[` (no > or ]]> after them) was quadratic, each tag
    and CDATA pattern rescanning to the end from every opening: now one pass (CPU time, so a
    busy machine does not count). Openings alone are text."""
    body = (unit * (1024 * 1024 // len(unit))).encode()
    start = time.thread_time()
    text = extract(body, "application/xml").text
    elapsed = time.thread_time() - start
    assert elapsed < 1.0, f"{elapsed:.2f}s of CPU"
    if unit in ("<", "<![CDATA["):
        assert body.decode() == text


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


OUTSIDE_HEADING = b"""<html><head><title>Tidal mill saved | Courier</title>
<meta property="og:title" content="Tidal mill saved"></head><body>
<header><nav><a href="/">Home</a></nav><h1>Tidal mill saved</h1></header>
<main><article><p>Residents of Brackwater voted on Saturday to keep the tidal mill, after a
campaign that lasted two years and divided the town.</p><h2>What next</h2><p>Repairs to the
sluice gates begin in spring, and volunteers will dredge the mill pond over the summer.</p>
</article></main><footer>All rights reserved</footer></body></html>"""


def test_a_title_outside_the_main_content_heads_its_markdown() -> None:
    """An `<h1>` outside `<main>` is no main content: the page's title heads the Markdown
    (not the text, which is the main content alone); a page whose content opens with its
    heading keeps that heading alone."""
    outside = extract(OUTSIDE_HEADING, HTML)
    within = OUTSIDE_HEADING.replace(b"<main><article>", b"<main><article><h1>Mill</h1>")
    inside = extract(within, HTML)
    assert outside.markdown is not None and inside.markdown is not None
    assert (
        [
            "# Tidal mill saved",
            "Residents of Brackwater voted",
            "## What next",
            "Repairs to the sluice",
        ],
        ["# Mill", "Residents of Brackwater voted", "## What next", "Repairs to the sluice"],
        ["Residents of Brackwater voted", "What next", "Repairs to the sluice"],
    ) == (
        [_start(block) for block in outside.markdown.split("\n\n")],
        [_start(block) for block in inside.markdown.split("\n\n")],
        [_start(line) for line in outside.text.split("\n")],
    )


def _start(block: str) -> str:
    """The first four words of `block` (at most)."""
    return " ".join(block.split()[:4])


@pytest.mark.parametrize("unit", ["\x9d", "\x1b]", "\x9b0", "\x1b[0"])
def test_a_megabyte_of_unterminated_escapes_in_metadata_is_cleaned_in_linear_time(
    unit: str,
) -> None:
    """A title of nothing but escape sequences that never end is cleaned in one pass (an OSC
    that ran to the next one's end each time took hours on a megabyte)."""
    started = time.process_time()
    cleaned = field_text(unit * (1024 * 1024 // len(unit)))
    assert time.process_time() - started < 1.0
    assert "\x1b" not in cleaned and "\x9d" not in cleaned and "\x9b" not in cleaned
