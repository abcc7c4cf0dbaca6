"""Which URLs a crawl may follow (`POST /crawls`): a pure verdict, no I/O.

`verdict` returns the first check that fails, in this order: NOT_HTTP, TOO_LONG, OFF_SITE,
TOO_DEEP, EXCLUDED; else IN_SCOPE. The site is the start URLs' hosts (`www.` and a trailing
dot stripped; not the scheme nor the port). Start URLs are never judged: they are fetched.

Patterns are globs over the path and query as httpx sends them (as written, dot segments
resolved), matched whole, case counting: `*` is any run without `/`, `**` any run, `/**` at
the end or before a `/` may match nothing; a pattern starting with neither `/` nor `**`
reads as if it began with `**/`; one that matches the path matches it with any query. The
examples are docs/concepts/crawls.md's table, each row a test. Each list is compiled once
into a bit-parallel automaton (a pattern's states are bits of one int): a match reads each
character once, where a backtracking regex over a hostile path can take polynomial time.
"""

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

import httpx

from app.rules.url_key import plain_url

MAX_PATTERNS = 100
"""Include patterns, and exclude patterns, one Scope takes."""
MAX_PATTERN_CHARS = 512
MAX_WILDCARDS = 8
"""Runs of stars in one pattern: each adds states a match must carry along."""

_STAR = "*"
_DOUBLE_STAR = "**"
_OPTIONAL = "/**"
"""A `/**` at the end of a pattern or before a `/`: it may match nothing."""
_STARS = re.compile(r"(\*+)")


class Verdict(StrEnum):
    """What a crawl does with a URL it found: IN_SCOPE is followed, the others are not.
    OFF_SITE: another host. EXCLUDED: matches an exclude pattern, or no include pattern.
    TOO_DEEP: past max_depth. TOO_LONG: past max_url_chars. NOT_HTTP: not an absolute
    http(s) URL with a host, or not one httpx can parse."""

    IN_SCOPE = "in_scope"
    OFF_SITE = "off_site"
    EXCLUDED = "excluded"
    TOO_DEEP = "too_deep"
    TOO_LONG = "too_long"
    NOT_HTTP = "not_http"


@dataclass(frozen=True)
class _Globs:
    """Patterns as one automaton: bit i of an int is "i tokens of a pattern matched"."""

    start: int
    accept: int
    literal: dict[str, int]
    """For each character, the states whose next token is that character."""
    wild: int
    """States on a `*` or a `**`: they stay on any character but `/`."""
    double_star: int
    """States on a `**`: they stay on a `/` too."""
    optional: int
    """States on the `/` of an optional `/**`: they may skip it and its `**`."""

    @classmethod
    def of(cls, patterns: tuple[str, ...], name: str) -> "_Globs":
        if len(patterns) > MAX_PATTERNS:
            raise ValueError(f"{name}: more than {MAX_PATTERNS} patterns")
        start = accept = wild = double_star = optional = 0
        literal: defaultdict[str, int] = defaultdict(int)
        offset = 0
        for pattern in patterns:
            tokens = _tokens(pattern, name)
            start |= 1 << offset
            for index, token in enumerate(tokens, start=offset):
                bit = 1 << index
                if token == _STAR:
                    wild |= bit
                elif token == _DOUBLE_STAR:
                    wild |= bit
                    double_star |= bit
                elif token == _OPTIONAL:
                    literal["/"] |= bit
                    optional |= bit
                else:
                    literal[token] |= bit
            offset += len(tokens)
            accept |= 1 << offset
            offset += 1
        unclosed = cls(start, accept, dict(literal), wild, double_star, optional)
        return replace(unclosed, start=unclosed.closed(start))

    def closed(self, states: int) -> int:
        """`states` and the states they reach without a character: past a wildcard, and
        past an optional `/**` (whose `**` is the next state)."""
        states |= (states & self.wild) << 1
        return states | (states & self.optional) << 2

    def step(self, states: int, text: str) -> int:
        """The states after reading `text` from `states`."""
        stay_on_slash = self.double_star
        for char in text:
            stay = stay_on_slash if char == "/" else self.wild
            states = self.closed(((states & self.literal.get(char, 0)) << 1) | (states & stay))
            if not states:
                break
        return states

    def match(self, target: str) -> bool:
        """Whether a pattern matches the path and query `target`, or its path alone."""
        path, question, query = target.partition("?")
        states = self.step(self.start, path)
        if states & self.accept:
            return True
        return bool(question) and bool(self.step(states, question + query) & self.accept)


def _tokens(pattern: str, name: str) -> list[str]:
    """A pattern as characters and wildcards, after the checks that bound its automaton.
    No two wildcards are next to each other, so `_Globs.closed` needs one pass."""
    if not pattern:
        raise ValueError(f"{name}: an empty pattern")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"{name}: a pattern longer than {MAX_PATTERN_CHARS} characters")
    if any(not "!" <= char <= "~" or char == "#" for char in pattern):
        raise ValueError(
            f"{name}: {pattern[:100]!r} has a character a URL's path and query never hold "
            "(write spaces and non-ASCII characters percent-encoded, as links do)"
        )
    if sum(piece[:1] == "*" for piece in _STARS.split(pattern)) > MAX_WILDCARDS:
        raise ValueError(f"{name}: {pattern[:100]!r} has more than {MAX_WILDCARDS} wildcards")
    anywhere = pattern if pattern.startswith(("/", "**")) else "**/" + pattern
    tokens: list[str] = []
    for piece in _STARS.split(anywhere):
        if piece[:1] == "*":
            tokens.append(_STAR if piece == "*" else _DOUBLE_STAR)
        else:
            tokens.extend(piece)
    return list(_with_optional(tokens))


