"""app.rules.crawl_scope: each verdict and the order they are checked in, the site's hosts,
every row of the Crawls guide's glob table, and the limits on patterns."""

import re
import time
from pathlib import Path

import pytest

from app.rules.crawl_scope import (
    MAX_PATTERN_CHARS,
    MAX_PATTERNS,
    MAX_WILDCARDS,
    Scope,
    Verdict,
    verdict,
)

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "crawls.md"

GLOBS = [
    ("/docs", ["/docs", "/docs?v=2"], ["/docs/", "/docs/a", "/Docs"]),
    ("/blog/*", ["/blog/", "/blog/a", "/blog/a?p=2"], ["/blog", "/blog/a/b"]),
    ("/a*", ["/a", "/ab", "/a%2Fb"], ["/a/b", "/b"]),
    ("/docs/**", ["/docs", "/docs/", "/docs/a/b"], ["/docsx", "/x/docs/a"]),
    ("/a/**/b", ["/a/b", "/a/x/b", "/a/x/y/b"], ["/a/xb", "/ab"]),
    ("/docs/**.pdf", ["/docs/a.pdf", "/docs/a/b.pdf"], ["/docs.pdf", "/docs/a.pdf/x"]),
    ("/a***z", ["/az", "/a/b/z"], ["/a/b/zx"]),
    ("*.pdf", ["/a.pdf", "/x/y/a.pdf"], ["/a.pdf/x", "/a.pdfx"]),
    ("docs/*", ["/docs/a", "/x/docs/a"], ["/xdocs/a", "/docs/a/b"]),
    ("**/docs", ["/docs", "/x/docs"], ["/xdocs"]),
    ("/search?q=*", ["/search?q=ai", "/search?q="], ["/searchXq=ai", "/search?q=a/b"]),
    ("/list?page=2", ["/list?page=2"], ["/list?sort=a&page=2"]),
    ("/caf%C3%A9/*", ["/caf%C3%A9/menu"], ["/caf%c3%a9/menu"]),
]
"""The Crawls guide's table (docs/concepts/crawls.md), row for row."""

GLOB_CASES = [
    (pattern, target, matches)
    for pattern, matching, other in GLOBS
    for target, matches in [(t, True) for t in matching] + [(t, False) for t in other]
]


def test_the_guide_table_is_the_tested_table() -> None:
    """Each row of the Crawls guide's table of patterns is one of GLOBS, in order."""
    guide = GUIDE.read_text()
    table = guide[guide.index("| pattern | matches |") :].split("\n\n", 1)[0]
    rows = [
        [re.findall(r"`([^`]*)`", cell) for cell in line.split("|")[1:4]]
        for line in table.splitlines()
        if line.startswith("| `")
    ]
    assert [(pattern, matching, other) for [pattern], matching, other in rows] == GLOBS


@pytest.mark.parametrize(("pattern", "target", "matches"), GLOB_CASES)
def test_an_include_pattern_admits_what_it_matches(
    pattern: str, target: str, matches: bool
) -> None:
    scope = Scope.of(["https://example.com/"], include=[pattern])
    expected = Verdict.IN_SCOPE if matches else Verdict.EXCLUDED
    assert expected == verdict(scope, "https://example.com" + target, 1)


@pytest.mark.parametrize(("pattern", "target", "matches"), GLOB_CASES)
def test_an_exclude_pattern_refuses_what_it_matches(
    pattern: str, target: str, matches: bool
) -> None:
    scope = Scope.of(["https://example.com/"], exclude=[pattern])
    expected = Verdict.EXCLUDED if matches else Verdict.IN_SCOPE
    assert expected == verdict(scope, "https://example.com" + target, 1)


START = "https://example.com/docs/"

