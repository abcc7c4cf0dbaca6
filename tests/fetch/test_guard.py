"""app.fetch.guard: the address classifier, the operator's policy, and the connect-time check."""

import socket
import ssl
from ipaddress import ip_address
from typing import Any

import httpcore
import httpx
import pytest

from app.fetch.guard import (
    BlockedDestination,
    Destinations,
    GuardedBackend,
    GuardedTransport,
    ascii_host,
    is_blocked,
    literal_ip,
    tls_context,
)
from app.part_settings import destinations_of
from app.settings import Settings

BLOCKED = [
    # IPv4: every special-purpose range, at both edges where it matters
    "0.0.0.0",
    "0.255.255.255",
    "10.0.0.0",
    "10.255.255.255",
    "100.64.0.0",
    "100.100.100.200",  # Alibaba Cloud metadata
    "100.127.255.255",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.0.1",
    "169.254.169.254",  # AWS, GCP, Azure metadata
    "172.16.0.0",
    "172.31.255.255",
    "192.0.0.8",
    "192.0.2.1",
    "192.88.99.1",
    "192.168.0.1",
    "192.168.255.255",
    "198.18.0.1",
    "198.19.255.255",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "224.0.1.1",  # multicast that Python calls global
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    # IPv6
    "::",
    "::1",
    "::7f00:1",  # IPv4-compatible
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::808:808",  # NAT64 of a public address: still a translator
    "64:ff9b:1::1",
    "100::1",
    "2001::1",  # Teredo
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:db8::1",
    "2002::1",
    "2002:c000:0204::1",  # 6to4
    "3fff::1",
    "5f00::1",
    "fc00::1",
    "fd00:ec2::254",  # AWS metadata over IPv6
    "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fe80::1",
    "febf:ffff::1",
    "fec0::1",
    "ff02::1",
    "ff0e::1",
    "4000::1",  # outside global unicast 2000::/3
    # IPv4-mapped IPv6: unwrapped first
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::ffff:100.64.0.1",
    "::ffff:224.0.1.1",
    "::ffff:0.0.0.0",
]

PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.88.98.255",
    "192.88.100.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "2a00:1450:4001:82a::200e",
    "2001:200::1",  # just past the IETF block 2001::/23
    "2003::1",
    "::ffff:8.8.8.8",
]


@pytest.mark.parametrize("address", BLOCKED)
def test_blocked_addresses(address: str) -> None:
    """Everything that is not globally routable unicast is blocked."""
    assert True is is_blocked(ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses(address: str) -> None:
    """Globally routable unicast, including the neighbours of blocked ranges, is not."""
    assert False is is_blocked(ip_address(address))


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("fe80::1%25eth0", "fe80::1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("example.com", None),
        ("cafe.de", None),
        ("1e100", None),
    ],
)
def test_literal_ip_reads_every_form_the_resolver_accepts(host: str, address: str | None) -> None:
    """Legacy IPv4 forms count as the address getaddrinfo would make of them."""
    expected = None if address is None else ip_address(address)
    assert expected == literal_ip(host)


def destinations(**settings: Any) -> Destinations:
    """The guard's rules as the composition root makes them of these settings."""
    return destinations_of(Settings(_env_file=None, **settings))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://[::1]:8080/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://[fd00:ec2::254]/",
        "http://10.1.2.3:8443/",
    ],
)
def test_literal_blocked_address_in_url_is_refused(url: str) -> None:
    """A URL naming a blocked address is refused without resolving anything."""
    with pytest.raises(BlockedDestination, match="not a public address"):
        destinations().check_url(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://user:secret@example.com/", "user name or password"),
        ("http://user@example.com/", "user name or password"),
        ("http://example.com:22/", "port 22 is not allowed"),
        ("https://example.com:1023/", "port 1023 is not allowed"),
        ("http://example.com:6379/", None),
        ("http://example.com:80/", None),
        ("https://example.com/", None),
        ("http://example.com:1024/", None),
        ("http://example.com:65535/", None),
    ],
)
def test_userinfo_and_ports(url: str, message: str | None) -> None:
    """No userinfo; ports 80, 443 and 1024-65535 by default."""
    if message is None:
        destinations().check_url(url)
    else:
        with pytest.raises(BlockedDestination, match=message):
            destinations().check_url(url)


def test_ports_come_from_settings() -> None:
    """INGEST_ALLOWED_PORTS replaces the default set."""
    guard = destinations(allowed_ports="443")
    guard.check_url("https://example.com/")
    with pytest.raises(BlockedDestination, match="port 8080"):
        guard.check_url("http://example.com:8080/")


