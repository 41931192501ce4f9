"""TLS terminated by skillwire, mutual TLS, and the client certificate handed to the app (issue 12).

Everything is real: a CA and certificates made per module with trustme, uvicorn and grpc.aio servers on
127.0.0.1, clients that trust the CA (httpx, raw ``ssl`` sockets, grpc.aio, the skillwire Client), and
``skillwire serve`` in a subprocess. The client certificate is observed where an app sees it: a tiny ASGI app
served by the same protocol classes as skillwire (it answers with its scope's TLS extension), and a grpc.aio
handler that reads its call's auth context.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import signal
import socket
import ssl
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import trustme

import serving
from conftest import EXAMPLES, Served, example_agent, free_port, start_process
from skillwire import Agent, Client, Limits, SkillContext, TaskState
from skillwire.cli.main import main
from skillwire.client import AgentConnectionError
from skillwire.client.grpc import GrpcTransport
from skillwire.errors import SkillwireError, TaskNotFoundError, UnauthenticatedError
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.security import MutualTLS, Security
from skillwire.server.bindings.tls import (
    PeerCertificate,
    TLSConfig,
    peer_certificate_from_grpc,
    peer_certificate_from_scope,
    tls_from,
)
from skillwire.server.serving.http import protocol_for
from skillwire.server.serving.uvicorn_tls import TLSH11Protocol, uvicorn_config

WAIT = 15.0  # the cap on every wait, in seconds
V1 = {"A2A-Version": "1.0"}
CARD = "/.well-known/agent-card.json"
ALICE_SUBJECT = "CN=alice,OU=agents,O=Acme"


@dataclass(frozen=True)
class Pki:
    """PEM files: a CA, the server's certificate for 127.0.0.1 and localhost, alice's client certificate
    from the same CA, and mallory's from another CA."""

    ca: Path
    server_cert: Path
    server_key: Path
    alice_cert: Path
    alice_key: Path
    mallory_cert: Path
    mallory_key: Path

    def tls(self, client_cert: str | None = "required") -> TLSConfig:
        ca = str(self.ca) if client_cert is not None else None
        return TLSConfig(str(self.server_cert), str(self.server_key), ca, client_cert)  # type: ignore[arg-type]

    def client_context(self, who: str | None = "alice") -> ssl.SSLContext:
        """What a client trusts (the CA) and presents (``who``'s certificate, or none)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if who is not None:
            context.load_cert_chain(getattr(self, f"{who}_cert"), getattr(self, f"{who}_key"))
        return context

    def grpc_credentials(self, who: str | None = "alice") -> grpc.ChannelCredentials:
        if who is None:
            return grpc.ssl_channel_credentials(self.ca.read_bytes())
        return grpc.ssl_channel_credentials(
            self.ca.read_bytes(),
            private_key=getattr(self, f"{who}_key").read_bytes(),
            certificate_chain=getattr(self, f"{who}_cert").read_bytes(),
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    alice = ca.issue_cert(
        "alice.agents.example",
        "alice@example.com",
        common_name="alice",
        organization_name="Acme",
        organization_unit_name="agents",
    )
    mallory = other.issue_cert("mallory.example", common_name="mallory", organization_unit_name="x")

    def write(name: str, blob: trustme.Blob) -> Path:
        blob.write_to_path(str(folder / name))
        return folder / name

    server_chain = folder / "server.pem"
    server_chain.write_bytes(b"".join(pem.bytes() for pem in server.cert_chain_pems))
    return Pki(
        ca=write("ca.pem", ca.cert_pem),
        server_cert=server_chain,
        server_key=write("server.key", server.private_key_pem),
        alice_cert=write("alice.pem", alice.cert_chain_pems[0]),
        alice_key=write("alice.key", alice.private_key_pem),
        mallory_cert=write("mallory.pem", mallory.cert_chain_pems[0]),
        mallory_key=write("mallory.key", mallory.private_key_pem),
    )


# -- a tiny app under skillwire's protocol classes ---------------------------------------------------------


async def tls_echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers with its scope's TLS extension, and the PeerCertificate read from the scope."""
    assert scope["type"] == "http"
    tls = scope.get("extensions", {}).get("tls")
    peer = peer_certificate_from_scope(scope)
    body = {
        "scheme": scope["scheme"],
        "tls": None if tls is None else {**tls, "client_cert_chain": list(tls["client_cert_chain"])},
        "peer": None if peer is None else {"subject": peer.subject, "sans": list(peer.sans)},
    }
    encoded = json.dumps(body).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": encoded})


