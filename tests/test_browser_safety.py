"""What a web page on another site can make an agent do (docs/security.md, "Browsers"): nothing, unless the
operator allows its origin.

First with httpx against a real server, header by header; then in Debian's Chromium (driven by Playwright),
where a page served from another 127.0.0.1 port tries what a hostile page can send without CORS (a
``no-cors`` fetch, ``navigator.sendBeacon``, a form post) against an agent without security and one whose
API key lives in a cookie, and a page on an allowed origin calls the agent through CORS.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from conftest import RunningServer, serve_asgi, skip_without_service, user_message
from skillwire import Agent, SkillContext
from skillwire.security import APIKey, Security
from skillwire.server.bindings.browser import BrowserPolicy, parse_origin

V1 = {"A2A-Version": "1.0"}
JSON = {**V1, "Content-Type": "application/json"}
KEY = "cookie-key-5b1e77"


def target(ran: list[str], *, cookie_key: bool = False) -> Agent:
    """An agent whose one skill, ``purge``, records each run: a request that reaches it shows there."""
    security = Security(APIKey("apiKey", keys={"ada": KEY}, location="cookie", parameter="key"))
    agent = Agent("Target", "Does what it is asked", security=security if cookie_key else None)

    @agent.skill(tags=["test"])
    async def purge(params: Any, ctx: SkillContext) -> str:
        """Purges everything."""
        ran.append(ctx.task_id)
        return "purged"

    return agent


def send_body(skill: str = "purge") -> dict[str, Any]:
    return {"message": user_message("go", metadata={"skillId": skill})}


def rpc_body(skill: str = "purge") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_body(skill)}
    ).encode()


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def agent(serve: Callable[..., RunningServer], ran: list[str]) -> RunningServer:
    return serve(target(ran).asgi(store="memory://"))


# -- the Content-Type of a body ---------------------------------------------------------------------------


def test_a_body_without_a_content_type_is_refused_on_both_http_bindings(
    agent: RunningServer, ran: list[str]
) -> None:
    rpc = httpx.post(agent.url + "/", content=rpc_body(), headers=V1)
    assert rpc.status_code == 200  # JSON-RPC answers its errors under 200
    assert rpc.json()["error"]["code"] == -32005
    rest = httpx.post(agent.url + "/message:send", content=json.dumps(send_body()), headers=V1)
    assert rest.status_code == 415
    assert rest.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    # sent chunked, without a Content-Length: refused once the body is in, before it is decoded
    chunked = httpx.post(agent.url + "/", content=iter([rpc_body()]), headers=V1)
    assert chunked.json()["error"]["code"] == -32005
    text = httpx.post(agent.url + "/", content=rpc_body(), headers={**V1, "Content-Type": "text/plain"})
    assert text.json()["error"]["code"] == -32005
    assert ran == []
    served = httpx.post(agent.url + "/", content=rpc_body(), headers=JSON)
    assert served.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(ran) == 1


def test_an_empty_post_needs_no_content_type(agent: RunningServer) -> None:
    """The official SDK's clients POST ``:subscribe`` and ``:cancel`` with no body and no Content-Type."""
    answer = httpx.post(agent.url + "/tasks/no-such-task:cancel", headers=V1)
    assert answer.status_code == 404
    assert answer.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


# -- requests a browser marks as coming from another site -------------------------------------------------


