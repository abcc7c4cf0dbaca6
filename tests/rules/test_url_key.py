"""app.rules.url_key: which URLs share a key (issue 43's list, point by point), and which
stay apart because they may name other pages."""

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.rules.url_key import TRACKING, _plain_key, plain_url, url_hash, url_key

SAME = [
    # Scheme and host in any case.
    ("HTTP://Example.COM/a", "http://example.com/a"),
    ("https://EXAMPLE.com./", "https://example.com./"),
    # IDNA: a host in Unicode, in any case, and its xn-- form.
    ("https://bücher.de/", "https://xn--bcher-kva.de/"),
    ("https://BÜCHER.de/", "https://xn--bcher-kva.de/"),
    ("https://xn--bcher-kva.de/", "https://xn--bcher-kva.de/"),
    # The scheme's default port, however the scheme is written.
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("HTTP://example.com:80/", "http://example.com/"),
    ("https://[::1]:443/", "https://[::1]/"),
    # The fragment.
    ("https://example.com/a#top", "https://example.com/a"),
    ("https://example.com/a?b=1#x?y", "https://example.com/a?b=1"),
    # Tracking parameters, in any case, escaped or not; the others sorted by name.
    ("https://example.com/?utm_source=x&utm_medium=y", "https://example.com/"),
    ("https://example.com/p?id=4&UTM_Campaign=z", "https://example.com/p?id=4"),
    ("https://example.com/p?gclid=1&fbclid=2&msclkid=3&id=4", "https://example.com/p?id=4"),
    ("https://example.com/p?utm%5Fsource=1&id=4", "https://example.com/p?id=4"),
    ("https://example.com/p?mc_eid=1&_ga=2&mtm_campaign=3&pk_kwd=4", "https://example.com/p"),
    ("https://example.com/p?b=2&a=1", "https://example.com/p?a=1&b=2"),
    ("https://example.com/p?x=2&a=1&x=1", "https://example.com/p?a=1&x=2&x=1"),
    # Percent-encoding: hex in upper case, unreserved characters decoded.
    ("https://example.com/%c3%a4", "https://example.com/%C3%A4"),
    ("https://example.com/ä", "https://example.com/%C3%A4"),
    ("https://example.com/%7Euser/%41%2d%5F%2E", "https://example.com/~user/A-_."),
    ("https://example.com/?q=%e2%82%ac", "https://example.com/?q=%E2%82%AC"),
    ("https://example.com/a%2fb", "https://example.com/a%2Fb"),
    # Dot segments, also those an escape spelt.
    ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ("https://example.com/a/%2E%2E/b", "https://example.com/b"),
    ("https://example.com/a/b/%2e", "https://example.com/a/b/"),
    # An empty query, or empty pairs.
    ("https://example.com/?", "https://example.com/"),
    ("https://example.com/p?&a=1&&", "https://example.com/p?a=1"),
    ("https://example.com", "https://example.com/"),
]


@pytest.mark.parametrize(("url", "key"), SAME)
def test_urls_of_one_page_share_a_key(url: str, key: str) -> None:
    assert key == url_key(url)


APART = [
    ("https://example.com/A", "https://example.com/a"),
    ("https://example.com/a/", "https://example.com/a"),
    ("https://example.com//a", "https://example.com/a"),
    ("http://example.com/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com/"),
    ("https://example.com:8443/", "https://example.com/"),
    ("https://www.example.com/", "https://example.com/"),
    ("https://example.com/a+b", "https://example.com/a%2Bb"),
    ("https://example.com/?q=a+b", "https://example.com/?q=a%20b"),
    ("https://example.com/?ref=main", "https://example.com/?ref=dev"),
    ("https://example.com/?source=a", "https://example.com/"),
    ("https://example.com/?flag", "https://example.com/"),
    ("https://example.com/?q=", "https://example.com/"),
    ("https://example.com/?a=1&a=2", "https://example.com/?a=2&a=1"),
    ("https://u:p@example.com/", "https://example.com/"),
]