@pytest.mark.parametrize(
    ("blocked_hosts", "url"),
    [
        ("example.com", "http://example.com/"),
        ("example.com", "http://EXAMPLE.com./"),
        ("*.example.com", "http://a.b.example.com/"),
        ("bücher.de", "http://xn--bcher-kva.de/"),
        ("8.8.8.0/24", "http://8.8.8.8/"),
        ("2606:4700::/32", "http://[2606:4700:4700::1111]/"),
    ],
)
def test_blocked_hosts(blocked_hosts: str, url: str) -> None:
    """Names (exact or *.suffix, IDNA-normalised) and networks in INGEST_BLOCKED_HOSTS."""
    with pytest.raises(BlockedDestination, match="blocked"):
        destinations(blocked_hosts=blocked_hosts).check_url(url)


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "EXAMPLE.com.",
        "a_b.example-1.com",
        "8.8.8.8",
        "999.1.1.1",
        "bücher.de",
        "XN--BCHER-KVA.de",
        "ex ample.com",
        "exa%mple.com",
        "[2606:4700::1111]",
        "a..b",
        "-",
    ],
)
def test_ascii_host_is_what_httpx_puts_on_the_wire(host: str) -> None:
    """The shortcut for hosts already in their wire form gives what parsing them as a URL
    gives (IDNA, lower case, no trailing dot; the host as given when it does not parse)."""
    lowered = host.lower().rstrip(".")
    try:
        expected = httpx.URL(f"http://{lowered}/").raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError):
        expected = lowered
    assert ascii_host(host) == expected


def test_wildcard_does_not_cover_the_apex() -> None:
    """`*.example.com` blocks subdomains, not example.com itself."""
    destinations(blocked_hosts="*.example.com").check_url("http://example.com/")


@pytest.mark.parametrize(
    ("allowed_hosts", "host", "address", "refused"),
    [
        ("intranet.example", "intranet.example", "10.0.0.5", False),
        ("intranet.example", "other.example", "10.0.0.5", True),
        ("*.corp.example", "wiki.corp.example", "192.168.1.2", False),
        ("10.0.0.0/8", "anything.example", "10.9.9.9", False),
        ("10.0.0.0/8", "anything.example", "172.16.0.1", True),
        ("127.0.0.1", "127.0.0.1", "127.0.0.1", False),
        ("127.0.0.1", "127.0.0.2", "127.0.0.2", True),
        ("127.0.0.1", "x.example", "::ffff:127.0.0.1", False),
    ],
)
def test_allowed_hosts_exempt_names_and_networks(
    allowed_hosts: str, host: str, address: str, refused: bool
) -> None:
    """INGEST_ALLOWED_HOSTS lets a listed name or network reach a private address."""
    assert refused == destinations(allowed_hosts=allowed_hosts).refuses(host, ip_address(address))


def test_blocked_wins_over_allowed() -> None:
    """An address both allowed and blocked is blocked."""
    guard = destinations(allowed_hosts="10.0.0.0/8", blocked_hosts="10.0.0.5")
    assert (True, False) == (
        guard.refuses("x", ip_address("10.0.0.5")),
        guard.refuses("x", ip_address("10.0.0.6")),
    )


def test_allow_private_networks_turns_the_address_check_off_only() -> None:
    """With INGEST_ALLOW_PRIVATE_NETWORKS, loopback passes; ports and blocked hosts still apply."""
    guard = destinations(allow_private_networks=True, blocked_hosts="10.0.0.0/8")
    guard.check_url("http://127.0.0.1:8080/")
    with pytest.raises(BlockedDestination, match="port 25"):
        guard.check_url("http://127.0.0.1:25/")
    with pytest.raises(BlockedDestination, match="blocked"):
        guard.check_url("http://10.1.1.1/")


# ---- the connect-time check ---------------------------------------------------------------


class RecordingBackend(httpcore.AsyncNetworkBackend):
    """Stands in for the network: records which addresses were connected to."""

    def __init__(self, refuse: set[str] | frozenset[str] = frozenset()) -> None:
        self.connected: list[str] = []
        self.refuse = refuse

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connected.append(host)
        if host in self.refuse:
            raise httpcore.ConnectError("refused")
        return httpcore.AsyncMockStream([])


def resolving(table: dict[str, list[str]]):
    async def resolve(host: str):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ip_address(a) for a in table[host]]

    return resolve


async def connect(host: str, table: dict[str, list[str]], **settings: object) -> RecordingBackend:
    inner = RecordingBackend()
    backend = GuardedBackend(destinations(**settings), resolving(table), inner)
    await backend.connect_tcp(host, 443, timeout=1)
    return inner