@pytest.fixture
def echo_server() -> Iterator[Any]:
    """``echo_server(tls, http, loop="auto")``: ``tls_echo`` under uvicorn with ``tls``, the protocol
    ``http`` and the event ``loop``; its ``https://127.0.0.1:PORT`` URL."""
    running: list[serving.Running] = []

    def start(tls: TLSConfig, http: Any, loop: str = "auto") -> str:
        sock = serving.bound_socket()
        config = uvicorn_config(
            tls,
            tls_echo,
            http=http,
            loop=loop,
            host="127.0.0.1",
            port=sock.getsockname()[1],
            lifespan="off",
            log_level="warning",
        )
        running.append(serving.start(config, sock=sock, name="tls-echo", timeout=WAIT))
        return running[-1].url

    yield start
    for server in running:
        server.stop(WAIT)


#: The protocol classes served with: skillwire's bounded httptools protocol (``skillwire serve``), uvicorn's
#: httptools, and h11 (``--reload``, or no httptools).
PROTOCOLS = {
    "bounded": lambda: protocol_for(Limits()),
    "httptools": lambda: "httptools",
    "h11": lambda: "h11",
}


def echo(url: str, context: ssl.SSLContext) -> dict[str, Any]:
    with httpx.Client(verify=context, timeout=WAIT) as http:
        response = http.get(url + "/")
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_client_certificate_subject_reaches_the_scope(
    pki: Pki, echo_server: Any, protocol: str, loop: str
) -> None:
    url = echo_server(pki.tls("required"), PROTOCOLS[protocol](), loop)
    seen = echo(url, pki.client_context("alice"))
    tls = seen["tls"]
    assert seen["scheme"] == "https"
    assert tls["client_cert_name"] == ALICE_SUBJECT
    assert tls["client_cert_chain"] == [pki.alice_cert.read_text()]
    assert tls["client_cert_error"] is None
    assert tls["tls_version"] == 0x0304  # TLS 1.3, which both sides have
    assert tls["cipher_suite"] in (0x1301, 0x1302, 0x1303)  # TLS 1.3's AEAD suites
    assert tls["server_cert"] == pki.server_cert.read_text()  # the server's own (trustme's CA has no chain)
    assert seen["peer"] == {"subject": ALICE_SUBJECT, "sans": ["alice.agents.example", "alice@example.com"]}


def test_each_connection_carries_its_own_certificate(pki: Pki, echo_server: Any) -> None:
    url = echo_server(pki.tls("optional"), protocol_for(Limits()))
    with (
        httpx.Client(verify=pki.client_context("alice"), timeout=WAIT) as alice,
        httpx.Client(verify=pki.client_context(None), timeout=WAIT) as anonymous,
    ):
        for _ in range(2):  # keep-alive: several requests on each connection
            assert alice.get(url).json()["tls"]["client_cert_name"] == ALICE_SUBJECT
            tls = anonymous.get(url).json()["tls"]
            assert (tls["client_cert_name"], tls["client_cert_chain"]) == (None, [])


def test_plain_http_has_no_tls_extension() -> None:
    sock = serving.bound_socket()
    port = sock.getsockname()[1]
    config = uvicorn_config(None, tls_echo, http="h11", host="127.0.0.1", port=port, lifespan="off")
    with serving.running(config, sock=sock, timeout=WAIT) as server:
        seen = httpx.get(f"{server.url}/", timeout=WAIT).json()
    assert (seen["scheme"], seen["tls"], seen["peer"]) == ("http", None, None)


# -- what the handshake refuses ---------------------------------------------------------------------------