VERDICTS = [
    # NOT_HTTP: another scheme, no host, a URL httpx refuses; before any other check.
    ({}, "ftp://example.com/a", Verdict.NOT_HTTP),
    ({}, "mailto:a@example.com", Verdict.NOT_HTTP),
    ({}, "javascript:alert(1)", Verdict.NOT_HTTP),
    ({}, "data:text/html,hi", Verdict.NOT_HTTP),
    ({}, "/docs/a", Verdict.NOT_HTTP),
    ({}, "//example.com/docs/a", Verdict.NOT_HTTP),
    ({}, "http:///docs/a", Verdict.NOT_HTTP),
    ({}, "http://example.com:port/", Verdict.NOT_HTTP),
    ({}, "http://example.com/a\x00b", Verdict.NOT_HTTP),
    ({}, "ftp://example.com/" + "a" * 3000, Verdict.NOT_HTTP),
    # TOO_LONG: past max_url_chars, counted on the URL as given; before OFF_SITE.
    ({}, "https://example.com/" + "a" * (2048 - 20), Verdict.IN_SCOPE),
    ({}, "https://example.com/" + "a" * (2049 - 20), Verdict.TOO_LONG),
    ({"max_url_chars": 22}, "https://example.com/ab", Verdict.IN_SCOPE),
    ({"max_url_chars": 22}, "https://example.com/abc", Verdict.TOO_LONG),
    ({"max_url_chars": 22}, "https://other.org/abcdef", Verdict.TOO_LONG),
    # OFF_SITE: another host, or one that only looks like the site's; before TOO_DEEP.
    ({}, "https://other.org/docs/a", Verdict.OFF_SITE),
    ({}, "https://notexample.com/", Verdict.OFF_SITE),
    ({}, "https://example.com.evil.org/", Verdict.OFF_SITE),
    ({}, "https://example.com@evil.org/", Verdict.OFF_SITE),
    ({}, "https://example.co/", Verdict.OFF_SITE),
    ({}, "https://docs.example.com/", Verdict.OFF_SITE),
    ({"max_depth": 1}, "https://other.org/", Verdict.OFF_SITE),
    # The host only: another scheme, port or user is the same site.
    ({}, "http://example.com/a", Verdict.IN_SCOPE),
    ({}, "https://example.com:8443/a", Verdict.IN_SCOPE),
    ({}, "http://example.com:80/a", Verdict.IN_SCOPE),
    ({}, "https://user:secret@example.com/a", Verdict.IN_SCOPE),
    # Hosts in any case, with `www.` or a trailing dot.
    ({}, "HTTPS://EXAMPLE.COM/a", Verdict.IN_SCOPE),
    ({}, "https://Example.Com/a", Verdict.IN_SCOPE),
    ({}, "https://www.example.com/a", Verdict.IN_SCOPE),
    ({}, "https://WWW.Example.com/a", Verdict.IN_SCOPE),
    ({}, "https://example.com./a", Verdict.IN_SCOPE),
    ({}, "https://www2.example.com/a", Verdict.OFF_SITE),
    ({}, "https://www.www.example.com/a", Verdict.OFF_SITE),
    # Subdomains: on with the flag, any depth of them, `www.` stripped first.
    ({"subdomains": True}, "https://docs.example.com/", Verdict.IN_SCOPE),
    ({"subdomains": True}, "https://a.b.example.com/", Verdict.IN_SCOPE),
    ({"subdomains": True}, "https://www.docs.example.com/", Verdict.IN_SCOPE),
    ({"subdomains": True}, "https://www.www.example.com/a", Verdict.IN_SCOPE),
    ({"subdomains": True}, "https://example.com/", Verdict.IN_SCOPE),
    ({"subdomains": True}, "https://notexample.com/", Verdict.OFF_SITE),
    ({"subdomains": True}, "https://example.com.evil.org/", Verdict.OFF_SITE),
    # TOO_DEEP: past max_depth; before EXCLUDED.
    ({"max_depth": 1}, "https://example.com/a", Verdict.IN_SCOPE),
    ({"max_depth": 0}, "https://example.com/a", Verdict.TOO_DEEP),
    ({"max_depth": 0, "exclude": ["/a"]}, "https://example.com/a", Verdict.TOO_DEEP),
    ({"max_depth": 1, "exclude": ["/a"]}, "https://example.com/a", Verdict.EXCLUDED),
    # EXCLUDED: an exclude pattern matches, or include patterns and none matches.
    ({"exclude": ["/private/**"]}, "https://example.com/private/a", Verdict.EXCLUDED),
    ({"exclude": ["/private/**"]}, "https://example.com/public/a", Verdict.IN_SCOPE),
    ({"include": ["/docs/**"]}, "https://example.com/blog/a", Verdict.EXCLUDED),
    ({"include": ["/docs/**", "/blog/*"]}, "https://example.com/blog/a", Verdict.IN_SCOPE),
    (
        {"include": ["/docs/**"], "exclude": ["/docs/old/**"]},
        "https://example.com/docs/old/a",
        Verdict.EXCLUDED,
    ),
    (
        {"include": ["/docs/**"], "exclude": ["/docs/old/**"]},
        "https://example.com/docs/new/a",
        Verdict.IN_SCOPE,
    ),
    # The path as httpx sends it: an empty one is `/`, dot segments resolved, non-ASCII
    # characters percent-encoded, escapes kept as written; no fragment.
    ({"include": ["/"]}, "https://example.com", Verdict.IN_SCOPE),
    ({"exclude": ["/admin/**"]}, "https://example.com/docs/../admin/a", Verdict.EXCLUDED),
    ({"include": ["/caf%C3%A9/*"]}, "https://example.com/café/menu", Verdict.IN_SCOPE),
    ({"include": ["/caf%C3%A9/*"]}, "https://example.com/caf%c3%a9/menu", Verdict.EXCLUDED),
    ({"include": ["/a%20b"]}, "https://example.com/a b", Verdict.IN_SCOPE),
    ({"include": ["/a/*"]}, "https://example.com/a%2Fb/c", Verdict.EXCLUDED),
    ({"include": ["/docs"]}, "https://example.com/docs#part", Verdict.IN_SCOPE),
    ({"include": ["/docs"]}, "https://example.com/docs?", Verdict.IN_SCOPE),
    ({"include": ["/blog/*"]}, "https://example.com/blog/a?next=/x/y", Verdict.IN_SCOPE),
    ({"include": ["/blog/**"]}, "https://example.com/blog?p=2", Verdict.IN_SCOPE),
    ({"include": ["/blog?p=*"]}, "https://example.com/blog?p=2", Verdict.IN_SCOPE),
    ({"include": ["/blog?p=*"]}, "https://example.com/blog", Verdict.EXCLUDED),
    # The host is never matched.
    ({"include": ["**example**"]}, "https://example.com/a", Verdict.EXCLUDED),
    ({"include": ["example.com/**"]}, "https://example.com/a", Verdict.EXCLUDED),
]


