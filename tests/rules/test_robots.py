"""app.rules.robots and the claim's interval: what each answer for robots.txt means (RFC 9309),
whether a URL is refused, what the caps cut of a hostile file and which answers are kept, how
long an unreachable robots.txt holds jobs back, and the domain's minimum interval with a
Crawl-delay."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from protego import Protego

from app.model import ROBOTS_DISALLOWED, DeadReason, ErrorKind, Failure, MarkDead, Reschedule
from app.rules.policy import decide
from app.rules.robots import (
    ALLOW_ALL,
    ANSWERS_KEPT,
    MAX_RULES_PER_GROUP,
    MAX_WILDCARD_RULES,
    MAX_WILDCARDS,
    ROBOTS_RATE_LIMITED,
    ROBOTS_UNREACHABLE,
    Cut,
    RobotsRules,
    parse,
    product_token,
    refusal,
    rules_from_answer,
    rules_from_failure,
    rules_not_parsed,
    while_unreachable,
)
from app.rules.scheduling import (
    Candidate,
    DomainState,
    ShareRules,
    TenantState,
    choose,
    min_interval,
    next_start,
)
from tests.support.hostile import wildcard_robots_txt
from tests.support.rules import RETRY

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ROBOTS = b"""User-agent: ingest
Disallow: /private
Allow: /private/open
Crawl-delay: 2.5

User-agent: *
Disallow: /
"""


OBEY = ShareRules(
    domain_max_in_flight=8,
    domain_min_interval_seconds=0.0,
    robots_crawl_delay_max_seconds=60.0,
    tenant_max_in_flight=0,
    tenant_weights={},
)
"""The claim's rules with robots.txt obeyed: Crawl-delays honoured up to a minute."""


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("ingest/0.1", "ingest"),
        ("Ingest-Bot/2.0 (+https://example.com/bot)", "ingest-bot"),
        ("my_crawler", "my_crawler"),
        ("  ingest", "ingest"),
        ("Mozilla/5.0 (compatible; ingest)", "mozilla"),
        ("/0.1", "*"),
        ("", "*"),
    ],
)
def test_product_token_is_the_leading_name(user_agent: str, token: str) -> None:
    """The product token is the User-Agent's leading letters, `_` and `-`, lower-cased; `*`
    when there are none."""
    assert token == product_token(user_agent)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://a.test/", True),
        ("http://a.test/page?q=1", True),
        ("http://a.test/private", False),
        ("http://a.test/private/x", False),
        ("http://a.test/private/open/x", True),
    ],
)
def test_a_2xx_gives_the_rules_of_the_crawlers_group(url: str, allowed: bool) -> None:
    """A 200's rules apply by the group naming `ingest`, longest match first (Allow beats a
    shorter Disallow); the `*` group's Disallow: / is not ours."""
    rules = rules_from_answer(200, ROBOTS, None)
    assert isinstance(rules, RobotsRules)
    assert (allowed, 2.5) == (rules.allows(url, "ingest"), rules.crawl_delay("ingest"))


def test_another_crawlers_token_falls_to_the_star_group() -> None:
    """A token no group names gets the `*` group: everything disallowed, no Crawl-delay."""
    rules = rules_from_answer(200, ROBOTS, None)
    assert isinstance(rules, RobotsRules)
    assert (False, None) == (rules.allows("http://a.test/", "other"), rules.crawl_delay("other"))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451, 499, 301, 304])
def test_4xx_and_unfollowed_answers_are_unavailable(status: int) -> None:
    """RFC 9309 2.3.1.3: a 4xx (401 and 403 too) means no rules: everything allowed; so
    does an answer neither 2xx nor an error (a 3xx not followed)."""
    assert ALLOW_ALL == rules_from_answer(status, b"User-agent: *\nDisallow: /", None)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599])
def test_5xx_is_unreachable_and_transient(status: int) -> None:
    """RFC 9309 2.3.1.4: a 5xx is "unreachable": the job fails transient, and says why."""
    assert Failure(
        ErrorKind.TRANSIENT,
        ROBOTS_UNREACHABLE,
        f"robots.txt answered HTTP {status}: unreachable",
    ) == rules_from_answer(status, b"", None)


