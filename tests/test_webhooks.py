"""Signed push-notification deliveries, end to end: a sender signs with WebhookSigner and POSTs with httpx to a
real Starlette receiver under uvicorn, which verifies with WebhookVerifier.verify_request as docs/push.md
shows. Time is an injected clock; nothing sleeps."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi import Request as FastAPIRequest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import serving
from skillwire.errors import SkillwireError
from skillwire.security import KeyCache
from skillwire.webhooks import (
    BODY_CLAIM,
    HEADER,
    WebhookKeys,
    WebhookSigner,
    WebhookVerificationError,
    WebhookVerifier,
    load_or_create,
)

ISSUER = "https://agent.example"
BODY = b'{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_COMPLETED"}}}'


class Clock:
    """The time both sides read, moved by the test."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` under a real uvicorn on 127.0.0.1, for the block; its base URL."""
    with serving.running(app, name="receiver") as server:
        yield server.url


DOC = Path(__file__).resolve().parent.parent / "docs" / "push.md"


def documented_app(verifier: WebhookVerifier) -> Starlette:
    """The receiver exactly as docs/push.md shows it (its block with ``async def hook``)."""
    [code] = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if "async def hook" in b]
    namespace: dict[str, Any] = {"verifier": verifier}
    exec(compile(code, str(DOC), "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, Starlette)
    return app


def receiver(verifier: WebhookVerifier) -> Starlette:
    """The documented receiver's routes, in an app that closes the verifier (its JWKS fetcher) at shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await verifier.close()

    return Starlette(routes=documented_app(verifier).routes, lifespan=lifespan)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def signer(clock: Clock) -> WebhookSigner:
    return WebhookSigner(ECKey.generate_key("P-256", private=True), issuer=ISSUER, clock=clock)


@pytest.fixture
def receive(clock: Clock) -> Iterator[Callable[..., str]]:
    """``receive(jwks, **options)``: a receiver verifying with those keys started; its webhook URL."""
    with contextlib.ExitStack() as stack:

        def start(jwks: Any, **options: Any) -> str:
            port_url = stack.enter_context(served(receiver(_verifier(jwks, clock, **options))))
            return port_url + "/hook"

        yield start


def _verifier(jwks: Any, clock: Clock, *, audience: str | None = None, **options: Any) -> WebhookVerifier:
    return WebhookVerifier(jwks, issuer=ISSUER, audience=audience or _AUDIENCE, clock=clock, **options)


#: The audience the receivers expect: each test's URL is only known once its server runs, so receivers are
#: told this fixed name and the sender signs for it (the audience check itself is tested with another).
_AUDIENCE = "https://me.example/hook"


async def post(url: str, body: bytes, token: str | None) -> httpx.Response:
    headers = {"content-type": "application/a2a+json"}
    if token is not None:
        headers[HEADER] = token
    async with httpx.AsyncClient() as http:
        return await http.post(url, content=body, headers=headers, timeout=15)


def refused(response: httpx.Response, status: int, reason: str) -> bool:
    return response.status_code == status and reason in response.text


async def test_a_signed_delivery_is_accepted(receive: Callable[..., str], signer: WebhookSigner) -> None:
    url = receive(signer.public_jwks())
    response = await post(url, BODY, signer.sign(BODY, audience=_AUDIENCE))
    assert response.status_code == 204, response.text


async def test_a_fastapi_receiver_verifies_the_same_way(signer: WebhookSigner, clock: Clock) -> None:
    verifier = _verifier(signer.public_jwks(), clock)
    app = FastAPI()

    @app.post("/hook")
    async def hook(request: FastAPIRequest) -> dict[str, Any]:
        try:
            delivery = await verifier.verify_request(request)
        except WebhookVerificationError as error:
            return {"refused": str(error), "status": error.status}
        return {"jti": delivery.jti, "event": json.loads(delivery.body)}

    with served(app) as base:
        token = signer.sign(BODY, audience=_AUDIENCE)
        answer = (await post(base + "/hook", BODY, token)).json()
        assert "event" in answer, answer
        assert answer["event"] == json.loads(BODY)
        answer = (await post(base + "/hook", BODY + b" ", signer.sign(BODY, audience=_AUDIENCE))).json()
        assert answer["status"] == 401 and BODY_CLAIM in answer["refused"]


def test_the_token_carries_the_documented_header_and_claims(signer: WebhookSigner, clock: Clock) -> None:
    token = signer.sign(BODY, audience=_AUDIENCE)
    decoded = jwt.decode(token, ECKey.import_key(signer.public_jwks()["keys"][0]), algorithms=["ES256"])
    assert decoded.header == {"alg": "ES256", "kid": signer.keys.current.kid, "typ": "JWT"}
    claims = decoded.claims
    assert set(claims) == {"iss", "aud", "iat", "exp", "jti", BODY_CLAIM}
    assert (claims["iss"], claims["aud"], claims["iat"]) == (ISSUER, _AUDIENCE, int(clock.now))
    assert claims["exp"] == claims["iat"] + 300
    import hashlib

    assert claims[BODY_CLAIM] == base64.urlsafe_b64encode(hashlib.sha256(BODY).digest()).rstrip(b"=").decode()
    assert signer.sign(BODY, audience=_AUDIENCE) != token  # a new jti each time


async def test_a_tampered_body_is_refused(receive: Callable[..., str], signer: WebhookSigner) -> None:
    url = receive(signer.public_jwks())
    token = signer.sign(BODY, audience=_AUDIENCE)
    response = await post(url, BODY.replace(b"COMPLETED", b"FAILED"), token)
    assert refused(response, 401, BODY_CLAIM)


async def test_a_delivery_without_a_token_is_refused(
    receive: Callable[..., str], signer: WebhookSigner
) -> None:
    response = await post(receive(signer.public_jwks()), BODY, None)
    assert refused(response, 401, HEADER)


async def test_a_token_for_another_webhook_is_refused(
    receive: Callable[..., str], signer: WebhookSigner
) -> None:
    url = receive(signer.public_jwks())
    response = await post(url, BODY, signer.sign(BODY, audience="https://someone-else.example/hook"))
    assert refused(response, 401, "(aud)")


async def test_a_token_from_another_issuer_is_refused(receive: Callable[..., str], clock: Clock) -> None:
    other = WebhookSigner(
        ECKey.generate_key("P-256", private=True), issuer="https://evil.example", clock=clock
    )
    response = await post(receive(other.public_jwks()), BODY, other.sign(BODY, audience=_AUDIENCE))
    assert refused(response, 401, "(iss)")


async def test_an_expired_token_is_refused(
    receive: Callable[..., str], signer: WebhookSigner, clock: Clock
) -> None:
    url = receive(signer.public_jwks())
    token = signer.sign(BODY, audience=_AUDIENCE)
    clock.now += 300 + 60 + 1  # lifetime, leeway, and one second more
    assert refused(await post(url, BODY, token), 401, "expired")


async def test_a_replayed_delivery_is_refused(receive: Callable[..., str], signer: WebhookSigner) -> None:
    url = receive(signer.public_jwks())
    token = signer.sign(BODY, audience=_AUDIENCE)
    assert (await post(url, BODY, token)).status_code == 204
    assert refused(await post(url, BODY, token), 401, "replayed")
    assert (await post(url, BODY, signer.sign(BODY, audience=_AUDIENCE))).status_code == 204


async def test_a_token_older_than_the_replay_window_is_refused(
    receive: Callable[..., str], clock: Clock
) -> None:
    """A token living longer than the window is accepted only within it: its jti is not remembered longer."""
    long_lived = WebhookSigner(
        ECKey.generate_key("P-256", private=True), issuer=ISSUER, lifetime=3600, clock=clock
    )
    url = receive(long_lived.public_jwks(), replay_window=600)
    token = long_lived.sign(BODY, audience=_AUDIENCE)
    clock.now += 600 + 60 + 1
    assert refused(await post(url, BODY, token), 401, "issued more than 600 s ago")


async def test_a_shared_replay_store_is_asked(receive: Callable[..., str], signer: WebhookSigner) -> None:
    remembered: dict[str, float] = {}

    async def seen(jti: str, until: float) -> bool:  # as a Redis SET NX would answer
        if jti in remembered:
            return True
        remembered[jti] = until
        return False

    url = receive(signer.public_jwks(), seen=seen)
    token = signer.sign(BODY, audience=_AUDIENCE)
    assert (await post(url, BODY, token)).status_code == 204
    assert refused(await post(url, BODY, token), 401, "replayed")
    [until] = remembered.values()
    assert until == signer.clock() + 300 + 60


async def test_a_token_from_an_unknown_key_is_refused(
    receive: Callable[..., str], signer: WebhookSigner, clock: Clock
) -> None:
    url = receive(signer.public_jwks())
    stranger = WebhookSigner(ECKey.generate_key("P-256", private=True), issuer=ISSUER, clock=clock)
    assert refused(await post(url, BODY, stranger.sign(BODY, audience=_AUDIENCE)), 401, "No key")


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _claims(clock: Clock) -> dict[str, Any]:
    from skillwire.webhooks import body_digest

    now = int(clock.now)
    return {
        "iss": ISSUER,
        "aud": _AUDIENCE,
        "iat": now,
        "exp": now + 300,
        "jti": "x1",
        BODY_CLAIM: body_digest(BODY),
    }


async def test_unsigned_and_hmac_tokens_are_refused(
    receive: Callable[..., str], signer: WebhookSigner, clock: Clock
) -> None:
    url = receive(signer.public_jwks())
    kid = signer.keys.current.kid
    unsigned = f"{_b64({'alg': 'none', 'kid': kid, 'typ': 'JWT'})}.{_b64(_claims(clock))}."
    assert refused(await post(url, BODY, unsigned), 401, "not accepted")
    # HS256 keyed with the public JWK's text: the classic algorithm-confusion forgery
    secret = OctKey.import_key(json.dumps(signer.public_jwks()["keys"][0]).encode())
    forged = jwt.encode({"alg": "HS256", "kid": kid}, _claims(clock), secret, algorithms=["HS256"])
    assert refused(await post(url, BODY, forged), 401, "'HS256' is not accepted")


def test_hmac_and_none_cannot_be_allowed(signer: WebhookSigner) -> None:
    for alg in ("none", "HS256"):
        with pytest.raises(ValueError, match="algorithms"):
            WebhookVerifier(signer.public_jwks(), issuer=ISSUER, audience=_AUDIENCE, algorithms=(alg,))


async def test_a_body_over_the_limit_is_refused(receive: Callable[..., str], signer: WebhookSigner) -> None:
    url = receive(signer.public_jwks(), max_body_bytes=len(BODY) - 1)
    assert refused(await post(url, BODY, signer.sign(BODY, audience=_AUDIENCE)), 413, "larger than")


async def test_a_rotated_out_key_verifies_during_its_grace_period_only(
    receive: Callable[..., str], clock: Clock
) -> None:
    old_key, new_key = (ECKey.generate_key("P-256", private=True) for _ in range(2))
    signer = WebhookSigner(WebhookKeys(old_key, clock=clock), issuer=ISSUER, clock=clock)
    in_flight = signer.sign(BODY, audience=_AUDIENCE)
    signer.rotate(new_key, grace=600)
    during = receive(signer.public_jwks())
    assert (await post(during, BODY, in_flight)).status_code == 204
    assert (await post(during, BODY, signer.sign(BODY, audience=_AUDIENCE))).status_code == 204

    clock.now += 601
    assert [k["kid"] for k in signer.public_jwks()["keys"]] == [new_key.thumbprint()]
    after = receive(signer.public_jwks())
    retired = WebhookSigner(old_key, issuer=ISSUER, clock=clock)  # someone still holding the old key
    assert refused(await post(after, BODY, retired.sign(BODY, audience=_AUDIENCE)), 401, "No key")
    assert (await post(after, BODY, signer.sign(BODY, audience=_AUDIENCE))).status_code == 204


def jwks_server(signer: WebhookSigner, fetched: list[str]) -> Starlette:
    async def jwks(request: Request) -> Response:
        fetched.append(request.url.path)
        return JSONResponse(signer.public_jwks())

    return Starlette(routes=[Route("/jwks.json", jwks)])


async def test_keys_are_fetched_from_a_jwks_url_and_follow_a_rotation(
    receive: Callable[..., str], clock: Clock
) -> None:
    old_key, new_key = (ECKey.generate_key("P-256", private=True) for _ in range(2))
    signer = WebhookSigner(old_key, issuer=ISSUER, clock=clock)
    fetched: list[str] = []
    with served(jwks_server(signer, fetched)) as keys_url:
        cache = KeyCache(min_ttl=60, default_ttl=60, max_ttl=60, refresh_interval=0)
        url = receive(keys_url + "/jwks.json", cache=cache)
        assert (await post(url, BODY, signer.sign(BODY, audience=_AUDIENCE))).status_code == 204
        in_flight = signer.sign(BODY, audience=_AUDIENCE)
        signer.rotate(new_key, grace=600)
        # the new kid is unknown to the receiver's cached set: it fetches again and finds it
        assert (await post(url, BODY, signer.sign(BODY, audience=_AUDIENCE))).status_code == 204
        assert (await post(url, BODY, in_flight)).status_code == 204
        assert len(fetched) == 2

        clock.now += 601  # past the grace period, and past the cached set's 60 s
        retired = WebhookSigner(old_key, issuer=ISSUER, clock=clock)
        assert refused(await post(url, BODY, retired.sign(BODY, audience=_AUDIENCE)), 401, "No key")
        # fetched once as the cached set had expired, and once more for the unknown kid (refresh_interval=0)
        assert len(fetched) == 4


async def test_verify_takes_the_body_and_headers_directly(signer: WebhookSigner, clock: Clock) -> None:
    verifier = _verifier(signer.public_jwks(), clock)
    token = signer.sign(BODY, audience=_AUDIENCE)
    delivery = await verifier.verify(BODY, {HEADER.lower(): token})
    assert (delivery.issuer, delivery.audience, delivery.body) == (ISSUER, _AUDIENCE, BODY)
    with pytest.raises(WebhookVerificationError, match="replayed") as caught:
        await verifier.verify(BODY, {HEADER: token})
    assert isinstance(caught.value, SkillwireError) and caught.value.status == 401


def test_load_or_create_makes_a_key_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "webhook-key.pem"
    first = load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.is_private and first.key_type == "EC" and getattr(first, "curve_name", None) == "P-256"
    written = path.read_bytes()
    again = load_or_create(path)
    assert path.read_bytes() == written
    assert again.thumbprint() == first.thumbprint()
    signer = WebhookSigner(again, issuer=ISSUER)
    assert signer.public_jwks()["keys"][0]["kid"] == first.thumbprint()


def test_importing_the_module_does_not_load_joserfc() -> None:
    import subprocess
    import sys

    code = "import sys, skillwire.webhooks\nassert 'joserfc' not in sys.modules, sorted(sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
