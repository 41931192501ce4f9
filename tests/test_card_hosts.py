"""The Host header is never reflected into the agent card (issue 12), on a real uvicorn server.

Without configuration the card names the address the connection reached; with allowed hosts the card names
the Host a request used, other Hosts are refused on every route, and the card is served with
``Vary: Host``; with a public URL the card names it. ``skillwire serve`` on loopback allows the loopback
names only."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    A2A_V1,
    EXAMPLES,
    PROCESS_TIMEOUT,
    RunningServer,
    Served,
    assert_proto,
    example_agent,
    rpc,
)
from conftest import start_process as start
from skillwire import Client
from skillwire.security import APIKey, Security
from skillwire.server.bindings.hosts import AllowedHosts, parse_host, served_hosts
from skillwire.server.serving.serve import warn_unnamed
from test_mounting import fastapi_app, run

CARD = "/.well-known/agent-card.json"
EVIL = {"Host": "evil.example"}
WAIT = 15.0


@pytest.fixture
async def http() -> Any:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


def urls_of(card: dict[str, Any]) -> list[str]:
    return [i["url"] for i in card["supportedInterfaces"]] + [card.get("url", "")]


# -- without configuration: the address reached --------------------------------------------------------------


async def test_without_configuration_the_card_names_the_address_reached(
    serve: Any, http: httpx.AsyncClient
) -> None:
    srv: RunningServer = serve(example_agent("greeter").asgi(store="memory://"))
    honest = await http.get(srv.url + CARD)
    evil = await http.get(srv.url + CARD, headers=EVIL)
    assert evil.status_code == 200 and "evil.example" not in evil.text
    assert urls_of(evil.json()) == urls_of(honest.json())
    assert all(url.startswith(srv.url) for url in urls_of(evil.json()))
    assert "vary" not in evil.headers  # the card does not depend on the Host
    # nor does the extended card's, nor any answer
    answer = await http.post(srv.url, json=rpc("ListTasks", {}), headers={**A2A_V1, **EVIL})
    assert answer.status_code == 200 and "evil.example" not in answer.text


# -- allowed hosts: others refused, Vary: Host -------------------------------------------------------------------


@pytest.fixture
def guarded(serve: Any) -> RunningServer:
    agent = example_agent("greeter")
    agent.extended_card = agent.card()
    agent.extended_card_enabled = True
    agent.security = Security(APIKey(keys={"tester": "hosts-key"}))  # the extended card needs it
    app = agent.asgi(store="memory://", allowed_hosts=["agent.example", "127.0.0.1"])
    return serve(app)  # type: ignore[no-any-return]


async def test_an_allowed_host_is_the_cards_host_and_the_card_varies_by_host(
    guarded: RunningServer, http: httpx.AsyncClient
) -> None:
    named = await http.get(guarded.url + CARD, headers={"Host": "agent.example:8443"})
    assert named.status_code == 200
    card = named.json()
    assert card["supportedInterfaces"][0]["url"] == "http://agent.example:8443"
    assert named.headers["vary"] == "Host"
    local = await http.get(guarded.url + CARD)  # Host: 127.0.0.1:PORT
    assert local.json()["supportedInterfaces"][0]["url"] == guarded.url
    assert local.headers["vary"] == "Host"
    assert named.headers["etag"] != local.headers["etag"]  # one ETag per base URL
    # an ETag of another host's card does not revalidate this one
    again = await http.get(guarded.url + CARD, headers={"If-None-Match": named.headers["etag"]})
    assert again.status_code == 200
    same = await http.get(guarded.url + CARD, headers={"If-None-Match": local.headers["etag"]})
    assert same.status_code == 304 and same.headers["vary"] == "Host"
    for member in (
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
        "security",
    ):
        card.pop(member, None)
    # the v0.3 shape written beside each scheme's v1.0 one (type, in, name, ...)
    card["securitySchemes"] = {
        name: {k: v for k, v in scheme.items() if k.endswith("SecurityScheme")}
        for name, scheme in card["securitySchemes"].items()
    }
    assert_proto(card, "AgentCard")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", CARD, None),
        ("HEAD", CARD, None),
        ("GET", "/tasks", None),
        (
            "POST",
            "/message:send",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
        ),
        ("GET", "/extendedAgentCard", None),
        ("GET", "/no/such/route", None),
    ],
)
async def test_another_host_is_refused_on_every_http_json_route(
    guarded: RunningServer, http: httpx.AsyncClient, method: str, path: str, body: Any
) -> None:
    answer = await http.request(method, guarded.url + path, json=body, headers={**A2A_V1, **EVIL})
    assert answer.status_code == 400
    if method != "HEAD":
        error = answer.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
        assert "'evil.example' is not served here" in error["message"]
        assert error["details"][0]["reason"] == "INVALID_REQUEST"
        assert "evil.example" not in error["message"].split("answers to")[1]


async def test_another_host_is_refused_over_json_rpc_in_its_shape(
    guarded: RunningServer, http: httpx.AsyncClient
) -> None:
    for method in ("GetExtendedAgentCard", "SendMessage"):
        answer = await http.post(guarded.url, json=rpc(method, {}), headers={**A2A_V1, **EVIL})
        assert answer.status_code == 400
        body = answer.json()
        assert body["jsonrpc"] == "2.0" and body["id"] is None
        assert body["error"]["code"] == -32600 and "not served here" in body["error"]["message"]


def test_a_request_without_a_host_is_refused(guarded: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=WAIT) as sock:
        sock.sendall(b"GET /.well-known/agent-card.json HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400") and b"(none) is not served here" in answer


async def test_a_client_reaching_an_allowed_host_uses_the_card(guarded: RunningServer) -> None:
    async with await Client.connect(guarded.url, retries=0, credentials={"apiKey": "hosts-key"}) as client:
        assert client.card.supported_interfaces[0].url == guarded.url
        extended = await client.get_extended_card()
        assert extended.supported_interfaces[0].url == guarded.url


# -- a public URL ---------------------------------------------------------------------------------------------


async def test_a_public_url_is_named_whatever_the_host(serve: Any, http: httpx.AsyncClient) -> None:
    srv = serve(example_agent("greeter").asgi(store="memory://", public_url="https://agents.example/greeter"))
    evil = await http.get(srv.url + CARD, headers=EVIL)
    assert evil.status_code == 200 and "evil.example" not in evil.text
    assert evil.json()["supportedInterfaces"][0]["url"] == "https://agents.example/greeter/"
    assert "vary" not in evil.headers


async def test_a_public_url_with_allowed_hosts_refuses_the_others(
    serve: Any, http: httpx.AsyncClient
) -> None:
    app = example_agent("greeter").asgi(
        store="memory://", public_url="https://agents.example", allowed_hosts=["127.0.0.1"]
    )
    srv = serve(app)
    assert (await http.get(srv.url + CARD, headers=EVIL)).status_code == 400
    served = await http.get(srv.url + CARD)
    assert served.json()["supportedInterfaces"][0]["url"] == "https://agents.example"
    assert "vary" not in served.headers  # the card names the public URL whatever the Host


# -- mounted -------------------------------------------------------------------------------------------------------


async def test_a_mounted_app_with_allowed_hosts(http: httpx.AsyncClient) -> None:
    a2a = example_agent("greeter").asgi(store="memory://", allowed_hosts=["agent.example", "127.0.0.1"])
    with run(fastapi_app(a2a, "/a2a"), a2a) as server:
        base = server.url
        card = await http.get(base + "/a2a" + CARD, headers={"Host": "agent.example"})
        assert card.json()["supportedInterfaces"][0]["url"] == "http://agent.example/a2a/"
        assert card.headers["vary"] == "Host"
        refused = await http.get(base + "/a2a" + CARD, headers=EVIL)
        assert refused.status_code == 400
        # the parent's own routes are the parent's business
        assert (await http.get(base + "/health", headers=EVIL)).status_code == 200
        async with await Client.connect(base + "/a2a", retries=0) as client:
            assert client.card.supported_interfaces[0].url == base + "/a2a/"


async def test_a_mounted_app_without_configuration_names_the_address_reached(http: httpx.AsyncClient) -> None:
    a2a = example_agent("greeter").asgi(store="memory://")
    with run(fastapi_app(a2a, "/a2a"), a2a) as server:
        card = (await http.get(server.url + "/a2a" + CARD, headers=EVIL)).json()
        assert card["supportedInterfaces"][0]["url"] == server.url + "/a2a/"


# -- skillwire serve -------------------------------------------------------------------------------------------


def test_serve_on_loopback_allows_the_loopback_names_only(tmp_path: Path, processes: list[Served]) -> None:
    served = start(
        str(EXAMPLES / "greeter"), "memory://", tmp_path
    )  # --host 127.0.0.1, no flags (the TCK's way)
    processes.append(served)
    assert (
        httpx.get(served.url + CARD, timeout=PROCESS_TIMEOUT).json()["supportedInterfaces"][0]["url"]
        == served.url
    )
    evil = httpx.get(served.url + CARD, headers=EVIL, timeout=PROCESS_TIMEOUT)
    assert evil.status_code == 400 and "not served here" in evil.text
    local = httpx.get(
        served.url + CARD, headers={"Host": f"localhost:{served.port}"}, timeout=PROCESS_TIMEOUT
    )
    assert local.json()["supportedInterfaces"][0]["url"] == f"http://localhost:{served.port}"
    assert local.headers["vary"] == "Host"
    six = httpx.get(served.url + CARD, headers={"Host": f"[::1]:{served.port}"}, timeout=PROCESS_TIMEOUT)
    assert six.json()["supportedInterfaces"][0]["url"] == f"http://[::1]:{served.port}"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_allowed_hosts_from_flags_or_the_environment(
    tmp_path: Path, processes: list[Served], how: str
) -> None:
    import os

    hosts = ["agent.example", "127.0.0.1"]
    if how == "flag":
        served = start(
            str(EXAMPLES / "greeter"), "memory://", tmp_path, *[f"--allowed-host={h}" for h in hosts]
        )
    else:
        env = {**os.environ, "SKILLWIRE_ALLOWED_HOSTS": ",".join(hosts)}
        served = start(str(EXAMPLES / "greeter"), "memory://", tmp_path, env=env)
    processes.append(served)
    named = httpx.get(served.url + CARD, headers={"Host": "agent.example"}, timeout=PROCESS_TIMEOUT)
    assert named.json()["supportedInterfaces"][0]["url"] == "http://agent.example"
    local = httpx.get(
        served.url + CARD, headers={"Host": f"localhost:{served.port}"}, timeout=PROCESS_TIMEOUT
    )
    assert local.status_code == 400  # the list given replaces the loopback default


def test_serve_refuses_an_allowed_host_that_is_not_one(capsys: pytest.CaptureFixture[str]) -> None:
    from skillwire.cli.main import main

    assert main(["serve", str(EXAMPLES / "greeter"), "--allowed-host", "http://agent.example/"]) == 2
    assert "--allowed-host" in capsys.readouterr().err


# -- the rules ---------------------------------------------------------------------------------------------------


def test_the_defaults_of_a_served_agent() -> None:
    loopback = ["127.0.0.1", "localhost", "[::1]"]
    assert served_hosts("127.0.0.1", None) == loopback
    assert served_hosts("localhost", None) == loopback
    assert served_hosts("::1", None) == loopback
    assert served_hosts("127.0.0.2", None) == ["127.0.0.2", *loopback]
    assert served_hosts("0.0.0.0", None) is None  # the address reached, with a warning
    assert served_hosts("127.0.0.1", None, public_url="https://a.example") is None
    assert served_hosts("0.0.0.0", None, env="a.example, b.example:8443") == ["a.example", "b.example:8443"]
    assert served_hosts("0.0.0.0", ["c.example"], env="a.example") == ["c.example"]


def test_a_server_reachable_from_elsewhere_without_a_name_warns(caplog: pytest.LogCaptureFixture) -> None:
    app = example_agent("greeter").asgi(store="memory://")
    with caplog.at_level(logging.WARNING, logger="skillwire.http"):
        warn_unnamed(app, "127.0.0.1")
        assert not caplog.records
        warn_unnamed(app, "0.0.0.0")
    assert "neither a public URL nor allowed hosts" in caplog.text
    caplog.clear()
    named = example_agent("greeter").asgi(store="memory://", allowed_hosts=["agent.example"])
    with caplog.at_level(logging.WARNING, logger="skillwire.http"):
        warn_unnamed(named, "0.0.0.0")
    assert not caplog.records


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("agent.example", True),
        ("AGENT.example.", True),
        ("agent.example:9", True),  # an entry without a port allows every port
        ("fixed.example:8443", True),
        ("fixed.example", False),  # port 80
        ("fixed.example:8444", False),
        ("[::1]:8000", True),
        ("[::1]:8001", False),
        ("evil.example", False),
        ("agent.example.evil.example", False),
        ("agent.example@evil.example", False),
        ("", False),
        ("[::1", False),
    ],
)
def test_allowed_hosts_match_name_and_port(host: str, allowed: bool) -> None:
    hosts = AllowedHosts(["agent.example", "fixed.example:8443", "[::1]:8000"])
    assert hosts.allows(host) is allowed


def test_allowed_hosts_answer_the_same_after_many_hosts_and_schemes() -> None:
    """Answers are remembered per (Host, scheme), a bounded number of them: asked again, and after a caller
    has sent a thousand other hosts, every answer is the same as the first time."""
    hosts = AllowedHosts(["agent.example", "fixed.example:443"])
    cases = [
        ("fixed.example", "https", True),
        ("fixed.example", "http", False),  # the same header, another default port
        ("agent.example:1", "http", True),
        ("evil.example", "https", False),
    ]
    first = [hosts.allows(host, scheme) for host, scheme, _ in cases]
    assert first == [allowed for _, _, allowed in cases]
    assert not any(hosts.allows(f"h{i}.example", "http") for i in range(1000))
    assert [hosts.allows(host, scheme) for host, scheme, _ in cases] == first
    assert hosts.allows("h999.example") is False and hosts.allows("AGENT.example") is True


@pytest.mark.parametrize(
    "entry", ["http://a.example", "a.example/x", "a.example:0", "a.example:99999", "::1", ""]
)
def test_an_entry_that_is_not_host_port_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_host(entry)
