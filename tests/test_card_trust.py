"""Signed cards served and trusted for real (issue 12): a uvicorn server signs its public and extended
cards and publishes its keys; skillwire's client (and the CLI, and a2a-sdk's card resolver) verify them,
and refuse a card that is unsigned, tampered with, or signed by a key not trusted."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from a2a.client import A2ACardResolver
from a2a.utils.signing import create_signature_verifier
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey
from jwt.api_jwk import PyJWK

import serving
from conftest import PROCESS_TIMEOUT, RunningServer, Served, assert_proto, example_agent
from conftest import start_process as start
from skillwire import Agent, CardSignatureError, CardSigner, Client, SyncClient, Task
from skillwire.cli.main import main
from skillwire.client.grpc import GrpcTransport
from skillwire.security import APIKey, Security
from skillwire.wire.card_signing import ALGORITHMS

WAIT = 15.0
CARD = "/.well-known/agent-card.json"
JWKS = "/.well-known/jwks.json"
#: The v0.3 members a card serving both versions writes beside the v1.0 ones (no security schemes here).
V03_MEMBERS = (
    "protocolVersion",
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "supportsAuthenticatedExtendedCard",
)

Serve = Callable[[Any], RunningServer]


def signer(kid: str, kind: str = "EC") -> CardSigner:
    key = {
        "EC": lambda: ECKey.generate_key("P-256", private=True),
        "RSA": lambda: RSAKey.generate_key(2048, private=True),
        "OKP": lambda: OKPKey.generate_key("Ed25519", private=True),
    }[kind]()
    return CardSigner(key, kid=kid)


def jwks(*signers: CardSigner) -> dict[str, Any]:
    return {"keys": [s.public_jwk() for s in signers]}


def signed_agent(*signers: CardSigner, extended: bool = False) -> Agent:
    agent = example_agent("greeter")
    agent.card_signer = list(signers)
    if extended:
        agent.extended_card = msgspec.structs.replace(agent.card(), name="Greeter (extended)")
        agent.extended_card_enabled = True
        agent.security = Security(APIKey(keys={"tester": EXTENDED_KEY}))  # it is for authenticated callers
    return agent


EXTENDED_KEY = "extended-card-key"
KEYED = {"apiKey": EXTENDED_KEY}


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


def header_of(signature: Any) -> dict[str, Any]:
    protected = signature["protected"] if isinstance(signature, dict) else signature.protected
    return json.loads(base64.urlsafe_b64decode(protected + "=="))  # type: ignore[no-any-return]


# -- the server signs -----------------------------------------------------------------------------------------


async def test_the_served_card_is_signed_and_parses_strictly_as_the_proto(
    serve: Serve, http: httpx.AsyncClient
) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    served = (await http.get(srv.url + CARD)).json()
    for member in V03_MEMBERS:
        served.pop(member)
    card = assert_proto(served, "AgentCard")  # strict: no member lf.a2a.v1.AgentCard lacks
    assert len(card.signatures) == 1
    assert header_of(served["signatures"][0]) == {
        "alg": "ES256",
        "kid": "card-1",
        "typ": "JOSE",
        "jku": srv.url + JWKS,
    }
    published = await http.get(srv.url + JWKS)
    assert published.headers["content-type"] == "application/jwk-set+json"
    assert published.json() == jwks(key)
    assert "d" not in published.json()["keys"][0]  # the public key only


async def test_an_agent_that_does_not_sign_publishes_no_keys(serve: Serve, http: httpx.AsyncClient) -> None:
    srv = serve(example_agent("greeter").asgi(store="memory://"))
    assert "signatures" not in (await http.get(srv.url + CARD)).json()
    assert (await http.get(srv.url + JWKS)).status_code == 404


@pytest.mark.parametrize("keys", ["dict", "KeySet", "URL"])
async def test_the_client_verifies_the_card_with_keys_given_as(serve: Serve, keys: str) -> None:
    key = signer("card-1", "RSA")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    card_keys: Any = {"dict": jwks(key), "KeySet": KeySet.import_key_set(jwks(key)), "URL": srv.url + JWKS}[
        keys
    ]
    async with await Client.connect(srv.url, card_keys=card_keys, retries=0) as client:
        assert client.card.signatures and client.card.name == "Greeter"
        # only the interfaces of the signed v1.0 card: none rebuilt from the unsigned v0.3 members
        assert {i.protocol_version for i in client.card.supported_interfaces} == {"1.0"}
        reply = await client.send("Ada")
        assert isinstance(reply, Task) and reply.artifacts[0].parts[0].text == "Hi Ada!"
        assert (await client.refresh_card()).signatures  # revalidated (304) and still trusted


async def test_an_unsigned_card_is_refused(serve: Serve) -> None:
    srv = serve(example_agent("greeter").asgi(store="memory://"))
    with pytest.raises(CardSignatureError, match="not signed"):
        await Client.connect(srv.url, card_keys=jwks(signer("card-1")), retries=0)


async def test_a_card_signed_by_an_untrusted_key_is_refused(serve: Serve) -> None:
    srv = serve(signed_agent(signer("card-1")).asgi(store="memory://"))
    impostor = signer("card-1")  # the same kid, another key
    with pytest.raises(CardSignatureError, match="does not verify with key 'card-1'"):
        await Client.connect(srv.url, card_keys=jwks(impostor), retries=0)
    with pytest.raises(CardSignatureError, match="'card-1' is not one of the trusted keys"):
        await Client.connect(srv.url, card_keys=jwks(signer("other")), retries=0)


async def test_key_rotation_two_signatures_and_the_old_kid_gone(serve: Serve) -> None:
    old, new = signer("2025", "RSA"), signer("2026", "OKP")
    srv = serve(signed_agent(old, new).asgi(store="memory://"))
    for trusted in (jwks(old), jwks(new), jwks(old, new)):
        async with await Client.connect(srv.url, card_keys=trusted, retries=0) as client:
            assert [header_of(s)["kid"] for s in client.card.signatures] == ["2025", "2026"]


async def test_a_jwks_url_is_fetched_again_when_the_agent_rotated(serve: Serve) -> None:
    """The keys at a JWKS URL are fetched once; a card that fails with them makes the client fetch them
    again (the agent may have rotated in a key), then trust or refuse it."""
    first, second = signer("k1"), signer("k2")
    keys_now = {"jwks": jwks(first)}

    async def keys_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = json.dumps(keys_now["jwks"]).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    agent = signed_agent(first)
    srv = serve(agent.asgi(store="memory://"))
    with serve_asgi(keys_app) as keys_url:
        async with await Client.connect(srv.url, card_keys=keys_url + JWKS, retries=0) as client:
            srv.app.card_endpoint.signers = (second,)  # the agent rotates to a new key ...
            srv.app.card_endpoint.invalidate()
            keys_now["jwks"] = jwks(second)  # ... and publishes it
            assert header_of((await client.refresh_card()).signatures[0])["kid"] == "k2"
            srv.app.card_endpoint.signers = (signer("k3"),)  # a key nobody published
            srv.app.card_endpoint.invalidate()
            with pytest.raises(CardSignatureError, match="'k3' is not one of the trusted keys"):
                await client.refresh_card()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_extended_card_is_signed_and_verified(serve: Serve, binding: str) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key, extended=True).asgi(store="memory://"))
    async with await Client.connect(
        srv.url, card_keys=jwks(key), bindings=[binding], retries=0, credentials=KEYED
    ) as client:
        extended = await client.get_extended_card()
    assert extended.name == "Greeter (extended)"
    assert extended.supported_interfaces[0].url.rstrip("/") == srv.url
    assert header_of(extended.signatures[0])["jku"] == srv.url + JWKS


async def test_the_extended_card_over_grpc_is_signed_and_verified(serve: Serve) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key, extended=True).asgi(store="memory://", grpc_port=0))
    grpc_origin = [str(srv.app.grpc_address)]  # its own port: another origin for the client's credentials
    async with await Client.connect(
        srv.url,
        card_keys=jwks(key),
        bindings=["GRPC"],
        retries=0,
        credentials=KEYED,
        allowed_origins=grpc_origin,
    ) as client:
        assert isinstance(client.transport, GrpcTransport)
        extended = await client.get_extended_card()
    assert extended.name == "Greeter (extended)" and "jku" not in header_of(extended.signatures[0])


async def test_an_extended_card_that_is_not_signed_is_refused(serve: Serve) -> None:
    """A public card signed, an extended one not (the handler's own, unsigned): refused all the same."""
    key = signer("card-1")
    agent = signed_agent(key, extended=True)
    srv = serve(agent.asgi(store="memory://"))
    srv.app.dispatcher._sign_card = None  # the agent stops signing what GetExtendedAgentCard returns
    async with await Client.connect(srv.url, card_keys=jwks(key), retries=0, credentials=KEYED) as client:
        with pytest.raises(CardSignatureError, match="not signed"):
            await client.get_extended_card()


def test_the_sync_client_takes_card_keys(serve: Serve) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    with SyncClient.connect(srv.url, card_keys=jwks(key), retries=0) as client:
        assert client.card.signatures


# -- a card tampered with on its way ------------------------------------------------------------------------


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Any small ASGI ``app`` under a real uvicorn on 127.0.0.1; yields its base URL."""
    with serving.running(app, name="tampering", lifespan="off", log_level="critical", timeout=WAIT) as server:
        yield server.url


def card_server(card: dict[str, Any]) -> Callable[..., Any]:
    """A tiny ASGI app that serves ``card`` as the agent card (what a proxy or a cache in between could do)."""
    body = json.dumps(card).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        status = 200 if scope["path"] == CARD else 404
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body if status == 200 else b"{}"})

    return app


def _tamper_interface(card: dict[str, Any]) -> None:
    card["supportedInterfaces"][0]["url"] = "http://evil.example/"


def _tamper_skill(card: dict[str, Any]) -> None:
    card["skills"][0]["description"] = "Sends your data elsewhere"


def _tamper_capability(card: dict[str, Any]) -> None:
    caps = card["capabilities"]
    caps["pushNotifications"] = not caps.get("pushNotifications")


def _tamper_signature(card: dict[str, Any]) -> None:
    card["signatures"][0]["signature"] = card["signatures"][0]["signature"][::-1]


def _add_member(card: dict[str, Any]) -> None:
    card["documentationUrl"] = "http://evil.example/docs"


@pytest.mark.parametrize(
    "tamper", [_tamper_interface, _tamper_skill, _tamper_capability, _tamper_signature, _add_member]
)
async def test_a_card_tampered_with_is_refused(
    serve: Serve, http: httpx.AsyncClient, tamper: Callable[[dict[str, Any]], None]
) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    card = (await http.get(srv.url + CARD)).json()
    with serve_asgi(card_server(card)) as untouched:  # served as it was: trusted
        async with await Client.connect(untouched, card_keys=jwks(key), retries=0) as client:
            assert client.card.name == "Greeter"
    tamper(card)
    with (
        serve_asgi(card_server(card)) as tampered,
        pytest.raises(CardSignatureError, match="does not verify"),
    ):
        await Client.connect(tampered, card_keys=jwks(key), retries=0)


async def test_unsigned_v03_members_do_not_matter(serve: Serve, http: httpx.AsyncClient) -> None:
    """The v0.3 members beside the card are not signed: changing them leaves the signature good, and the
    verifying client does not use them."""
    key = signer("card-1")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    card = (await http.get(srv.url + CARD)).json()
    card["url"] = "http://evil.example/"
    card["additionalInterfaces"] = [{"url": "http://evil.example/", "transport": "JSONRPC"}]
    with serve_asgi(card_server(card)) as relayed:
        async with await Client.connect(relayed, card_keys=jwks(key), retries=0) as client:
            assert all("evil" not in i.url for i in client.card.supported_interfaces)


async def test_a_verified_card_keeps_only_the_signed_security_schemes(
    serve: Serve, http: httpx.AsyncClient
) -> None:
    """A card serving both versions writes each scheme's v0.3 members beside its v1.0 ones; they are not
    signed, so a relay may change them, and the verifying client drops them."""
    key = signer("card-1")
    app = signed_agent(key).asgi(store="memory://")
    schemes = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}}
    app.card = msgspec.structs.replace(app.card, security_schemes=schemes)
    srv = serve(app)
    card = (await http.get(srv.url + CARD)).json()
    assert card["securitySchemes"]["bearer"]["type"] == "http"  # the v0.3 shape, beside the v1.0 one
    card["securitySchemes"]["bearer"]["scheme"] = "Basic"
    with serve_asgi(card_server(card)) as relayed:
        async with await Client.connect(relayed, card_keys=jwks(key), retries=0) as client:
            assert client.card.security_schemes == schemes


# -- the official a2a-sdk ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["ES256", "RS256", "EdDSA"])
async def test_a2a_sdk_card_resolver_verifies_the_served_card(
    serve: Serve, http: httpx.AsyncClient, alg: str
) -> None:
    key = signer("card-1", {"ES256": "EC", "RS256": "RSA", "EdDSA": "OKP"}[alg])
    srv = serve(signed_agent(key).asgi(store="memory://"))
    published = (await http.get(srv.url + JWKS)).json()["keys"]
    seen: list[tuple[str | None, str | None]] = []

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        seen.append((kid, jku))
        return PyJWK(next(k for k in published if k["kid"] == kid))

    verifier = create_signature_verifier(key_provider, list(ALGORITHMS))
    card = await A2ACardResolver(http, srv.url).get_agent_card(signature_verifier=verifier)
    assert card.name == "Greeter" and seen == [("card-1", srv.url + JWKS)]


# -- the command line -----------------------------------------------------------------------------------------


def test_cli_card_verifies_with_card_keys(
    serve: Serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = signer("card-1")
    srv = serve(signed_agent(key).asgi(store="memory://"))
    keys_file = tmp_path / "jwks.json"
    keys_file.write_text(json.dumps(jwks(key)))
    assert main(["card", srv.url, "--card-keys", str(keys_file), "--retries", "0"]) == 0
    assert "Greeter" in capsys.readouterr().out
    assert main(["card", srv.url, "--card-keys", srv.url + JWKS, "--retries", "0"]) == 0
    keys_file.write_text(json.dumps(jwks(signer("card-1"))))
    assert main(["card", srv.url, "--card-keys", str(keys_file), "--retries", "0"]) == 3
    error = capsys.readouterr().err
    assert "reading the agent card" in error and "does not verify with key 'card-1'" in error


def test_cli_send_refuses_an_unsigned_card(
    serve: Serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = serve(example_agent("greeter").asgi(store="memory://"))
    keys_file = tmp_path / "jwks.json"
    keys_file.write_text(json.dumps(jwks(signer("card-1"))))
    assert main(["send", srv.url, "Ada", "--card-keys", str(keys_file), "--retries", "0"]) == 3
    assert "the agent card is not signed" in capsys.readouterr().err


def test_cli_card_keys_must_be_a_jwks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "not.json").write_text("[1, 2]")
    with pytest.raises(SystemExit) as exited:
        main(["card", ":1", "--card-keys", str(tmp_path / "not.json")])
    assert exited.value.code == 2 and "is not a JWKS" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_signs_with_a_key_file(tmp_path: Path, processes: list[Served], how: str) -> None:
    """``skillwire serve --card-signing-key PATH`` (or SKILLWIRE_CARD_SIGNING_KEY), in a subprocess: a PEM
    here, a JWK there; the served card verifies with the JWKS it publishes and with the key's own."""
    key = ECKey.generate_key("P-384", private=True)
    if how == "flag":
        (tmp_path / "card.pem").write_bytes(key.as_pem(private=True))
        served = start(
            str(EXAMPLE_GREETER),
            "memory://",
            tmp_path,
            "--card-signing-key",
            "card.pem",
            "--card-signing-kid",
            "pem-1",
        )
        kid = "pem-1"
    else:
        (tmp_path / "card.jwk").write_text(json.dumps({**key.as_dict(private=True), "kid": "jwk-1"}))
        served = start(
            str(EXAMPLE_GREETER),
            "memory://",
            tmp_path,
            env=_env_with(CARD_SIGNING_KEY=str(tmp_path / "card.jwk")),
        )
        kid = "jwk-1"
    processes.append(served)
    assert f"card signed by {kid}; keys: {served.url}{JWKS}" in "".join(served.lines)
    expected = {"keys": [{**key.as_dict(private=False), "kid": kid, "alg": "ES384", "use": "sig"}]}
    assert httpx.get(served.url + JWKS, timeout=PROCESS_TIMEOUT).json() == expected

    async def connect() -> str:
        async with await Client.connect(served.url, card_keys=expected, retries=0) as client:
            return header_of(client.card.signatures[0])["kid"]  # type: ignore[no-any-return]

    assert asyncio.run(connect()) == kid


def test_serve_refuses_a_key_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "public.jwk").write_text(
        json.dumps(ECKey.generate_key("P-256", private=True).as_dict(private=False))
    )
    assert main(["serve", str(EXAMPLE_GREETER), "--card-signing-key", str(tmp_path / "public.jwk")]) == 2
    assert "needs the private key" in capsys.readouterr().err
    assert main(["serve", str(EXAMPLE_GREETER), "--card-signing-key", str(tmp_path / "missing.pem")]) == 2
    assert "No such file" in capsys.readouterr().err


EXAMPLE_GREETER = Path(__file__).resolve().parent.parent / "examples" / "greeter"


def _env_with(**values: str) -> dict[str, str]:
    import os

    return {**os.environ, **{f"SKILLWIRE_{name}": value for name, value in values.items()}}
