"""app.content.links: a page's links and feeds, resolved, normalized, bounded; and extract()
returning them with the page."""

from urllib.parse import urljoin

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml.html import document_fromstring

from app.content.extract import PARSE_MAX_CHARS, ExtractionLimits, extract
from app.content.hostile import PageCaps
from app.content.links import (
    FEEDS_MAX,
    TEXT_MAX_CHARS,
    URL_MAX_CHARS,
    PageLinks,
    _joined,
    page_links,
)
from app.fetch.urls import MAX_URL_LENGTH
from app.model import PageLink
from app.rules.url_key import url_key

PAGE = "https://example.com/dir/page.html"


def found(markup: str, url: str | None = PAGE, max_links: int = 1000) -> PageLinks:
    return page_links(document_fromstring(markup), url, max_links)


def urls(markup: str, url: str | None = PAGE) -> list[str]:
    return [link.url for link in found(markup, url).links]


def one(markup: str, url: str | None = PAGE) -> PageLink:
    [link] = found(markup, url).links
    return link


# ---- resolving ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("other.html", "https://example.com/dir/other.html"),
        ("../up.html", "https://example.com/up.html"),
        ("/root", "https://example.com/root"),
        ("?q=1", "https://example.com/dir/page.html?q=1"),
        ("https://other.org/x", "https://other.org/x"),
        ("HTTP://Other.ORG:80/x", "http://other.org/x"),
        ("//cdn.example.net/x", "https://cdn.example.net/x"),
        ("  \n/spaced\t/path\n ", "https://example.com/spaced/path"),
        ("/a b", "https://example.com/a%20b"),
        ("/%7euser/", "https://example.com/~user/"),
    ],
)
def test_a_link_is_resolved_against_the_page(href: str, url: str) -> None:
    """Relative, absolute and protocol-relative links are resolved against the page's URL,
    as a browser does (whitespace around stripped, tabs and line breaks inside dropped), and
    normalized as URL keys are."""
    assert [url] == urls(f'<a href="{href}">x</a>')


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        " JavaScript:void(0)",
        "java\nscript:alert(1)",
        "mailto:someone@example.com",
        "tel:+15551234",
        "data:text/html,<b>x</b>",
        "ftp://example.com/file",
        "file:///etc/passwd",
        "http://[not-an-address/",
        "http:///no-host",
        "https://",
    ],
)
def test_a_link_that_is_no_web_page_is_dropped(href: str) -> None:
    """Only http(s) URLs with a host are links: scripts, mail, phone, data and other schemes,
    and URLs that do not parse, are not."""
    assert PageLinks() == found(f'<a href="{href}">x</a>')


def test_a_link_to_the_page_itself_is_dropped() -> None:
    """A fragment of the page, an empty href and the page's own URL with tracking parameters
    all lead to the page itself: none is a link."""
    markup = (
        '<a href="#top">top</a><a href="">here</a><a href="page.html#s">s</a>'
        '<a href="?utm_source=x">u</a><a href="other.html#s">other</a>'
    )
    assert ["https://example.com/dir/other.html"] == urls(markup)


def test_an_element_without_href_is_no_link() -> None:
    """An anchor without href (a named anchor) is no link."""
    assert PageLinks() == found('<a name="top">top</a><a id="x">x</a>')


def test_base_href_resolves_the_links() -> None:
    """The first `<base href>` (itself resolved against the page) is what links resolve
    against; later ones are ignored."""
    markup = (
        '<html><head><base target="_blank"><base href="/other/dir/">'
        '<base href="https://ignored.org/"></head>'
        '<body><a href="x.html">x</a><a href="#frag">frag</a></body></html>'
    )
    assert ["https://example.com/other/dir/x.html", "https://example.com/other/dir/"] == urls(
        markup
    )


def test_an_absolute_base_href_resolves_without_a_page_url() -> None:
    """With no page URL, an absolute `<base href>` still resolves relative links."""
    markup = '<base href="https://base.example/d/"><a href="x">x</a>'
    assert ["https://base.example/d/x"] == urls(markup, url=None)


@pytest.mark.parametrize("base", ["javascript:x", "mailto:a@b.c", "data:,x"])
def test_a_base_href_that_is_no_web_url_is_ignored(base: str) -> None:
    """A `<base href>` that is no http(s) URL leaves the page's URL to resolve against."""
    markup = f'<base href="{base}"><a href="x.html">x</a>'
    assert ["https://example.com/dir/x.html"] == urls(markup)


def test_without_a_page_url_only_absolute_links_count() -> None:
    """With no page URL (and no base), relative links cannot be resolved and are dropped;
    absolute ones are kept, none internal."""
    markup = (
        '<a href="/rel">r</a><a href="//host.example/p">p</a><a href="https://a.example/">a</a>'
    )
    assert (PageLink("https://a.example/", "a", False),) == found(markup, url=None).links


