"""The SSRF guard: which destinations a fetch may reach, enforced where the socket is opened.

Two checks, each raising `BlockedDestination` before a byte is sent: `Destinations.check_url`
on a URL (run by the API at submit, and by `GuardedTransport` on every request, so on every
redirect hop), and `GuardedBackend.connect_tcp` at connect time, which resolves the host
itself and connects only to an address it has checked (so DNS rebinding cannot slip through).

`is_blocked` is the address classifier: everything that is not globally routable unicast.
`INGEST_ALLOW_PRIVATE_NETWORKS` turns the address check off; ports, userinfo and
`INGEST_BLOCKED_HOSTS` still apply. `no_cookies` keeps the clients shared by jobs stateless.
This module sends no HTTP and decides no retries.
"""

import asyncio
import functools
import ipaddress
import re
import select
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.cookiejar import Cookie, CookieJar, CookiePolicy
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import httpcore
import httpx

IPAddress = IPv4Address | IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[Sequence[IPAddress]]]
"""Resolves a host name to its addresses; the default asks the system (getaddrinfo)."""


class BlockedDestination(Exception):
    """The guard refused a destination; nothing was sent to it. Where a setting would let
    it through, the message names that setting: it reaches whoever submitted the URL (the
    422, the job's last_error), who may be the operator trying the service on localhost."""


PRIVATE_HINT = (
    "(list it in INGEST_ALLOWED_HOSTS, or set INGEST_ALLOW_PRIVATE_NETWORKS=true to allow "
    "every private address, e.g. for testing)"
)
"""How a refused non-public address can be let through: one host, or all of them."""


# IPv6 unicast that is routable on the internet lives in 2000::/3 (RFC 4291); the rest is not.
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")

# Not globally routable unicast, from the IANA special-purpose registries. Python's
# `is_global` is not enough on its own: it calls some multicast, 192.88.99.0/24, 2002::/16
# and NAT64 global, and its answers change between Python versions.
BLOCKED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT; holds Alibaba Cloud's metadata 100.100.100.200
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local; holds the cloud metadata address 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast 255.255.255.255
        "::/96",  # unspecified, loopback, IPv4-compatible
        "64:ff9b::/96",  # NAT64: would reach any IPv4 address through a translator
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments, Teredo 2001::/32 among them
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: embeds an IPv4 address
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 segment identifiers
        "fc00::/7",  # unique local; holds AWS's metadata fd00:ec2::254
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


def unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped IPv6 one (::ffff:a.b.c.d), else `ip` itself."""
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_blocked(ip: IPAddress) -> bool:
    """True unless `ip` is globally routable unicast. IPv4-mapped addresses are unwrapped."""
    ip = unwrap(ip)
    if isinstance(ip, IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        return True
    if any(ip in network for network in BLOCKED_NETWORKS):
        return True
    return not ip.is_global or ip.is_multicast


# Hosts that getaddrinfo reads as IPv4 in legacy forms: 2130706433, 0x7f.1, 127.1.
_LEGACY_IPV4 = re.compile(r"[0-9a-fA-FxX.]+")


def literal_ip(host: str) -> IPAddress | None:
    """The address a host names literally (any form the system resolver accepts), or None."""
    host = host.strip("[]").split("%", 1)[0]  # an IPv6 zone id is not part of the address
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(host):
        try:
            return IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


_ON_THE_WIRE = re.compile(r"[a-z0-9._-]+")
"""A lower-case host of these characters is already its wire form: IDNA and percent-encoding
leave it as it is."""


def ascii_host(host: str) -> str:
    """A host name as it goes on the wire (IDNA, lower case, no trailing dot). Most hosts
    are so already, and the guard asks for every fetch: those skip parsing a URL
    (docs/design/fetch.md)."""
    host = host.lower().rstrip(".")
    if _ON_THE_WIRE.fullmatch(host):
        return host
    try:
        return httpx.URL(f"http://{host}/").raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError):
        return host


@dataclass(frozen=True)
class _Hosts:
    """Entries of INGEST_ALLOWED_HOSTS or INGEST_BLOCKED_HOSTS: names and networks."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    """From `*.example.com`: any subdomain, not example.com itself."""
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> "_Hosts":
        names, suffixes, networks = set(), [], []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                suffixes.append("." + ascii_host(entry[2:]))
            else:
                names.add(ascii_host(entry))
        return cls(frozenset(names), tuple(suffixes), tuple(networks))

    def has_name(self, host: str) -> bool:
        return host in self.names or host.endswith(self.suffixes)

    def has_address(self, ip: IPAddress) -> bool:
        return any(ip in network for network in self.networks)


@dataclass(frozen=True)
class Destinations:
    """The operator's policy: which hosts, addresses and ports a fetch may reach."""

    allow_private: bool
    ports: frozenset[int]
    allowed: _Hosts = field(default_factory=_Hosts)
    blocked: _Hosts = field(default_factory=_Hosts)

    @classmethod
    def parse(
        cls,
        allow_private: bool,
        ports: frozenset[int],
        allowed_hosts: Iterable[str] = (),
        blocked_hosts: Iterable[str] = (),
    ) -> "Destinations":
        """The rules of INGEST_ALLOW_PRIVATE_NETWORKS, INGEST_ALLOWED_PORTS and the entries of
        INGEST_ALLOWED_HOSTS and INGEST_BLOCKED_HOSTS (as the settings checked them)."""
        return cls(
            allow_private=allow_private,
            ports=ports,
            allowed=_Hosts.parse(allowed_hosts),
            blocked=_Hosts.parse(blocked_hosts),
        )

    def check_url(self, url: httpx.URL | str) -> None:
        """Refuse a URL on what it says alone: userinfo, port, host name, literal address."""
        if not isinstance(url, httpx.URL):
            url = httpx.URL(url)
        if url.userinfo:
            raise BlockedDestination("URL must not contain a user name or password")
        port = url.port or (443 if url.scheme == "https" else 80)
        host = url.raw_host.decode("ascii")
        self.check_host(host, port)
        ip = literal_ip(host)
        if ip is not None:
            self.check_addresses(host, [ip])

    def check_host(self, host: str, port: int) -> None:
        """Refuse a port not allowed or a host name blocked by the operator."""
        if port not in self.ports:
            raise BlockedDestination(f"port {port} is not allowed (INGEST_ALLOWED_PORTS)")
        if self.blocked.has_name(ascii_host(host)):
            raise BlockedDestination(f"host {host} is blocked (INGEST_BLOCKED_HOSTS)")

    def check_addresses(self, host: str, addresses: Iterable[IPAddress]) -> None:
        """Refuse if any address `host` resolved to may not be reached."""
        for ip in addresses:
            if self.refuses(host, ip):
                shown = unwrap(ip)
                literal = literal_ip(host) == ip
                subject = f"{shown} is" if literal else f"{host} resolves to {shown}, which is"
                if self.blocked.has_address(unwrap(ip)):
                    raise BlockedDestination(f"{subject} blocked (INGEST_BLOCKED_HOSTS)")
                raise BlockedDestination(f"{subject} not a public address {PRIVATE_HINT}")

    def refuses(self, host: str, ip: IPAddress) -> bool:
        """Blocked hosts and networks always; then allowed ones pass; then the classifier."""
        ip = unwrap(ip)
        if self.blocked.has_address(ip):
            return True
        if self.allow_private or self.allowed.has_address(ip):
            return False
        if self.allowed.has_name(ascii_host(host)):
            return False
        return is_blocked(ip)