@pytest.mark.parametrize(("status", "retry_after"), [(429, None), (429, "30"), (503, "30")])
def test_429_and_503_with_retry_after_are_rate_limited(status: int, retry_after: str | None):
    """Like any page's: a 429, or a 503 with Retry-After, defers the job (the header kept)."""
    failure = rules_from_answer(status, b"", retry_after)
    assert (
        Failure(
            ErrorKind.RATE_LIMITED,
            ROBOTS_RATE_LIMITED,
            f"robots.txt answered HTTP {status}",
            status,
            retry_after,
        )
        == failure
    )


def test_an_empty_or_garbage_2xx_allows_everything() -> None:
    """A 200 with no rule Protego understands (or bytes that are no UTF-8) allows all."""
    for body in (b"", b"\xff\xfe<html>not robots</html>"):
        rules = rules_from_answer(200, body, None)
        assert isinstance(rules, RobotsRules)
        assert rules.allows("http://a.test/x", "ingest")


@pytest.mark.parametrize("type_", ["TooManyRedirects", "InvalidRedirect", "BlockedDestination"])
def test_redirects_not_followed_are_unavailable(type_: str) -> None:
    """RFC 9309 2.3.1.2: a robots.txt whose redirects cannot be followed allows all."""
    assert ALLOW_ALL == rules_from_failure(Failure(ErrorKind.FATAL, type_, "no"))


def test_a_transient_network_error_is_unreachable() -> None:
    """A refused connection or a timeout is "unreachable": transient, saying what happened."""
    failure = rules_from_failure(Failure(ErrorKind.TRANSIENT, "ConnectError", "refused"))
    assert (
        Failure(
            ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, "robots.txt unreachable: ConnectError: refused"
        )
        == failure
    )


def test_a_fatal_network_error_fails_the_job_as_its_fetch_would() -> None:
    """A host that does not resolve fails the job fatal, its type kept, said of robots.txt."""
    failure = rules_from_failure(Failure(ErrorKind.FATAL, "NameNotFound", "no such host"))
    assert (
        Failure(
            ErrorKind.FATAL, "NameNotFound", "robots.txt unreachable: NameNotFound: no such host"
        )
        == failure
    )


UNREACHABLE = Failure(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE, "robots.txt answered HTTP 503")


@pytest.mark.parametrize(
    ("failing_for", "verdict"),
    [
        (timedelta(0), UNREACHABLE),
        (timedelta(hours=23, minutes=59), UNREACHABLE),
        (timedelta(hours=24), ALLOW_ALL),
        (timedelta(days=40), ALLOW_ALL),
    ],
)
def test_an_unreachable_robots_txt_holds_jobs_back_for_a_bounded_time(failing_for, verdict):
    """Unreachable for less than the bound: the job is retried; from the bound on,
    robots.txt is taken as absent, so the domain is not blocked for ever."""
    assert verdict == while_unreachable(UNREACHABLE, NOW - failing_for, NOW, 86400)


@pytest.mark.parametrize("kind", [ErrorKind.FATAL, ErrorKind.RATE_LIMITED])
def test_only_unreachable_is_given_up_on(kind: ErrorKind) -> None:
    """A fatal or rate-limited failure stands however long it lasts."""
    failure = Failure(kind, "X", "x")
    assert failure == while_unreachable(failure, NOW - timedelta(days=60), NOW, 86400)


def test_refusal_is_fatal_and_names_the_token() -> None:
    """A disallowed URL fails fatal (RobotsDisallowed), naming the token; an allowed one not."""
    rules = rules_from_answer(200, ROBOTS, None)
    assert isinstance(rules, RobotsRules)
    assert (
        Failure(
            ErrorKind.FATAL,
            ROBOTS_DISALLOWED,
            "robots.txt disallows this URL for user agent 'ingest'",
        ),
        None,
    ) == (
        refusal(rules, "http://a.test/private", "ingest"),
        refusal(rules, "http://a.test/", "ingest"),
    )


def test_a_refused_job_dies_robots_at_once() -> None:
    """Policy: a refusal makes the job dead (robots) on its first attempt, no retry."""
    rules = rules_from_answer(200, ROBOTS, None)
    assert isinstance(rules, RobotsRules)
    failure = refusal(rules, "http://a.test/private", "ingest")
    assert failure is not None
    assert MarkDead(DeadReason.ROBOTS, failure) == decide(failure, 1, 4, 0, NOW, RETRY)


