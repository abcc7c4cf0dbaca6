"""Pure checks on submitted URLs and on redirects' targets. No I/O."""

import re

import httpx

from app.fetch.guard import literal_ip
from app.rules.url_key import domain_of

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253
"""The longest DNS name; the domain column (300) also holds a port and IPv6 brackets."""


def job_domain(url: str) -> str:
    """Validate a URL to fetch and return its domain (lower-cased host[:port]).

    Raises ValueError with a message meant for the submitter.
    """
    return domain_of(job_url(url))


def job_url(url: str) -> httpx.URL:
    """Validate a URL to fetch and return it parsed, for a caller that needs more of it than
    its domain (parsing is most of what a submitted job costs the API).

    Raises ValueError with a message meant for the submitter.
    """
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"URL is longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() for ch in url):
        raise ValueError("URL must not contain whitespace")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    _check_target(parsed)
    return parsed


def _check_target(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise ValueError("URL scheme must be http or https")
    if not url.host:
        raise ValueError("URL must have a host")
    if url.port is not None and not 0 < url.port < 65536:
        raise ValueError("URL port must be between 1 and 65535")
    # raw_host is the ASCII (IDNA) form, never shorter than the Unicode one kept as domain.
    if len(url.raw_host) > MAX_HOST_LENGTH:
        raise ValueError(f"URL host is longer than {MAX_HOST_LENGTH} characters")


# A label of a host as httpx writes it (lower case, IDNA), and a last label that is a number:
# no top-level domain is one, so such a host must be an IPv4 address (127.1, 0x7f.1).
_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")


def check_redirect(url: httpx.URL) -> None:
    """Refuse a redirect's target (its Location joined to the URL answered) that is no URL
    a fetch can go to: a scheme, host or port `job_url` refuses, userinfo, or a host that is
    neither an address nor a DNS name. Trying it would fail, maybe as a transient failure
    counted against the domain that answered. An IPv4 address in a legacy form passes, as it
    does at submit: the guard reads and checks it, and connects to the address read.

    Raises ValueError with a message meant for the job's error."""
    _check_target(url)
    if url.userinfo:
        raise ValueError("URL must not contain a user name or password")
    host = url.raw_host.decode("ascii")
    if ":" in host:  # an IPv6 address, which httpx checked
        return
    labels = host.removesuffix(".").split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"URL host {host!r} is no DNS name")
    if _NUMBER.fullmatch(labels[-1]) and literal_ip(host.removesuffix(".")) is None:
        raise ValueError(f"URL host {host!r} is no IPv4 address")