@pytest.mark.parametrize(("options", "url", "expected"), VERDICTS)
def test_verdict(options: dict[str, object], url: str, expected: Verdict) -> None:
    """The first check a URL fails, in the order NOT_HTTP, TOO_LONG, OFF_SITE, TOO_DEEP,
    EXCLUDED; links here are found one link from the start URL."""
    scope = Scope.of([START], **options)  # type: ignore[arg-type]
    assert expected == verdict(scope, url, 1)


DEPTHS = [(None, 1000, Verdict.IN_SCOPE), (0, 0, Verdict.IN_SCOPE), (0, 1, Verdict.TOO_DEEP)]
DEPTHS += [(2, 2, Verdict.IN_SCOPE), (2, 3, Verdict.TOO_DEEP)]


@pytest.mark.parametrize(("max_depth", "depth", "expected"), DEPTHS)
def test_too_deep_is_past_max_depth(max_depth: int | None, depth: int, expected: Verdict) -> None:
    scope = Scope.of([START], max_depth=max_depth)
    assert expected == verdict(scope, "https://example.com/a", depth)


SITES = [
    (["https://www.example.com/"], frozenset({"example.com"})),
    (["HTTPS://Example.COM:8443/a?b#c"], frozenset({"example.com"})),
    (["https://example.com./"], frozenset({"example.com"})),
    (["https://bücher.de/", "https://xn--bcher-kva.de/"], frozenset({"xn--bcher-kva.de"})),
    (["https://a.org/", "http://www.b.org/x"], frozenset({"a.org", "b.org"})),
    (["https://user@[::1]:8000/"], frozenset({"::1"})),
]


@pytest.mark.parametrize(("start_urls", "hosts"), SITES)
def test_the_site_is_the_start_urls_hosts(start_urls: list[str], hosts: frozenset[str]) -> None:
    assert hosts == Scope.of(start_urls).hosts


def test_a_host_in_unicode_or_idna_is_one_site() -> None:
    scope = Scope.of(["https://BÜCHER.de/"], subdomains=True)
    urls = ["https://xn--bcher-kva.de/a", "https://bücher.de/a", "https://www.bücher.de/a"]
    assert [Verdict.IN_SCOPE] * 3 == [verdict(scope, url, 1) for url in urls]


def test_subdomains_of_a_start_host_do_not_widen_to_its_parent() -> None:
    scope = Scope.of(["https://blog.example.com/"], subdomains=True)
    urls = ["https://example.com/", "https://a.blog.example.com/", "https://www.example.com/"]
    assert [Verdict.OFF_SITE, Verdict.IN_SCOPE, Verdict.OFF_SITE] == [
        verdict(scope, url, 1) for url in urls
    ]


def test_a_start_url_a_pattern_refuses_is_excluded_all_the_same() -> None:
    """The crawl fetches its start URLs without asking; verdict has no exception for them."""
    scope = Scope.of([START], include=["/blog/**"])
    assert Verdict.EXCLUDED == verdict(scope, START, 0)