def test_an_area_is_a_link() -> None:
    """An image map's `<area href>` is a link; its text is its alt text, else its title."""
    markup = (
        '<map><area href="/one" alt="One"><area href="/two" title="Two"><area href="/three"></map>'
    )
    assert [("https://example.com/one", "One"), ("https://example.com/two", "Two")] == [
        (link.url, link.text) for link in found(markup).links[:2]
    ]
    assert "" == found(markup).links[2].text


def test_the_whole_page_counts() -> None:
    """Links of the navigation, the footer and the head are links too, in document order;
    nofollow and download links are kept (a crawler decides)."""
    markup = (
        '<html><body><nav><a href="/nav">Nav</a></nav><article><p>Text <a href="/in">in</a>'
        '</p></article><footer><a href="/foot" rel="nofollow">Foot</a>'
        '<a href="/file.zip" download>File</a></footer></body></html>'
    )
    assert [
        "https://example.com/nav",
        "https://example.com/in",
        "https://example.com/foot",
        "https://example.com/file.zip",
    ] == urls(markup)


# ---- normalizing and deduplicating --------------------------------------------------------


def test_tracking_parameters_and_fragments_are_dropped() -> None:
    """Links are URL keys: tracking parameters and fragments go, the query is sorted."""
    markup = '<a href="/x?utm_source=a&b=2&fbclid=z&a=1#frag">x</a>'
    assert ["https://example.com/x?a=1&b=2"] == urls(markup)


def test_links_are_deduplicated_by_key_first_wins() -> None:
    """Two links with one key are one link, with the first one's text, even if empty."""
    markup = (
        '<a href="/x"></a><a href="/x#a">Second</a><a href="https://EXAMPLE.com/x?utm_medium=m">'
        'Third</a><a href="/y">Y</a><a href="/y">Y again</a>'
    )
    assert (
        PageLink("https://example.com/x", "", True),
        PageLink("https://example.com/y", "Y", True),
    ) == found(markup).links


def test_a_link_is_internal_on_the_page_host_www_aside() -> None:
    """A link is internal when its host is the page's, either with `www.` or not; any other
    host (a subdomain, another site) is external, whatever its port or scheme."""
    markup = (
        '<a href="https://www.example.com/a">a</a><a href="http://example.com:8080/b">b</a>'
        '<a href="https://blog.example.com/c">c</a><a href="https://example.org/d">d</a>'
        '<a href="https://wwwexample.com/e">e</a>'
    )
    assert [True, True, False, False, False] == [
        link.internal for link in found(markup, url="https://example.com/").links
    ]
    assert [True, True, False, False, False] == [
        link.internal for link in found(markup, url="https://WWW.example.com/").links
    ]


def test_internal_compares_international_hosts_as_idna() -> None:
    """A page on an international host recognises links to it written either way."""
    markup = '<a href="https://xn--bcher-kva.de/a">a</a><a href="https://www.bücher.de/b">b</a>'
    assert [("https://xn--bcher-kva.de/a", True), ("https://www.xn--bcher-kva.de/b", True)] == [
        (link.url, link.internal) for link in found(markup, url="https://bücher.de/").links
    ]


def test_without_a_page_url_no_link_is_internal() -> None:
    """With no page URL, nothing is internal."""
    assert [False] == [
        link.internal for link in found('<a href="https://example.com/dir/x">x</a>', url=None).links
    ]


# ---- bounds -------------------------------------------------------------------------------


def test_links_past_the_bound_are_counted_not_kept() -> None:
    """The first `max_links` distinct links are kept; the distinct ones past it are counted
    (a repeat of a kept link, or of a counted one, counts nothing)."""
    markup = "".join(f'<a href="/{n}">{n}</a>' for n in range(10)) + '<a href="/1">1</a>'
    markup += '<a href="/9">again</a>'
    result = found(markup, max_links=3)
    assert (["https://example.com/0", "https://example.com/1", "https://example.com/2"], 7) == (
        [link.url for link in result.links],
        result.cut,
    )


def test_no_link_kept_at_a_bound_of_zero() -> None:
    """A bound of zero keeps no link and counts every one."""
    assert PageLinks(cut=2) == found('<a href="/a">a</a><a href="/b">b</a>', max_links=0)


def test_the_url_cap_is_a_submitted_urls() -> None:
    """A link as long as a job's URL may be can be submitted as one."""
    assert MAX_URL_LENGTH == URL_MAX_CHARS


