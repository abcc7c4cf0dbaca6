"""app.content.sitemaps: sitemaps, sitemap indexes, RSS and Atom feeds and llms.txt read into
absolute http(s) URLs, deduplicated and bounded, with their dates as ISO 8601; hostile bodies
(gzip bombs, entity expansion, broken XML, Markdown made to backtrack) end bounded, and
nothing raises."""

import functools
import gzip
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.content.sitemaps import (
    MAX_URL_CHARS,
    FoundUrl,
    KindHint,
    SiteListing,
    _bounded,
    read_listing,
    robots_sitemaps,
)

SITE = "https://site.example/sitemap.xml"
MB = 1024 * 1024
SITEMAP_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def read(body: bytes | str, hint: KindHint = "sitemap", max_entries: int = 100) -> SiteListing:
    data = body.encode() if isinstance(body, str) else body
    return read_listing(data, SITE, max_entries, MB, hint)


def urls(listing: SiteListing) -> list[str]:
    return [found.url for found in listing.urls]


def urlset(*locs: str, namespace: str = SITEMAP_NS) -> str:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {namespace}>{entries}</urlset>'


@pytest.mark.parametrize(
    "namespace",
    [SITEMAP_NS, "", 'xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"'],
    ids=["default namespace", "none", "prefixed"],
)
def test_a_urlset_lists_its_locs_and_lastmods(namespace: str) -> None:
    """Each `<url>`'s `<loc>` and `<lastmod>`, matched by local name in any namespace."""
    p = "sm:" if namespace.startswith("xmlns:sm") else ""
    body = (
        f"<{p}urlset {namespace}>"
        f"<{p}url><{p}loc>https://site.example/a</{p}loc>"
        f"<{p}lastmod>2024-05-01T10:00:00Z</{p}lastmod></{p}url>"
        f"<{p}url><{p}loc>https://site.example/b</{p}loc></{p}url>"
        f"</{p}urlset>"
    )
    expected = SiteListing(
        "urlset",
        (
            FoundUrl("https://site.example/a", "2024-05-01T10:00:00Z"),
            FoundUrl("https://site.example/b", None),
        ),
    )
    assert expected == read(body)


@pytest.mark.parametrize(
    ("lastmod", "kept"),
    [
        ("2024-05-01", "2024-05-01"),
        ("2024-05-01T10:00:00+02:00", "2024-05-01T10:00:00+02:00"),
        ("2024-05-01T10:00:00.123Z", "2024-05-01T10:00:00.123Z"),
        ("  2024-05-01T10:00Z \n", "2024-05-01T10:00Z"),
        ("2024-13-01", None),
        ("yesterday", None),
        ("Wed, 01 May 2024 10:00:00 GMT", None),
        ("", None),
        ("2024-05-01" + " " * 100, "2024-05-01"),
        ("2024-05-01T10:00:00" + "0" * 100, None),
    ],
)
def test_a_lastmod_is_kept_as_written_only_if_iso_8601(lastmod: str, kept: str | None) -> None:
    """A `<lastmod>` is kept, stripped, if `datetime.fromisoformat` reads it (a trailing Z
    as UTC); anything else, or anything too long to be a date, is None."""
    body = (
        f"<urlset><url><loc>https://site.example/a</loc><lastmod>{lastmod}</lastmod></url></urlset>"
    )
    assert (FoundUrl("https://site.example/a", kept),) == read(body).urls


def test_a_sitemap_index_lists_its_child_sitemaps() -> None:
    """A `<sitemapindex>`'s `<sitemap><loc>` and `<lastmod>` are its `sitemaps`, no `urls`."""
    body = (
        f"<sitemapindex {SITEMAP_NS}>"
        "<sitemap><loc>https://site.example/posts.xml.gz</loc>"
        "<lastmod>2024-05-01</lastmod></sitemap>"
        "<sitemap><loc>/pages.xml</loc></sitemap>"
        "</sitemapindex>"
    )
    expected = SiteListing(
        "sitemapindex",
        sitemaps=(
            FoundUrl("https://site.example/posts.xml.gz", "2024-05-01"),
            FoundUrl("https://site.example/pages.xml", None),
        ),
    )
    assert expected == read(body)