def test_an_unreachable_robots_txt_is_retried() -> None:
    """Policy: robots.txt unreachable reschedules the job with the normal backoff."""
    decision = decide(UNREACHABLE, 1, 4, 0, NOW, RETRY)
    assert isinstance(decision, Reschedule)
    assert (30.0, UNREACHABLE) == (decision.delay_seconds, decision.failure)


@pytest.mark.parametrize(
    ("obey", "configured", "crawl_delay", "cap", "interval"),
    [
        ("ignore", 0.0, 5.0, 60.0, 0.0),
        ("ignore", 2.0, 5.0, 60.0, 2.0),
        ("obey", 0.0, None, 60.0, 0.0),
        ("obey", 2.0, None, 60.0, 2.0),
        ("obey", 0.0, 5.0, 60.0, 5.0),
        ("obey", 10.0, 5.0, 60.0, 10.0),
        ("obey", 1.0, 3600.0, 60.0, 60.0),
        ("obey", 90.0, 3600.0, 60.0, 90.0),
        ("obey", 0.0, 5.0, 0.0, 0.0),
        ("obey", 0.0, 0.0, 60.0, 0.0),
    ],
)
def test_min_interval_is_the_larger_capped(obey, configured, crawl_delay, cap, interval):
    """interval = max(configured, min(crawl_delay, cap)) when robots.txt is obeyed; the
    configured one alone when ignored or when no Crawl-delay is known."""
    rules = replace(
        OBEY,
        domain_min_interval_seconds=configured,
        robots_crawl_delay_max_seconds=cap if obey == "obey" else None,
    )
    assert interval == min_interval(crawl_delay, rules)


def test_next_start_follows_the_domains_crawl_delay() -> None:
    """The claim's next start of a domain: now + its interval; none when there is none."""
    assert (NOW + timedelta(seconds=5), None, None) == (
        next_start(DomainState(0, crawl_delay=5.0), NOW, OBEY),
        next_start(DomainState(0), NOW, OBEY),
        next_start(None, NOW, OBEY),
    )


def test_a_claim_starts_one_fetch_of_a_domain_with_a_crawl_delay() -> None:
    """Two due jobs of a domain whose Crawl-delay is known: a claim takes one; of a domain
    with none, both."""
    candidates = [
        Candidate(f"{domain}{i}", "t", domain, 0, NOW + timedelta(seconds=i))
        for domain in ("slow.test", "fast.test")
        for i in range(2)
    ]
    domains = {"slow.test": DomainState(0, crawl_delay=1.0), "fast.test": DomainState(0)}
    chosen = choose(candidates, {"t": TenantState()}, domains, 10, NOW, OBEY)
    assert ["fast.test0", "fast.test1", "slow.test0"] == sorted(c.id for c in chosen)


def test_a_hostile_robots_txt_is_cut_to_the_caps() -> None:
    """Of 17,000 rules with `*` for every crawler, MAX_WILDCARD_RULES are kept; the first of
    them still applies, one past the cap does not."""
    rules = parse(wildcard_robots_txt().encode(), "ingest")
    assert (Cut(wildcard_rules=17_000 - MAX_WILDCARD_RULES), False, True) == (
        rules.cut,
        rules.allows(f"http://a.test/aaaaaaa{MAX_WILDCARD_RULES - 1:04x}", "ingest"),
        rules.allows(f"http://a.test/aaaaaaa{MAX_WILDCARD_RULES:04x}", "ingest"),
    )


def test_rules_past_each_cap_are_cut_and_counted() -> None:
    """A user agent's rules past MAX_RULES_PER_GROUP are cut, its `*` rules past
    MAX_WILDCARD_RULES and any rule of more than MAX_WILDCARDS `*` too; its groups count
    as one (RFC 9309 merges them), another agent's group apart."""
    stars = [f"Disallow: /s{i}/*x\n" for i in range(MAX_WILDCARD_RULES + 1)]
    plain = [f"Disallow: /p{i}/\n" for i in range(MAX_RULES_PER_GROUP)]
    text = (
        "User-agent: ingest\n"
        + "".join(stars)
        + ("Disallow: /w" + "*x" * (MAX_WILDCARDS + 1) + "\n")
        + "User-agent: other\nDisallow: /other/\n"
        + "User-agent: ingest\n"
        + "".join(plain)
    )
    last_plain = MAX_RULES_PER_GROUP - MAX_WILDCARD_RULES - 1
    rules = parse(text.encode(), "ingest")
    assert Cut(rules=MAX_WILDCARD_RULES, wildcard_rules=1, wildcards=1) == rules.cut
    assert [False, True, True, False, True] == [
        rules.allows(f"http://a.test{path}", "ingest")
        for path in (
            f"/s{MAX_WILDCARD_RULES - 1}/x",
            f"/s{MAX_WILDCARD_RULES}/x",
            "/w" + "x" * (MAX_WILDCARDS + 1),
            f"/p{last_plain}/",
            f"/p{last_plain + 1}/",
        )
    ]


