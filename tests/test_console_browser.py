"""The web console in a real browser: headless Chromium (Debian's, driven by Playwright) against real agents.

Each test drives the page as a user would (forms, buttons, the keyboard) and checks what the agent did, as
the agent reports it. Screenshots go to tests/artifacts/console/ (not committed; CI keeps them as
artifacts). Without a Chromium the tests skip with the reason, and fail instead under
SKILLWIRE_REQUIRE_SERVICES=1 (CI installs Debian's chromium).

Assertions use Playwright's locators and ``expect`` only: the console's Content-Security-Policy forbids
string evaluation, which ``page.wait_for_function`` needs, and the policy is part of what is tested.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningServer, TcpProxy, rpc, serve_asgi, skip_without_service, start_server
from console_agent import HOSTILE, PNG, console_agent, typed_console_agent
from test_client_v03 import peer as v03_peer  # noqa: F401 - a fixture: the a2a-sdk 0.3 agent

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

ARTIFACTS = Path(__file__).parent / "artifacts" / "console"
WAIT_MS = 15_000


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        skip_without_service("Chromium", "no chromium on PATH: apt-get install chromium")
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # a drip still waiting ends


@pytest.fixture
def agent_server(gate: threading.Event) -> Iterator[RunningServer]:
    server = start_server(console_agent(gate).asgi(store="memory://", console=True))
    yield server
    server.stop()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert problems == []  # no uncaught script error in the page


def open_console(page: Any, base: str) -> None:
    page.goto(base + "/console")  # the redirect to /console/ included
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=WAIT_MS)


def skill(page: Any, skill_id: str) -> Any:
    return page.locator(f"#skill-{skill_id}")


def wait_state(page: Any, state: str) -> None:
    expect(page.locator("#task-state")).to_have_text(state, timeout=WAIT_MS)


def task_id_of(page: Any) -> str:
    page.wait_for_url(re.compile(r"#/task/"), timeout=WAIT_MS)
    return page.url.rsplit("#/task/", 1)[1]


def get_task(base: str, task_id: str) -> dict[str, Any]:
    answer = httpx.post(base + "/", json=rpc("GetTask", {"id": task_id}), headers={"A2A-Version": "1.0"})
    result: dict[str, Any] = answer.json()["result"]
    return result


def artifact_text(task: dict[str, Any]) -> list[str]:
    return ["".join(p.get("text", "") for p in a["parts"]) for a in task.get("artifacts", [])]


# -- the agent page -------------------------------------------------------------------------------------


def test_the_card_is_shown_and_agent_markup_stays_text(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    header = page.locator("header.agent")
    expect(header.locator("h1")).to_have_text("Console test agent")
    expect(header).to_contain_text(HOSTILE)  # the description's markup, as text
    card = page.locator("section.card")
    expect(card).to_contain_text("JSONRPC")
    expect(card).to_contain_text("push notifications: yes")
    expect(card).to_contain_text("No security schemes")
    expect(card).to_contain_text("https://skillwire.dev/extensions/skill-schemas/v1")
    expect(card).to_contain_text("Not signed.")
    assert page.locator("#view img").count() == 0
    assert page.locator("script").count() == 1  # the console's own
    expect(page.locator("article.skill")).to_have_count(8)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "agent-page.png"))


def test_greet_through_the_generated_form(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    greet = skill(page, "greet")
    name = greet.get_by_label("name")
    expect(name).to_have_attribute("required", "")
    style = greet.get_by_label("style")
    expect(style).to_have_value("0")  # the schema's default, casual, is chosen
    name.fill("Ada")
    style.select_option(label="formal")
    greet.get_by_role("button", name="Send to Greet").click()
    task_id = task_id_of(page)
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Good day, Ada.")
    expect(page.locator("#history")).to_contain_text('"name": "Ada"')
    task = get_task(agent_server.url, task_id)
    assert artifact_text(task) == ["Good day, Ada."]
    assert task["history"][0]["parts"][0]["data"] == {"name": "Ada", "style": "formal"}


def test_an_empty_required_field_is_refused_by_the_agent_and_said(
    page: Any, agent_server: RunningServer
) -> None:
    open_console(page, agent_server.url)
    greet = skill(page, "greet")
    greet.get_by_role("button", name="Send to Greet").click()
    # nothing to send for the required name: the agent's own validation answers, shown in the page
    expect(greet.locator(".result .error")).to_contain_text("name", timeout=WAIT_MS)


def test_an_example_fills_the_form_in_one_click(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    greet = skill(page, "greet")
    greet.get_by_role("button", name='{"name": "Grace", "style": "formal"}').click()
    expect(greet.get_by_label("name")).to_have_value("Grace")
    greet.get_by_role("button", name="JSON").click()
    raw = json.loads(greet.get_by_label("Greet input as JSON").input_value())
    assert raw == {"name": "Grace", "style": "formal"}
    greet.get_by_role("button", name="Send to Greet").click()
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Good day, Grace.")


def test_the_raw_json_editor_and_the_free_text_box(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    greet = skill(page, "greet")
    greet.get_by_role("button", name="JSON").click()
    greet.get_by_label("Greet input as JSON").fill('{"name": "Linus"}')
    greet.get_by_role("button", name="Send to Greet").click()
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Hello, Linus!")
    page.get_by_role("link", name="Agent").click()
    greet = skill(page, "greet")
    greet.get_by_role("button", name="Text").click()
    greet.get_by_label("Message to Greet").fill("Barbara")  # the skill's textInput takes a text message
    greet.get_by_role("button", name="Send to Greet").click()
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Hello, Barbara!")


def test_nested_objects_arrays_defaults_and_formats(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    order = skill(page, "order")
    expect(order.get_by_label("email")).to_have_attribute("type", "email")
    expect(order.get_by_label("deliver_on")).to_have_attribute("type", "date")
    expect(order.get_by_label("quantity")).to_have_value("1")  # the default
    order.get_by_label("email").fill("ada@example.com")
    order.get_by_label("city").fill("London")
    order.locator("fieldset.array input").first.fill("tea")
    order.get_by_role("button", name=re.compile("^Add")).click()
    order.locator("fieldset.array input").nth(1).fill("scones")
    order.get_by_label("quantity").fill("3")
    order.get_by_label("gift").check()
    order.get_by_label("deliver_on").fill("2026-12-24")
    order.get_by_role("button", name="Send to Order").click()
    task_id = task_id_of(page)
    wait_state(page, "completed")
    task = get_task(agent_server.url, task_id)
    received = task["artifacts"][0]["parts"][0]["data"]["received"]
    assert received == {
        "customer": {"email": "ada@example.com", "address": {"city": "London"}},
        "items": ["tea", "scones"],
        "quantity": 3,
        "gift": True,
        "deliver_on": "2026-12-24",
    }


# -- typed skills: forms from the schemas Python types make ----------------------------------------------


@pytest.fixture
def typed_server() -> Iterator[RunningServer]:
    server = start_server(typed_console_agent().asgi(store="memory://", console=True))
    yield server
    server.stop()


def result_of(base: str, page: Any) -> Any:
    task_id = task_id_of(page)
    wait_state(page, "completed")
    return get_task(base, task_id)["artifacts"][0]["parts"][0]["data"]


def test_every_typed_skill_has_a_form_and_no_json_box(page: Any, typed_server: RunningServer) -> None:
    open_console(page, typed_server.url)
    expect(page.locator("article.skill")).to_have_count(3)
    for skill_id in ("plan", "ship", "adopt"):
        article = skill(page, skill_id)
        expect(article.locator("fieldset.object.root")).to_have_count(1)
        expect(article).not_to_contain_text("has no form")
        assert article.locator("textarea.code").count() == 1  # the JSON tab's editor only


def test_a_decorator_skill_form_has_its_constraints(page: Any, typed_server: RunningServer) -> None:
    open_console(page, typed_server.url)
    plan = skill(page, "plan")
    days = plan.get_by_label("days")
    expect(days).to_have_value("3")  # the parameter's default
    expect(days).to_have_attribute("min", "1")
    expect(days).to_have_attribute("max", "14")
    expect(days).to_have_attribute("step", "1")
    expect(plan.locator("fieldset.object.root")).to_contain_text("a whole number, at least 1, at most 14")
    plan.get_by_label("city").fill("Oslo")
    days.fill("20")
    plan.get_by_role("button", name="Send to Plan").click()
    expect(plan.locator(".result .error")).to_contain_text("/days")  # the agent's -32602, under the form
    days.fill("5")
    plan.get_by_label("mode").select_option(label="bike")
    plan.get_by_role("button", name="Add stops item").click()
    plan.get_by_role("textbox", name="stops item").fill("Bergen")
    plan.get_by_role("button", name="Add scores item").click()
    plan.get_by_label("scores key").fill("views")
    plan.get_by_label("scores value").fill("9")
    plan.get_by_role("button", name="Send to Plan").click()
    assert result_of(typed_server.url, page) == {
        "city": "Oslo",
        "days": 5,
        "mode": "bike",
        "budget": None,  # left empty: the parameter's default
        "stops": ["Bergen"],
        "scores": {"views": 9},
    }


def test_a_struct_skill_form_nests_its_types(page: Any, typed_server: RunningServer) -> None:
    open_console(page, typed_server.url)
    ship = skill(page, "ship")
    to = ship.locator("fieldset.object", has=page.locator("legend", has_text="to")).first
    to.get_by_label("street").fill("1 Quay")
    to.get_by_label("city").fill("Tromso")
    expect(to.get_by_label("country")).to_have_value("NO")
    ship.get_by_role("button", name="Add lines item").click()
    line = ship.locator("fieldset.array li").first
    line.get_by_role("textbox", name="item", exact=True).fill("rope")
    expect(line.get_by_label("quantity")).to_have_attribute("min", "1")
    line.get_by_label("quantity").fill("2")
    line.get_by_label("color").select_option(label="blue")
    ship.get_by_label("express").check()
    ship.get_by_role("button", name="Send to Ship").click()
    assert result_of(typed_server.url, page) == {
        "to": {"street": "1 Quay", "city": "Tromso", "country": "NO"},
        "lines": [{"item": "rope", "quantity": 2, "color": "blue"}],
        "express": True,
        "notes": None,
    }


def test_a_pydantic_skill_form_chooses_a_union_member(page: Any, typed_server: RunningServer) -> None:
    open_console(page, typed_server.url)
    adopt = skill(page, "adopt")
    adopt.get_by_role("textbox", name="Name", exact=True).fill("Ada")
    age = adopt.get_by_role("spinbutton", name="Age")
    expect(age).to_have_attribute("max", "150")
    age.fill("36")
    pet = adopt.locator("fieldset.choice")
    expect(pet.locator(":scope > select option")).to_have_text(["cat", "dog"])
    pet.locator(":scope > select").select_option(label="dog")
    pet.get_by_label("Good").check()
    adopt.get_by_role("button", name="Send to Adopt").click()
    assert result_of(typed_server.url, page) == {
        "name": "Ada",
        "age": 36,
        "pet": {"kind": "dog", "good": True},
        "nickname": None,
    }


def test_the_skills_are_on_the_first_screen(page: Any, typed_server: RunningServer) -> None:
    open_console(page, typed_server.url)  # the viewport is 1280x900
    first = page.locator("article.skill").first.locator("h3")
    box = first.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900, box
    skills = page.locator("section.skills").bounding_box()
    details = page.locator("section.card").bounding_box()
    assert skills is not None and details is not None and details["y"] > skills["y"]  # the card comes after


# -- live tasks -----------------------------------------------------------------------------------------


def test_stream_50_grows_one_artifact_in_order(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    stream = skill(page, "stream")
    stream.get_by_role("button", name="50").click()  # the example, as a text message
    stream.get_by_role("button", name="Send to Stream").click()
    task_id = task_id_of(page)
    wait_state(page, "completed")
    expected = "".join(f"chunk {i};" for i in range(50))
    artifact = page.locator("#artifacts article.artifact")
    expect(artifact).to_have_count(2)  # the stream, then the result
    expect(artifact.first.locator("pre")).to_have_text(expected)
    expect(page.locator("#timeline")).to_contain_text("working")
    assert artifact_text(get_task(agent_server.url, task_id))[0] == expected
    page.screenshot(path=str(ARTIFACTS / "stream-task.png"))


def test_a_dripping_task_shows_each_chunk_as_it_comes(
    page: Any, agent_server: RunningServer, gate: threading.Event
) -> None:
    open_console(page, agent_server.url)
    skill(page, "drip").get_by_label("Message to Drip").fill("go")
    skill(page, "drip").get_by_role("button", name="Send to Drip").click()
    wait_state(page, "working")
    drops = page.locator("#artifacts article.artifact").first.locator("pre")
    expect(drops).to_have_text(
        "".join(f"drop {i};" for i in range(5)), timeout=WAIT_MS
    )  # the agent waits here
    gate.set()
    wait_state(page, "completed")
    expect(drops).to_have_text("".join(f"drop {i};" for i in range(10)))


def test_a_dropped_stream_is_resumed_without_gaps(browser: Any, gate: threading.Event) -> None:
    server = start_server(console_agent(gate).asgi(store="memory://", console=True))
    proxy = TcpProxy(("127.0.0.1", server.port))
    proxy.start()
    context = browser.new_context()
    page = context.new_page()
    try:
        open_console(page, f"http://127.0.0.1:{proxy.port}")
        drip = skill(page, "drip")
        drip.get_by_label("Message to Drip").fill("go")
        drip.get_by_role("button", name="Send to Drip").click()
        drops = page.locator("#artifacts article.artifact").first.locator("pre")
        expect(drops).to_have_text("".join(f"drop {i};" for i in range(5)), timeout=WAIT_MS)
        proxy.cut()  # the page's stream drops; its retries are refused for now
        expect(page.locator("#task-link")).to_contain_text("reconnecting", timeout=WAIT_MS)
        proxy.start()
        expect(page.locator("#task-link")).to_have_text("Live.", timeout=WAIT_MS)  # resubscribed
        gate.set()  # the rest comes over the new subscription
        wait_state(page, "completed")
        expect(drops).to_have_text("".join(f"drop {i};" for i in range(10)))
        expect(page.locator("#artifacts article.artifact")).to_have_count(2)
    finally:
        context.close()
        proxy.cut()
        server.stop()


def test_input_required_is_answered_in_the_page(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    interview = skill(page, "interview")
    interview.get_by_label("Message to Interview").fill("start")
    interview.get_by_role("button", name="Send to Interview").click()
    task_id = task_id_of(page)
    wait_state(page, "input-required")
    prompt = page.locator("#prompt")
    expect(prompt).to_contain_text("What is your name?")
    page.screenshot(path=str(ARTIFACTS / "input-required.png"))
    page.locator("#answer").fill("Ada")
    prompt.get_by_role("button", name="Send answer").click()
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Thanks, Ada.")
    task = get_task(agent_server.url, task_id)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert artifact_text(task) == ["Thanks, Ada."]


def test_a_long_task_is_canceled_from_the_page(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    hold = skill(page, "hold")
    hold.get_by_label("Message to Hold").fill("wait")
    hold.get_by_role("button", name="Send to Hold").click()
    task_id = task_id_of(page)
    wait_state(page, "working")
    page.get_by_role("button", name="Cancel task").click()
    wait_state(page, "canceled")
    expect(page.get_by_role("button", name="Cancel task")).to_have_count(0)
    assert get_task(agent_server.url, task_id)["status"]["state"] == "TASK_STATE_CANCELED"


def test_hostile_agent_text_is_inert(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    hostile = skill(page, "hostile")
    hostile.get_by_label("Message to Hostile").fill("go")
    hostile.get_by_role("button", name="Send to Hostile").click()
    wait_state(page, "completed")
    artifacts = page.locator("#artifacts")
    expect(artifacts).to_contain_text(HOSTILE)  # the name and the text, literally
    expect(page.locator("#timeline")).to_contain_text(HOSTILE)
    assert page.locator("#view img, #view b, #view script").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def test_files_are_previewed_and_downloaded(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    picture = skill(page, "picture")
    picture.get_by_label("Message to Picture").fill("go")
    picture.get_by_role("button", name="Send to Picture").click()
    wait_state(page, "completed")
    preview = page.locator("#artifacts img.preview")
    expect(preview).to_have_attribute("src", re.compile("^blob:"))
    expect(preview).to_have_attribute("alt", "red.png")
    with page.expect_download() as caught:
        page.get_by_role("link", name=re.compile("^Download red.png")).click()
    assert Path(caught.value.path()).read_bytes() == PNG
    with page.expect_download() as caught:
        page.get_by_role("link", name=re.compile("^Download notes.txt")).click()
    assert caught.value.suggested_filename == "notes.txt"
    assert Path(caught.value.path()).read_bytes() == b"plain words\n"


# -- the task list --------------------------------------------------------------------------------------


def test_tasks_are_listed_filtered_and_paged(page: Any, agent_server: RunningServer) -> None:
    context_id = str(uuid.uuid4())
    ids = []
    for i in range(7):
        message = {
            "role": "ROLE_USER",
            "messageId": str(uuid.uuid4()),
            "contextId": context_id,
            "parts": [{"data": {"name": f"n{i}"}}],
            "metadata": {"skillId": "greet"},
        }
        answer = httpx.post(
            agent_server.url + "/",
            json=rpc("SendMessage", {"message": message}),
            headers={"A2A-Version": "1.0"},
        ).json()
        ids.append(answer["result"]["task"]["id"])
    open_console(page, agent_server.url)
    page.get_by_role("link", name="Tasks").click()
    page.locator("#filter-context").fill(context_id)
    page.locator("#filter-size").select_option("5")
    page.get_by_role("button", name="Show tasks").click()
    rows = page.locator("table.tasks tbody tr")
    expect(rows).to_have_count(5, timeout=WAIT_MS)
    expect(page.locator("#tasks-summary")).to_contain_text("Tasks 1-5 of 7")
    expect(page.locator("table.tasks thead th")).to_have_text(
        ["Task", "Skill", "State", "Updated", "Context", "Artifacts"]
    )
    for i in range(5):  # each task's skill, and its one artifact
        expect(rows.nth(i).locator("td").nth(1)).to_have_text("greet")
        expect(rows.nth(i).locator("td").nth(5)).to_have_text("1")
    first_page = [rows.nth(i).locator("a").inner_text() for i in range(5)]
    page.locator("#page-next").click()
    expect(page.locator("#tasks-summary")).to_contain_text("Tasks 6-7 of 7")
    expect(rows).to_have_count(2)
    second_page = [rows.nth(i).locator("a").inner_text() for i in range(2)]
    assert sorted(first_page + second_page) == sorted(ids)
    expect(page.locator("#page-next")).to_be_disabled()
    page.locator("#page-previous").click()
    expect(page.locator("#tasks-summary")).to_contain_text("Tasks 1-5 of 7")
    page.locator("#filter-state").select_option("failed")
    page.get_by_role("button", name="Show tasks").click()
    expect(page.locator("#tasks-summary")).to_have_text("No tasks.")
    page.locator("#filter-state").select_option("completed")
    page.get_by_role("button", name="Show tasks").click()
    expect(rows).to_have_count(5)
    page.screenshot(path=str(ARTIFACTS / "tasks.png"))
    # a task's page, with its history
    target = rows.first.locator("a")
    target_id = target.inner_text()
    target.click()
    expect(page.locator("h1")).to_contain_text(target_id)
    wait_state(page, "completed")
    number = ids.index(target_id)
    expect(page.locator("#history")).to_contain_text(f'"name": "n{number}"')
    expect(page.locator("#artifacts")).to_contain_text(f"Hello, n{number}!")


# -- keyboard and phone ---------------------------------------------------------------------------------


def test_keyboard_only(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to content")
    page.keyboard.press("Enter")
    expect(page.locator("#view")).to_be_focused()
    name = skill(page, "greet").get_by_label("name")
    for _ in range(40):  # tab through, as a user would: the first skill's first field is a few stops away
        if name.evaluate("(el) => el === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(name).to_be_focused()
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")  # submits the form
    wait_state(page, "completed")
    expect(page.locator("#artifacts")).to_contain_text("Hello, Ada!")


def test_phone_width_has_no_sideways_scrolling(browser: Any, agent_server: RunningServer) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        open_console(page, agent_server.url)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "phone.png"))
        skill(page, "greet").get_by_label("name").fill("Ada")
        skill(page, "greet").get_by_role("button", name="Send to Greet").click()
        wait_state(page, "completed")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


# -- credentials ----------------------------------------------------------------------------------------


def test_typed_credentials_are_sent_and_the_server_keeps_none(page: Any) -> None:
    from skillwire import Agent, SkillContext
    from skillwire.security import APIKey, Security

    agent = Agent(
        "Secure", "Knows its callers", security=Security(APIKey("apiKey", keys={"alice": "k-alice"}))
    )

    @agent.skill(tags=["security"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who called."""
        return f"Hello, {ctx.principal.subject}"

    server = start_server(agent.asgi(store="memory://", console=True))
    try:
        open_console(page, server.url)  # the page and the card are public
        whoami_skill = skill(page, "whoami")
        whoami_skill.get_by_label("Message to Whoami").fill("hi")
        whoami_skill.get_by_role("button", name="Send to Whoami").click()
        expect(whoami_skill.locator(".result .error")).to_be_visible(timeout=WAIT_MS)  # refused without a key
        page.get_by_role("button", name="Credentials").click()
        page.locator("#cred-kind").select_option("apikey")
        expect(page.locator("#cred-key-name")).to_have_value("X-API-Key")  # from the card's scheme
        page.locator("#cred-key").fill("k-alice")
        page.get_by_role("button", name="Use these credentials").click()
        whoami_skill.get_by_role("button", name="Send to Whoami").click()
        wait_state(page, "completed")
        expect(page.locator("#artifacts")).to_contain_text("Hello, alice")
        storage = page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]")
        assert storage == [0, 0, ""]  # kept in the page's memory only
        page.reload()
        expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=WAIT_MS)
        page.get_by_role("button", name="Credentials").click()
        expect(page.locator("#cred-kind")).to_have_value("none")  # gone with the page
    finally:
        server.stop()


