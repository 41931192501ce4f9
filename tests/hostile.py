"""Servers that do not play fair, for the client's trust tests and the CLI's output tests: a tiny ASGI app
that serves a hand-written agent card (pointing wherever the test says) and answers calls with an error of
its choosing, a recorder in front of a real agent that notes every request it gets, and a self-signed
certificate for an https server. Each runs under a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import datetime
import ipaddress
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import serving
from serving import Running

CARD_PATH = "/.well-known/agent-card.json"


@dataclass
class Seen:
    """One HTTP request a server got."""

    method: str
    path: str
    query: str
    headers: dict[str, str]

    def carries(self, secret: str) -> bool:
        return secret in self.query or any(secret in value for value in self.headers.values())


def _seen(scope: dict[str, Any]) -> Seen:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    return Seen(scope["method"], scope["path"], scope["query_string"].decode("latin-1"), headers)


def card(interfaces: list[tuple[str, str]], **members: Any) -> dict[str, Any]:
    """A v1.0 agent card (JSON) whose interfaces are ``(binding, url)``, with ``members`` over the rest."""
    return {
        "name": "Elsewhere",
        "description": "A card that names interfaces somewhere else.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": binding, "protocolVersion": "1.0"} for binding, url in interfaces
        ],
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
        **members,
    }


@dataclass
class CardServer:
    """Serves ``card`` at the well-known path and answers every other request with ``error`` as a JSON-RPC
    error (or with ``result``, when set); with ``redirect``, answers every request with a 307 to the same path there. Records what it gets
    in ``requests``."""

    card: dict[str, Any] = field(default_factory=lambda: card([]))
    error: dict[str, Any] = field(default_factory=lambda: {"code": -32603, "message": "no agent here"})
    result: dict[str, Any] | None = None
    redirect: str | None = None
    requests: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.requests.append(_seen(scope))
        while (await receive()).get("more_body"):
            pass
        if self.redirect is not None:
            await _answer(send, 307, b"", [(b"location", (self.redirect + scope["path"]).encode())])
        elif scope["path"] == CARD_PATH:
            await _answer(send, 200, json.dumps(self.card).encode())
        else:
            answer = {"error": self.error} if self.result is None else {"result": self.result}
            await _answer(send, 200, json.dumps({"jsonrpc": "2.0", "id": 1, **answer}).encode())


async def _answer(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] = []) -> None:  # noqa: B006
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Recorder:
    """Stands in front of an A2AApplication (for ``serve``), noting every HTTP request in ``requests``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[Seen] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests.append(_seen(scope))
        await self.app(scope, receive, send)


@contextmanager
def running(app: Any, *, tls: tuple[Path, Path] | None = None) -> Iterator[Running]:
    """``app`` under plain uvicorn (no lifespan, no access log), over HTTPS with ``tls`` (cert.pem, key.pem);
    stopped on exit."""
    with serving.running(app, tls=tls, name="hostile", lifespan="off", access_log=False, ws="none") as server:
        yield server


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, its own issuer, and its key: (cert.pem, key.pem) in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .add_extension(ski, False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            True,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file
