"""The httpx side of :mod:`skillwire.server.notifications.outbound`: a transport that connects only to checked addresses.

Kept apart so that building a :class:`~skillwire.server.notifications.outbound.WebhookPolicy` (``skillwire serve``) does not
load httpx. How the connection stays on the checked address while TLS stays on the host name:
httpcore opens each connection through its network backend, ``connect_tcp(host, port)``, then wraps the
stream in TLS with ``server_hostname`` taken from the request's origin, the URL's host. Our backend resolves
``host``, checks every address and opens the TCP connection to a checked IP; httpcore's ``start_tls`` is
untouched, so SNI and certificate verification (``check_hostname`` of the SSL context) use the host name
from the URL, never the IP (tests/test_outbound.py proves a certificate for another name is refused).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable

import httpcore
import httpx

from skillwire.server.notifications.outbound import IPAddress, Resolver, WebhookPolicy

__all__ = ["CheckedBackend", "guarded_client"]

_SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves a host once, checks every address against ``policy`` and
    connects to a checked address (the first that answers, in the resolver's order)."""

    def __init__(self, policy: WebhookPolicy, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self._tcp = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._addresses(host, port, timeout)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._tcp.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # check_addresses never returns an empty list
        raise failure

    async def _addresses(self, host: str, port: int, within: float | None) -> list[IPAddress]:
        try:
            return await asyncio.wait_for(self.policy.checked_addresses(host, port, self.resolver), within)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {within} s") from None
        except OSError as exc:  # socket.gaierror: the name does not resolve
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks are not delivered over Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._tcp.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose connections :class:`CheckedBackend` opens; each
    request's URL is checked by the policy first (what httpx parsed, which is what it will connect to)."""

    def __init__(
        self,
        policy: WebhookPolicy,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        limits: httpx.Limits = _LIMITS,
    ) -> None:
        context = ssl_context or httpx.create_ssl_context(trust_env=False)
        super().__init__(verify=context, trust_env=False, limits=limits)
        self.policy = policy
        # httpx's transport takes no network backend, so the pool it built is replaced by the same
        # pool over ours; AsyncHTTPTransport only forwards requests to self._pool.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=CheckedBackend(policy, resolver),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.userinfo:
            from skillwire.errors import WebhookRefusedError

            raise WebhookRefusedError("the URL holds userinfo (user:password@)")
        self.policy.check_target(url.scheme, url.host.rstrip(".").lower(), url.port, url=str(url))
        return await super().handle_async_request(request)


def guarded_client(
    policy: WebhookPolicy,
    *,
    timeout: float = 10.0,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """An httpx client that calls only what ``policy`` allows: each request's URL is checked, each
    connection's host resolved once, every address checked and the connection made to a checked address,
    with TLS (SNI and certificate verification) still on the URL's host name. Redirects are never followed
    (a 3xx is the caller's failure to report) and no proxy or ``.netrc`` is read from the environment.
    ``ssl_context``: the CAs to trust (default: the system's, as httpx's). Refusals raise
    WebhookRefusedError from the request."""
    transport = GuardedTransport(policy, resolver=resolver, ssl_context=ssl_context)
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)