async def test_connects_to_the_checked_address_not_the_name() -> None:
    """A public name is resolved once, and the socket opens to that very address."""
    inner = await connect("example.com", {"example.com": ["93.184.216.34"]})
    assert ["93.184.216.34"] == inner.connected


@pytest.mark.parametrize(
    "addresses",
    [["127.0.0.1"], ["93.184.216.34", "10.0.0.1"], ["10.0.0.1", "93.184.216.34"], ["::1"]],
)
async def test_refused_if_any_resolved_address_is_blocked(addresses: list[str]) -> None:
    """One blocked address among the answers refuses the name; nothing is connected."""
    inner = RecordingBackend()
    backend = GuardedBackend(destinations(), resolving({"evil.test": addresses}), inner)
    with pytest.raises(BlockedDestination, match=r"evil\.test resolves to"):
        await backend.connect_tcp("evil.test", 443)
    assert [] == inner.connected


async def test_next_address_is_tried_when_one_refuses() -> None:
    """When the first checked address refuses the connection, the next one is tried."""
    inner = RecordingBackend(refuse={"93.184.216.34"})
    table = {"example.com": ["93.184.216.34", "93.184.216.35"]}
    backend = GuardedBackend(destinations(), resolving(table), inner)
    await backend.connect_tcp("example.com", 443)
    assert ["93.184.216.34", "93.184.216.35"] == inner.connected


async def test_unknown_name_keeps_the_gaierror_in_the_chain() -> None:
    """NXDOMAIN surfaces as a ConnectError caused by the gaierror, for the classifier."""
    backend = GuardedBackend(destinations(), resolving({}), RecordingBackend())
    with pytest.raises(httpcore.ConnectError) as info:
        await backend.connect_tcp("nx.test", 443)
    assert isinstance(info.value.__cause__, socket.gaierror)


async def test_port_is_checked_at_connect_time_too() -> None:
    """A port outside INGEST_ALLOWED_PORTS is refused before resolving."""
    backend = GuardedBackend(destinations(), resolving({}), RecordingBackend())
    with pytest.raises(BlockedDestination, match="port 25"):
        await backend.connect_tcp("example.com", 25)


async def test_literal_address_is_not_resolved() -> None:
    """A literal IP skips the resolver and is checked as is."""
    inner = await connect("8.8.8.8", {})
    assert ["8.8.8.8"] == inner.connected


async def test_every_redirect_hop_is_checked() -> None:
    """A public first hop that redirects to a name resolving to loopback is refused there."""
    redirect = b"HTTP/1.1 302 Found\r\nLocation: http://sneaky.test/x\r\nContent-Length: 0\r\n\r\n"

    class Redirecting(RecordingBackend):
        async def connect_tcp(
            self, host, port, timeout=None, local_address=None, socket_options=None
        ):
            self.connected.append(host)
            return httpcore.AsyncMockStream([redirect])

    network = Redirecting()
    table = {"public.test": ["93.184.216.34"], "sneaky.test": ["127.0.0.1"]}
    transport = GuardedTransport(destinations(), httpx.Limits(), resolving(table), network)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
        with pytest.raises(BlockedDestination, match=r"sneaky\.test resolves to 127\.0\.0\.1,"):
            await client.get("http://public.test/")
    assert ["93.184.216.34"] == network.connected


async def test_redirect_to_a_literal_private_address_is_refused_before_connecting() -> None:
    """A Location naming 169.254.169.254 is refused by the URL check, no socket opened."""
    redirect = (
        b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n"
    )

    class Redirecting(RecordingBackend):
        async def connect_tcp(
            self, host, port, timeout=None, local_address=None, socket_options=None
        ):
            self.connected.append(host)
            return httpcore.AsyncMockStream([redirect])

    network = Redirecting()
    table = {"public.test": ["93.184.216.34"]}
    transport = GuardedTransport(destinations(), httpx.Limits(), resolving(table), network)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
        with pytest.raises(BlockedDestination, match=r"169\.254\.169\.254 is not a public"):
            await client.get("http://public.test/")
    assert ["93.184.216.34"] == network.connected


def test_transports_share_one_tls_context_with_httpx_defaults() -> None:
    """The CA roots are loaded once per process, not twice per transport (~25 ms each load,
    five transports per worker), and the one context verifies as httpx's default does."""
    first = GuardedTransport(destinations(), httpx.Limits())
    second = GuardedTransport(destinations(), httpx.Limits())
    assert first._pool._ssl_context is second._pool._ssl_context is tls_context()
    assert tls_context().verify_mode == ssl.CERT_REQUIRED
    assert tls_context().check_hostname