# -- skillwire console URL: any agent, through the relay ------------------------------------------------


def first_skill_send(page: Any, text: str) -> None:
    """Send ``text`` through the first skill's free-text box."""
    first = page.locator("article.skill").first
    first.locator("textarea").last.fill(text)
    first.locator("button[type=submit]").click()


def test_the_relay_drives_an_a2a_sdk_agent(page: Any) -> None:
    from skillwire.cli.console_relay import Relay
    from test_client_interop_sdk import run_sdk_agent

    with run_sdk_agent() as sdk:
        relay_url, stop = serve_asgi(Relay(sdk.url))
        try:
            open_console(page, relay_url)
            expect(page.locator("section.card")).to_contain_text("JSONRPC")
            first_skill_send(page, "stream 5")
            wait_state(page, "completed")
            expect(page.locator("#artifacts")).to_contain_text("chunk 4")
            page.get_by_role("link", name="Agent").click()
            first_skill_send(page, "ask")
            wait_state(page, "input-required")
            page.locator("#answer").fill("blue")
            page.get_by_role("button", name="Send answer").click()
            wait_state(page, "completed")
            page.get_by_role("link", name="Agent").click()
            first_skill_send(page, "slow")
            wait_state(page, "working")
            page.get_by_role("button", name="Cancel task").click()
            wait_state(page, "canceled")
            page.get_by_role("link", name="Tasks").click()
            page.get_by_role("button", name="Show tasks").click()
            expect(page.locator("table.tasks tbody tr")).to_have_count(3, timeout=WAIT_MS)
        finally:
            stop()


