"""robots.txt policy (RFC 9309, with INGEST_ROBOTS_TXT=obey): pure functions, no I/O, time
as an argument.

What an answer for /robots.txt makes of a domain's rules (`rules_from_answer`,
`rules_from_failure`), how long a robots.txt that cannot be read holds its jobs back
(`while_unreachable`), and whether a URL may be fetched (`refusal`). Reading robots.txt and
keeping it is `app.fetch.robots`'s; the domain's minimum interval with Crawl-delay is the
claim's (`app.scheduling.min_interval`).

What each answer means (RFC 9309 section 2.3.1)::

    2xx                          the rules it holds (parsed by Protego)
    429, 503 with Retry-After    rate-limited, like any such answer: the job is deferred
    other 4xx (401, 403, 404)    "unavailable": no rules, everything allowed
    5xx                          "unreachable": the job is a transient failure (retried)
    more than 5 redirects, a
    redirect refused or no URL   "unavailable": everything allowed
    transient network errors     "unreachable", as a 5xx
    other fatal errors (NXDOMAIN,
    certificate)                 the job fails as its own fetch would: fatal

A robots.txt unreachable for INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS is taken as unavailable
(RFC 9309: after a "reasonably long period"), so a broken server does not hold its domain's
jobs back for ever.
"""

from dataclasses import dataclass
from datetime import datetime

from protego import Protego

from app.model import ROBOTS_DISALLOWED, ErrorKind, Failure

ROBOTS_UNREACHABLE = "RobotsUnreachable"
"""The `Failure.type` of a job whose domain's robots.txt answered 5xx or not at all."""

ROBOTS_RATE_LIMITED = "RobotsRateLimited"

_REDIRECT_REFUSALS = frozenset({"TooManyRedirects", "InvalidRedirect", "BlockedDestination"})
"""A robots.txt whose redirects cannot be followed is unavailable (RFC 9309 2.3.1.2)."""


@dataclass(frozen=True)
class RobotsRules:
    """What a domain's robots.txt says to this crawler. No parser: unavailable, so
    everything is allowed and no Crawl-delay asked."""

    parser: Protego | None = None

    def allows(self, url: str, token: str) -> bool:
        return self.parser is None or self.parser.can_fetch(url, token)

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
    """The rules an answer for /robots.txt gives, or the failure its job takes (the table in
    this module's docstring). `body` is what was read of it, at most INGEST_ROBOTS_MAX_BYTES."""
    if 200 <= status < 300:
        # RFC 9309: UTF-8; a byte that is not is a character the rules cannot match anyway.
        return RobotsRules(Protego.parse(body.decode("utf-8", "replace")))
    message = f"robots.txt answered HTTP {status}"
    if status == 429 or (status == 503 and retry_after is not None):
        return Failure(ErrorKind.RATE_LIMITED, ROBOTS_RATE_LIMITED, message, status, retry_after)
    if 500 <= status < 600:
        return Failure(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, f"{message}: unreachable")
    return ALLOW_ALL


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
    it has lasted `max_seconds`; then robots.txt is taken as unavailable: everything
    allowed. A fatal or rate-limited failure stands as it is."""
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
