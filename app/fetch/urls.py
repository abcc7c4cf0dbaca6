"""Pure checks on submitted URLs. No I/O."""

import httpx

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
    if parsed.scheme not in ("http", "https"):
        raise ValueError("URL scheme must be http or https")
    if not parsed.host:
        raise ValueError("URL must have a host")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ValueError("URL port must be between 1 and 65535")
    # raw_host is the ASCII (IDNA) form, never shorter than the Unicode one kept as domain.
    if len(parsed.raw_host) > MAX_HOST_LENGTH:
        raise ValueError(f"URL host is longer than {MAX_HOST_LENGTH} characters")
    return parsed


def domain_of(url: httpx.URL) -> str:
    """The domain of a URL `job_url` accepted: its lower-cased host[:port]."""
    host = url.host.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{host}:{url.port}" if url.port is not None else host
