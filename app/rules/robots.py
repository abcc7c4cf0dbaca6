"""robots.txt policy (RFC 9309, with INGEST_ROBOTS_TXT=obey): pure functions, no I/O, time
as an argument.

What an answer for /robots.txt makes of a domain's rules (`rules_from_answer`, whose
docstring has the table of answers, and `rules_from_failure`), how long a robots.txt that
cannot be read holds its jobs back (`while_unreachable`), and whether a URL may be fetched
(`refusal`). Reading robots.txt and keeping it is `app.fetch.robots_reader`'s; the domain's
minimum interval with Crawl-delay is the claim's (`app.rules.scheduling.min_interval`).
"""

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from protego import Protego

from app.model import ROBOTS_DISALLOWED, ErrorKind, Failure

ROBOTS_UNREACHABLE = "RobotsUnreachable"
"""The `Failure.type` of a job whose domain's robots.txt answered 5xx or not at all."""

ROBOTS_RATE_LIMITED = "RobotsRateLimited"

_REDIRECT_REFUSALS = frozenset({"TooManyRedirects", "InvalidRedirect", "BlockedDestination"})
"""A robots.txt whose redirects cannot be followed is unavailable (RFC 9309 2.3.1.2)."""


MAX_RULES_PER_GROUP = 2048
"""Allow and Disallow rules kept for one user agent (its groups merged, as RFC 9309 2.2.1
merges them); later ones are dropped. A URL is matched on the worker's loop against its
group's rules, one after another; Yandex reads no more than this of a whole file."""
MAX_WILDCARD_RULES = 128
"""Of those, rules with a `*` kept: a plain rule is a prefix test, but a rule with a `*`
searches the URL (up to 2048 characters) for what follows it."""
MAX_WILDCARDS = 8
"""A rule with more `*` than this is dropped: rules people write have one or two
(`/*?*sort=`), and each is one more search of the URL."""
ANSWERS_KEPT = 64
"""Answers kept per domain's rules (the URL's digest and the token), least recently used out
first: a URL retried or submitted again is not matched again."""


@dataclass(frozen=True)
class Cut:
    """What `capped` dropped of a robots.txt: nothing, of any file written by hand."""

    rules: int = 0
    """Rules past MAX_RULES_PER_GROUP for their user agent."""
    wildcard_rules: int = 0
    """Rules with a `*` past MAX_WILDCARD_RULES for their user agent."""
    wildcards: int = 0
    """Rules of more than MAX_WILDCARDS `*`."""

    def __bool__(self) -> bool:
        return bool(self.rules or self.wildcard_rules or self.wildcards)

    def __str__(self) -> str:
        return (
            f"ignored {self.rules} rules past {MAX_RULES_PER_GROUP} for their user agent,"
            f" {self.wildcard_rules} with '*' past {MAX_WILDCARD_RULES},"
            f" {self.wildcards} of more than {MAX_WILDCARDS} '*'"
        )


@dataclass(frozen=True)
class RobotsRules:
    """What a domain's robots.txt says to this crawler. No parser: unavailable, so
    everything is allowed and no Crawl-delay asked."""

    parser: Protego | None = None
    cut: Cut = Cut()
    """What was dropped of the file before Protego read it (`capped`)."""
    token: str | None = None
    """The one token these rules answer for (other crawlers' groups dropped); None: any."""
    _answers: OrderedDict[bytes, bool] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )

    def allows(self, url: str, token: str) -> bool:
        """Whether `token` may fetch `url`; an answer kept (ANSWERS_KEPT) is not matched again."""
        if self.parser is None:
            return True
        if self.token is not None and token != self.token:
            raise ValueError(f"these rules were kept for {self.token!r}, not {token!r}")
        # A digest, not the URL: up to 2 KB a URL, times ANSWERS_KEPT, times every domain kept.
        key = hashlib.blake2b(f"{token} {url}".encode(), digest_size=16).digest()
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self.parser.can_fetch(url, token)
            if len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(key)
        return answer

    def crawl_delay(self, token: str) -> float | None:
        """The Crawl-delay of the group that applies to `token`, if it names one."""
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(token)
        return None if delay is None or delay < 0 else float(delay)