def test_an_overlong_link_is_dropped_and_counted() -> None:
    """A link longer than URL_MAX_CHARS, as written or once normalized (escaping can lengthen
    it), is not kept but counted in `cut`, once however often it appears; one just at the cap
    is kept."""
    at_cap = "https://example.com/" + "a" * (URL_MAX_CHARS - len("https://example.com/"))
    past_cap = at_cap + "b"
    escaped = "https://example.com/" + "é" * (URL_MAX_CHARS // 2)
    markup = "".join(
        f'<a href="{href}">x</a>' for href in (past_cap, past_cap, escaped, at_cap, "/ok")
    )
    result = found(markup)
    assert ([at_cap, "https://example.com/ok"], 2) == (
        [link.url for link in result.links],
        result.cut,
    )


def test_a_page_of_many_links_is_bounded() -> None:
    """A page of 100,000 links (some repeated) keeps the first `max_links` and counts the
    rest; each link's work is bounded, so the whole is linear in the page."""
    markup = "<body>" + "".join(f'<a href="/p/{n % 60_000}">link {n}</a>' for n in range(100_000))
    result = found(markup, max_links=1000)
    assert (1000, 59_000, "https://example.com/p/999", "link 999") == (
        len(result.links),
        result.cut,
        result.links[-1].url,
        result.links[-1].text,
    )


# ---- text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ('<a href="/x">  Read\n\n  the   <b>whole</b>\tstory </a>', "Read the whole story"),
        ('<a href="/x"><div>Card</div><div>title</div></a>', "Card title"),
        ('<a href="/x">one<br>two</a>', "one two"),
        ('<a href="/x" title="  The title ">  </a>', "The title"),
        ('<a href="/x"><img src="i.png" alt="Logo"></a>', "Logo"),
        ('<a href="/x"><img src="a.png"><img src="b.png" alt=" Second "></a>', "Second"),
        ('<a href="/x" title="Title"><img src="i.png" alt="Alt"></a>', "Title"),
        ('<a href="/x" title="Title">Words</a>', "Words"),
        ('<a href="/x"><img src="i.png"></a>', ""),
        ('<a href="/x">a<!-- hidden -->b<script>var s;</script>c<style>p{}</style>d</a>', "abcd"),
    ],
)
def test_the_text_of_a_link(markup: str, text: str) -> None:
    """A link's text is what it shows, on one line (blocks set apart); if it shows none, its
    title, else the alt text of the first image in it that has one."""
    assert text == one(markup).text


def test_hostile_text_is_made_safe() -> None:
    """Control characters, terminal escape sequences and invisible characters are dropped
    from a link's text and from its title, as from every field of the metadata."""
    markup = (
        '<a href="/x">Cl\x1b[31mick\x7f he\u200bre\u202e!</a>'
        '<a href="/y" title="Ti\x9b2Jt\x01le\x1b]0;owned\x07"></a>'
    )
    assert ["Click here!", "Title"] == [link.text for link in found(markup).links]


