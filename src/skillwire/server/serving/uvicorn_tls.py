"""HTTPS under uvicorn: a hardened SSL context, and the ASGI TLS extension uvicorn does not provide.

:func:`uvicorn_config` is what :func:`skillwire.server.serving.serve.build_server` makes its ``uvicorn.Config`` with::

    config = uvicorn_config(app.tls, app, http="h11", host="127.0.0.1", port=8443)

With a :class:`~skillwire.server.bindings.tls.TLSConfig` it adds the certificate options, holds the SSL context uvicorn
makes to :func:`~skillwire.server.bindings.tls.harden` (TLS 1.2 at least), and swaps the HTTP protocol class for one
with :class:`TLSScope` mixed in: on each TLS connection, once the handshake is done, it reads the session
(:func:`~skillwire.server.bindings.tls.tls_extension`) and gives every request of the connection
``scope["extensions"]["tls"]``. uvicorn's h11 and httptools protocols read their app from ``self.app`` for
each request (from uvicorn 0.30 to today), which is where the mixin wraps it; the bounded httptools protocol
of :mod:`skillwire.server.serving.http` gets it the same way. A protocol that stopped doing so would serve without
the extension: the app would see no client certificate, never a wrong one (``tests/test_tls.py`` would say).

Kept apart from :mod:`skillwire.server.bindings.tls` so that reading a certificate does not import uvicorn.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from skillwire.server.bindings.tls import TLSConfig, first_certificate, harden, tls_extension

__all__ = ["TLSH11Protocol", "TLSScope", "uvicorn_config", "with_tls_scope"]

log = logging.getLogger("skillwire.tls")


class _HardenedConfig(uvicorn.Config):
    """uvicorn's configuration, whose SSL context is :func:`harden`-ed once uvicorn has made it (after
    ``load``, which every uvicorn version has; ``ssl_context_factory`` is recent), to ``min_tls`` at least."""

    min_tls = "1.2"

    def load(self) -> None:
        super().load()
        context = getattr(self, "ssl", None)
        if isinstance(context, ssl.SSLContext):
            harden(context, self.min_tls)


def uvicorn_config(tls: TLSConfig | None, app: Any, **options: Any) -> uvicorn.Config:
    """``uvicorn.Config(app, **options)``, serving ``tls`` when it is set: its certificates, a hardened
    context, and ``options["http"]`` (a protocol class or uvicorn's name for one) with the ASGI TLS
    extension."""
    if tls is None:
        return uvicorn.Config(app, **options)
    options["http"] = with_tls_scope(_protocol_class(options.get("http", "auto")))
    config = _HardenedConfig(app, **options, **tls.uvicorn_options())
    config.min_tls = tls.min_version
    return config


def _protocol_class(http: Any) -> type[asyncio.Protocol]:
    if not isinstance(http, str):
        return http  # type: ignore[no-any-return]
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    return import_from_string(HTTP_PROTOCOLS.get(http, http))  # type: ignore[no-any-return]


class _WithTLS:
    """The application, given the connection's TLS extension in every scope."""

    __slots__ = ("app", "extension")

    def __init__(self, app: Any, extension: dict[str, Any]) -> None:
        self.app = app
        self.extension = extension

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope["extensions"] = {**(scope.get("extensions") or {}), "tls": dict(self.extension)}
        await self.app(scope, receive, send)


class TLSScope(asyncio.Protocol):
    """Mixin for a uvicorn HTTP protocol class: on a TLS connection, the app it calls (``self.app``, read
    for each request by uvicorn's h11 and httptools protocols) gets the ASGI TLS extension in its scopes.
    Should the protocol not hold its app there, or the session not be readable, the scopes go without it:
    the app then sees no client certificate, never a wrong one."""

    app: Any
    config: Any

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or transport.is_closing() or getattr(self, "app", None) is None:
            return
        certfile = getattr(getattr(self, "config", None), "ssl_certfile", None)
        try:
            server_cert = first_certificate(str(certfile)) if certfile else None
            extension = tls_extension(ssl_object, server_cert)
        except Exception:
            log.warning(
                "cannot read the TLS session: this connection's requests carry no TLS extension",
                exc_info=True,
            )
            return
        self.app = _WithTLS(self.app, extension)


class TLSH11Protocol(TLSScope, H11Protocol):
    """uvicorn's h11 protocol with the ASGI TLS extension (a module-level class: ``--reload`` hands its
    configuration to fresh processes, which must find it by name)."""


def with_tls_scope(protocol: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``protocol`` (uvicorn's h11 or httptools protocol, or a subclass) with the ASGI TLS extension."""
    if issubclass(protocol, TLSScope):
        return protocol
    if protocol is H11Protocol:
        return TLSH11Protocol
    return type(f"TLS{protocol.__name__}", (TLSScope, protocol), {})