def handshake(url: str, context: ssl.SSLContext) -> str:
    """Connect, send one HTTP request and read: ``"answered over TLSv1.3"``, or ``"refused: "`` and the
    alert the server sent (``"closed"``: it closed the connection without one). Under TLS 1.3 the server
    judges the client's certificate after the client's half of the handshake, so a refusal arrives on the
    first read."""
    port = int(url.rpartition(":")[2])
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
        ):
            conn.sendall(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            head = conn.recv(12)
            if not head:
                return "refused: closed"
            assert head == b"HTTP/1.1 200", head
            return f"answered over {conn.version()}"
    except ssl.SSLError as exc:
        return f"refused: {exc.reason}"
    except ConnectionResetError:
        return "refused: reset"


def test_required_client_certificate_missing_fails_the_handshake(pki: Pki, echo_server: Any) -> None:
    url = echo_server(pki.tls("required"), protocol_for(Limits()))
    assert handshake(url, pki.client_context(None)).startswith("refused: ")
    assert handshake(url, pki.client_context("alice")) == "answered over TLSv1.3"


@pytest.mark.parametrize("mode", ["required", "optional"])
def test_certificate_from_another_ca_is_refused(pki: Pki, echo_server: Any, mode: str) -> None:
    url = echo_server(pki.tls(mode), protocol_for(Limits()))
    assert handshake(url, pki.client_context("mallory")).startswith("refused: ")
    assert handshake(url, pki.client_context("alice")) == "answered over TLSv1.3"


def test_optional_client_certificate_may_be_left_out(pki: Pki, echo_server: Any) -> None:
    url = echo_server(pki.tls("optional"), "h11")
    assert echo(url, pki.client_context(None))["peer"] is None
    assert echo(url, pki.client_context("alice"))["peer"]["subject"] == ALICE_SUBJECT


def old_client(maximum: ssl.TLSVersion, pki: Pki) -> ssl.SSLContext:
    """A client that offers TLS 1.1 (or 1.2) and every cipher: only the server can refuse it."""
    context = pki.client_context(None)
    with warnings.catch_warnings():  # naming TLS 1.1 at all is deprecated: that is the point here
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.maximum_version = maximum
    context.set_ciphers("ALL:@SECLEVEL=0")
    return context


def test_tls_1_1_is_refused_and_1_2_accepted(pki: Pki, echo_server: Any) -> None:
    url = echo_server(pki.tls(None), protocol_for(Limits()))
    # the same client, the same ciphers, one version apart: the server refuses the older
    assert handshake(url, old_client(ssl.TLSVersion.TLSv1_1, pki)).startswith("refused: ")
    assert handshake(url, old_client(ssl.TLSVersion.TLSv1_2, pki)) == "answered over TLSv1.2"
    tls = echo(url, old_client(ssl.TLSVersion.TLSv1_2, pki))["tls"]
    assert tls["tls_version"] == 0x0303
    # offered every cipher, the server still picks a forward-secret AEAD one: ECDHE with AES-GCM or ChaCha20
    assert tls["cipher_suite"] in {0xC02B, 0xC02C, 0xC02F, 0xC030, 0xCCA8, 0xCCA9}


@pytest.mark.parametrize("protocol", ["bounded", "h11"])
def test_a_tls_1_3_minimum_refuses_1_2(pki: Pki, echo_server: Any, protocol: str) -> None:
    tls = dataclasses.replace(pki.tls(None), min_version="1.3")
    url = echo_server(tls, PROTOCOLS[protocol]())
    assert handshake(url, old_client(ssl.TLSVersion.TLSv1_2, pki)).startswith("refused: ")
    assert handshake(url, pki.client_context(None)) == "answered over TLSv1.3"
    assert echo(url, pki.client_context(None))["tls"]["tls_version"] == 0x0304


def test_a_tls_minimum_version_is_checked_and_crosses_to_reloaded_processes(pki: Pki) -> None:
    with pytest.raises(SkillwireError, match=r"1\.2 or 1\.3"):
        TLSConfig(str(pki.server_cert), str(pki.server_key), min_version="1.1")  # type: ignore[arg-type]
    with pytest.raises(SkillwireError, match="--tls-cert"):
        tls_from(None, None, min_version="1.3")
    env = {"SKILLWIRE_TLS_CERT": str(pki.server_cert), "SKILLWIRE_TLS_KEY": str(pki.server_key)}
    tls = tls_from(None, None, env={**env, "SKILLWIRE_TLS_MIN_VERSION": "1.3"})
    assert tls is not None and tls.min_version == "1.3"
    assert tls.server_context().minimum_version is ssl.TLSVersion.TLSv1_3
    config = uvicorn_config(tls, "skillwire.cli.main:app_from_env", http="h11", factory=True)
    assert pickle.loads(pickle.dumps(config)).min_tls == "1.3"


def test_serve_refuses_a_tls_1_3_minimum_with_grpc(pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    """grpcio cannot be held to TLS 1.3: gRPC is refused rather than served with 1.2."""
    target = str(EXAMPLES / "echo")
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key), "--tls-min-version", "1.3"]
    assert main(["serve", target, "--store", "memory://", *tls, "--grpc-port", "0"]) == 2
    assert "gRPC cannot be held to TLS 1.3" in capsys.readouterr().err


