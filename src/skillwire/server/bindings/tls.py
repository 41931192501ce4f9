"""TLS terminated by skillwire itself, optionally mutual, and the client certificate handed to the app.

:class:`TLSConfig` says where the server's certificate and key are and, for mutual TLS, which CA signs the
client certificates and whether one is ``required`` or ``optional``. ``skillwire serve --tls-cert PEM
--tls-key PEM [--tls-client-ca PEM] [--tls-client-cert required|optional]``, ``agent.run(tls_cert=...)`` and
``agent.asgi(tls=...)`` take it; the uvicorn server that :func:`skillwire.server.serving.serve.build_server` makes
then serves HTTPS, and the gRPC server uses the same certificate and client CA::

    tls = TLSConfig("server.pem", "server.key", client_ca="clients-ca.pem")  # client certificates required
    app = agent.asgi(tls=tls, grpc_port=50051)

Both listeners accept TLS 1.2 and 1.3 only (1.3 when the client has it), and on TLS 1.2 only the
forward-secret AEAD cipher suites; ``min_version="1.3"`` (``--tls-min-version 1.3``) refuses TLS 1.2 on
HTTPS. grpcio cannot be held to a minimum version, so gRPC over TLS is refused at start with it (serve gRPC
behind a proxy that terminates TLS 1.3 instead). A client certificate is verified against the client CA during the
handshake: one that does not verify fails the handshake, in ``optional`` mode too (a client may send none).
grpcio can require a client certificate but not ask for an optional one, so under ``optional`` gRPC asks for
none and its calls carry no peer certificate (a warning says so at start).

uvicorn does not put the peer certificate in the ASGI scope. Its HTTP protocol classes, subclassed in
:mod:`skillwire.server.serving.uvicorn_tls`, read the TLS session once per connection and add the ASGI TLS extension
(https://asgi.readthedocs.io/en/latest/specs/tls.html) to each scope of that connection:
``scope["extensions"]["tls"]`` with ``server_cert`` and ``client_cert_chain`` (PEM strings; the chain is the
client's own certificate, as Python's ssl module gives no more), ``client_cert_name`` (the subject as RFC
4514), ``client_cert_error`` (always None: a certificate that does not verify never gets this far),
``tls_version`` (``0x0304`` for TLS 1.3) and ``cipher_suite`` (the IANA number, ``0x1301`` ...).

:func:`peer_certificate_from_scope` reads that extension under any ASGI server that provides it, and
:func:`peer_certificate_from_grpc` a gRPC call's auth context; each gives a :class:`PeerCertificate`, whose
``subject`` is the same string on every binding (the security layer's principal id)::

    peer = peer_certificate_from_scope(scope)
    if peer is not None:
        print(peer.subject, peer.common_name, peer.sans, peer.fingerprint_sha256)

Parsing a certificate needs the ``cryptography`` package (``pip install 'skillwire[tls]'``); a client CA is
refused without it, so that client certificates are never accepted and then left unread.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from skillwire.errors import MissingExtraError, SkillwireError

__all__ = [
    "PeerCertificate",
    "TLSConfig",
    "first_certificate",
    "harden",
    "peer_certificate_from_grpc",
    "peer_certificate_from_scope",
    "tls_extension",
    "tls_from",
]

log = logging.getLogger("skillwire.tls")

ClientCert = Literal["required", "optional"]
MinVersion = Literal["1.2", "1.3"]
_MIN_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

#: TLS 1.2 cipher suites: forward secrecy and AEAD only (TLS 1.3's own suites are all of that kind).
_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS"

_CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


# -- configuration ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TLSConfig:
    """The server's certificate chain and key (PEM files) and, for mutual TLS, the CA that signs client
    certificates. ``client_cert``: ``required`` (the default with a ``client_ca``) or ``optional``;
    ``min_version``: the oldest TLS version served, ``"1.2"`` (the default) or ``"1.3"``."""

    cert: str
    key: str
    client_ca: str | None = None
    client_cert: ClientCert | None = None
    min_version: MinVersion = "1.2"

    def __post_init__(self) -> None:
        if self.min_version not in _MIN_VERSIONS:
            raise SkillwireError(f"TLS minimum version {self.min_version!r}: expected 1.2 or 1.3")
        if self.client_cert not in (None, "required", "optional"):
            raise SkillwireError(
                f"TLS client certificate {self.client_cert!r}: expected required or optional"
            )
        if self.client_cert is not None and self.client_ca is None:
            raise SkillwireError(
                f"TLS client certificates ({self.client_cert}) need the CA that signs them (--tls-client-ca)"
            )
        if self.client_ca is not None and importlib.util.find_spec("cryptography") is None:
            raise MissingExtraError("mutual TLS (a client CA) needs the cryptography package", "tls")

    @property
    def client_auth(self) -> Literal["required", "optional", "none"]:
        """Whether the server asks for a client certificate, and whether it must come."""
        if self.client_ca is None:
            return "none"
        return self.client_cert or "required"

    def uvicorn_options(self) -> dict[str, Any]:
        """The ``uvicorn.Config`` arguments that serve this (:func:`uvicorn_config` also hardens them)."""
        return {
            "ssl_certfile": self.cert,
            "ssl_keyfile": self.key,
            "ssl_ca_certs": self.client_ca,
            "ssl_cert_reqs": _CERT_REQS[self.client_auth],
        }

    def server_context(self) -> ssl.SSLContext:
        """A server ``SSLContext`` for this configuration, as skillwire serves with (for a server of your
        own); SkillwireError if a file cannot be read or does not hold what it should."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise SkillwireError(
                f"cannot load the TLS certificate {self.cert} and key {self.key}: {exc}"
            ) from None
        if self.client_ca is not None:
            try:
                context.load_verify_locations(self.client_ca)
            except (OSError, ssl.SSLError) as exc:
                raise SkillwireError(f"cannot load the TLS client CA {self.client_ca}: {exc}") from None
        context.verify_mode = _CERT_REQS[self.client_auth]
        return harden(context, self.min_version)

    def grpc_credentials(self) -> Any:
        """``grpc.ServerCredentials`` for the same certificate, key and client CA (needs grpcio)."""
        import grpc  # type: ignore[import-untyped]

        if self.min_version != "1.2":
            raise SkillwireError(
                f"gRPC cannot be held to TLS {self.min_version} (grpcio has no such setting): serve gRPC behind"
                " a proxy that terminates TLS, or leave the minimum version at 1.2"
            )
        required = self.client_auth == "required"
        if self.client_auth == "optional":
            log.warning(
                "gRPC cannot ask for an optional client certificate: gRPC calls carry none "
                "(use --tls-client-cert required for certificates on gRPC)"
            )
        pair = (Path(self.key).read_bytes(), Path(self.cert).read_bytes())
        ca = Path(self.client_ca).read_bytes() if required and self.client_ca else None
        return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=required)