ALLOW_ALL = RobotsRules()


def product_token(user_agent: str) -> str:
    """The product token a robots.txt group names this crawler by (RFC 9309 2.2.1): the
    User-Agent's leading letters, underscores and hyphens (`ingest` of `ingest/0.1`); `*`
    when it starts with none, so only the groups for every crawler apply."""
    token = ""
    for char in user_agent.strip():
        if not (char.isascii() and (char.isalpha() or char in "_-")):
            break
        token += char
    return token.lower() or "*"


def rules_from_answer(status: int, body: bytes, retry_after: str | None) -> RobotsRules | Failure:
    """The rules an answer for /robots.txt gives, or the failure its job takes. `body` is
    what was read of it, at most INGEST_ROBOTS_MAX_BYTES.

    What each answer means (RFC 9309 section 2.3.1)::

        2xx                          the rules it holds (`parse`: capped, then read by Protego)
        2xx not parsed in time       "unreachable", as a 5xx (`rules_not_parsed`)
        429, 503 with Retry-After    rate-limited, like any such answer: the job is deferred
        other 4xx (401, 403, 404)    "unavailable": no rules, everything allowed
        5xx                          "unreachable": the job is a transient failure (retried)
        more than 5 redirects, a
        redirect refused or no URL   "unavailable": everything allowed
        transient network errors     "unreachable", as a 5xx
        other fatal errors (NXDOMAIN,
        certificate)                 the job fails as its own fetch would: fatal

    RFC 9309 names no file that cannot be parsed: one not parsed within the extraction
    deadline is read as unreachable, held back as a 5xx is, not as a licence.
    """
    if 200 <= status < 300:
        return parse(body)
    message = f"robots.txt answered HTTP {status}"
    if status == 429 or (status == 503 and retry_after is not None):
        return Failure(ErrorKind.RATE_LIMITED, ROBOTS_RATE_LIMITED, message, status, retry_after)
    if 500 <= status < 600:
        return Failure(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, f"{message}: unreachable")
    return ALLOW_ALL


def rules_not_parsed(reason: str) -> Failure:
    """The failure of the jobs whose robots.txt was not parsed (`parse` past the extraction
    deadline, or its process died): unreachable, so retried as a 5xx's are."""
    return Failure(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, f"robots.txt not parsed: {reason}")


def parse(body: bytes, token: str | None = None) -> RobotsRules:
    """The rules of a 2xx's body for the crawler named `token` (None: for any), capped
    (`capped`). Python over up to INGEST_ROBOTS_MAX_BYTES: `app.fetch.robots_reader` runs it in the
    extraction processes, under their deadline."""
    # RFC 9309: UTF-8; a byte that is not is a character the rules cannot match anyway.
    text, cut = capped(body.decode("utf-8", "replace"), token)
    parser = Protego.parse(text)
    if token is not None:
        parser.can_fetch("/", token)  # chooses and indexes the token's group here, not on the loop
    return RobotsRules(parser, cut, token)


_AGENT = frozenset({"user-agent", "useragent", "user agent"})
_RULE = frozenset({"allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"})
_SITE_WIDE = frozenset({"sitemap", "sitemaps", "site-map", "host"})
_GROUP = frozenset(
    {"crawl-delay", "crawl delay", "request-rate", "request rate", "visit-time", "visit time"}
)
_DIRECTIVES = _AGENT | _RULE | _SITE_WIDE | _GROUP
"""The directives as Protego spells them (protego/_protego.py): `capped` reads lines as it does."""


