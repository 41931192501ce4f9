"""The SSRF guard for the URLs the server calls on a caller's behalf (push notification webhooks, issue 13).

A caller names a webhook URL; the server will POST to it. Without a guard that caller could make the server
reach what only the server can reach: its own loopback, the private network, a cloud metadata service. The
guard is on by default: :class:`WebhookPolicy` refuses those, and an allowlist opens hosts or networks
explicitly (the client lives in :mod:`skillwire.server.notifications.outbound_http`, which imports this module and
not the other way round, so that the policy loads without httpx)::

    policy = WebhookPolicy(allow=["hooks.internal.example", "10.1.0.0/16"])
    policy.check_url("https://hooks.example.com/a2a")   # a ParsedTarget, or WebhookRefusedError
    async with guarded_client(policy) as client:        # resolves, checks, connects to the checked address
        response = await client.post(url, json=event)   # a 3xx is not followed: the caller reports failure

Two moments, two checks:

* **Config time** (:meth:`WebhookPolicy.check_url`, when a caller sets a push configuration): what can be
  known without DNS. The scheme is https (http only with ``allow_http``); no userinfo; a host, and a port in
  1-65535; a literal IP not in a refused class; not a name that always means this machine or the metadata
  service (``localhost``, ``*.localhost``, ``metadata.google.internal``); no numeric host in a legacy form
  (``127.1``, ``0x7f.0.0.1``, ``2130706433``: resolvers read them as IPv4 addresses). The refusal is a
  :class:`~skillwire.errors.WebhookRefusedError`, an InvalidParamsError: the caller sees -32602 (HTTP 400)
  and the reason.
* **Delivery time** (:func:`~skillwire.server.notifications.outbound_http.guarded_client`): the URL httpx actually sends to is checked again, the host is
  resolved once per connection, **every** address of the answer is checked, and the connection is made to a
  checked address: nothing resolves the name a second time, so an answer that changes between check and
  connect (DNS rebinding) has nothing to change.

Rules chosen:

* **Mixed answers are refused.** A name whose answer holds one refused address is refused, even if others
  are public. Dropping the bad addresses and connecting to the rest would be safe for that connection, but
  an answer that mixes a public address with 127.0.0.1 is an attack or a misconfiguration either way, and
  refusing it makes the outcome independent of address order and says why.
* **The allowlist** (``allow``) holds host names and networks. A name on it (exact, case-insensitive, a
  trailing dot ignored, no wildcards) is allowed whatever it resolves to: whoever lists
  ``hooks.internal.example`` vouches for its DNS. A network (``10.0.0.0/8``, ``127.0.0.1``, ``[::1]``)
  allows the addresses in it, as literals and in answers; an IPv4 network also allows the IPv4-mapped
  forms of its addresses (``::ffff:10.0.0.1`` is the same socket address).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from skillwire.errors import WebhookRefusedError

if TYPE_CHECKING:
    pass

__all__ = [
    "IPAddress",
    "ParsedTarget",
    "Resolver",
    "WebhookPolicy",
    "WebhookRefusedError",
    "address_refusal",
    "resolve",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``async resolver(host, port) -> [addresses]``: the event loop's getaddrinfo (:func:`resolve`) unless given.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

_net = ipaddress.ip_network

#: Refused by name before the address classes (the first match names the refusal), then the ``ipaddress``
#: properties, then "not globally reachable" catches the rest (documentation, benchmarking, ...).
_METADATA = {
    ipaddress.ip_address("169.254.169.254"): "AWS, GCP, Azure, OpenStack",
    ipaddress.ip_address("fd00:ec2::254"): "AWS, IPv6",
    ipaddress.ip_address("100.100.100.200"): "Alibaba Cloud",
}
_EXPLICIT: tuple[tuple[IPNetwork, str], ...] = (
    (_net("100.64.0.0/10"), "shared address space (RFC 6598)"),
    (_net("255.255.255.255/32"), "broadcast"),
    (_net("192.0.0.0/24"), "IETF protocol assignments"),
    (_net("198.18.0.0/15"), "benchmarking"),
    (_net("fc00::/7"), "private (unique local)"),
)
_NAT64 = _net("64:ff9b::/96")
_COMPATIBLE = _net("::/96")
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata"})
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` is refused as a webhook destination, or None: ``address_refusal(ip("10.0.0.1"))``
    is ``"private address 10.0.0.1"``. IPv6 forms embedding an IPv4 address (mapped, compatible, NAT64,
    6to4) are judged by the IPv4 address they embed."""
    embedded = _embedded_v4(address)
    if embedded is not None:
        form, v4 = embedded
        inner = address_refusal(v4)
        if inner is not None:
            return f"{form} form of {inner}"
        # a public IPv4 behind NAT64 or 6to4 is reachable; the deprecated compatible form is not
        return f"{form} address {address}" if form == "IPv4-compatible" else None
    return _class_refusal(address)