def test_the_relay_drives_a_v03_agent(page: Any, v03_peer: Any) -> None:  # noqa: F811 - the fixture
    from skillwire.cli.console_relay import Relay

    relay_url, stop = serve_asgi(Relay(v03_peer.url))
    try:
        open_console(page, relay_url)
        expect(page.locator("section.card")).to_contain_text("JSON-RPC, A2A 0.3")
        first_skill_send(page, "stream now")
        wait_state(page, "completed")
        expect(page.locator("#artifacts")).to_contain_text("chunk-3")
        page.get_by_role("link", name="Agent").click()
        first_skill_send(page, "input please")
        wait_state(page, "input-required")
        expect(page.locator("#prompt")).to_be_visible()
        page.get_by_role("link", name="Agent").click()
        first_skill_send(page, "long wait")
        wait_state(page, "working")
        page.get_by_role("button", name="Cancel task").click()
        wait_state(page, "canceled")
        page.get_by_role("link", name="Tasks").click()
        expect(page.locator("#view")).to_contain_text("0.3", timeout=WAIT_MS)  # no ListTasks in v0.3: said
    finally:
        stop()


# -- the examples, as a new user meets them -------------------------------------------------------------


def test_the_greeter_example_through_its_form(page: Any) -> None:
    from conftest import example_agent

    server = start_server(example_agent("greeter").asgi(store="memory://", console=True))
    try:
        open_console(page, server.url)
        greet = skill(page, "greet")
        greet.get_by_label("name").fill("Ada")
        greet.get_by_label("style").select_option(label="formal")
        greet.get_by_role("button", name="Send to Greet").click()
        wait_state(page, "completed")
        expect(page.locator("#artifacts")).to_contain_text("Good day, Ada. It is a pleasure to meet you.")
    finally:
        server.stop()


