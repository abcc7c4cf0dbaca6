"""A URL's key: what two submits of the same page share (`POST /jobs` with `unique`,
`GET /jobs?url=`), as Scrapy's request fingerprint and Crawlee's uniqueKey are.

Pure: a URL in, its key out; no I/O. httpx parses (lower-case scheme and host, the host in
IDNA, the scheme's default port dropped); the rest is here: fragment dropped, tracking
parameters dropped (`TRACKING`), the query's pairs sorted by name, percent-encoding
normalized (hex upper case, unreserved characters decoded), dot segments removed, an empty
query dropped. Nothing that can name another page is touched: path case, trailing
slashes, `+`, reserved characters escaped or not, parameters outside `TRACKING`.
The rules are listed for users in docs/api.md ("The same URL twice"); a change to them
must come with a migration that computes the stored keys again (as 0018 first did).
"""

import hashlib
import re
from dataclasses import dataclass

import httpx

TRACKING_PREFIXES = ("utm_", "mtm_")
"""Query parameters named so (in any case) are dropped: Google Analytics' and Matomo's
campaign tags."""

TRACKING = frozenset(
    {
        # Click ids: Google, Meta, Microsoft, X, TikTok, Yandex, LinkedIn.
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "gad_source",
        "srsltid",
        "fbclid",
        "igshid",
        "msclkid",
        "twclid",
        "ttclid",
        "yclid",
        "ysclid",
        "li_fat_id",
        # Google Analytics' cross-domain linker.
        "_ga",
        "_gl",
        # Mail and marketing tools: Mailchimp, HubSpot, Marketo, Olytics, Vero, Matomo (Piwik).
        "mc_cid",
        "mc_eid",
        "_hsenc",
        "_hsmi",
        "__hssc",
        "__hstc",
        "__hsfp",
        "hsctatracking",
        "mkt_tok",
        "oly_anon_id",
        "oly_enc_id",
        "vero_id",
        "vero_conv",
        "pk_campaign",
        "pk_kwd",
        "pk_keyword",
        "pk_source",
        "pk_medium",
        "pk_content",
        "pk_cid",
    }
)
"""Query parameters dropped by name (in any case). Only names that track and select
nothing: a wider rule (courlan's drops `ref`, `source`, `session` and blank values) would
give two pages one key, and a unique submit of one the other's job."""

_TRACKING = frozenset(name.encode() for name in TRACKING)
_TRACKING_PREFIXES = tuple(prefix.encode() for prefix in TRACKING_PREFIXES)
DEFAULT_PORTS = {"http": 80, "https": 443}
_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def url_key(url: str | httpx.URL) -> str:
    """The key of `url` (a URL string, or one httpx parsed). ValueError if httpx cannot
    parse it; the API checks a URL before (`app.fetch.urls.job_url`)."""
    if not isinstance(url, httpx.URL):
        if (plain := _plain_key(url)) is not None:
            return plain
        try:
            url = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
    host = url.raw_host.decode("ascii")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    userinfo = _escapes(url.userinfo).decode("ascii")
    authority = f"{userinfo}@{host}" if userinfo else host
    # httpx drops a default port only when the scheme is written in lower case.
    if url.port is not None and DEFAULT_PORTS.get(url.scheme) != url.port:
        authority += f":{url.port}"
    path = url.raw_path.split(b"?", 1)[0]
    key = f"{url.scheme}://{authority}{_dot_segments_removed(_escapes(path)).decode('ascii')}"
    query = _query(url.query)
    return f"{key}?{query}" if query else key


# An http(s) URL whose every part httpx would take as it is written: a host of letters,
# digits, dots and dashes, no user, and a path and query of characters httpx does not escape
# (no space, quote, bracket, non-ASCII). Character classes only: linear on any input.
_PLAIN_URL = re.compile(
    r"([hH][tT][tT][pP][sS]?)://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?"
    r"([/?#][A-Za-z0-9\-._~!$&'()*+,;=:@/?#%]*)?"
)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True, slots=True)
class PlainUrl:
    """A plain URL's parts as httpx would give them (`plain_url`)."""

    scheme: str
    """Lower case."""
    host: str
    """Lower case, ASCII (httpx's `raw_host`)."""
    port: int | None
    """As written; None for none."""
    path: bytes
    """httpx's `raw_path` up to its query: "/" for none."""
    query: bytes | None
    """None: no `?` at all; b"": a `?` and nothing after it."""

    @property
    def raw_path(self) -> bytes:
        """httpx's `raw_path`: the path, and `?` and the query if there is one."""
        return self.path if self.query is None else self.path + b"?" + self.query


