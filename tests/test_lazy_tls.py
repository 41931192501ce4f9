"""The client's own HTTP client sets TLS up on first use (issue 31: ``skillwire card :8000`` no longer loads
the CA bundle), and verification stays on: real servers, plain and over TLS with a self-signed
certificate, the CA named the standard way (``SSL_CERT_FILE``) or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import serving
from hostile import self_signed
from skillwire import Agent, Client
from skillwire.client.lazy_tls import LazyTLSTransport, default_http
from skillwire.protocol import models as m
from skillwire.server.bindings.tls import TLSConfig

WAIT = 10.0


def _echo() -> Agent:
    agent = Agent("Echo", "Says it back")

    @agent.skill(tags=["echo"])
    async def echo(params: dict[str, str], ctx: object) -> str:
        """Says the text back."""
        return params["text"]

    return agent


def _echoed(result: m.Task | m.Message) -> str:
    assert isinstance(result, m.Task), result
    return "".join(part.text for artifact in result.artifacts for part in artifact.parts)


@pytest.fixture
def pem(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path)


@pytest.fixture
def plain() -> Iterator[serving.Running]:
    with serving.running(_echo().asgi(store="memory://")) as server:
        yield server


@pytest.fixture
def over_tls(pem: tuple[Path, Path]) -> Iterator[serving.Running]:
    with serving.running(_echo().asgi(store="memory://", tls=TLSConfig(str(pem[0]), str(pem[1])))) as server:
        yield server


async def test_plain_http_never_sets_tls_up(plain: serving.Running) -> None:
    transport = LazyTLSTransport()
    async with (
        httpx.AsyncClient(transport=transport, timeout=WAIT) as http,
        await Client.connect(plain.url, http=http, timeout=WAIT) as client,
    ):
        assert _echoed(await client.send("hi")) == "hi"
    assert not transport.tls_ready


async def test_https_sets_tls_up_once_and_verifies_the_certificate(
    over_tls: serving.Running, pem: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert over_tls.url.startswith("https://")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    transport = LazyTLSTransport()
    async with httpx.AsyncClient(transport=transport, timeout=WAIT) as http:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get(over_tls.url + "/.well-known/agent-card.json")
    assert transport.tls_ready

    monkeypatch.setenv("SSL_CERT_FILE", str(pem[0]))  # trusted the standard way, as httpx reads it
    async with default_http(httpx.Timeout(WAIT)) as http:
        assert (await http.get(over_tls.url + "/.well-known/agent-card.json")).status_code == 200
    async with await Client.connect(over_tls.url, timeout=WAIT) as client:  # its own HTTP client
        assert _echoed(await client.send("hi")) == "hi"


async def test_a_scheme_other_than_http_and_https_is_refused() -> None:
    async with httpx.AsyncClient(transport=LazyTLSTransport(), timeout=WAIT) as http:
        with pytest.raises(httpx.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1/x")


async def test_a_proxy_in_the_environment_is_still_used(
    plain: serving.Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with serving.bound_socket() as closed:  # bound, never listening: the proxy refuses every connection
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed.getsockname()[1]}")
        async with default_http(httpx.Timeout(WAIT)) as http:
            with pytest.raises((httpx.ConnectError, httpx.ProxyError)):
                await http.get(plain.url + "/.well-known/agent-card.json")
    monkeypatch.delenv("HTTP_PROXY")
    async with default_http(httpx.Timeout(WAIT)) as http:
        assert (await http.get(plain.url + "/.well-known/agent-card.json")).status_code == 200