def test_the_echo_example_streams_50_chunks(page: Any) -> None:
    from conftest import example_agent

    server = start_server(example_agent("echo").asgi(store="memory://", console=True))
    try:
        open_console(page, server.url)
        echo = skill(page, "echo")
        echo.get_by_role("button", name="stream 10").click()  # an example fills the text box...
        echo.get_by_label("Message to Echo").fill("stream 50")  # ...and a user edits it
        echo.get_by_role("button", name="Send to Echo").click()
        task_id = task_id_of(page)
        wait_state(page, "completed")
        expected = "".join(f"chunk {i}" for i in range(50))
        expect(page.locator("#artifacts article.artifact pre")).to_have_text(expected)
        assert artifact_text(get_task(server.url, task_id)) == [expected]
    finally:
        server.stop()


def test_data_artifacts_are_formatted_json(page: Any, agent_server: RunningServer) -> None:
    open_console(page, agent_server.url)
    order = skill(page, "order")
    order.get_by_role("button", name="JSON").click()
    order.get_by_label("Order input as JSON").fill(
        '{"customer": {"email": "a@example.com"}, "items": ["<b>x</b>"]}'
    )
    order.get_by_role("button", name="Send to Order").click()
    wait_state(page, "completed")
    shown = page.locator("#artifacts pre.json").first.inner_text()
    assert json.loads(shown) == {"received": {"customer": {"email": "a@example.com"}, "items": ["<b>x</b>"]}}
    assert "\n  " in shown  # indented, not one line
    assert page.locator("#artifacts b").count() == 0