REFUSED = [
    ([], {}, "start_urls: none"),
    (["ftp://example.com/"], {}, "start_urls: 'ftp://example.com/' is not an http"),
    (["/docs"], {}, "is not an http"),
    (["http:///docs"], {}, "is not an http"),
    (["https://example.com:port/"], {}, "is not an http"),
    ([START], {"include": [""]}, "include: an empty pattern"),
    ([START], {"exclude": ["/a b"]}, "exclude: '/a b' has a character"),
    ([START], {"include": ["/café"]}, "percent-encoded"),
    ([START], {"include": ["/a#b"]}, "has a character"),
    ([START], {"include": ["/a\tb"]}, "has a character"),
    ([START], {"include": ["/a"] * (MAX_PATTERNS + 1)}, "include: more than 100 patterns"),
    ([START], {"exclude": ["/a"] * (MAX_PATTERNS + 1)}, "exclude: more than 100 patterns"),
    ([START], {"include": ["/" * (MAX_PATTERN_CHARS + 1)]}, "longer than 512 characters"),
    ([START], {"exclude": ["/*" * (MAX_WILDCARDS + 1)]}, "more than 8 wildcards"),
    ([START], {"exclude": ["**a" * (MAX_WILDCARDS + 1)]}, "more than 8 wildcards"),
    ([START], {"max_depth": -1}, "max_depth: less than 0"),
    ([START], {"max_url_chars": 0}, "max_url_chars: less than 1"),
]


@pytest.mark.parametrize(("start_urls", "options", "message"), REFUSED)
def test_a_scope_refuses_what_it_cannot_keep(
    start_urls: list[str], options: dict[str, object], message: str
) -> None:
    """ValueError, naming the field, for the API to answer 422."""
    with pytest.raises(ValueError, match=re.escape(message)):
        Scope.of(start_urls, **options)  # type: ignore[arg-type]


ACCEPTED = [
    ["/a"] * MAX_PATTERNS,
    ["/" * MAX_PATTERN_CHARS],
    ["/*" * MAX_WILDCARDS],
    ["*a" * MAX_WILDCARDS],
    ["/a****b"],
]
"""At the limits; `***` is one wildcard, and so is the `**/` a pattern without a leading
`/` is read with."""


@pytest.mark.parametrize("patterns", ACCEPTED)
def test_patterns_at_the_limits_are_taken(patterns: list[str]) -> None:
    scope = Scope.of([START], include=patterns, exclude=patterns)
    assert (tuple(patterns), tuple(patterns)) == (scope.include, scope.exclude)


def test_a_scope_made_directly_checks_its_patterns() -> None:
    with pytest.raises(ValueError, match="include: an empty pattern"):
        Scope(frozenset({"example.com"}), include=("",))


def test_scopes_of_the_same_crawl_are_equal() -> None:
    one = Scope.of(["https://www.example.com/a"], include=["/docs/**"], max_depth=2)
    other = Scope.of(["https://example.com/b"], include=("/docs/**",), max_depth=2)
    assert (one, hash(one)) == (other, hash(other))


HOSTILE = [
    ("**a**a**a**a**a**a**a**b", "a" * 2000, Verdict.EXCLUDED),
    ("*a*a*a*a*a*a*a*b", "a" * 2000, Verdict.EXCLUDED),
    ("/**/**/**/**/**/**/**/**/b", "a/" * 1000, Verdict.EXCLUDED),
    ("a*a*a*a*a*a*a*a*c", "ab" * 1000, Verdict.EXCLUDED),
    ("a*a*a*a*a*a*a*a*", "ab" * 1000, Verdict.IN_SCOPE),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), HOSTILE)
def test_a_hostile_pattern_on_a_long_path_ends_quickly(
    pattern: str, path: str, expected: Verdict
) -> None:
    """Patterns that send a backtracking regex into polynomial time are read in one pass."""
    scope = Scope.of([START], include=[pattern], max_url_chars=4096)
    started = time.perf_counter()
    found = verdict(scope, "https://example.com/" + path, 1)
    elapsed = time.perf_counter() - started
    assert expected == found
    assert elapsed < 1.0


def test_the_largest_scope_on_the_longest_url_ends_quickly() -> None:
    """A hundred patterns of 512 characters in each list, a URL of max_url_chars."""
    include = ["**" + "a" * 505 + f"**{n:03}" for n in range(MAX_PATTERNS)]
    exclude = ["**/" + "a" * 500 + f"/**{n:03}" for n in range(MAX_PATTERNS)]
    scope = Scope.of([START], include=include, exclude=exclude)
    url = "https://example.com/" + "a" * (2048 - 20)
    started = time.perf_counter()
    found = verdict(scope, url, 1)
    elapsed = time.perf_counter() - started
    assert Verdict.EXCLUDED == found
    assert elapsed < 2.0