async def system_resolver(host: str) -> list[IPAddress]:
    """The host's addresses from getaddrinfo (run by the event loop in a thread)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    addresses = (literal_ip(str(sockaddr[0])) for *_, sockaddr in infos)
    return list(dict.fromkeys(ip for ip in addresses if ip is not None))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the address check at connect time, for every new
    connection: it resolves the host itself, refuses if ANY resolved address is blocked, and
    connects to an address it has checked. A DNS answer that changes between check and
    connect (rebinding) cannot slip through, because nothing resolves the name a second time.
    httpcore still sends the Host header and TLS SNI, and verifies the certificate, for the
    hostname."""

    def __init__(
        self,
        destinations: Destinations,
        resolver: Resolver = system_resolver,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.destinations = destinations
        self.resolver = resolver
        self._backend = backend or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.destinations.check_host(host, port)
        addresses = await self._resolve(host, timeout)
        self.destinations.check_addresses(host, addresses)
        error: Exception | None = None
        for ip in addresses:  # every one is checked; the first that answers is used
            try:
                stream = await self._backend.connect_tcp(
                    str(ip),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
                return _Stream(stream, stream.get_extra_info("socket"))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def _resolve(self, host: str, timeout: float | None) -> Sequence[IPAddress]:
        ip = literal_ip(host)
        if ip is not None:
            return [ip]
        try:
            async with asyncio.timeout(timeout):
                addresses = await self.resolver(host)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:  # a gaierror stays in the chain, for the classifier
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedDestination("Unix sockets are never fetched")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _Stream(httpcore.AsyncNetworkStream):
    """A connection's stream, with its socket looked up once. httpcore asks every idle pooled
    connection whether its socket is readable (closed by the server) whenever a request
    starts or ends; anyio builds its whole table of attributes to answer, a large part of a
    fetch's CPU (docs/design/fetch.md). The answer itself is one poll() of the socket."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, sock: socket.socket | None) -> None:
        self._stream = stream
        self._socket = sock

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return _Stream(tls, self._socket)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self._socket is None or _readable(self._socket)
        return self._stream.get_extra_info(info)


def _readable(sock: socket.socket) -> bool:
    if sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings (certifi's roots, or SSL_CERT_FILE/SSL_CERT_DIR), made once
    per process and shared by every transport: loading the roots is slow
    (docs/design/fetch.md), and a worker has five transports (four fetch pools and the
    webhooks'). A client context holds no per-connection state to share: Python resumes no
    TLS session unless asked to."""
    return httpx.create_ssl_context()


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, with every request's URL checked and every new connection
    made by `GuardedBackend`. Redirects are new requests, so every hop is checked."""

    def __init__(
        self,
        destinations: Destinations,
        limits: httpx.Limits,
        resolver: Resolver = system_resolver,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        """`network` is what opens the sockets once an address is checked (tests fake it)."""
        tls = tls_context()
        # Retries are the queue's to decide; the transport makes none.
        super().__init__(verify=tls, limits=limits, retries=0)
        self.destinations = destinations
        # httpx 0.28 cannot be handed a network backend (encode/httpx#3749 adds it), so the
        # pool it built is replaced by the same pool on ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            retries=0,
            network_backend=GuardedBackend(destinations, resolver, network),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.destinations.check_url(request.url)
        return await super().handle_async_request(request)


class _RefuseCookies(CookiePolicy):
    """Parse no Set-Cookie header, store no cookie, send none."""

    netscape = False  # with both off, CookieJar does not even parse Set-Cookie
    rfc2965 = False
    hide_cookie2 = True

    def set_ok(self, cookie: Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: Cookie, request: object) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: object) -> bool:
        return False

    def path_return_ok(self, path: str, request: object) -> bool:
        return False


def no_cookies() -> CookieJar:
    """A cookie jar that stays empty: the `cookies` of a client shared by jobs and tenants.

    httpx keeps every Set-Cookie in its client's jar and sends it with every later request
    to that site, whoever's job it is, and on a redirect's next hop; httpx 0.28 cannot turn
    that off (encode/httpx#2992). It keeps this jar as given (it copies only the jars of
    single requests), so its policy decides: nothing is stored.
    """
    return CookieJar(policy=_RefuseCookies())


def guarded_client(transport: httpx.AsyncBaseTransport, **options: Any) -> httpx.AsyncClient:
    """An httpx client that goes only through `transport` (a `GuardedTransport`, or a test's
    mock), shared by jobs and tenants: proxy variables cannot route it around the guard
    (`trust_env` off), it follows no redirect itself (the caller checks each hop, or takes a
    3xx as the answer), and it keeps no cookie (`no_cookies`). The fetcher's and the
    webhooks' clients; `options` are the rest of httpx's (timeouts, headers, hooks)."""
    return httpx.AsyncClient(
        trust_env=False,
        follow_redirects=False,
        cookies=no_cookies(),
        transport=transport,
        **options,
    )