def test_a_cut_rule_still_ends_its_group() -> None:
    """A rule cut from our group does not let the next group's user agents join it: the `*`
    group's Disallow stays the `*` group's."""
    text = "User-agent: ingest\nDisallow: /" + "*x" * (MAX_WILDCARDS + 1) + "\n"
    text += "User-agent: *\nDisallow: /\n"
    rules = parse(text.encode(), "ingest")
    assert (Cut(wildcards=1), True) == (rules.cut, rules.allows("http://a.test/page", "ingest"))


LENIENT = """# a comment
Disallow: /before-any-group
User agent: googlebot
Disallow: /
useragent ingest-bot # ours, and the next line too
user agent ingest
Dissallow: /typo
Disallow /no-colon
Allow: /typo/open$
Crawl delay 4
Sitemap: https://a.test/sitemap.xml
User-agent: in*
Disallow: /prefix-of-ours
User-agent: *
Disallow: /all
User-agent: other
Crawl-delay: 9
Allow: /
"""


@pytest.mark.parametrize("token", ["ingest", "other", "googlebot", "in", "nobody"])
def test_rules_kept_for_a_token_answer_as_the_whole_file_does(token: str) -> None:
    """Kept for one token (others' groups dropped), the rules answer that token as Protego
    does over the whole file: spellings it tolerates, merged groups, Crawl-delay."""
    whole = Protego.parse(LENIENT)
    kept = parse(LENIENT.encode(), token)
    paths = ["/", "/typo", "/typo/open", "/typo/x", "/no-colon", "/prefix-of-ours", "/all"]
    assert [whole.can_fetch(f"http://a.test{p}", token) for p in paths] + [
        whole.crawl_delay(token)
    ] == [kept.allows(f"http://a.test{p}", token) for p in paths] + [kept.crawl_delay(token)]


def test_rules_kept_for_a_token_answer_no_other() -> None:
    """Rules kept for `ingest` refuse to answer for another token rather than answer wrong."""
    with pytest.raises(ValueError, match="kept for 'ingest'"):
        parse(ROBOTS, "ingest").allows("http://a.test/", "other")


def test_an_answer_is_matched_once_then_kept() -> None:
    """The same URL asked again is answered from the rules' answers, not matched again; past
    ANSWERS_KEPT other URLs, the least recently asked is matched again."""
    rules = parse(ROBOTS, "ingest")
    assert rules.parser is not None
    matched: list[str] = []
    can_fetch = rules.parser.can_fetch

    def counting(url: str, token: str) -> bool:
        matched.append(url)
        return can_fetch(url, token)

    rules.parser.can_fetch = counting  # type: ignore[method-assign, assignment]
    answers = [rules.allows("http://a.test/private/x", "ingest") for _ in range(3)]
    for i in range(ANSWERS_KEPT):
        rules.allows(f"http://a.test/{i}", "ingest")
    rules.allows("http://a.test/private/x", "ingest")
    assert ([False] * 3, 2 + ANSWERS_KEPT) == (answers, len(matched))
    assert ["http://a.test/private/x"] * 2 == [matched[0], matched[-1]]


def test_a_robots_txt_not_parsed_is_unreachable_until_the_bound() -> None:
    """A parse past the extraction deadline fails the job as an unreachable robots.txt does
    (transient, retried), and is given up on after the same bound: everything allowed."""
    failure = rules_not_parsed("not done within 15s (INGEST_EXTRACT_TIMEOUT_SECONDS)")
    assert (
        Failure(
            ErrorKind.TRANSIENT,
            ROBOTS_UNREACHABLE,
            "robots.txt not parsed: not done within 15s (INGEST_EXTRACT_TIMEOUT_SECONDS)",
        ),
        failure,
        ALLOW_ALL,
    ) == (
        failure,
        while_unreachable(failure, NOW - timedelta(hours=1), NOW, 86400),
        while_unreachable(failure, NOW - timedelta(days=1), NOW, 86400),
    )