# -- skillwire's own server: the card, the Client, gRPC ----------------------------------------------------


def test_card_urls_are_https(pki: Pki, serve: Any) -> None:
    srv = serve(example_agent("echo").asgi(store="memory://", grpc_port=0, tls=pki.tls("required")))
    base = f"https://127.0.0.1:{srv.port}"
    with httpx.Client(verify=pki.client_context("alice"), timeout=WAIT) as http:
        card = http.get(base + CARD).json()
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls == {"JSONRPC": base, "HTTP+JSON": base, "GRPC": f"https://{srv.app.grpc_address}"}


async def test_skillwire_client_over_mutual_tls(pki: Pki, serve: Any) -> None:
    srv = serve(example_agent("echo").asgi(store="memory://", tls=pki.tls("required")))
    base = f"https://127.0.0.1:{srv.port}"
    async with httpx.AsyncClient(verify=pki.client_context("alice"), timeout=WAIT) as http:
        for binding in ("JSONRPC", "HTTP+JSON"):
            async with await Client.connect(base, http=http, bindings=[binding], retries=0) as client:
                task = await client.send("hello")
            assert task.status.state is TaskState.COMPLETED, binding
    async with httpx.AsyncClient(verify=pki.client_context(None), timeout=WAIT) as http:
        with pytest.raises(AgentConnectionError):  # no client certificate: the server hangs up
            await Client.connect(base, http=http, retries=0)


async def test_grpc_over_mutual_tls_through_the_client(pki: Pki, serve: Any) -> None:
    srv = serve(example_agent("echo").asgi(store="memory://", grpc_port=0, tls=pki.tls("required")))
    base = f"https://127.0.0.1:{srv.port}"
    async with httpx.AsyncClient(verify=pki.client_context("alice"), timeout=WAIT) as http:
        client = await Client.connect(
            base, http=http, bindings=["GRPC"], retries=0, grpc_credentials=pki.grpc_credentials("alice")
        )
        async with client:
            assert isinstance(client.transport, GrpcTransport)
            task = await client.send("hello")
    assert task.status.state is TaskState.COMPLETED
    url = f"https://{srv.app.grpc_address}"
    async with GrpcTransport(url, timeout=WAIT, credentials=pki.grpc_credentials("alice")) as transport:
        with pytest.raises(TaskNotFoundError):  # the call arrived
            await transport.send(Operation.GET_TASK, m.GetTaskRequest(id="nope"))
    for who in (None, "mallory"):  # no client certificate, one of another CA
        async with GrpcTransport(url, timeout=WAIT, credentials=pki.grpc_credentials(who)) as transport:
            with pytest.raises(AgentConnectionError):
                await transport.send(Operation.GET_TASK, m.GetTaskRequest(id="nope"))


