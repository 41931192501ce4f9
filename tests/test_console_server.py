"""The web console as the agent serves it (``/console/``) and as ``skillwire console URL`` relays it, over real
HTTP: what is served, with which headers, where it is on and off, and what the relay forwards and refuses."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    PROCESS_TIMEOUT,
    RunningServer,
    Served,
    example_agent,
    free_port,
    gated_agent,
    rpc,
    serve_asgi,
    start_process,
    start_server,
    user_message,
)
from skillwire import Agent, SkillContext
from skillwire.cli.console_relay import Relay
from skillwire.console import CONTENT_SECURITY_POLICY, asset_bytes
from skillwire.security import APIKey, Security

ASSETS = Path(__file__).parents[1] / "src" / "skillwire" / "console" / "assets"
V1 = {"A2A-Version": "1.0"}
CONSOLE = {"X-Skillwire-Console": "1"}


@pytest.fixture
def greeter() -> Iterator[RunningServer]:
    server = start_server(example_agent("greeter").asgi(store="memory://", console=True))
    yield server
    server.stop()


# -- served by the agent ------------------------------------------------------------------------------------


def test_the_page_and_its_files_are_served_with_a_strict_policy(greeter: RunningServer) -> None:
    page = httpx.get(greeter.url + "/console/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.content == (ASSETS / "index.html").read_bytes()
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        answer = httpx.get(f"{greeter.url}/console/{name}")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith(kind)
        assert answer.content == (ASSETS / name).read_bytes()
    config = httpx.get(greeter.url + "/console/config.json")
    assert config.json() == {"mode": "served", "card": "../.well-known/agent-card.json"}
    assert config.headers["cache-control"] == "no-store"


def test_console_redirects_to_the_folder_and_keeps_the_query(greeter: RunningServer) -> None:
    answer = httpx.get(greeter.url + "/console?x=1")
    assert answer.status_code == 308
    assert answer.headers["location"] == "/console/?x=1"


def test_etag_head_and_methods(greeter: RunningServer) -> None:
    first = httpx.get(greeter.url + "/console/console.js")
    again = httpx.get(greeter.url + "/console/console.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert (
        httpx.get(greeter.url + "/console/console.js", headers={"If-None-Match": '"other"'}).status_code
        == 200
    )
    head = httpx.head(greeter.url + "/console/")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len((ASSETS / "index.html").read_bytes()))
    post = httpx.post(greeter.url + "/console/", content=b"x")
    assert post.status_code == 405 and post.headers["allow"] == "GET, HEAD"


def test_other_paths_under_console_still_reach_the_agent(greeter: RunningServer) -> None:
    # /console/tasks is the REST binding's ListTasks of a tenant named "console", not a console file
    answer = httpx.get(greeter.url + "/console/tasks", headers=V1)
    assert answer.status_code == 200
    assert answer.json()["tasks"] == []
    assert httpx.get(greeter.url + "/console/nothing-here.js").status_code == 404


def test_the_console_is_off_unless_asked(tmp_path: Path) -> None:
    server = start_server(example_agent("greeter").asgi(store="memory://"))
    try:
        assert httpx.get(server.url + "/console/").status_code == 404
    finally:
        server.stop()


def test_the_page_is_public_and_the_calls_are_not() -> None:
    agent = Agent("Secure", "Knows its callers", security=Security(APIKey("apiKey", keys={"alice": "k"})))

    @agent.skill(tags=["security"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who called."""
        return ctx.principal.subject

    server = start_server(agent.asgi(store="memory://", console=True))
    try:
        assert httpx.get(server.url + "/console/").status_code == 200
        refused = httpx.post(
            server.url + "/", json=rpc("SendMessage", {"message": user_message("hi")}), headers=V1
        )
        assert refused.status_code == 401
        allowed = httpx.post(
            server.url + "/",
            json=rpc("SendMessage", {"message": user_message("hi")}),
            headers={**V1, "X-API-Key": "k"},
        )
        assert allowed.json()["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "alice"
    finally:
        server.stop()


def test_mounted_under_a_path_the_links_follow_the_mount() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = example_agent("greeter").asgi(store="memory://", console=True)
    outer = Starlette(routes=[Mount("/a2a", app=app)], lifespan=app.lifespan)
    server = serve_asgi(outer)
    try:
        answer = httpx.get(server[0] + "/a2a/console")
        assert answer.status_code == 308 and answer.headers["location"] == "/a2a/console/"
        assert httpx.get(server[0] + "/a2a/console/").status_code == 200
        # the page's card link, ../.well-known/agent-card.json from /a2a/console/, is the mounted agent's card
        card = httpx.get(server[0] + "/a2a/.well-known/agent-card.json")
        assert card.json()["name"] == "Greeter"
    finally:
        server[1]()


def test_the_shipped_files_are_small_and_counted() -> None:
    sizes = asset_bytes()
    assert set(sizes) == {"index.html", "console.css", "console.js"}
    for name, size in sizes.items():
        assert size == (ASSETS / name).stat().st_size
    assert sum(sizes.values()) < 100_000  # the budget docs/performance.md reports against


@pytest.mark.slow
def test_the_wheel_ships_the_console(tmp_path: Path) -> None:
    import zipfile

    root = Path(__file__).parents[1]
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("skillwire-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("index.html", "console.css", "console.js"):
        assert f"skillwire/console/assets/{name}" in names


# -- skillwire serve ----------------------------------------------------------------------------------------


def _banner(served: Served) -> str:
    return "".join(served.lines)


def test_serve_turns_the_console_on_for_loopback(tmp_path: Path, processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", Path(__file__).parents[1])
    processes.append(served)
    assert f"  console: {served.url}/console/" in _banner(served)
    assert httpx.get(served.url + "/console/").status_code == 200


def test_no_console_turns_it_off(tmp_path: Path, processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", Path(__file__).parents[1], "--no-console")
    processes.append(served)
    assert "console:" not in _banner(served)
    assert httpx.get(served.url + "/console/").status_code == 404


def test_a_public_bind_has_no_console_unless_asked(tmp_path: Path, processes: list[Served]) -> None:
    root = Path(__file__).parents[1]
    served = start_process("examples/greeter", "memory://", root, "--host", "0.0.0.0")
    processes.append(served)
    assert "console:" not in _banner(served)
    assert httpx.get(served.url + "/console/").status_code == 404
    on = start_process("examples/greeter", "memory://", root, "--host", "0.0.0.0", "--console")
    processes.append(on)
    assert "console:" in _banner(on)
    assert httpx.get(on.url + "/console/").status_code == 200


# -- the relay of skillwire console URL ---------------------------------------------------------------------


@pytest.fixture
def relay(greeter: RunningServer) -> Iterator[str]:
    url, stop = serve_asgi(Relay(greeter.url))
    yield url
    stop()


def test_the_relay_serves_the_console_with_its_config(relay: str, greeter: RunningServer) -> None:
    assert httpx.get(relay + "/").headers["location"] == "/console/"
    assert httpx.get(relay + "/console/").content == (ASSETS / "index.html").read_bytes()
    config = httpx.get(relay + "/console/config.json").json()
    assert config == {"mode": "relay", "card": "/.well-known/agent-card.json", "agent": greeter.url}


def test_the_relay_forwards_the_pages_calls(relay: str) -> None:
    card = httpx.get(relay + "/.well-known/agent-card.json", headers=CONSOLE)
    assert card.json()["name"] == "Greeter"
    answer = httpx.post(
        relay + "/", json=rpc("SendMessage", {"message": user_message("Ada")}), headers={**V1, **CONSOLE}
    )
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_relay_refuses_other_callers(relay: str) -> None:
    body = rpc("SendMessage", {"message": user_message("Ada")})
    refused = httpx.post(relay + "/", json=body, headers=V1)  # not the page: no X-Skillwire-Console
    assert refused.status_code == 403 and "X-Skillwire-Console" in refused.json()["error"]
    rebound = httpx.post(relay + "/", json=body, headers={**V1, **CONSOLE, "Host": "evil.example:80"})
    assert rebound.status_code == 400  # a DNS-rebound name is not this machine's


def test_the_relay_card_url_may_be_the_cards(greeter: RunningServer) -> None:
    assert Relay(greeter.url + "/.well-known/agent-card.json").console.config["card"] == (
        "/.well-known/agent-card.json"
    )
    assert Relay(greeter.url + "/a2a/").console.config["card"] == "/a2a/.well-known/agent-card.json"
    with pytest.raises(Exception, match="http:// or https://"):
        Relay("ftp://example.com/")


class Recorder:
    """An ASGI peer that records the headers it got and answers with a cookie; ``/stream`` streams until the
    caller goes away, then sets ``gone``."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.gone = threading.Event()
        self.streaming = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        if scope["path"] == "/stream":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
            self.streaming.set()
            while (await receive())["type"] != "http.disconnect":
                pass
            self.gone.set()
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"set-cookie", b"session=1")],
            }
        )
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    peer = Recorder()
    url, stop = serve_asgi(peer)
    yield peer, url
    stop()


def test_the_relay_passes_no_cookies_or_page_address(recorder: tuple[Recorder, str]) -> None:
    peer, url = recorder
    relay_url, stop = serve_asgi(Relay(url))
    try:
        answer = httpx.post(
            relay_url + "/rpc?q=1",
            content=b"{}",
            headers={
                **CONSOLE,
                "Cookie": "secret=1",
                "Origin": relay_url,
                "Referer": relay_url + "/console/",
                "Sec-Fetch-Site": "same-origin",
                "Authorization": "Bearer typed-in-the-page",
            },
        )
        assert answer.status_code == 200
        assert "set-cookie" not in answer.headers
        got = peer.headers[-1]
        for name in ("cookie", "origin", "referer", "sec-fetch-site", "x-skillwire-console"):
            assert name not in got
        assert got["authorization"] == "Bearer typed-in-the-page"  # what the user typed goes on
        assert got["host"] == url.removeprefix("http://")
    finally:
        stop()


def test_the_relay_ends_the_upstream_call_when_the_page_goes(recorder: tuple[Recorder, str]) -> None:
    peer, url = recorder
    relay_url, stop = serve_asgi(Relay(url))
    try:
        with httpx.stream("GET", relay_url + "/stream", headers=CONSOLE) as answer:
            chunks = answer.iter_raw()  # kept: a dropped iterator closes the response
            assert next(chunks) == b"data: 1\n\n"  # streamed through as it came
            assert peer.streaming.is_set() and not peer.gone.is_set()
        assert peer.gone.wait(PROCESS_TIMEOUT)
    finally:
        stop()


def test_the_relay_budgets_concurrency_and_bodies(recorder: tuple[Recorder, str]) -> None:
    peer, url = recorder
    relay_url, stop = serve_asgi(Relay(url, max_concurrent=1, max_body=1000))
    try:
        with httpx.stream("GET", relay_url + "/stream", headers=CONSOLE) as held:
            chunks = held.iter_raw()  # kept: a dropped iterator closes the response
            next(chunks)
            busy = httpx.get(relay_url + "/other", headers=CONSOLE)
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert peer.gone.wait(PROCESS_TIMEOUT)
        big = httpx.post(relay_url + "/", content=b"x" * 1001, headers=CONSOLE)
        assert big.status_code == 413
        assert httpx.post(relay_url + "/", content=b"x" * 1000, headers=CONSOLE).status_code == 200
    finally:
        stop()


def test_an_agent_that_is_down_is_a_502() -> None:
    down = f"http://127.0.0.1:{free_port()}"
    relay_url, stop = serve_asgi(Relay(down))
    try:
        answer = httpx.get(relay_url + "/.well-known/agent-card.json", headers=CONSOLE)
        assert answer.status_code == 502
        assert "could not be reached" in answer.json()["error"]
    finally:
        stop()


def test_a_stream_comes_through_event_by_event(gate: threading.Event) -> None:
    server = start_server(gated_agent(gate).asgi(store="memory://"))
    relay_url, stop = serve_asgi(Relay(server.url))
    try:
        body = rpc("SendStreamingMessage", {"message": user_message("go")})
        with httpx.stream("POST", relay_url + "/", json=body, headers={**V1, **CONSOLE}) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            lines = answer.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            assert "task" in first  # before the agent was let go on: not buffered
            gate.set()
            rest = [line for line in lines if line.startswith("data:")]
        assert "TASK_STATE_COMPLETED" in rest[-1]
    finally:
        stop()
        server.stop()


def test_skillwire_console_runs_the_relay(greeter: RunningServer) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillwire", "console", greeter.url, "--no-open", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == f"skillwire: console for {greeter.url} at http://127.0.0.1:{port}/console/"
        assert httpx.get(f"http://127.0.0.1:{port}/console/").status_code == 200
        card = httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", headers=CONSOLE)
        assert card.json()["name"] == "Greeter"
    finally:
        proc.terminate()
        proc.wait(PROCESS_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()


def test_skillwire_console_listens_on_loopback_only() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "skillwire",
            "console",
            "http://127.0.0.1:9/",
            "--no-open",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )
    assert done.returncode == 2
    assert "loopback address only" in done.stderr