def tls_from(
    cert: str | None,
    key: str | None,
    client_ca: str | None = None,
    client_cert: str | None = None,
    *,
    min_version: str | None = None,
    env: Mapping[str, str] | None = None,
) -> TLSConfig | None:
    """The TLS configuration these options give (None: plain HTTP), its files checked; what is not given
    comes from ``env``'s ``SKILLWIRE_TLS_CERT``, ``_KEY``, ``_CLIENT_CA``, ``_CLIENT_CERT`` and
    ``_MIN_VERSION`` when ``env`` is passed. SkillwireError for an incomplete or unreadable configuration."""
    if env is not None:
        cert = cert or env.get("SKILLWIRE_TLS_CERT") or None
        key = key or env.get("SKILLWIRE_TLS_KEY") or None
        client_ca = client_ca or env.get("SKILLWIRE_TLS_CLIENT_CA") or None
        client_cert = client_cert or env.get("SKILLWIRE_TLS_CLIENT_CERT") or None
        min_version = min_version or env.get("SKILLWIRE_TLS_MIN_VERSION") or None
    if cert is None and key is None:
        if client_ca is not None or client_cert is not None:
            raise SkillwireError("TLS client certificates need the server's own certificate and key too")
        if min_version is not None:
            raise SkillwireError("a TLS minimum version (--tls-min-version) needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise SkillwireError("TLS needs both the certificate (--tls-cert) and its private key (--tls-key)")
    config = TLSConfig(cert, key, client_ca, client_cert, min_version or "1.2")  # type: ignore[arg-type]
    config.server_context()
    return config


def harden(context: ssl.SSLContext, min_version: str = "1.2") -> ssl.SSLContext:
    """Hold ``context`` to TLS ``min_version`` at least (1.2 by default; 1.3 is preferred: the highest
    version both sides have is chosen), forward-secret AEAD suites on TLS 1.2, no compression, no
    renegotiation."""
    context.minimum_version = _MIN_VERSIONS[min_version]
    context.set_ciphers(_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    return context


# -- the ASGI TLS extension --------------------------------------------------------------------------------

#: ``SSLObject.version()`` as the TLS protocol number.
_TLS_VERSIONS = {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303, "TLSv1.1": 0x0302, "TLSv1": 0x0301, "SSLv3": 0x0300}
#: OpenSSL cipher names as IANA numbers, learnt from the contexts that negotiated them.
_CIPHER_IDS: dict[str, int] = {}


def _cipher_suite(ssl_object: ssl.SSLObject) -> int | None:
    cipher = ssl_object.cipher()
    if cipher is None:
        return None
    name = cipher[0]
    if name not in _CIPHER_IDS:
        for entry in ssl_object.context.get_ciphers():
            _CIPHER_IDS[entry["name"]] = entry["id"] & 0xFFFF  # OpenSSL's id is 0x0300 and the IANA number
    return _CIPHER_IDS.get(name)


@functools.lru_cache(maxsize=8)
def first_certificate(path: str) -> str | None:
    """The first certificate of a PEM file (the server's own, before its chain), as PEM."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return None
    return ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(text[start : stop + len(end)]))


def tls_extension(ssl_object: ssl.SSLObject, server_cert: str | None) -> dict[str, Any]:
    """The ASGI TLS extension's dictionary for one connection's TLS session."""
    der = ssl_object.getpeercert(binary_form=True)
    chain: tuple[str, ...] = ()
    name = None
    if der:
        peer = _parse_der(der)
        chain, name = (peer.pem,), peer.subject
    return {
        "server_cert": server_cert,
        "client_cert_chain": chain,
        "client_cert_name": name,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
        "cipher_suite": _cipher_suite(ssl_object),
    }


# -- the peer's certificate --------------------------------------------------------------------------------


class PeerCertificate(msgspec.Struct, frozen=True, kw_only=True):
    """A verified client certificate, as the TLS handshake delivered it."""

    #: The subject's distinguished name as RFC 4514 writes it, most specific first: ``CN=alice,O=Acme``.
    subject: str
    #: The subject's (first) common name.
    common_name: str | None
    #: The subject alternative names, as plain values: DNS names, IP addresses, URIs, e-mail addresses.
    sans: tuple[str, ...]
    #: The certificate, PEM-encoded.
    pem: str
    #: SHA-256 of the DER encoding, lower-case hex without separators.
    fingerprint_sha256: str

    @classmethod
    def from_pem(cls, pem: str) -> PeerCertificate:
        """Parse one PEM certificate (ValueError if it is none)."""
        return _parse_der(ssl.PEM_cert_to_DER_cert(pem.strip()))


@functools.lru_cache(maxsize=256)  # the same clients reconnect with the same certificates
def _parse_der(der: bytes) -> PeerCertificate:
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise MissingExtraError("reading client certificates needs the cryptography package", "tls") from None
    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    common_name = names[0].value if names else None
    sans: list[str] = []
    try:
        alternative = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        pass
    else:
        for entry in alternative:
            if isinstance(entry, x509.DNSName | x509.RFC822Name | x509.UniformResourceIdentifier):
                sans.append(entry.value)
            elif isinstance(entry, x509.IPAddress):
                sans.append(str(entry.value))
    return PeerCertificate(
        subject=cert.subject.rfc4514_string(),
        common_name=common_name if isinstance(common_name, str) else None,
        sans=tuple(sans),
        pem=ssl.DER_cert_to_PEM_cert(der),
        fingerprint_sha256=hashlib.sha256(der).hexdigest(),
    )


def _from_pem(pem: str, where: str) -> PeerCertificate | None:
    try:
        return PeerCertificate.from_pem(pem)
    except ValueError as exc:
        log.warning("%s holds a client certificate that does not parse: %s", where, exc)
        return None


def peer_certificate_from_scope(scope: Mapping[str, Any]) -> PeerCertificate | None:
    """The client certificate of an ASGI request: the first of the TLS extension's ``client_cert_chain``
    (any ASGI server that implements the extension), or None (no TLS, no certificate, or one that the server
    says failed verification)."""
    tls = (scope.get("extensions") or {}).get("tls")
    if not isinstance(tls, Mapping) or tls.get("client_cert_error"):
        return None
    first = next(iter(tls.get("client_cert_chain") or ()), None)
    return _from_pem(first, "the ASGI TLS extension") if isinstance(first, str) else None


def peer_certificate_from_grpc(context: Any) -> PeerCertificate | None:
    """The client certificate of a gRPC call (a ``grpc.aio.ServicerContext``), or None.

    grpcio's auth context holds, for a verified client certificate, ``x509_pem_cert``,
    ``x509_common_name``, ``x509_subject`` and ``x509_subject_alternative_name`` (each a list of bytes).
    The PEM is parsed rather than those read, so that ``subject`` is the string the HTTP bindings give for
    the same certificate (grpc's ``x509_subject`` is OpenSSL's rendering, which need not match)."""
    auth = context.auth_context() or {}
    pems = auth.get("x509_pem_cert") or ()
    if not pems:
        return None
    pem = pems[0].decode("ascii", "replace") if isinstance(pems[0], bytes) else str(pems[0])
    return _from_pem(pem, "the gRPC auth context")
