"""Every Python example in docs/client.md runs against real servers and prints what its comments say.

Convention: a ``# -> text`` comment says what the next line of output is; comments follow the order in
which the example prints (a comment alone on a line continues the one above it). The examples use
http://127.0.0.1:8000 for ``examples/greeter`` and http://127.0.0.1:8001 for ``examples/workshop``; the test
points them at its own servers. A block that is a fragment (it uses names it does not define) is marked by
having no ``asyncio.run`` nor ``with`` at top level and is only compiled.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from typing import Any

import pytest

from conftest import EXAMPLES, ROOT
from skillwire import Agent

DOC = ROOT / "docs" / "client.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
EXPECT = re.compile(r"#\s*->\s*(.*)$")


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def expected_output(code: str) -> list[str]:
    return [m.group(1).strip() for line in code.splitlines() if (m := EXPECT.search(line))]


def runnable(code: str) -> bool:
    return any(line.startswith(("asyncio.run(", "with ")) for line in code.splitlines())


def test_the_doc_has_runnable_examples() -> None:
    found = blocks()
    assert sum(runnable(b) for b in found) >= 6
    assert all(expected_output(b) for b in found if runnable(b))


@pytest.fixture(scope="module")
def urls() -> Any:
    from conftest import start_server

    greeter = start_server(Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://"))
    workshop = start_server(Agent.from_folder(EXAMPLES / "workshop").asgi(store="memory://"))
    yield {"http://127.0.0.1:8000": greeter.url, "http://127.0.0.1:8001": workshop.url}
    greeter.stop()
    workshop.stop()


@pytest.mark.parametrize("index", range(len(blocks())))
def test_doc_example(index: int, urls: dict[str, str]) -> None:
    code = blocks()[index]
    if not runnable(code):
        compile(code, f"{DOC.name}[{index}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    for placeholder, url in urls.items():
        code = code.replace(placeholder, url)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{DOC.name}[{index}]", "exec"), {"__name__": "__doc_example__"})
    assert out.getvalue().splitlines() == expected_output(code)