def test_auth_required_is_answered_with_new_credentials(page: Any) -> None:
    from skillwire import Agent, SkillContext
    from skillwire.security import APIKey, Principal, Security

    def verify(key: str) -> Principal | None:
        scopes = {"k-basic": frozenset(), "k-deploy": frozenset({"deploy"})}.get(key)
        return None if scopes is None else Principal(subject="alice", scheme="apiKey", scopes=scopes)

    agent = Agent(
        "Deployer", "Deploys, with the right scope", security=Security(APIKey("apiKey", keys=verify))
    )

    @agent.skill(tags=["security"])
    async def deploy(params: Any, ctx: SkillContext) -> str:
        """Deploys, once the caller has the deploy scope."""
        who = await ctx.require(["deploy"])
        return f"deployed by {who.subject}"

    server = start_server(agent.asgi(store="memory://", console=True))
    try:
        open_console(page, server.url)
        page.get_by_role("button", name="Credentials").click()
        page.locator("#cred-kind").select_option("apikey")
        page.locator("#cred-key").fill("k-basic")
        page.get_by_role("button", name="Use these credentials").click()
        skill(page, "deploy").get_by_label("Message to Deploy").fill("go")
        skill(page, "deploy").get_by_role("button", name="Send to Deploy").click()
        wait_state(page, "auth-required")
        prompt = page.locator("#prompt")
        expect(prompt).to_contain_text("Authorization required")
        expect(prompt).to_contain_text("deploy")  # what the agent says is missing
        if page.locator("#cred-panel").is_hidden():
            page.get_by_role("button", name="Credentials").click()
        page.locator("#cred-key").fill("k-deploy")
        page.get_by_role("button", name="Use these credentials").click()
        page.locator("#answer").fill("again, with the scope")
        prompt.get_by_role("button", name="Send answer").click()
        wait_state(page, "completed")
        expect(page.locator("#artifacts")).to_contain_text("deployed by alice")
    finally:
        server.stop()


def test_an_mcp_tool_is_a_skill_with_a_form_in_the_console(page: Any) -> None:
    """Issue 30: the tools of an MCP server written with the official SDK, wrapped as skills, are drawn and
    run by the console like any skill (the tool's inputSchema as the form, its structured result back)."""
    from test_mcp_tools import STDIO, agent_with

    server = start_server(agent_with(STDIO).asgi(store="memory://", console=True))
    try:
        open_console(page, server.url)
        multiply = skill(page, "calc-multiply")  # the console's id for calc.multiply
        expect(multiply).to_contain_text("Multiplies two integers.")
        expect(multiply.locator("fieldset.object.root")).to_have_count(1)
        multiply.get_by_label(re.compile(r"^A\b")).fill("6")  # the title the SDK gives the parameter
        multiply.get_by_label(re.compile(r"^B\b")).fill("7")
        multiply.get_by_role("button", name=re.compile("^Send to")).click()
        assert result_of(server.url, page) == {"result": 42}
    finally:
        server.stop()