CROSS_SITE = [
    pytest.param({"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, id="cross-site"),
    pytest.param({"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, id="another-port"),
    pytest.param({"Sec-Fetch-Site": "same-site"}, id="same-site-without-origin"),
    pytest.param({"Origin": "http://127.0.0.1:1"}, id="origin-only"),
    pytest.param({"Origin": "null"}, id="opaque-origin"),
]


@pytest.mark.parametrize("browser", CROSS_SITE)
def test_a_request_a_browser_marks_cross_site_is_refused(
    agent: RunningServer, ran: list[str], browser: dict[str, str]
) -> None:
    rpc = httpx.post(agent.url + "/", content=rpc_body(), headers={**JSON, **browser})
    assert rpc.status_code == 403
    assert rpc.json()["error"]["code"] == -32041
    rest = httpx.post(agent.url + "/message:send", json=send_body(), headers={**V1, **browser})
    assert rest.status_code == 403
    assert rest.json()["error"]["status"] == "PERMISSION_DENIED"
    read = httpx.get(agent.url + "/tasks", headers={**V1, **browser})
    assert read.status_code == 403
    assert ran == []
    assert "access-control-allow-origin" not in rest.headers


@pytest.mark.parametrize(
    "browser",
    [
        pytest.param({"Sec-Fetch-Site": "same-origin"}, id="same-origin"),
        pytest.param({"Sec-Fetch-Site": "none"}, id="typed-by-the-user"),
        pytest.param({}, id="not-a-browser"),
    ],
)
def test_the_agents_own_pages_and_other_clients_are_served(
    agent: RunningServer, ran: list[str], browser: dict[str, str]
) -> None:
    answer = httpx.post(agent.url + "/", content=rpc_body(), headers={**JSON, **browser})
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(ran) == 1


def test_an_origin_naming_the_host_it_was_sent_to_is_same_origin(
    agent: RunningServer, ran: list[str]
) -> None:
    """A browser without Sec-Fetch-Site sends Origin alone: its own page's is the request's Host."""
    own = {"Origin": agent.url}
    answer = httpx.post(agent.url + "/message:send", json=send_body(), headers={**V1, **own})
    assert answer.status_code == 200
    other = {"Origin": agent.url.replace("127.0.0.1", "localhost")}
    assert (
        httpx.post(agent.url + "/message:send", json=send_body(), headers={**V1, **other}).status_code == 403
    )
    assert len(ran) == 1


# -- CORS for the origins the operator allows -------------------------------------------------------------


APP = "https://app.example"


def test_nothing_is_allowed_by_default(agent: RunningServer) -> None:
    preflight = httpx.options(
        agent.url + "/",
        headers={"Origin": APP, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers


def test_an_allowed_origin_gets_cors_and_its_requests_are_served(
    serve: Callable[..., RunningServer], ran: list[str]
) -> None:
    srv = serve(target(ran).asgi(store="memory://", cors_origins=[APP + "/"]))
    asked = "content-type, a2a-version, authorization"
    preflight = httpx.options(
        srv.url + "/message:send",
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": asked,
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == asked
    assert "access-control-allow-credentials" not in preflight.headers
    assert "Origin" in preflight.headers["vary"]
    browser = {"Origin": APP, "Sec-Fetch-Site": "cross-site"}
    answer = httpx.post(srv.url + "/message:send", json=send_body(), headers={**V1, **browser})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == APP
    assert "Retry-After" in answer.headers["access-control-expose-headers"]
    card = httpx.get(srv.url + "/.well-known/agent-card.json", headers=browser)
    assert card.headers["access-control-allow-origin"] == APP
    assert len(ran) == 1
    # any other origin: no grant, refused
    other = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    refused = httpx.options(srv.url + "/message:send", headers=other)
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    evil = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert httpx.post(srv.url + "/message:send", json=send_body(), headers={**V1, **evil}).status_code == 403
    assert len(ran) == 1


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://App.Example", "https://app.example"),
        ("https://app.example:443/", "https://app.example"),
        ("http://127.0.0.1:5173", "http://127.0.0.1:5173"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_origins_are_written_as_browsers_write_them(given: str, origin: str) -> None:
    assert parse_origin(given) == origin
    assert BrowserPolicy([given]).allows(origin)


@pytest.mark.parametrize(
    "bad",
    [
        "*",
        "app.example",
        "https://app.example/path",
        "ftp://app.example",
        "https://u@app.example",
        "https://",
    ],
)
def test_what_is_not_an_origin_is_refused_when_configured(bad: str) -> None:
    with pytest.raises(ValueError, match="not an origin"):
        BrowserPolicy([bad])


# -- in a real browser ------------------------------------------------------------------------------------

#: The hostile page: every request a page may send to another origin without asking it (no preflight),
#: with the user's cookies, then ``data-done`` once the fetches are answered and the form's page loaded.
ATTACK_PAGE = """<!doctype html><html><body><iframe name="sink" id="sink"></iframe><script>
const agent = new URLSearchParams(location.search).get("agent");
const message = {messageId: "m-" + Math.random(), role: "ROLE_USER", parts: [{text: "go"}],
                 metadata: {skillId: "purge"}};
const rpc = JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage", params: {message}});
const rest = JSON.stringify({message});
const rpcUrl = agent + "/?A2A-Version=1.0", restUrl = agent + "/message:send?A2A-Version=1.0";
async function attack() {
  await fetch(rpcUrl, {method: "POST", mode: "no-cors", credentials: "include", body: new Blob([rpc])});
  await fetch(restUrl, {method: "POST", mode: "no-cors", credentials: "include", body: new Blob([rest])});
  await fetch(rpcUrl, {method: "POST", mode: "no-cors", credentials: "include", body: rpc});
  navigator.sendBeacon(rpcUrl, new Blob([rpc]));
  navigator.sendBeacon(restUrl, new Blob([rest]));
  const form = document.createElement("form");
  form.method = "POST"; form.action = restUrl; form.enctype = "text/plain"; form.target = "sink";
  const field = document.createElement("input");
  field.name = rest.slice(0, -1) + ', "pad": "'; field.value = '"}';
  form.appendChild(field); document.body.appendChild(form);
  await new Promise((resolve) => { document.getElementById("sink").onload = resolve; form.submit(); });
  document.body.dataset.done = "true";
}
async function call() {
  try {
    const answer = await fetch(restUrl, {method: "POST", body: rest,
                                         headers: {"Content-Type": "application/json"}});
    document.body.dataset.result = (await answer.json()).task.status.state;
  } catch (error) {
    document.body.dataset.result = "blocked";
  }
}
(new URLSearchParams(location.search).get("mode") === "call" ? call() : attack());
</script></body></html>"""
#: Requests the attack makes to the agent (three fetches, two beacons, one form post).
ATTACKS = 6
WAIT_MS = 15_000


async def attack_site(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The page's own site: ATTACK_PAGE at every path."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = ATTACK_PAGE.encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AccessLines(logging.Handler):
    """The agent's access lines (one per request, refused ones included), to wait on."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.changed:
            self.lines.append(record.getMessage())
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[str]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.lines) >= count, timeout), self.lines
            return list(self.lines)


@pytest.fixture
def access() -> Iterator[AccessLines]:
    logger = logging.getLogger("skillwire.access")
    handler, level = AccessLines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    playwright_sync = pytest.importorskip("playwright.sync_api")
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        skip_without_service("Chromium", "no chromium on PATH: apt-get install chromium")
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def site() -> Iterator[str]:
    url, stop = serve_asgi(attack_site)
    yield url
    stop()


def run_page(chromium: Any, url: str, attribute: str, cookie: str | None = None) -> str:
    """Open ``url`` in a fresh browser context (with the agent's ``key`` cookie for 127.0.0.1, if given) and
    wait for the page to set ``data-<attribute>`` on its body; its value."""
    from playwright.sync_api import expect

    context = chromium.new_context()
    try:
        if cookie is not None:  # set by the agent's site: a cookie of 127.0.0.1, whatever the port
            context.add_cookies([{"name": "key", "value": cookie, "domain": "127.0.0.1", "path": "/"}])
        page = context.new_page()
        page.goto(url)
        body = page.locator("body")
        expect(body).to_have_attribute(f"data-{attribute}", __import__("re").compile(".+"), timeout=WAIT_MS)
        return str(body.get_attribute(f"data-{attribute}"))
    finally:
        context.close()


@pytest.mark.parametrize("cookie_key", [False, True], ids=["no-security", "api-key-in-a-cookie"])
def test_a_page_on_another_port_cannot_make_the_agent_run_a_skill(
    chromium: Any,
    site: str,
    serve: Callable[..., RunningServer],
    access: AccessLines,
    ran: list[str],
    cookie_key: bool,
) -> None:
    srv = serve(target(ran, cookie_key=cookie_key).asgi(store="memory://"))
    if cookie_key:  # the cookie is good: the agent's own requests with it are served
        own = httpx.post(srv.url + "/", content=rpc_body(), headers={**JSON, "Cookie": f"key={KEY}"})
        assert own.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        ran.clear()
        access.wait_for(1)
        access.lines.clear()
    done = run_page(chromium, f"{site}/?agent={srv.url}", "done", cookie=KEY if cookie_key else None)
    assert done == "true"
    lines = access.wait_for(ATTACKS)
    assert ran == []  # nothing reached the skill
    refused = [line for line in lines if "PERMISSION_DENIED" in line or "CONTENT_TYPE_NOT_SUPPORTED" in line]
    assert len(refused) == ATTACKS, lines


def test_a_page_on_an_allowed_origin_calls_the_agent_and_others_cannot(
    chromium: Any, site: str, serve: Callable[..., RunningServer], ran: list[str]
) -> None:
    allowed = serve(target(ran).asgi(store="memory://", cors_origins=[site]))
    assert run_page(chromium, f"{site}/?mode=call&agent={allowed.url}", "result") == "TASK_STATE_COMPLETED"
    assert len(ran) == 1
    closed = serve(target(ran).asgi(store="memory://"))
    assert run_page(chromium, f"{site}/?mode=call&agent={closed.url}", "result") == "blocked"
    assert len(ran) == 1


# -- the operator's options --------------------------------------------------------------------------------


def test_serve_takes_cors_origins_from_flags_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import EXAMPLES
    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse

    greeter = str(EXAMPLES / "greeter")
    flags = [
        "--store",
        "memory://",
        "--cors-origin",
        "https://App.example",
        "--cors-origin",
        "http://127.0.0.1:5173",
    ]
    _, app = application(_parse(["serve", greeter, *flags]))
    assert app.browser.origins == {"https://app.example", "http://127.0.0.1:5173"}
    monkeypatch.setenv("SKILLWIRE_CORS_ORIGINS", "https://a.example, https://b.example")
    _, app = application(_parse(["serve", greeter, "--store", "memory://"]))
    assert app.browser.origins == {"https://a.example", "https://b.example"}


def test_serve_refuses_a_cors_origin_that_is_not_one(capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import EXAMPLES
    from skillwire.cli.main import main

    assert main(["serve", str(EXAMPLES / "greeter"), "--store", "memory://", "--cors-origin", "*"]) == 2
    assert "--cors-origin" in capsys.readouterr().err
