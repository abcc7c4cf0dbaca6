"""app.fetch.urls: which submitted URLs are accepted, their domain, which redirects are followed."""

import httpx
import pytest

from app.fetch.urls import MAX_HOST_LENGTH, MAX_URL_LENGTH, check_redirect, job_domain


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://example.com", "example.com"),
        ("http://example.com/", "example.com"),
        ("https://example.com/a/b?q=1#frag", "example.com"),
        ("https://Example.COM/Path", "example.com"),
        ("HTTPS://EXAMPLE.COM/", "example.com"),
        ("http://sub.example.com/", "sub.example.com"),
        ("http://example.com:8080/", "example.com:8080"),
        ("https://Example.com:8443/x", "example.com:8443"),
        ("http://example.com:1/", "example.com:1"),
        ("http://example.com:65535/", "example.com:65535"),
        ("https://example.com:80/", "example.com:80"),
        ("http://user:secret@Example.com/", "example.com"),
        ("http://127.0.0.1:9000/", "127.0.0.1:9000"),
        ("http://[::1]/", "[::1]"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("https://[2001:DB8::1]/", "[2001:db8::1]"),
        ("http://bücher.de/", "bücher.de"),
        ("http://BÜCHER.de/", "bücher.de"),
        ("http://xn--bcher-kva.de/", "bücher.de"),
    ],
)
def test_accepted_urls_and_their_domain(url: str, domain: str) -> None:
    """http(s) URLs with a host give the lower-cased host, the port if explicit, IPv6 bracketed."""
    assert domain == job_domain(url)


@pytest.mark.parametrize(
    ("url", "domain"),
    [("http://example.com:80/", "example.com"), ("https://example.com:443/", "example.com")],
)
def test_scheme_default_port_is_dropped(url: str, domain: str) -> None:
    """An explicit default port is normalised away (httpx drops it), so it is the same domain."""
    assert domain == job_domain(url)


def test_url_of_exactly_the_maximum_length_is_accepted() -> None:
    """A URL of exactly MAX_URL_LENGTH characters is accepted."""
    prefix = "http://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH - len(prefix))

    assert (2048, "example.com") == (len(url), job_domain(url))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/file", "scheme must be http or https"),
        ("file:///etc/passwd", "scheme must be http or https"),
        ("javascript:alert(1)", "scheme must be http or https"),
        ("example.com", "scheme must be http or https"),
        ("example.com/path", "scheme must be http or https"),
        ("//example.com/", "scheme must be http or https"),
        ("", "scheme must be http or https"),
        ("http://", "must have a host"),
        ("http:///path", "must have a host"),
        ("https://:8080/", "must have a host"),
        ("http://exa mple.com/", "must not contain whitespace"),
        ("http://example.com/a b", "must not contain whitespace"),
        (" http://example.com/", "must not contain whitespace"),
        ("http://example.com/\n", "must not contain whitespace"),
        ("http://example.com/\t", "must not contain whitespace"),
        ("http://example.com/\u00a0", "must not contain whitespace"),
        ("http://example.com:0/", "port must be between 1 and 65535"),
        ("http://example.com:65536/", "port must be between 1 and 65535"),
        ("http://example.com:99999/", "port must be between 1 and 65535"),
        ("http://example.com:abc/", "not a valid URL"),
        ("http://example.com:-1/", "port must be between 1 and 65535"),
    ],
)
def test_rejected_urls(url: str, message: str) -> None:
    """Bad URLs raise ValueError with a message meant for the submitter."""
    with pytest.raises(ValueError) as info:
        job_domain(url)

    assert message in str(info.value)


def test_url_one_character_too_long_is_rejected() -> None:
    """A URL of MAX_URL_LENGTH + 1 characters is rejected before it is parsed."""
    prefix = "http://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH + 1 - len(prefix))

    with pytest.raises(ValueError) as info:
        job_domain(url)

    assert "URL is longer than 2048 characters" == str(info.value)


def test_rejection_does_not_chain_the_parser_error() -> None:
    """The parser's own exception is not chained onto the message for the submitter."""
    with pytest.raises(ValueError) as info:
        job_domain("http://example.com:abc/")

    assert (None, True) == (info.value.__cause__, info.value.__suppress_context__)


def test_host_of_the_longest_dns_name_is_accepted() -> None:
    """A host of MAX_HOST_LENGTH (253) characters is accepted, with a port."""
    host = ("a" * 62 + ".") * 4 + "b"  # 253 characters
    assert (MAX_HOST_LENGTH, f"{host}:8080") == (len(host), job_domain(f"http://{host}:8080/"))


@pytest.mark.parametrize(
    "host",
    [
        ("a" * 62 + ".") * 4 + "bc",  # 254 characters
        "a" * 320,  # over the domain column's 300
        "a." * 150 + "b",  # many short labels
    ],
)
def test_host_longer_than_a_dns_name_is_rejected(host: str) -> None:
    """A host over 253 characters (in its ASCII form) is refused: DNS has no such name, and
    the domain column could not hold it."""
    with pytest.raises(ValueError) as info:
        job_domain(f"http://{host}/")

    assert "URL host is longer than 253 characters" == str(info.value)


@pytest.mark.parametrize(
    "target",
    [
        "http://example.com/a?b#c",
        "https://EXAMPLE.com:8443/",
        "http://bücher.de/",
        "http://example.com./",
        "http://under_score.example/",
        "http://[::1]:8080/",
        "http://127.0.0.1:1/",
        "http://2130706433/",  # 127.0.0.1, as the guard reads it
        "http://0x7f.1/",
        "http://0177.1/",
        "http://127.1/",
        "http://" + ("a" * 62 + ".") * 4 + "b/",
    ],
)
def test_a_redirect_to_an_http_url_with_a_name_or_address_is_followed(target: str) -> None:
    """http(s), a DNS name or an address (IPv4 in a legacy form too: the guard checks the
    address it names), a port 1-65535: followed."""
    check_redirect(httpx.URL(target))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ftp://example.com/", "URL scheme must be http or https"),
        ("http://example.com:0/", "URL port must be between 1 and 65535"),
        ("http://0x7f.1:99999999/", "URL port must be between 1 and 65535"),
        ("http://u:p@example.com/", "URL must not contain a user name or password"),
        ("http://%41.example/", "URL host '%41.example' is no DNS name"),
        ("http://.example/", "URL host '.example' is no DNS name"),
        ("http://" + "a" * 64 + ".example/", f"URL host '{'a' * 64}.example' is no DNS name"),
        ("http://1.2.3.4.5/", "URL host '1.2.3.4.5' is no IPv4 address"),
        ("http://4294967296/", "URL host '4294967296' is no IPv4 address"),
        ("http://example.0x/", "URL host 'example.0x' is no IPv4 address"),
    ],
)
def test_a_redirect_to_no_url_to_fetch_is_refused(target: str, message: str) -> None:
    """What `job_url` refuses, userinfo, and a host that is neither a DNS name nor an
    address (a last label that is a number must make an IPv4 address)."""
    with pytest.raises(ValueError) as info:
        check_redirect(httpx.URL(target))

    assert message == str(info.value)