@pytest.mark.parametrize(("one", "other"), APART)
def test_urls_that_may_name_other_pages_keep_apart(one: str, other: str) -> None:
    """Nothing that can select another page is dropped: path case, trailing slashes, `+`,
    reserved characters, parameters that are not tracking ones (`ref`, `source`, blank
    values), the order of one parameter's values."""
    assert url_key(one) != url_key(other)


def test_a_parsed_url_gives_the_key_of_its_text() -> None:
    url = "https://Example.com/a?utm_source=x&b=%7e"
    assert url_key(url) == url_key(httpx.URL(url)) == "https://example.com/a?b=~"


def test_a_url_httpx_refuses_has_no_key() -> None:
    with pytest.raises(ValueError, match="not a valid URL"):
        url_key("http://example.com:port/")


@pytest.mark.parametrize(
    ("url", "key"),
    [("mailto:a.b@c.d", "mailto://a.b@c.d"), ("hard::page.html", "hard://:page.html")],
)
def test_a_url_without_a_host_keeps_its_relative_path(url: str, key: str) -> None:
    """A URL with no host (no job has one, but a page's own URL may be anything in a test
    or a benchmark) is keyed, its relative path as it is: no dot segment is read in it."""
    assert key == url_key(url)


def test_the_digest_is_a_signed_64_bit_integer_of_the_key() -> None:
    keys = [url_key(url) for url, _ in SAME]
    digests = [url_hash(key) for key in keys]
    assert all(-(2**63) <= digest < 2**63 for digest in digests)
    assert len(set(keys)) == len(set(digests))
    assert url_hash("https://example.com/") == url_hash(url_key("HTTPS://EXAMPLE.COM:443/#x"))


def test_tracking_names_are_lower_case() -> None:
    """Matched against a lower-cased name, so each must be written in lower case."""
    assert {name.lower() for name in TRACKING} == TRACKING


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/a/.",
        "https://example.com/a/b/..",
        "https://example.com/a/./b",
        "HTTP://Example.com:80/%7e?utm_source=x&b=1#f",
        "https://example.com:443",
        "https://example.com?b=2&a=1",
        "https://example.com/%2e%2e/a",
        "https://example.com/a%2fb/",
    ],
)
def test_a_plain_url_is_keyed_as_httpx_parses_it(url: str) -> None:
    """The key of a URL's text is the key of the URL httpx parsed (as the API keys a job),
    dot segments and escapes included."""
    assert url_key(httpx.URL(url)) == url_key(url)


_PLAIN_PARTS = st.text(alphabet="aZ09-._~!$&'()*+,;=:@/?#%2e", max_size=30)


@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "Https"]),
    host=st.one_of(
        st.from_regex(r"[A-Za-z0-9.-]{1,20}", fullmatch=True),
        st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}", fullmatch=True),
    ),
    port=st.one_of(st.none(), st.integers(0, 99999)),
    rest=st.one_of(
        st.just(""), st.builds(lambda c, t: c + t, st.sampled_from("/?#"), _PLAIN_PARTS)
    ),
)
def test_a_plain_url_is_keyed_as_httpx_would_parse_it(
    scheme: str, host: str, port: int | None, rest: str
) -> None:
    """The key read from a plain URL's text (`_plain_key`, the quick way a page's links are
    keyed) is the key of the URL as httpx parses it, and its host and path (what a crawl's
    scope judges) are httpx's; or there is none and httpx decides."""
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{rest}"
    quick = _plain_key(url)
    if quick is None:
        return
    parts, parsed_url = plain_url(url), httpx.URL(url)
    assert parts is not None
    assert (parsed_url.raw_host.decode(), parsed_url.raw_path) == (parts.host, parts.raw_path)
    try:
        parsed = url_key(httpx.URL(url))
    except ValueError:
        parsed = None
    assert parsed == quick