def capped(text: str, token: str | None = None) -> tuple[str, Cut]:
    """`text` without what would cost without telling `token` anything: the lines of groups
    naming no user agent that could be `token` (None: keep every group), and the rules past
    the caps (MAX_RULES_PER_GROUP, MAX_WILDCARD_RULES, MAX_WILDCARDS). A rule is cut to
    `Disallow:`, which Protego skips but which still ends its group, so no two groups merge.
    One pass over the lines, each split as Protego splits it; no regular expression."""
    lines = text.splitlines(keepends=True)
    group: set[str] = set()  # the user agents of the current group that may be `token`
    naming = False  # the last directive named a user agent: the next one joins its group
    kept: Counter[str] = Counter()
    kept_wild: Counter[str] = Counter()
    rules = wildcard_rules = wildcards = 0
    for i, line in enumerate(lines):
        directive = _directive(line.partition("#")[0].strip())
        if directive is None:
            continue
        name, value = directive
        if name in _AGENT:
            if not naming:
                group = set()
            naming = True
            agent = value.lower()
            if token is None or agent.replace("*", "") in token:
                group |= {agent, agent.replace("*", "")} - {""}
            else:
                lines[i] = ""
            continue
        if name in _SITE_WIDE:
            continue
        naming = False
        if not group and token is not None:
            lines[i] = ""  # another crawler's group (or no group's): nothing of it is ours
        elif name in _RULE and value and group:
            wild = "*" in value
            if value.count("*") > MAX_WILDCARDS:
                wildcards += 1
            elif any(kept[agent] >= MAX_RULES_PER_GROUP for agent in group):
                rules += 1
            elif wild and any(kept_wild[agent] >= MAX_WILDCARD_RULES for agent in group):
                wildcard_rules += 1
            else:
                kept.update(group)
                if wild:
                    kept_wild.update(group)
                continue
            lines[i] = "Disallow:\n"
    return "".join(lines), Cut(rules, wildcard_rules, wildcards)


def _directive(line: str) -> tuple[str, str] | None:
    """A stripped line's directive (lower case) and value as Protego reads them; None when it
    reads none (a colon-less line whose first words name no directive)."""
    name, colon, value = line.partition(":")
    name = name.strip().lower()
    if colon and (name in _DIRECTIVES or not value or value[0].isspace()):
        return name, value.strip()
    words = line.split()
    for count in (1, 2):
        candidate = " ".join(words[:count]).lower()
        if candidate in _DIRECTIVES:
            return candidate, " ".join(words[count:])
    return (name, value.strip()) if colon else None


def rules_from_failure(failure: Failure) -> RobotsRules | Failure:
    """The rules a robots.txt that could not be fetched gives (a redirect not followed:
    everything allowed), or the failure its job takes: transient (unreachable) or fatal as
    the page's own fetch would be (its host does not resolve, its certificate is bad)."""
    if failure.type in _REDIRECT_REFUSALS:
        return ALLOW_ALL
    message = f"robots.txt unreachable: {failure.label}: {failure.message}"
    if failure.kind is ErrorKind.FATAL:
        return Failure(
            ErrorKind.FATAL, failure.type, message, failure.http_status, None, failure.unexpected
        )
    return Failure(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, message)


def while_unreachable(
    failure: Failure, failing_since: datetime, now: datetime, max_seconds: float
) -> RobotsRules | Failure:
    """A transient failure to read robots.txt holds its jobs back (they are retried) until
    it has lasted `max_seconds` (INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS); then robots.txt is
    taken as unavailable, everything allowed (RFC 9309: after a "reasonably long period"),
    so a broken server does not hold its domain's jobs back for ever. A fatal or
    rate-limited failure stands as it is."""
    if failure.kind is not ErrorKind.TRANSIENT:
        return failure
    if (now - failing_since).total_seconds() >= max_seconds:
        return ALLOW_ALL
    return failure


def refusal(rules: RobotsRules, url: str, token: str) -> Failure | None:
    """The fatal failure of a URL `rules` disallow for `token`; None if it may be fetched."""
    if rules.allows(url, token):
        return None
    return Failure(
        ErrorKind.FATAL,
        ROBOTS_DISALLOWED,
        f"robots.txt disallows this URL for user agent {token!r}",
    )