async def test_peer_certificate_from_grpc_matches_the_http_subject(pki: Pki) -> None:
    seen: list[PeerCertificate | None] = []

    async def who(request: bytes, context: Any) -> bytes:
        seen.append(peer_certificate_from_grpc(context))
        return b""

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Who", {"Am": handler}),))
    port = server.add_secure_port("127.0.0.1:0", pki.tls("required").grpc_credentials())
    await server.start()
    try:
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", pki.grpc_credentials("alice")) as channel:
            await channel.unary_unary("/t.Who/Am")(b"", timeout=WAIT)
    finally:
        await server.stop(None)
    peer = seen[0]
    assert peer is not None
    assert peer == PeerCertificate.from_pem(pki.alice_cert.read_text())
    assert peer.subject == ALICE_SUBJECT  # what client_cert_name says over HTTP
    assert peer.common_name == "alice"
    assert peer.sans == ("alice.agents.example", "alice@example.com")


async def test_grpc_without_client_ca_serves_tls_and_sees_no_certificate(pki: Pki) -> None:
    seen: list[PeerCertificate | None] = []

    async def who(request: bytes, context: Any) -> bytes:
        seen.append(peer_certificate_from_grpc(context))
        return b""

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Who", {"Am": handler}),))
    port = server.add_secure_port("127.0.0.1:0", pki.tls(None).grpc_credentials())
    await server.start()
    try:
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", pki.grpc_credentials(None)) as channel:
            await channel.unary_unary("/t.Who/Am")(b"", timeout=WAIT)
    finally:
        await server.stop(None)
    assert seen == [None]


# -- PeerCertificate and the scope ------------------------------------------------------------------------


def test_peer_certificate_has_subject_names_and_fingerprint(pki: Pki) -> None:
    pem = pki.alice_cert.read_text()
    peer = PeerCertificate.from_pem(pem)
    assert peer.subject == ALICE_SUBJECT
    assert peer.common_name == "alice"
    assert peer.sans == ("alice.agents.example", "alice@example.com")
    assert peer.pem == pem
    assert peer.fingerprint_sha256 == hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()
    with pytest.raises(ValueError):
        PeerCertificate.from_pem("not a certificate")


def test_peer_certificate_from_scope_reads_any_servers_extension(pki: Pki) -> None:
    pem = pki.alice_cert.read_text()
    # the extension as another ASGI server writes it (a list, more keys than needed)
    tls = {"server_cert": None, "client_cert_chain": [pem], "client_cert_name": ALICE_SUBJECT}
    peer = peer_certificate_from_scope({"type": "http", "extensions": {"tls": tls}})
    assert peer is not None and peer.subject == ALICE_SUBJECT
    for scope in (
        {"type": "http"},
        {"type": "http", "extensions": {}},
        {"type": "http", "extensions": {"tls": {"client_cert_chain": []}}},
        {"type": "http", "extensions": {"tls": {**tls, "client_cert_error": "unknown CA"}}},
        {"type": "http", "extensions": {"tls": {**tls, "client_cert_chain": ["garbage"]}}},
    ):
        assert peer_certificate_from_scope(scope) is None


# -- configuration: the CLI, the environment, --reload ----------------------------------------------------


def test_tls_from_checks_the_configuration(pki: Pki, tmp_path: Path) -> None:
    cert, key, ca = str(pki.server_cert), str(pki.server_key), str(pki.ca)
    assert tls_from(None, None) is None
    assert tls_from(cert, key) == TLSConfig(cert, key)
    env = {"SKILLWIRE_TLS_CERT": cert, "SKILLWIRE_TLS_KEY": key, "SKILLWIRE_TLS_CLIENT_CA": ca}
    config = tls_from(None, None, env=env)
    assert config is not None and config.client_auth == "required"
    assert tls_from(None, None, client_cert="optional", env=env) == TLSConfig(cert, key, ca, "optional")
    bad = [
        ((cert, None), "both the certificate"),
        ((None, None, ca), "server's own certificate"),
        ((cert, key, None, "optional"), "need the CA"),
        ((cert, key, ca, "sometimes"), "expected required or optional"),
        ((str(tmp_path / "missing.pem"), key), "cannot load the TLS certificate"),
        ((cert, str(pki.alice_key)), "cannot load the TLS certificate"),  # a key that is not the cert's
        ((cert, key, str(tmp_path)), "cannot load the TLS client CA"),
    ]
    for options, message in bad:
        with pytest.raises(SkillwireError, match=message):
            tls_from(*options)