def test_long_text_is_cut() -> None:
    """A link's text, title or alt text is cut at TEXT_MAX_CHARS, whatever the link holds,
    and a cut between words leaves no space at the end."""
    long = "x" * 100_000
    words = " ".join(["word"] * 50_000)
    markup = (
        f'<a href="/x">{long}</a><a href="/y" title="{long}"></a>'
        f'<a href="/z"><img alt="{long}"></a><a href="/w">{words}</a>'
    )
    assert ["x" * TEXT_MAX_CHARS] * 3 + [("word " * (TEXT_MAX_CHARS // 5)).rstrip()] == [
        link.text for link in found(markup).links
    ]


def test_text_is_read_from_the_links_first_elements_only() -> None:
    """A link wrapping thousands of empty elements reads only its first ones for text: one
    past them is not read."""
    markup = '<a href="/x">' + "<span></span>" * 10_000 + "late</a>"
    assert "" == one(markup).text
    assert "early" == one('<a href="/x">early' + "<span></span>" * 10_000 + "late</a>").text


# ---- feeds --------------------------------------------------------------------------------


def test_feeds_are_the_alternate_links_of_feed_types() -> None:
    """RSS, Atom and JSON Feed alternates are feeds, resolved and normalized like links,
    deduplicated; other alternates and other rels are not, nor are feeds among the links."""
    markup = (
        "<html><head>"
        '<link rel="alternate" type="application/rss+xml" href="/feed.xml?utm_source=x">'
        '<link rel="Alternate" type="Application/Atom+XML; charset=utf-8" href="atom.xml">'
        '<link rel="alternate" type="application/feed+json" href="//feeds.example.net/j">'
        '<link rel="alternate" type="application/rss+xml" href="/feed.xml#dup">'
        '<link rel="alternate" hreflang="fr" href="/fr/">'
        '<link rel="stylesheet" type="application/rss+xml" href="/not-a-feed">'
        '<link rel="alternate" type="application/rss+xml" href="javascript:x">'
        "</head><body></body></html>"
    )
    assert PageLinks(
        feeds=(
            "https://example.com/feed.xml",
            "https://example.com/dir/atom.xml",
            "https://feeds.example.net/j",
        )
    ) == found(markup)


def test_feeds_are_bounded() -> None:
    """At most FEEDS_MAX feeds are kept."""
    markup = "".join(
        f'<link rel="alternate" type="application/rss+xml" href="/f{n}">' for n in range(100)
    )
    feeds = found(markup).feeds
    assert (FEEDS_MAX, "https://example.com/f0") == (len(feeds), feeds[0])


# ---- through extract() --------------------------------------------------------------------


ARTICLE = """<html><head><title>Mill</title>
<link rel="alternate" type="application/atom+xml" href="/feed.atom">
<script>var a = "<a href='/in-script'>no</a>";</script></head>
<body><nav><a href="/">Home</a> <a href="/news/">News</a></nav>
<article><h1>Harbour mill</h1><p>The mill on the harbour is to be restored, after a long
campaign by the residents of the town, who voted for it last week. See
<a href="https://council.example.org/minutes?utm_campaign=c#item4">the minutes</a>.</p>
<p>The works begin next spring and take two years, the council says.</p></article>
<footer><a href="https://www.example.com/about">About</a></footer></body></html>"""


def test_extract_returns_the_pages_links() -> None:
    """An HTML page's document carries its links (navigation and footer too, not what a
    script holds) and feeds, while its text is the main content alone."""
    document = extract(ARTICLE.encode(), "text/html", url="https://example.com/news/mill")
    assert (
        (
            PageLink("https://example.com/", "Home", True),
            PageLink("https://example.com/news/", "News", True),
            PageLink("https://council.example.org/minutes", "the minutes", False),
            PageLink("https://www.example.com/about", "About", True),
        ),
        ("https://example.com/feed.atom",),
        0,
    ) == (document.links, document.feeds, document.links_cut)
    assert "Home" not in document.text


def test_extract_bounds_the_links() -> None:
    """`ExtractionLimits.max_links` bounds the links kept; the rest are counted."""
    limits = ExtractionLimits(max_links=1)
    document = extract(ARTICLE.encode(), "text/html", "https://example.com/news/mill", limits)
    assert (1, 3) == (len(document.links), document.links_cut)


def test_extract_reads_links_of_a_page_without_main_content() -> None:
    """A page of links alone, where trafilatura finds no main content, still has them."""
    document = extract(b'<a href="/a">a</a>', "text/html", url="https://example.com/")
    assert (PageLink("https://example.com/a", "a", True),) == document.links


def test_a_huge_page_of_links_through_extract() -> None:
    """100,000 links through extract(), with the hostile caps raised to let them in: the
    bound holds."""
    body = "<body><p>Links.</p>" + "".join(f"<a href=/{n}></a>" for n in range(100_000))
    assert len(body) < PARSE_MAX_CHARS
    limits = ExtractionLimits(page=PageCaps(elements=200_000, attributes=200_000), max_links=50)
    document = extract(body.encode(), "text/html", "https://example.com/", limits)
    assert (50, 99_950) == (len(document.links), document.links_cut)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"a": "<a href=\\"/x\\">x</a>"}', "application/json"),
        (b'<feed><link href="https://example.com/x"/></feed>', "application/atom+xml"),
        (b'<a href="/x">x</a>', "text/plain"),
    ],
)
def test_other_types_have_no_links(body: bytes, content_type: str) -> None:
    """JSON, XML and plain text documents have no links."""
    document = extract(body, content_type, url="https://example.com/")
    assert ((), (), 0) == (document.links, document.feeds, document.links_cut)


@given(
    base=st.sampled_from(
        ["https://example.com/a/b.html?q=1", "http://user@h.org:8080/x/", "https://h.org"]
    ),
    href=st.one_of(
        st.text(alphabet="/.?#=&abAB%2", max_size=20),
        st.builds(lambda t: "//" + t, st.text(alphabet="a.b/c", min_size=1, max_size=12)),
        st.builds(lambda t: "HTTP://h.org/" + t, st.text(alphabet="a./?#", max_size=12)),
    ),
)
def test_a_link_joined_the_quick_way_has_urljoins_key(base: str, href: str) -> None:
    """`_joined` (absolute links and links from the root without urljoin's parse) gives the
    key urljoin's result has."""

    def key(url: str) -> str | None:
        try:
            return url_key(url)
        except ValueError:
            return None

    assert key(urljoin(base, href)) == key(_joined(base, href))


def test_no_link_is_read_when_none_is_kept() -> None:
    """INGEST_LINKS_MAX_PER_PAGE=0: extraction reads no link (and counts none cut)."""
    page = '<html><body><p>Text enough.</p><a href="/a">a</a><a href="/b">b</a></body></html>'
    document = extract(page.encode(), "text/html", PAGE, ExtractionLimits(max_links=0))
    assert ((), 0) == (document.links, document.links_cut)
