"""A tiny identity provider for the token scheme tests, served by a real uvicorn server on 127.0.0.1.

It signs JWTs with keys made in the test (RSA and EC, via joserfc) and serves, under its issuer path
(``/realms/test``): the OpenID Connect discovery document, the RFC 8414 metadata (at the well-known path
inserted before the issuer's path), the JWKS (counting fetches, with the ``Cache-Control`` it is told) and an
RFC 7662 introspection endpoint (HTTP basic client authentication). ``failing = True`` makes it answer 503
to everything, as an IdP that is down behind its load balancer::

    with running_idp() as idp:
        token = idp.token(sub="alice", scope="read")
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

from joserfc import jwt
from joserfc.jwk import ECKey, Key, RSAKey

import serving
from serving import bound_socket

REALM = "/realms/test"
AUDIENCE = "https://agent.example"
CLIENT = ("agent-client", "s3cret pass")


class Clock:
    """The time the schemes see (``clock=``), moved on by the test instead of sleeping."""

    def __init__(self, now: float = 1_900_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def b64(data: bytes | dict[str, Any]) -> str:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class IdP:
    def __init__(self, port: int, clock: Clock) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.issuer = self.base + REALM
        self.clock = clock
        self.rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig"})
        self.ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
        #: the keys the JWKS publishes (their public halves)
        self.published: list[Key] = [self.rsa, self.ec]
        self.cache_control: str | None = "max-age=300"
        #: a JWKS body to serve instead of the keys (bytes as they are)
        self.jwks_body: bytes | None = None
        self.failing = False
        self.fetches: dict[str, int] = {"jwks": 0, "openid": 0, "oauth": 0, "introspect": 0}
        #: introspection answers by token; unknown tokens are inactive
        self.opaque: dict[str, dict[str, Any]] = {}

    # -- tokens -------------------------------------------------------------------------------------------

    def claims(self, **claims: Any) -> dict[str, Any]:
        now = int(self.clock())
        base = {"iss": self.issuer, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300}
        base.update(claims)
        return {k: v for k, v in base.items() if v is not None}

    def token(self, key: Key | None = None, header: dict[str, Any] | None = None, **claims: Any) -> str:
        key = key or self.rsa
        alg = "ES256" if isinstance(key, ECKey) else "RS256"
        head = {"alg": alg, "kid": key.kid, **(header or {})}
        return jwt.encode({k: v for k, v in head.items() if v is not None}, self.claims(**claims), key)

    def unsigned(self, header: dict[str, Any], **claims: Any) -> str:
        """A token in JWS form with the given header and an empty signature (for ``alg: none``)."""
        return f"{b64(header)}.{b64(self.claims(**claims))}."

    # -- the ASGI app ---------------------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": self.issuer + "/jwks",
            "introspection_endpoint": self.issuer + "/introspect",
            "token_endpoint": self.issuer + "/token",
        }

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, headers, content = self.answer(scope, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def answer(self, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        path = scope["path"]
        json_type = [(b"content-type", b"application/json")]
        if path == REALM + "/jwks":
            self.fetches["jwks"] += 1
        elif path == REALM + "/.well-known/openid-configuration":
            self.fetches["openid"] += 1
        elif path == "/.well-known/oauth-authorization-server" + REALM:
            self.fetches["oauth"] += 1
        elif path == REALM + "/introspect":
            self.fetches["introspect"] += 1
        if self.failing:
            return 503, json_type, b'{"error": "temporarily_unavailable"}'
        if path == REALM + "/jwks":
            headers = json_type + (
                [(b"cache-control", self.cache_control.encode())] if self.cache_control else []
            )
            if self.jwks_body is not None:
                return 200, headers, self.jwks_body
            keys = {"keys": [key.as_dict(private=False) for key in self.published]}
            return 200, headers, json.dumps(keys).encode()
        if path in (
            REALM + "/.well-known/openid-configuration",
            "/.well-known/oauth-authorization-server" + REALM,
        ):
            return 200, json_type, json.dumps(self.document()).encode()
        if path == REALM + "/introspect" and scope["method"] == "POST":
            return self.introspect(dict(scope["headers"]), body)
        return 404, json_type, b"{}"

    def introspect(
        self, headers: dict[bytes, bytes], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        json_type = [(b"content-type", b"application/json")]
        expected = "Basic " + base64.b64encode(f"{CLIENT[0]}:{CLIENT[1].replace(' ', '+')}".encode()).decode()
        if headers.get(b"authorization", b"").decode() != expected:
            return 401, json_type, b'{"error": "invalid_client"}'
        form = parse_qs(body.decode())
        token = form.get("token", [""])[0]
        answer = self.opaque.get(token, {"active": False})
        return 200, json_type, json.dumps(answer).encode()

    def opaque_token(self, **answer: Any) -> str:
        token = uuid.uuid4().hex
        now = int(self.clock())
        self.opaque[token] = {"active": True, "sub": "bob", "exp": now + 300, "iss": self.issuer, **answer}
        return token


@contextmanager
def running_idp(clock: Clock | None = None) -> Iterator[IdP]:
    sock = bound_socket()
    idp = IdP(sock.getsockname()[1], clock or Clock())
    with serving.running(
        idp,
        sock=sock,
        name="idp",
        lifespan="off",
        access_log=False,
        ws="none",
        timeout_graceful_shutdown=2,
    ):
        yield idp


__all__ = ["AUDIENCE", "CLIENT", "REALM", "Clock", "IdP", "b64", "running_idp"]