def _with_optional(tokens: list[str]) -> Iterable[str]:
    """`tokens` with each optional `/**` as one `_OPTIONAL` and its `**`; one that follows
    a `**` or another optional adds nothing and is dropped."""
    previous = ""
    index = 0
    while index < len(tokens):
        after = tokens[index + 2 : index + 3]
        if tokens[index : index + 2] == ["/", _DOUBLE_STAR] and after in ([], ["/"]):
            index += 2
            if previous != _DOUBLE_STAR:
                yield from (_OPTIONAL, _DOUBLE_STAR)
                previous = _DOUBLE_STAR
            continue
        previous = tokens[index]
        yield previous
        index += 1


@dataclass(frozen=True)
class Scope:
    """What a crawl may follow; see the module docstring for the order and the globs.
    Constructing one checks and compiles the patterns: ValueError names the first bad one."""

    hosts: frozenset[str]
    """The start URLs' hosts: lower-case, in IDNA, without `www.` or a trailing dot."""
    subdomains: bool = False
    """Whether a host ending in `.` and one of `hosts` is on the site too."""
    include: tuple[str, ...] = ()
    """Empty: the whole site; else a URL must match one of them."""
    exclude: tuple[str, ...] = ()
    """A URL matching one is EXCLUDED, whatever `include` says."""
    max_depth: int | None = None
    """Links followed from a start URL (depth 0); None: no limit."""
    max_url_chars: int = 2048
    """The longest URL followed, in characters as given."""
    _include: _Globs = field(init=False, repr=False, compare=False)
    _exclude: _Globs = field(init=False, repr=False, compare=False)
    _subdomain_suffixes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError("max_depth: less than 0")
        if self.max_url_chars < 1:
            raise ValueError("max_url_chars: less than 1")
        object.__setattr__(self, "_include", _Globs.of(self.include, "include"))
        object.__setattr__(self, "_exclude", _Globs.of(self.exclude, "exclude"))
        suffixes = tuple("." + host for host in self.hosts) if self.subdomains else ()
        object.__setattr__(self, "_subdomain_suffixes", suffixes)

    @classmethod
    def of(
        cls,
        start_urls: Sequence[str],
        *,
        subdomains: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_depth: int | None = None,
        max_url_chars: int = 2048,
    ) -> "Scope":
        """The scope of a crawl from these start URLs. ValueError if there are none, if
        one is not an http(s) URL with a host, or if a pattern or a limit is refused."""
        if not start_urls:
            raise ValueError("start_urls: none")
        return cls(
            frozenset(_site_host(_start_host(url)) for url in start_urls),
            subdomains,
            tuple(include),
            tuple(exclude),
            max_depth,
            max_url_chars,
        )

    def on_site(self, host: str) -> bool:
        """Whether `host` (lower-case, in IDNA) is one of the site's."""
        site_host = _site_host(host)
        return site_host in self.hosts or site_host.endswith(self._subdomain_suffixes)

    def admits(self, target: str) -> bool:
        """Whether the path and query `target` passes the include and exclude patterns."""
        if self._exclude.match(target):
            return False
        return not self.include or self._include.match(target)


def verdict(scope: Scope, url: str, depth: int) -> Verdict:
    """Whether a crawl follows `url`, found at `depth` links from a start URL."""
    # A plain URL's host and path read from its text, as httpx would give them: a page's
    # links are judged by the hundred, and httpx's parse was most of a verdict's cost.
    plain = plain_url(url)
    if plain is not None:
        host, raw_path = plain.host, plain.raw_path
    elif (parsed := _http_url(url)) is not None:
        host, raw_path = parsed.raw_host.decode("ascii"), parsed.raw_path
    else:
        return Verdict.NOT_HTTP
    if len(url) > scope.max_url_chars:
        return Verdict.TOO_LONG
    if not scope.on_site(host):
        return Verdict.OFF_SITE
    if scope.max_depth is not None and depth > scope.max_depth:
        return Verdict.TOO_DEEP
    if not scope.admits(raw_path.decode("ascii")):
        return Verdict.EXCLUDED
    return Verdict.IN_SCOPE


def _http_url(url: str) -> httpx.URL | None:
    """`url` parsed, if it is an absolute http(s) URL with a host; else None."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return None
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        return None
    return parsed


def _start_host(url: str) -> str:
    parsed = _http_url(url)
    if parsed is None:
        raise ValueError(f"start_urls: {url[:100]!r} is not an http(s) URL with a host")
    return parsed.raw_host.decode("ascii")


def _site_host(host: str) -> str:
    return host.removesuffix(".").removeprefix("www.")
