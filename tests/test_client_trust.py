"""The client trusts no agent card (security issue 12): credentials go only to the origin the caller named
or one it allowed, an https URL never leads to plaintext, and neither a refreshed nor an extended card
moves a connected client. Two real servers each time: the one named, whose card points at the other, and
the other, a real skillwire agent that records every request it gets."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from conftest import RecordingHandler, RunningServer
from hostile import CARD_PATH, CardServer, Recorder, Running, card, running, self_signed
from skillwire import Agent, Client, SyncClient
from skillwire.cli.main import main
from skillwire.client import HTTPStatusError, InsecureDowngradeError, UntrustedOriginError
from skillwire.client.origins import origin_of
from skillwire.protocol import models as m
from skillwire.security import APIKey, Security

WAIT = 10.0
BINDINGS = ["JSONRPC", "HTTP+JSON"]

SCHEMES: dict[str, Any] = {
    "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
    "queryKey": {"apiKeySecurityScheme": {"location": "query", "name": "key"}},
    "cookieKey": {"apiKeySecurityScheme": {"location": "cookie", "name": "session"}},
    "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}},
}
SECRETS = {
    "apiKey": "k-secret-1",
    "queryKey": "q-secret-2",
    "cookieKey": "c-secret-3",
    "bearer": "b-secret-4",
}


@dataclass
class Other:
    """The real agent a card points at: every HTTP request it got, and every call its handler ran (gRPC
    ones among them, with their metadata)."""

    server: RunningServer
    recorder: Recorder
    handler: list[RecordingHandler]

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def grpc_address(self) -> str:
        address = self.server.app.grpc_address
        assert address is not None
        return address

    def got_nothing(self) -> bool:
        return self.recorder.requests == [] and all(h.headers == [] for h in self.handler)

    def got_any_secret(self) -> bool:
        calls = [h for made in self.handler for h in made.headers]
        return any(r.carries(s) for r in self.recorder.requests for s in SECRETS.values()) or any(
            s in value for headers in calls for value in headers.values() for s in SECRETS.values()
        )


async def echo(context: Any, events: Any) -> None:
    await events.artifact(f"echo: {context.text}", name="echo")
    await events.complete()


def real_agent(serve: Callable[[Any], RunningServer], *, grpc: bool = False, **agent: Any) -> Other:
    made: list[RecordingHandler] = []

    def wrap(runtime: Any) -> RecordingHandler:
        made.append(RecordingHandler(runtime))
        return made[-1]

    home = Agent("Home", "Echoes what it gets.", executor=echo, **agent)
    app = home.asgi(store="memory://", wrap=wrap, grpc_port=0 if grpc else None)
    app.card = msgspec.structs.replace(app.card, security_schemes=SCHEMES)
    recorder = Recorder(app)
    return Other(serve(recorder), recorder, made)


@pytest.fixture
def other(serve: Callable[[Any], RunningServer]) -> Other:
    return real_agent(serve)


@pytest.fixture
def named() -> Iterator[tuple[CardServer, Running]]:
    """The server the caller names: it serves a hand-written card (set by the test) and nothing else."""
    server = CardServer()
    with running(server) as run:
        yield server, run


def points_at(server: CardServer, binding: str, url: str) -> None:
    server.card = card([(binding, url)], securitySchemes=SCHEMES)


def echoed(result: m.Task | m.Message) -> str:
    assert isinstance(result, m.Task), result
    text = result.artifacts[0].parts[0].text
    assert isinstance(text, str)
    return text


# -- credentials stay with the origin named --------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_credentials_are_not_sent_where_a_card_points_elsewhere(
    other: Other, named: tuple[CardServer, Running], binding: str
) -> None:
    server, run = named
    points_at(server, binding, other.url + "/")
    with pytest.raises(UntrustedOriginError) as refused:
        await Client.connect(run.url, bindings=(binding,), credentials=SECRETS, timeout=WAIT, retries=0)
    error = refused.value
    assert not isinstance(error, InsecureDowngradeError)
    assert error.origin == origin_of(other.url) and error.named_origin == origin_of(run.url)
    text = str(error)
    assert f"({origin_of(other.url)})" in text and f"({origin_of(run.url)})" in text
    assert text.endswith(f"allow it explicitly: allowed_origins=['{origin_of(other.url)}']")
    assert other.got_nothing()
    assert [r.path for r in server.requests] == [CARD_PATH]  # the public card, fetched without credentials
    assert not any(r.carries(secret) for r in server.requests for secret in SECRETS.values())


@pytest.mark.parametrize(
    "headers", [{"Authorization": "Bearer h-secret"}, {"X-API-Key": "h-secret"}, {"Cookie": "sid=h-secret"}]
)
async def test_headers_that_carry_credentials_count_as_credentials(
    other: Other, named: tuple[CardServer, Running], headers: dict[str, str]
) -> None:
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    with pytest.raises(UntrustedOriginError):
        await Client.connect(run.url, headers=headers, timeout=WAIT, retries=0)
    assert other.got_nothing()


async def test_a_shared_http_client_with_credentials_counts_too(
    other: Other, named: tuple[CardServer, Running]
) -> None:
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    shared = [
        httpx.AsyncClient(auth=("ada", "pw")),
        httpx.AsyncClient(headers={"X-Auth-Token": "h-secret"}),
        httpx.AsyncClient(cookies={"sid": "h-secret"}),
    ]
    for http in shared:
        async with http:
            with pytest.raises(UntrustedOriginError):
                await Client.connect(run.url, http=http, timeout=WAIT, retries=0)
    assert other.got_nothing()
    async with httpx.AsyncClient() as http:  # a cookie an answer set stays with its domain: not ambient
        http.cookies.set("sid", "from-an-answer", domain="elsewhere.example")
        async with await Client.connect(run.url, http=http, timeout=WAIT) as client:
            assert echoed(await client.send("hi")) == "echo: hi"


async def test_without_credentials_the_card_is_followed(
    other: Other, named: tuple[CardServer, Running]
) -> None:
    """The documented choice: a card may name an API on another host, and with nothing secret to send the
    client goes there (headers that are not credentials included)."""
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    async with await Client.connect(run.url, headers={"X-Trace": "t-1"}, timeout=WAIT) as client:
        assert echoed(await client.send("hi")) == "echo: hi"
    assert [r.headers.get("x-trace") for r in other.recorder.requests] == ["t-1"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_allowed_origin_gets_the_credentials(
    other: Other, named: tuple[CardServer, Running], binding: str
) -> None:
    server, run = named
    points_at(server, binding, other.url + "/")
    async with await Client.connect(
        run.url, bindings=(binding,), credentials=SECRETS, allowed_origins=[other.url], timeout=WAIT
    ) as client:
        assert echoed(await client.send("hi")) == "echo: hi"
    (call,) = other.recorder.requests
    assert call.headers["x-api-key"] == "k-secret-1" and call.headers["authorization"] == "Bearer b-secret-4"
    assert "key=q-secret-2" in call.query and call.headers["cookie"] == "session=c-secret-3"


def test_the_sync_client_takes_allowed_origins(other: Other, named: tuple[CardServer, Running]) -> None:
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    with pytest.raises(UntrustedOriginError):
        SyncClient.connect(run.url, credentials=SECRETS, timeout=WAIT, retries=0)
    assert other.got_nothing()
    with SyncClient.connect(
        run.url, credentials=SECRETS, allowed_origins=[other.url], timeout=WAIT
    ) as client:
        assert echoed(client.send("hi")) == "echo: hi"
    assert other.got_any_secret()


async def test_the_origin_named_keeps_getting_its_credentials(other: Other) -> None:
    async with await Client.connect(other.url, credentials=SECRETS, timeout=WAIT) as client:
        assert echoed(await client.send("hi")) == "echo: hi"
    card_fetch, call = other.recorder.requests
    assert card_fetch.path == CARD_PATH and "x-api-key" not in card_fetch.headers
    assert call.headers["x-api-key"] == "k-secret-1"


def test_an_allowed_origin_must_say_where(other: Other) -> None:
    with pytest.raises(ValueError, match="give its scheme"):
        SyncClient.connect(other.url, allowed_origins=["api.example.com"])
    assert other.got_nothing()


# -- no downgrade ----------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path)


@pytest.fixture
def named_over_tls(tls: tuple[Path, Path]) -> Iterator[tuple[CardServer, Running]]:
    server = CardServer()
    with running(server, tls=tls) as run:
        yield server, run


def trusting(cert: Path) -> httpx.AsyncClient:
    return httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert)))


@pytest.mark.parametrize("credentials", [None, SECRETS], ids=["without-credentials", "with-credentials"])
async def test_https_never_leads_to_plaintext(
    other: Other,
    named_over_tls: tuple[CardServer, Running],
    tls: tuple[Path, Path],
    credentials: dict[str, str] | None,
) -> None:
    server, run = named_over_tls
    # another host, and the very host and port the card was read from, over http
    same_port = run.url.replace("https://", "http://") + "/"
    for url in (other.url + "/", same_port):
        points_at(server, "JSONRPC", url)
        async with trusting(tls[0]) as http:
            with pytest.raises(InsecureDowngradeError) as refused:
                await Client.connect(run.url, http=http, credentials=credentials, timeout=WAIT, retries=0)
        text = str(refused.value)
        assert "not encrypted" in text and f"you named an https URL ({origin_of(run.url)})" in text
        assert text.endswith(f"allowed_origins=['{origin_of(url)}']")
    assert other.got_nothing()
    points_at(server, "JSONRPC", other.url + "/")
    async with (
        trusting(tls[0]) as http,
        await Client.connect(
            run.url, http=http, credentials=credentials, allowed_origins=[other.url], timeout=WAIT
        ) as client,
    ):
        assert echoed(await client.send("hi")) == "echo: hi"


async def test_https_to_https_elsewhere_is_only_about_credentials(
    named_over_tls: tuple[CardServer, Running], tls: tuple[Path, Path]
) -> None:
    server, run = named_over_tls
    elsewhere = CardServer()
    with running(elsewhere, tls=tls) as far:
        points_at(server, "JSONRPC", far.url.replace("127.0.0.1", "localhost") + "/")
        async with trusting(tls[0]) as http:
            with pytest.raises(UntrustedOriginError) as refused:
                await Client.connect(run.url, http=http, credentials=SECRETS, timeout=WAIT, retries=0)
            assert not isinstance(refused.value, InsecureDowngradeError)
            assert refused.value.origin == origin_of(far.url.replace("127.0.0.1", "localhost"))
    assert elsewhere.requests == []


# -- gRPC ------------------------------------------------------------------------------------------------


@pytest.fixture
def other_with_grpc(serve: Callable[[Any], RunningServer]) -> Other:
    pytest.importorskip("grpc")
    return real_agent(serve, grpc=True)


async def test_a_grpc_target_is_an_origin(other_with_grpc: Other, named: tuple[CardServer, Running]) -> None:
    other = other_with_grpc
    server, run = named
    points_at(server, "GRPC", other.grpc_address)
    with pytest.raises(UntrustedOriginError) as refused:
        await Client.connect(run.url, bindings=("GRPC",), credentials=SECRETS, timeout=WAIT, retries=0)
    assert refused.value.origin == f"http://{other.grpc_address}"
    assert other.got_nothing()
    allowed = [f"grpc://{other.grpc_address}"]
    async with await Client.connect(
        run.url, bindings=("GRPC",), credentials=SECRETS, allowed_origins=allowed, timeout=WAIT
    ) as client:
        assert echoed(await client.send("hi")) == "echo: hi"
    metadata = other.handler[0].headers[-1]
    assert metadata["authorization"] == "Bearer b-secret-4" and metadata["x-api-key"] == "k-secret-1"


async def test_grpc_on_the_agents_own_host_is_another_port(other_with_grpc: Other) -> None:
    """A skillwire agent serves gRPC on a port of its own: with credentials, that origin must be allowed
    too (a bare host:port is plaintext, as grpc:// is)."""
    other = other_with_grpc
    with pytest.raises(UntrustedOriginError):
        await Client.connect(other.url, bindings=("GRPC",), credentials=SECRETS, timeout=WAIT, retries=0)
    assert all(h.headers == [] for h in other.handler)
    async with await Client.connect(
        other.url, bindings=("GRPC",), credentials=SECRETS, allowed_origins=[other.grpc_address], timeout=WAIT
    ) as client:
        assert echoed(await client.send("hi")) == "echo: hi"
    assert other.handler[0].headers[-1]["x-api-key"] == "k-secret-1"


async def test_https_never_leads_to_plaintext_grpc(
    other_with_grpc: Other, named_over_tls: tuple[CardServer, Running], tls: tuple[Path, Path]
) -> None:
    server, run = named_over_tls
    for target in (other_with_grpc.grpc_address, f"grpc://{other_with_grpc.grpc_address}"):
        points_at(server, "GRPC", target)
        async with trusting(tls[0]) as http:
            with pytest.raises(InsecureDowngradeError):
                await Client.connect(run.url, http=http, bindings=("GRPC",), timeout=WAIT, retries=0)
    assert other_with_grpc.got_nothing()


# -- a connected client stays where it is ------------------------------------------------------------------


async def test_a_refreshed_card_does_not_move_the_client(
    other: Other, named: tuple[CardServer, Running]
) -> None:
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    elsewhere = CardServer()
    with running(elsewhere) as far:
        async with await Client.connect(
            run.url, credentials=SECRETS, allowed_origins=[other.url], timeout=WAIT
        ) as client:
            points_at(server, "JSONRPC", far.url + "/")
            refreshed = await client.refresh_card()
            assert refreshed.supported_interfaces[0].url == far.url + "/"
            assert echoed(await client.send("hi")) == "echo: hi"
    assert elsewhere.requests == []
    assert [r.path for r in server.requests] == [CARD_PATH, CARD_PATH]
    assert not any(r.carries(secret) for r in server.requests for secret in SECRETS.values())
    assert other.got_any_secret()


async def test_the_extended_card_does_not_move_the_client(serve: Callable[[Any], RunningServer]) -> None:
    elsewhere = CardServer()
    with running(elsewhere) as far:
        extended = m.AgentCard(
            name="Home (extended)",
            description="The card for callers with credentials.",
            version="1.0.0",
            supported_interfaces=[
                m.AgentInterface(url=far.url + "/", protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=m.AgentCapabilities(),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[],
        )
        # an extended card is for authenticated callers: the agent checks the key the client sends
        keys = Security(APIKey(keys={"tester": SECRETS["apiKey"]}))
        other = real_agent(serve, extended_card=extended, security=keys)
        async with await Client.connect(other.url, credentials=SECRETS, timeout=WAIT) as client:
            assert client.card.capabilities.extended_agent_card
            card = await client.get_extended_card()
            assert card.name == "Home (extended)" and card.supported_interfaces[0].url == far.url + "/"
            assert echoed(await client.send("hi")) == "echo: hi"
    _, asked, sent = other.recorder.requests
    assert asked.headers["x-api-key"] == "k-secret-1" and sent.headers["x-api-key"] == "k-secret-1"
    assert elsewhere.requests == []


async def test_a_redirect_does_not_carry_credentials(named: tuple[CardServer, Running]) -> None:
    """httpx keeps a header such as X-API-Key across a redirect: with credentials, none is followed, even
    on a shared client that follows redirects."""
    server, run = named
    elsewhere = CardServer()
    with running(elsewhere) as far, running(CardServer(redirect=far.url)) as moving:
        elsewhere.card = card([("JSONRPC", far.url + "/")])
        points_at(server, "JSONRPC", moving.url + "/")
        async with (
            httpx.AsyncClient(follow_redirects=True) as http,
            await Client.connect(
                run.url, http=http, credentials=SECRETS, allowed_origins=[moving.url], timeout=WAIT, retries=0
            ) as client,
        ):
            with pytest.raises(HTTPStatusError) as moved:
                await client.send("hi")
            assert moved.value.status_code == 307
        async with httpx.AsyncClient(follow_redirects=True) as http:
            with pytest.raises(HTTPStatusError):
                await Client.connect(moving.url, http=http, headers={"X-API-Key": "h-secret"}, retries=0)
        assert elsewhere.requests == []
        async with (
            httpx.AsyncClient(follow_redirects=True) as http,  # nothing secret: the caller's choice
            await Client.connect(moving.url, http=http, timeout=WAIT, retries=0) as client,
        ):
            assert client.card.name == "Elsewhere"
        assert [r.path for r in elsewhere.requests] == [CARD_PATH]


# -- the command line ------------------------------------------------------------------------------------


def test_skillwire_send_refuses_to_take_credentials_elsewhere(
    other: Other, named: tuple[CardServer, Running], capsys: pytest.CaptureFixture[str]
) -> None:
    server, run = named
    points_at(server, "JSONRPC", other.url + "/")
    for secret in (["--credential", "apiKey=k-secret-1"], ["-H", "Authorization=Bearer b-secret-4"]):
        code = main(["send", run.url, "hi", *secret])
        out, err = capsys.readouterr()
        assert code == 3 and out == ""
        (line,) = err.splitlines()
        assert line.startswith("skillwire: ") and f"--allow-origin {origin_of(other.url)}" in line
        assert "credentials are only sent to the origin you named" in line
    assert other.got_nothing()
    code = main(["send", run.url, "hi", "--credential", "apiKey=k-secret-1", "--allow-origin", other.url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "echo: hi" in out
    assert other.recorder.requests[-1].headers["x-api-key"] == "k-secret-1"


def test_skillwire_refuses_a_downgrade_from_https(
    other: Other,
    named_over_tls: tuple[CardServer, Running],
    tls: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, run = named_over_tls
    points_at(server, "JSONRPC", other.url + "/")
    monkeypatch.setenv("SSL_CERT_FILE", str(tls[0]))  # httpx trusts the test's certificate
    for argv in (["card", run.url], ["send", run.url, "hi"], ["tasks", "list", run.url]):
        code = main(argv)
        _, err = capsys.readouterr()
        assert code == 3 and "not encrypted" in err and f"--allow-origin {origin_of(other.url)}" in err
    code = main(["skills", "list", run.url])
    _, err = capsys.readouterr()
    assert code == 2 and "not encrypted" in err and f"--allow-origin {origin_of(other.url)}" in err
    assert other.got_nothing()
    code = main(["send", run.url, "hi", "--allow-origin", other.url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "echo: hi" in out
    assert main(["skills", "list", run.url, "--allow-origin", other.url]) == 0