def plain_url(url: str) -> PlainUrl | None:
    """The parts of `url` read from its text, as httpx would parse them, if it is plain: an
    http(s) URL (`_PLAIN_URL`) of a DNS name or a dotted IPv4 address, without dot segments
    or a stray `%` (a page's links are read by the hundred: httpx's parse is most of their
    cost). None for any other URL, which only httpx reads right."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None or ("%" in url and _BAD_ESCAPE.search(url)):
        return None
    scheme, host, port, rest = match.groups()
    host = host.lower()
    if not host.strip(".") or ".." in host or (host[-1].isdigit() and not _ipv4(host)):
        return None
    number = None if port is None else int(port)
    if number is not None and number > 65535:
        return None
    raw = (rest or "").split("#", 1)[0].encode("ascii")
    path, mark, query = raw.partition(b"?")
    if b"/." in path:  # dot segments: httpx's removal of them is its own (`/a/.` is `/a`)
        return None
    return PlainUrl(scheme.lower(), host, number, path or b"/", query if mark else None)


def _ipv4(host: str) -> bool:
    """Whether `host` is an IPv4 address as httpx takes one: four decimal octets, no leading
    zero (a host of digits and dots otherwise is for httpx to judge)."""
    octets = host.split(".")
    return len(octets) == 4 and all(
        octet.isdigit() and str(int(octet)) == octet and int(octet) <= 255 for octet in octets
    )


def _plain_key(url: str) -> str | None:
    """`url_key` of a plain URL (`plain_url`) from its text; None for any other."""
    plain = plain_url(url)
    if plain is None:
        return None
    authority = plain.host
    if plain.port is not None and plain.port != DEFAULT_PORTS[plain.scheme]:
        authority += f":{plain.port}"
    path = _dot_segments_removed(_escapes(plain.path)).decode("ascii")
    kept = _query(plain.query or b"")
    key = f"{plain.scheme}://{authority}{path}"
    return f"{key}?{kept}" if kept else key


def domain_of(url: httpx.URL) -> str:
    """The domain of a URL `app.fetch.urls.job_url` accepted: its lower-cased host[:port]
    (the host as Unicode, as jobs' `domain` holds it)."""
    host = url.host.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{host}:{url.port}" if url.port is not None else host


def url_hash(key: str) -> int:
    """The key's first 64 bits of sha256, signed (a BIGINT of either database): what the
    indexes hold, for a key may be longer than an index entry can be."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def _escapes(raw: bytes) -> bytes:
    """`raw` with each %XX in upper case, and decoded where it is an unreserved character."""

    def one(match: re.Match[bytes]) -> bytes:
        byte = int(match[1], 16)
        return bytes([byte]) if byte in _UNRESERVED else b"%" + match[1].upper()

    return _ESCAPE.sub(one, raw) if b"%" in raw else raw


def _query(raw: bytes) -> str:
    """The query's pairs with the tracking ones and empty ones dropped, escapes normalized,
    sorted by name (the values of one name keep their order)."""
    pairs = []
    for pair in raw.split(b"&"):
        if not pair:
            continue
        pair = _escapes(pair)
        name = pair.split(b"=", 1)[0]
        if not _tracks(name):
            pairs.append((name, pair))
    pairs.sort(key=lambda named: named[0])
    return b"&".join(pair for _, pair in pairs).decode("ascii")


def _tracks(name: bytes) -> bool:
    if b"%" in name:
        name = _ESCAPE.sub(lambda match: bytes([int(match[1], 16)]), name)
    lowered = name.lower()  # ASCII only: every tracking name is
    return lowered in _TRACKING or lowered.startswith(_TRACKING_PREFIXES)


def _dot_segments_removed(path: bytes) -> bytes:
    """RFC 3986's remove_dot_segments (5.2.4) on an absolute path: httpx removes the `.` and
    `..` it is given, not those an escape decoded here makes (`%2E%2E`). A relative path (a
    URL with no host, `mailto:a.b`) has no dot segments to remove."""
    if b"." not in path or not path.startswith(b"/"):
        return path
    segments = path.split(b"/")[1:]
    kept: list[bytes] = []
    for segment in segments:
        if segment == b"..":
            if kept:
                kept.pop()
        elif segment != b".":
            kept.append(segment)
    # A path ending in a dot segment ends in a slash: "/a/b/.." is "/a/".
    if segments[-1] in (b".", b".."):
        kept.append(b"")
    return b"/" + b"/".join(kept)
