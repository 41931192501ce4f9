"""The HTTP client :meth:`Client.connect` makes when it is not given one: TLS set up on first use.

httpx builds its default transport, and with it an SSL context loaded with the whole CA bundle, when the
client is made: about 20 ms, a tenth of ``skillwire card :8000``, spent even when every URL is plain
``http://`` (an agent on this machine, the usual case on the command line). This client routes ``http://``
to a transport that never does TLS and builds httpx's own verifying transport, with the same defaults
(``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else certifi), when it first sends to an ``https://`` URL.
Certificate verification is never off: the plain transport is only ever given ``http://`` URLs. httpx reads
no proxy from the environment for a client given its transport, so where a proxy is set
(``HTTPS_PROXY``, ...) the client is httpx's default one, as before.
"""

from __future__ import annotations

import urllib.request

import httpx

__all__ = ["LazyTLSTransport", "default_http"]


class LazyTLSTransport(httpx.AsyncBaseTransport):
    """``http://`` through a plain transport; ``https://`` through httpx's default one, made on first use."""

    def __init__(self) -> None:
        # verify=False only spares loading the CA bundle: this transport is handed http:// URLs alone
        self._plain = httpx.AsyncHTTPTransport(verify=False)
        self._tls: httpx.AsyncHTTPTransport | None = None

    @property
    def tls_ready(self) -> bool:
        """Whether the verifying transport (and its CA bundle) has been made."""
        return self._tls is not None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        scheme = request.url.scheme
        if scheme == "http":
            return await self._plain.handle_async_request(request)
        if scheme != "https":
            raise httpx.UnsupportedProtocol(f"{scheme!r} is not http or https", request=request)
        if self._tls is None:
            self._tls = httpx.AsyncHTTPTransport()
        return await self._tls.handle_async_request(request)

    async def aclose(self) -> None:
        await self._plain.aclose()
        if self._tls is not None:
            await self._tls.aclose()


def default_http(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """An httpx.AsyncClient as httpx makes it by default, whose TLS is set up when first needed (unless the
    environment names a proxy: then httpx's default client, which uses it)."""
    if urllib.request.getproxies():
        return httpx.AsyncClient(timeout=timeout)
    return httpx.AsyncClient(timeout=timeout, transport=LazyTLSTransport())