def test_an_image_sitemap_lists_pages_not_images() -> None:
    """Only a `<url>`'s own `<loc>` counts: an `<image:loc>` inside it names no page."""
    body = (
        f'<urlset {SITEMAP_NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        "<url><image:image><image:loc>https://cdn.example/a.jpg</image:loc></image:image>"
        "<loc>https://site.example/a</loc></url></urlset>"
    )
    assert ["https://site.example/a"] == urls(read(body))


RSS = """<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
<title>t</title><link>https://site.example/</link>
<atom:link href="https://site.example/feed" rel="self"/>
<item><title>a</title><link>https://site.example/a</link>
  <pubDate>Wed, 01 May 2024 10:00:00 GMT</pubDate></item>
<item><link> /b </link><pubDate>Thu, 02 May 2024 12:30:00 +0200</pubDate></item>
<item><guid>https://site.example/c</guid><pubDate>2024-05-03T00:00:00Z</pubDate></item>
<item><guid isPermaLink="false">https://site.example/not-a-link</guid></item>
<item><link><![CDATA[https://site.example/d?x=1&y=2]]></link><pubDate>someday</pubDate></item>
</channel></rss>"""


def test_rss_lists_its_items_links_with_pubdate_as_iso() -> None:
    """An RSS 2.0 item's `<link>` (else a permalink `<guid>`), its `<pubDate>` (RFC 822)
    converted to ISO 8601, one already ISO kept, one not a date None; the channel's own
    links are not items."""
    expected = SiteListing(
        "feed",
        (
            FoundUrl("https://site.example/a", "2024-05-01T10:00:00+00:00"),
            FoundUrl("https://site.example/b", "2024-05-02T12:30:00+02:00"),
            FoundUrl("https://site.example/c", "2024-05-03T00:00:00Z"),
            FoundUrl("https://site.example/d?x=1&y=2", None),
        ),
    )
    assert expected == read(RSS, "feed")


def test_rss_1_lists_its_items_with_dc_date() -> None:
    """RSS 1.0 (RDF): items beside the channel, in the RSS 1.0 namespace, `<dc:date>`."""
    body = (
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
        ' xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        "<channel><link>https://site.example/</link></channel>"
        "<item><link>https://site.example/a</link><dc:date>2024-05-01T10:00Z</dc:date></item>"
        "</rdf:RDF>"
    )
    expected = (FoundUrl("https://site.example/a", "2024-05-01T10:00Z"),)
    assert expected == read(body, "feed").urls


@pytest.mark.parametrize(
    "namespace", ['xmlns="http://www.w3.org/2005/Atom"', ""], ids=["namespace", "none"]
)
def test_atom_lists_each_entrys_alternate_link(namespace: str) -> None:
    """An Atom entry's `<link>` of rel "alternate" or none (not "self", "enclosure"...),
    resolved; `<updated>`, else `<published>`; a `<source>`'s links are not the entry's."""
    body = (
        f"<feed {namespace}><link href='https://site.example/' rel='alternate'/>"
        "<entry><link rel='self' href='https://site.example/a.atom'/>"
        "<link rel='enclosure' href='https://site.example/a.mp3'/>"
        "<link rel='alternate' type='text/html' href='https://site.example/a'/>"
        "<updated>2024-05-02T00:00:00Z</updated><published>2024-05-01T00:00:00Z</published>"
        "</entry>"
        "<entry><link href='/b'/><updated>not a date</updated>"
        "<published>2024-05-01</published></entry>"
        "<entry><source><link href='https://other.example/'/></source></entry>"
        "</feed>"
    )
    expected = SiteListing(
        "feed",
        (
            FoundUrl("https://site.example/a", "2024-05-02T00:00:00Z"),
            FoundUrl("https://site.example/b", "2024-05-01"),
        ),
    )
    assert expected == read(body, "feed")


@pytest.mark.parametrize(
    ("body", "hint", "kind"),
    [
        (urlset("https://site.example/a"), "feed", "urlset"),
        (RSS, "sitemap", "feed"),
        ("<feed><entry><link href='https://site.example/a'/></entry></feed>", "sitemap", "feed"),
    ],
)
def test_the_xml_root_decides_the_kind_not_the_hint(body: str, hint: KindHint, kind: str) -> None:
    """A sitemap URL may serve a feed and a feed URL a sitemap: both are read."""
    listing = read(body, hint)
    assert (kind, True) == (listing.kind, bool(listing.urls))