def test_serve_refuses_an_incomplete_tls_configuration(pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    target = str(EXAMPLES / "echo")
    assert main(["serve", target, "--store", "memory://", "--tls-cert", str(pki.server_cert)]) == 2
    assert "its private key (--tls-key)" in capsys.readouterr().err
    cert, key = ["--tls-cert", str(pki.server_cert)], ["--tls-key", str(pki.server_key)]
    assert main(["serve", target, "--store", "memory://", *cert, *key, "--tls-client-cert", "optional"]) == 2
    assert "--tls-client-ca" in capsys.readouterr().err


def test_the_reloading_servers_config_crosses_to_its_processes(pki: Pki) -> None:
    """``--reload`` hands uvicorn's config to fresh processes (spawned: pickled); under TLS it must still
    name its protocol class and harden its context there."""
    config = uvicorn_config(pki.tls("required"), "skillwire.cli.main:app_from_env", http="h11", factory=True)
    copy = pickle.loads(pickle.dumps(config))
    assert copy.http is TLSH11Protocol
    assert (copy.ssl_certfile, copy.ssl_ca_certs, copy.ssl_cert_reqs) == (
        str(pki.server_cert),
        str(pki.ca),
        ssl.CERT_REQUIRED,
    )


@pytest.mark.slow
def test_skillwire_serve_over_mutual_tls(pki: Pki, tmp_path: Path, processes: list[Served]) -> None:
    env = {
        "SKILLWIRE_TLS_CERT": str(pki.server_cert),
        "SKILLWIRE_TLS_KEY": str(pki.server_key),
    }
    served = start_process(
        str(EXAMPLES / "echo"),
        "memory://",
        tmp_path,
        "--tls-client-ca",
        str(pki.ca),
        "--grpc-port",
        str(free_port()),
        env={**os.environ, **env},
    )
    processes.append(served)
    banner = "".join(served.lines)
    base = f"https://127.0.0.1:{served.port}"
    assert f"at {base}/" in banner and f"agent card: {base}{CARD}" in banner
    assert "gRPC: https://127.0.0.1:" in banner
    with httpx.Client(verify=pki.client_context("alice"), timeout=WAIT) as http:
        card = http.get(base + CARD).json()
        assert {i["url"].split("://")[0] for i in card["supportedInterfaces"]} == {"https"}
        answer = http.post(
            base,
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
            },
        ).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert handshake(base, pki.client_context(None)).startswith("refused: ")


@pytest.mark.slow
def test_skillwire_serve_reload_over_tls(pki: Pki, tmp_path: Path) -> None:
    """``--reload`` serves each fresh process over TLS, the certificates handed on as SKILLWIRE_TLS_*."""
    tls = [
        "--tls-cert",
        str(pki.server_cert),
        "--tls-key",
        str(pki.server_key),
        "--tls-client-ca",
        str(pki.ca),
    ]
    served = start_process(
        str(EXAMPLES / "echo"), "memory://", tmp_path, "--reload", *tls, start_new_session=True
    )
    try:
        base = f"https://127.0.0.1:{served.port}"
        assert f"at {base}/" in "".join(served.lines)
        with httpx.Client(verify=pki.client_context("alice"), timeout=WAIT) as http:
            assert http.get(base + CARD).json()["supportedInterfaces"][0]["url"] == base
        assert handshake(base, pki.client_context(None)).startswith("refused: ")
    finally:
        os.killpg(served.proc.pid, signal.SIGTERM)  # the reloader and the server process it started
        served.proc.wait(WAIT)
        if served.proc.stdout is not None:
            served.proc.stdout.close()


RUN_AGENT = """
import sys
from skillwire import Agent

agent = Agent("Run Me", "Says it back")

@agent.skill(tags=["echo"], description="Says it back.")
async def echo(params, ctx):
    return "ok"

argv = sys.argv
port, cert, key = (argv[argv.index(flag) + 1] for flag in ("--port", "--tls-cert", "--tls-key"))
agent.run(port=int(port), store="memory://", tls_cert=cert, tls_key=key)
"""