def _class_refusal(address: IPAddress) -> str | None:
    if address in _METADATA:
        return f"cloud metadata address {address} ({_METADATA[address]})"
    for network, name in _EXPLICIT:
        if address.version == network.version and address in network:
            return f"{name} address {address}"
    for name, refused in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("not globally reachable", not address.is_global),
    ):
        if refused:
            return f"{name} address {address}"
    return None


def _embedded_v4(address: IPAddress) -> tuple[str, ipaddress.IPv4Address] | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE and int(address) > 1:  # not :: or ::1, which are judged as themselves
        return "IPv4-compatible", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class ParsedTarget:
    """A webhook URL that passed :meth:`WebhookPolicy.check_url`: its scheme, host (lower case, without
    brackets or a trailing dot), port (the scheme's default when not given), and its address when the host
    is a literal IP."""

    url: str
    scheme: str
    host: str
    port: int
    address: IPAddress | None


class WebhookPolicy:
    """Which webhook destinations the server calls: public https hosts, and what ``allow`` opens.

    ``allow``: host names and networks (``"hooks.internal.example"``, ``"10.0.0.0/8"``, ``"127.0.0.1"``,
    ``"[::1]"``); ``allow_http``: also plain http URLs (the scheme only: the address rules still apply)::

        WebhookPolicy().check_url("https://127.0.0.1/")                     # WebhookRefusedError: loopback
        WebhookPolicy(allow=["127.0.0.1"]).check_url("https://127.0.0.1/")  # ParsedTarget(...)
    """

    def __init__(self, allow: Sequence[str] = (), allow_http: bool = False) -> None:
        if isinstance(allow, str):
            raise TypeError("allow is a sequence of hosts or networks, not one string")
        self.allow_http = allow_http
        self.allow = tuple(allow)
        self._names: frozenset[str] = frozenset()
        self._networks: tuple[IPNetwork, ...] = ()
        names, networks = set(), []
        for entry in self.allow:
            network = _as_network(entry)
            if network is not None:
                networks.append(network)
            elif _valid_name(_normal_host(entry)):
                names.add(_normal_host(entry))
            else:
                raise ValueError(f"webhook allow entry {entry!r}: not a host name, an IP or a network")
        self._names, self._networks = frozenset(names), tuple(networks)

    def __repr__(self) -> str:
        return f"WebhookPolicy(allow={list(self.allow)!r}, allow_http={self.allow_http!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WebhookPolicy):
            return NotImplemented
        return (self._names, self._networks, self.allow_http) == (
            other._names,
            other._networks,
            other.allow_http,
        )

    __hash__ = None  # type: ignore[assignment]

    def check_url(self, url: str) -> ParsedTarget:
        """``url`` parsed, or WebhookRefusedError saying why it is refused (no DNS is asked)."""
        if any(ord(c) <= 0x20 or c in "\\\x7f" for c in url):
            raise WebhookRefusedError("the URL holds whitespace, a control character or a backslash")
        parts = urlsplit(url)
        if "@" in parts.netloc:
            raise WebhookRefusedError("the URL holds userinfo (user:password@)")
        try:
            port = parts.port
        except ValueError:
            raise WebhookRefusedError("the port is not a number in 1-65535") from None
        host = _normal_host(parts.hostname or "")
        return self.check_target(parts.scheme.lower(), host, port, url=url)

    def check_target(self, scheme: str, host: str, port: int | None, *, url: str = "") -> ParsedTarget:
        """The checks of :meth:`check_url` on a URL already split (delivery checks what httpx will send)."""
        if scheme not in _DEFAULT_PORTS or (scheme == "http" and not self.allow_http):
            allowed = "https or http" if self.allow_http else "https"
            raise WebhookRefusedError(f"scheme {scheme or '(none)'!r}: expected {allowed}")
        if not host:
            raise WebhookRefusedError("the URL names no host")
        if port is not None and not 1 <= port <= 65535:
            raise WebhookRefusedError(f"port {port} is not in 1-65535")
        address = _literal(host)
        if address is None and not self._names_allowed(host):
            self._check_name(host)
        elif address is not None and not self.allows_address(address):
            refusal = address_refusal(address)
            if refusal is not None:
                raise WebhookRefusedError(f"{refusal} (allow it with --webhook-allow)")
        return ParsedTarget(url, scheme, host, port or _DEFAULT_PORTS[scheme], address)

    def _check_name(self, host: str) -> None:
        if host == "localhost" or host.endswith(".localhost"):
            raise WebhookRefusedError(f"{host} is this machine (allow it with --webhook-allow)")
        if host in _METADATA_NAMES:
            raise WebhookRefusedError(f"{host} is the cloud metadata service")
        labels = host.split(".")
        if all(_NUMERIC_LABEL.match(label) for label in labels if label):
            raise WebhookRefusedError(f"{host} is a numeric host but not a dotted-quad IPv4 address")
        if not _valid_name(host):
            raise WebhookRefusedError(f"{host!r} is not a host name")

    def _names_allowed(self, host: str) -> bool:
        return host in self._names

    def allows_address(self, address: IPAddress) -> bool:
        """Whether ``address`` is in a network of the allowlist (or is the IPv4-mapped form of one)."""
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return any(
            candidate.version == network.version and candidate in network
            for network in self._networks
            for candidate in (address, mapped)
            if candidate is not None
        )

    def check_addresses(self, host: str, addresses: Iterable[IPAddress]) -> list[IPAddress]:
        """``addresses`` (what ``host`` resolved to) if every one is allowed, else WebhookRefusedError."""
        answer = list(dict.fromkeys(addresses))
        if not answer:
            raise WebhookRefusedError(f"{host} resolved to no address")
        if self._names_allowed(_normal_host(host)):
            return answer
        for address in answer:
            refusal = None if self.allows_address(address) else address_refusal(address)
            if refusal is not None:
                raise WebhookRefusedError(f"{host} resolves to a refused address: {refusal}")
        return answer

    async def checked_addresses(
        self, host: str, port: int, resolver: Resolver | None = None
    ) -> list[IPAddress]:
        """``host`` resolved once (by ``resolver``, else :func:`resolve`) and every address checked."""
        literal = _literal(_normal_host(host))
        addresses = [literal] if literal is not None else await (resolver or resolve)(host, port)
        return self.check_addresses(host, addresses)


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses of ``host`` by the event loop's getaddrinfo, in its order, without repeats."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found = (ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
    return list(dict.fromkeys(found))


def _normal_host(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host[:-1] if host.endswith(".") and not host.endswith("..") else host


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _as_network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(_normal_host(entry), strict=False)
    except ValueError:
        return None


_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def _valid_name(host: str) -> bool:
    """A DNS name of letters, digits, ``-`` and ``_`` (IDNs come here in their ASCII ``xn--`` form)."""
    if not host or len(host) > 253:
        return False
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return all(_LABEL.match(label) for label in ascii_host.split("."))