def test_a_gzip_sitemap_is_read() -> None:
    """A body starting with gzip's magic is decompressed first, whatever its name or type."""
    body = gzip.compress(urlset("https://site.example/a", "https://site.example/b").encode())
    expected = SiteListing(
        "urlset",
        (FoundUrl("https://site.example/a", None), FoundUrl("https://site.example/b", None)),
    )
    assert expected == read(body)


@functools.cache
def gzip_bomb() -> bytes:
    """A sitemap of two URLs, then 100 MB of spaces, then a third: about 100 KB gzipped."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = (
        "<urlset><url><loc>https://site.example/a</loc></url>"
        "<url><loc>https://site.example/b</loc></url>"
    )
    parts = [deflater.compress(head.encode())]
    spaces = b" " * MB
    parts += [deflater.compress(spaces) for _ in range(100)]
    parts.append(deflater.compress(b"<url><loc>https://site.example/c</loc></url></urlset>"))
    parts.append(deflater.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_decompressed_no_further_than_max_bytes() -> None:
    """No more than `max_bytes` is ever decompressed, however far the stream goes on."""
    data, truncated = _bounded(gzip_bomb(), MB)
    assert (MB, True) == (len(data or b""), truncated)


def test_a_gzip_bomb_is_read_as_far_as_max_bytes_its_last_entry_dropped() -> None:
    """What comes before the cut is read; the last entry before it is dropped, as a cut may
    split it; the listing says it was truncated."""
    listing = read_listing(gzip_bomb(), SITE, 100, MB, "sitemap")
    expected = SiteListing("urlset", (FoundUrl("https://site.example/a", None),), truncated=True)
    assert expected == listing


def test_a_body_past_max_bytes_is_read_as_far_as_it_goes() -> None:
    """A plain body longer than `max_bytes` is read to it; the entry the cut splits is
    dropped, not read as a URL cut short."""
    body = urlset("https://site.example/a", "https://site.example/b", "https://site.example/c")
    cut_in_b = body.index("/b</loc>") + 2
    listing = read_listing(body.encode(), SITE, 100, cut_in_b, "sitemap")
    expected = SiteListing("urlset", (FoundUrl("https://site.example/a", None),), truncated=True)
    assert expected == listing


def test_a_gzip_stream_cut_short_is_read_as_far_as_it_goes() -> None:
    """A gzip body cut by the fetch's own bound is decompressed as far as it goes."""
    body = gzip.compress(urlset(*(f"https://site.example/{n}" for n in range(1000))).encode())
    listing = read(body[: len(body) // 2])
    assert (True, True) == (listing.truncated, 10 < len(listing.urls) < 1000)


@pytest.mark.parametrize(
    "body",
    [b"\x1f\x8b" + b"not gzip at all", gzip.compress(b"<urlset/>")[:-30] + b"\xff" * 30],
    ids=["no gzip header", "corrupt stream"],
)
def test_a_corrupt_gzip_body_is_unknown(body: bytes) -> None:
    """A body with gzip's magic that does not decompress is unknown, empty."""
    assert "unknown" == read(body).kind


def test_no_bytes_allowed_reads_nothing() -> None:
    """A `max_bytes` of 0 reads nothing (zlib's 0 would mean no bound)."""
    body = gzip.compress(urlset("https://site.example/a").encode())
    assert SiteListing("unknown", truncated=True) == read_listing(body, SITE, 100, 0, "sitemap")


def test_urls_are_resolved_stripped_and_kept_only_if_http() -> None:
    """Relative URLs are resolved against the listing's; whitespace around them stripped;
    only http(s) URLs of a host, free of whitespace inside and at most MAX_URL_CHARS, kept."""
    long_path = "https://site.example/" + "a" * (MAX_URL_CHARS - len("https://site.example/"))
    body = urlset(
        "  https://site.example/a \n",
        "/b",
        "c?page=2",
        "//cdn.example/d",
        "http://site.example/e",
        long_path,
        long_path + "x",
        "ftp://site.example/f",
        "javascript:alert(1)",
        "mailto:a@site.example",
        "data:text/html,x",
        "http://:80/no-host",
        "http://[::1/broken-ipv6",
        "https://site.example/with space",
        "https://site.example/with\ttab",
        "https://site.example/with%09tab\t",
        "",
    )
    expected = [
        "https://site.example/a",
        "https://site.example/b",
        "https://site.example/c?page=2",
        "https://cdn.example/d",
        "http://site.example/e",
        long_path,
        "https://site.example/with%09tab",
    ]
    assert expected == urls(read(body))


def test_urls_are_deduplicated_keeping_the_first() -> None:
    """A URL listed twice (or written twice as the same URL) is kept once, as first listed."""
    body = (
        "<urlset>"
        "<url><loc>https://site.example/a</loc><lastmod>2024-05-01</lastmod></url>"
        "<url><loc>https://site.example/b</loc></url>"
        "<url><loc>/a</loc><lastmod>2024-06-01</lastmod></url>"
        "</urlset>"
    )
    expected = (
        FoundUrl("https://site.example/a", "2024-05-01"),
        FoundUrl("https://site.example/b", None),
    )
    assert expected == read(body).urls


def test_at_most_max_entries_are_kept_the_rest_counted() -> None:
    """The first `max_entries` distinct URLs are kept; the distinct ones past them are
    counted in `cut` (repeats and URLs not kept are not)."""
    body = urlset(*(f"https://site.example/{n}" for n in (1, 2, 1, 3, 4, 4, 5)), "ftp://x/")
    listing = read(body, max_entries=2)
    assert (["https://site.example/1", "https://site.example/2"], 3) == (
        urls(listing),
        listing.cut,
    )


def test_a_sitemap_index_is_bounded_too() -> None:
    """A sitemap index keeps at most `max_entries` child sitemaps, the rest counted."""
    entries = "".join(f"<sitemap><loc>/s{n}.xml</loc></sitemap>" for n in range(10))
    listing = read(f"<sitemapindex>{entries}</sitemapindex>", max_entries=4)
    assert (4, 6) == (len(listing.sitemaps), listing.cut)


def test_a_max_entries_of_0_keeps_nothing() -> None:
    """With no entries allowed every URL is cut."""
    listing = read(urlset("https://site.example/a", "https://site.example/b"), max_entries=0)
    assert ((), 2) == (listing.urls, listing.cut)


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY lol "lol">'
    + b"".join(
        b'<!ENTITY lol%d "%s">' % (n, (b"&lol%d;" % (n - 1) if n > 1 else b"&lol;") * 10)
        for n in range(1, 10)
    )
    + b"]><urlset><url><loc>https://site.example/&lol9;</loc></url>"
    + b"<url><loc>https://site.example/b</loc></url></urlset>"
)


@pytest.mark.timeout(3)
def test_entities_are_never_expanded() -> None:
    """A billion laughs document is read, at once, without expanding anything (libxml2 stops
    at the loop, keeping what came before it)."""
    assert ["https://site.example/"] == urls(read(BILLION_LAUGHS))


def test_external_entities_and_dtds_are_never_loaded(tmp_path: Path) -> None:
    """An entity naming a file, or one an external DTD defines, is not loaded."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    dtd = tmp_path / "defs.dtd"
    dtd.write_text('<!ENTITY leak "LEAKED">')
    body = (
        f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "{dtd.as_uri()}" ['
        f'<!ENTITY file SYSTEM "{secret.as_uri()}">]>'
        "<urlset><url><loc>https://site.example/&file;</loc></url>"
        "<url><loc>https://site.example/&leak;</loc></url></urlset>"
    )
    found = " ".join(urls(read(body)))
    assert ("SECRET" in found, "LEAKED" in found) == (False, False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "<urlset><url><loc>https://site.example/a</loc></url>"
            "<url><loc>https://site.example/b</loc>"
            "<url><loc>https://site.example/c</loc></urlset>",
            ["a", "b", "c"],
        ),
        (
            "<urlset><url><loc>https://site.example/a</loc></url>\x01"
            "<url><loc>https://site.example/b</lock></url>"
            "<url><loc>https://site.example/c</loc></url>",
            ["a", "b", "c"],
        ),
        (
            "<urlset><url><loc>https://site.example/a?x=1&y=2</loc></url>"
            "<url><loc>https://site.example/Q & A</loc></url>"
            "<url><loc>https://site.example/b?x=1&amp;y=2&#38;z=3</loc></url></urlset>",
            ["a?x=1&y=2", "b?x=1&y=2&z=3"],
        ),
        (
            "<rss><channel><item><link>https://site.example/a?x=1&y=2</link></item>"
            "<item><link><![CDATA[https://site.example/b?x=1&y=2&amp;]]></link></item>"
            "</channel></rss>",
            ["a?x=1&y=2", "b?x=1&y=2&amp;"],
        ),
        (
            "<feed><entry><link href='https://site.example/a?x=1&y=2'/></entry></feed>",
            ["a?x=1&y=2"],
        ),
    ],
    ids=["unclosed elements", "bad character and tag", "bare ampersands", "cdata", "attribute"],
)
def test_broken_xml_is_recovered_as_far_as_it_can_be(body: str, expected: list[str]) -> None:
    """Real sitemaps and feeds are often slightly broken: unclosed or mismatched elements,
    characters XML forbids and bare "&" (escaped, outside CDATA) are read past."""
    assert [f"https://site.example/{path}" for path in expected] == urls(read(body))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"garbage",
        b"\x00\xff\xfe\x01",
        b"<",
        b"<html><body><a href='https://site.example/a'>a</a></body></html>",
        b'{"urls": ["https://site.example/a"]}',
        b"https://site.example/a\nhttps://site.example/b\n",
        b"<?xml version='1.0'?>",
        b"<!DOCTYPE x>",
    ],
)
@pytest.mark.parametrize("hint", ["sitemap", "feed"])
def test_what_is_no_sitemap_or_feed_is_unknown(body: bytes, hint: KindHint) -> None:
    """Garbage, HTML, JSON, a text sitemap or an XML declaration alone: unknown, empty."""
    assert SiteListing("unknown") == read(body, hint)


@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=2000),
        st.text(alphabet="<>/&;[]()!\"' \n:#x-urlsetloc", max_size=2000).map(str.encode),
    ),
    hint=st.sampled_from(["sitemap", "feed", "llms_txt"]),
    max_entries=st.integers(0, 5),
    max_bytes=st.integers(0, 3000),
)
def test_nothing_raises_and_bounds_hold(
    body: bytes, hint: KindHint, max_entries: int, max_bytes: int
) -> None:
    """Whatever the body, a listing comes back, within `max_entries`."""
    for data in (body, gzip.compress(body)):
        listing = read_listing(data, SITE, max_entries, max_bytes, hint)
        assert len(listing.urls) <= max_entries and len(listing.sitemaps) <= max_entries


LLMS_TXT = """\ufeff# Site

> What the site is.

- [Guide](/docs/guide.md): how to start
- [API](https://api.example/reference.md "The API")
- [Wiki](https://en.wikipedia.org/wiki/Foo_(bar))
- [Angle](<https://site.example/angle.md>)
- [Relative](notes/a.md)
- [Mail](mailto:team@site.example)
- [Anchor](#top)
- [Guide again](https://site.example/docs/guide.md)
![Logo](/logo.png)
[Not a link] (https://site.example/spaced)
[Broken](https://site.example/no-close
"""


def test_llms_txt_lists_its_markdown_links_resolved() -> None:
    """Every `[text](url)` link (a title after the URL, one level of parentheses in it,
    `<url>`), resolved against llms.txt's URL, http(s) only, deduplicated; images skipped."""
    listing = read_listing(LLMS_TXT.encode(), "https://site.example/llms.txt", 100, MB, "llms_txt")
    expected = [
        "https://site.example/docs/guide.md",
        "https://api.example/reference.md",
        "https://en.wikipedia.org/wiki/Foo_(bar)",
        "https://site.example/angle.md",
        "https://site.example/notes/a.md",
        "https://site.example/llms.txt#top",
    ]
    assert ("llms_txt", expected) == (listing.kind, urls(listing))


def test_a_gzip_llms_txt_is_read() -> None:
    """llms.txt gzipped is decompressed first too."""
    listing = read(gzip.compress(b"[a](https://site.example/a)"), "llms_txt")
    assert ["https://site.example/a"] == urls(listing)


def test_llms_txt_past_max_bytes_drops_its_last_line() -> None:
    """Read past `max_bytes`, llms.txt's last line, which the cut may have split, is dropped."""
    body = b"[a](https://site.example/a)\n[b](https://site.example/bbbbbb)\n"
    listing = read_listing(body, SITE, 100, body.index(b"bbb)"), "llms_txt")
    assert (["https://site.example/a"], True) == (urls(listing), listing.truncated)


def test_llms_txt_is_bounded() -> None:
    """At most `max_entries` links, the rest counted."""
    body = "".join(f"[{n}](/{n})\n" for n in range(10))
    listing = read(body, "llms_txt", max_entries=3)
    assert (3, 7) == (len(listing.urls), listing.cut)


@pytest.mark.timeout(3)
@pytest.mark.parametrize(
    "body",
    [
        "[" * MB,
        "](" * (MB // 2),
        "[](" * (MB // 3),
        "[a](b(" * (MB // 6),
        '[a](b "' * (MB // 7),
        "[" + "a" * MB,
        "[a](" + "a" * MB,
        "[a](b " + '"' + "[a](b " * (MB // 6),
        "![" * (MB // 2),
    ],
    ids=["[[[", "](", "[](", "parens", "titles", "long text", "long url", "title", "images"],
)
def test_markdown_made_to_backtrack_is_read_in_linear_time(body: str) -> None:
    """A megabyte built to make a link pattern backtrack is read at once, finding nothing."""
    assert () == read(body, "llms_txt").urls


@pytest.mark.timeout(3)
@pytest.mark.parametrize(
    "body",
    [
        b"<urlset><url><loc>https://site.example/a" + b"&" * MB + b"</loc></url></urlset>",
        b"<urlset>" + b"<![CDATA[" * (MB // 9) + b"</urlset>",
        b"<urlset>&<![CDATA[" + b"]" * MB + b"</urlset>",
        b"<urlset>&" + b"&a" * (MB // 2) + b"</urlset>",
    ],
    ids=["ampersands", "cdata starts", "unclosed cdata", "entity names"],
)
def test_bare_ampersands_are_escaped_in_linear_time(body: bytes) -> None:
    """The escaping of bare "&" reads a megabyte built against it at once."""
    assert "urlset" == read(body).kind


@pytest.mark.parametrize(
    ("robots_txt", "expected"),
    [
        (
            "User-agent: *\nDisallow: /private\nSitemap: https://site.example/sitemap.xml\n",
            ("https://site.example/sitemap.xml",),
        ),
        (
            "SITEMAP: https://site.example/a.xml\r\nsitemap:https://site.example/b.xml\r\n"
            "Sitemaps: https://site.example/c.xml\nSite-map: https://site.example/d.xml\n",
            tuple(f"https://site.example/{name}.xml" for name in "abcd"),
        ),
        (
            "Sitemap https://site.example/a.xml\n  Sitemap:   http://site.example/b.xml  # b\n",
            ("https://site.example/a.xml", "http://site.example/b.xml"),
        ),
        (
            "Sitemap: /relative.xml\nSitemap: ftp://site.example/a.xml\nSitemap:\n"
            "Sitemap: https:///no-host.xml\n# Sitemap: https://site.example/commented.xml\n"
            "Sitemap: https://site.example/a b.xml\nSitemapx: https://site.example/x.xml\n"
            f"Sitemap: https://site.example/{'a' * MAX_URL_CHARS}.xml\n",
            (),
        ),
        (
            "\ufeffSitemap: https://site.example/a.xml\nSitemap: https://site.example/a.xml\n",
            ("https://site.example/a.xml",),
        ),
        ("", ()),
    ],
    ids=["plain", "spellings", "no colon, comment", "refused", "bom, repeated", "empty"],
)
def test_robots_sitemaps(robots_txt: str, expected: tuple[str, ...]) -> None:
    """robots.txt's Sitemap lines, read as Protego reads them: absolute http(s) URLs only,
    each once."""
    assert expected == robots_sitemaps(robots_txt)


def test_robots_sitemaps_are_bounded() -> None:
    """At most `max_entries` sitemaps, the first."""
    robots_txt = "".join(f"Sitemap: https://site.example/{n}.xml\n" for n in range(100_000))
    expected = tuple(f"https://site.example/{n}.xml" for n in range(3))
    assert expected == robots_sitemaps(robots_txt, max_entries=3)