@pytest.mark.slow
def test_agent_run_serves_tls_from_its_arguments_and_variables(
    pki: Pki, tmp_path: Path, processes: list[Served]
) -> None:
    """``agent.run(tls_cert=, tls_key=)``; the client CA from SKILLWIRE_TLS_CLIENT_CA."""
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    env = {**os.environ, "SKILLWIRE_TLS_CLIENT_CA": str(pki.ca)}
    served = start_process("-", "memory://", tmp_path, *tls, launcher=("-c", RUN_AGENT), env=env)
    processes.append(served)
    base = f"https://127.0.0.1:{served.port}"
    assert f"skillwire: serving 'Run Me' at {base}/" in "".join(served.lines)
    with httpx.Client(verify=pki.client_context("alice"), timeout=WAIT) as http:
        assert http.get(base + CARD).json()["name"] == "Run Me"
    assert handshake(base, pki.client_context(None)).startswith("refused: ")


# -- the mutual TLS security scheme -------------------------------------------------------------------------


def mtls_agent(subjects: list[str] | None = None) -> Agent:
    agent = Agent("Mtls", security=Security(MutualTLS(subjects=subjects)))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who."""
        return f"{ctx.principal.subject} via {ctx.principal.scheme}"

    return agent


ALICE_SUBJECT = "CN=alice,OU=agents,O=Acme"


async def test_the_mutual_tls_scheme_makes_the_certificate_subject_the_principal(
    pki: Pki, serve: Any
) -> None:
    srv = serve(mtls_agent().asgi(store="memory://", grpc_port=0, tls=pki.tls("optional")))
    base = f"https://127.0.0.1:{srv.port}"
    async with httpx.AsyncClient(verify=pki.client_context("alice"), timeout=WAIT) as http:
        for binding in ("JSONRPC", "HTTP+JSON"):
            async with await Client.connect(base, http=http, bindings=[binding], retries=0) as client:
                task = await client.send("hi")
            assert task.artifacts[0].parts[0].text == f"{ALICE_SUBJECT} via mtls", binding
    # the handshake let a client without a certificate in (optional): the scheme does not
    async with httpx.AsyncClient(verify=pki.client_context(None), timeout=WAIT) as http:
        answer = await http.post(
            base + "/", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}, headers=V1
        )
    assert answer.status_code == 401 and answer.json()["error"]["code"] == -32040
    # gRPC over the same certificates (grpcio cannot make them optional: it asks for none)
    url = f"https://{srv.app.grpc_address}"
    async with GrpcTransport(url, timeout=WAIT, credentials=pki.grpc_credentials(None)) as transport:
        with pytest.raises(UnauthenticatedError):
            await transport.send(Operation.LIST_TASKS, m.ListTasksRequest())


async def test_grpc_mutual_tls_principal(pki: Pki, serve: Any) -> None:
    srv = serve(mtls_agent().asgi(store="memory://", grpc_port=0, tls=pki.tls("required")))
    url = f"https://{srv.app.grpc_address}"
    async with GrpcTransport(url, timeout=WAIT, credentials=pki.grpc_credentials("alice")) as transport:
        sent = await transport.send(
            Operation.SEND_MESSAGE,
            m.SendMessageRequest(
                message=m.Message(message_id="g1", role=m.Role.USER, parts=[m.Part(text="hi")])
            ),
        )
    assert sent.task is not None
    assert sent.task.artifacts[0].parts[0].text == f"{ALICE_SUBJECT} via mtls"


async def test_the_mutual_tls_scheme_narrows_to_its_subjects(pki: Pki, serve: Any) -> None:
    srv = serve(mtls_agent(subjects=["CN=bob,O=Acme"]).asgi(store="memory://", tls=pki.tls("required")))
    async with httpx.AsyncClient(verify=pki.client_context("alice"), timeout=WAIT) as http:
        answer = await http.post(
            f"https://127.0.0.1:{srv.port}/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers=V1,
        )
    assert answer.status_code == 401
    assert "is not allowed" in answer.json()["error"]["message"]
