"""The web console in Firefox: Debian's firefox-esr, headless, driven over WebDriver BiDi (tests/bidi.py).

The same flows as the Chromium tests' core: a form filled in with the keyboard, a streamed task, a question
answered, a cancel, hostile agent text, the task list and a phone-width viewport. Without Firefox the tests
skip with the reason, and fail instead under SKILLWIRE_REQUIRE_SERVICES=1 (CI installs firefox-esr).

The page is waited on with a MutationObserver (``until``), never by sleeping or polling.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import RunningServer, skip_without_service, start_server
from console_agent import HOSTILE, console_agent

pytest.importorskip("websockets")
from bidi import Firefox, firefox_path, launch

ARTIFACTS = Path(__file__).parent / "artifacts" / "console"
WAIT_MS = 15_000

#: Resolves with the element's text once ``selector`` matches an element whose text matches ``pattern``
#: (a regular expression), watching the DOM for changes; rejects after WAIT_MS.
UNTIL = """
((selector, pattern) => new Promise((resolve, reject) => {
  const re = new RegExp(pattern);
  const check = () => {
    const el = document.querySelector(selector);
    if (el && re.test(el.textContent)) { observer.disconnect(); clearTimeout(timer); resolve(el.textContent); return true; }
    return false;
  };
  const observer = new MutationObserver(check);
  const timer = setTimeout(() => { observer.disconnect(); reject(new Error(`timed out waiting for ${selector} ~ ${pattern}`)); }, WAIT_MS);
  if (!check()) observer.observe(document.documentElement, { subtree: true, childList: true, characterData: true, attributes: true });
}))
""".replace("WAIT_MS", str(WAIT_MS))


@pytest.fixture(scope="module")
def firefox() -> Iterator[Firefox]:
    path = firefox_path()
    if path is None:
        skip_without_service("Firefox", "no firefox-esr on PATH: apt-get install firefox-esr")
    with launch(path) as browser:
        yield browser


@pytest.fixture
def agent_server() -> Iterator[RunningServer]:
    gate = threading.Event()
    server = start_server(console_agent(gate).asgi(store="memory://", console=True))
    yield server
    gate.set()
    server.stop()


@pytest.fixture
def page(firefox: Firefox, agent_server: RunningServer, request: pytest.FixtureRequest) -> Iterator[Firefox]:
    firefox.command(
        "browsingContext.setViewport",
        {"context": firefox.context, "viewport": {"width": 1280, "height": 900}},
    )
    firefox.navigate(agent_server.url + "/console")  # the redirect to /console/ included
    ready(firefox)
    yield firefox
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    firefox.screenshot(ARTIFACTS / f"firefox-{request.node.name}.png")


def until(browser: Firefox, selector: str, pattern: str) -> str:
    text: str = browser.js(f"{UNTIL}({json.dumps(selector)}, {json.dumps(pattern)})")
    return text


def ready(browser: Firefox) -> None:
    """Wait until the page has read the card and drawn itself (``data-ready`` on the body)."""
    browser.js(
        f"""new Promise((resolve, reject) => {{
          if (document.body.dataset.ready) return resolve(document.body.dataset.ready);
          const observer = new MutationObserver(() => {{
            if (document.body.dataset.ready) {{ observer.disconnect(); resolve(document.body.dataset.ready); }}
          }});
          observer.observe(document.body, {{ attributes: true }});
          setTimeout(() => {{ observer.disconnect(); reject(new Error("not ready")); }}, {WAIT_MS});
        }})"""
    )
    assert browser.js("document.body.dataset.ready") == "true"


def click(browser: Firefox, selector: str) -> None:
    assert browser.js(
        f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.click(); return true; }})()"
    )


def focus(browser: Firefox, selector: str) -> None:
    assert browser.js(
        f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.focus(); return document.activeElement === el; }})()"
    )


def send_text(browser: Firefox, skill_id: str, text: str) -> None:
    """Type ``text`` into the skill's free-text box (its Text tab, for a skill with a form) and send it."""
    browser.js(f"document.querySelector('#skill-{skill_id} .tab[data-mode=text]')?.click()")
    focus(browser, f"#text-{skill_id}")
    browser.type(text)
    click(browser, f"#skill-{skill_id} button[type=submit]")


def test_the_greeter_form_with_the_keyboard(page: Firefox) -> None:
    assert "Console test agent" in until(page, "header.agent h1", "Console test agent")
    focus(page, "#skill-greet input[name='input.name']")
    page.type("Ada")
    assert (
        page.js(
            "(() => { const s = document.querySelector(\"#skill-greet select[name='input.style']\"); s.value = '1'; s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()"
        )
        == "1"
    )
    page.press("Enter")  # Enter in a field sends the form
    until(page, "#task-state", "^completed$")
    assert until(page, "#artifacts", "Good day, Ada.")


def test_a_streamed_task_grows_in_order(page: Firefox) -> None:
    send_text(page, "stream", "50")
    until(page, "#task-state", "^completed$")
    expected = "".join(f"chunk {i};" for i in range(50))
    assert page.js("document.querySelector('#artifacts article.artifact pre').textContent") == expected


def test_a_question_is_answered_in_the_page(page: Firefox) -> None:
    send_text(page, "interview", "start")
    until(page, "#task-state", "^input-required$")
    assert "What is your name?" in until(page, "#prompt", "What is your name")
    focus(page, "#answer")
    page.type("Ada")
    click(page, "#prompt button[type=submit]")
    until(page, "#task-state", "^completed$")
    assert until(page, "#artifacts", "Thanks, Ada.")


def test_a_long_task_is_canceled(page: Firefox) -> None:
    send_text(page, "hold", "wait")
    until(page, "#task-state", "^working$")
    click(page, "#cancel")
    until(page, "#task-state", "^canceled$")


def test_hostile_text_is_inert(page: Firefox) -> None:
    send_text(page, "hostile", "go")
    until(page, "#task-state", "^completed$")
    assert HOSTILE in until(page, "#artifacts", "onerror")
    assert page.js("document.querySelectorAll('#view img, #view b, #view script').length") == 0
    assert page.js("window.__pwned === undefined") is True


def test_the_task_list_and_phone_width(page: Firefox) -> None:
    send_text(page, "greet", "Grace")
    until(page, "#task-state", "^completed$")
    page.navigate(page.js("location.href").split("#")[0] + "#/tasks")
    ready(page)
    click(page, "form.filters button[type=submit]")
    until(page, "#tasks-summary", "Tasks 1-1")
    page.command(
        "browsingContext.setViewport", {"context": page.context, "viewport": {"width": 390, "height": 844}}
    )
    page.navigate(page.js("location.href").split("#")[0] + "#/")
    ready(page)
    assert page.js("document.documentElement.scrollWidth") <= 390
