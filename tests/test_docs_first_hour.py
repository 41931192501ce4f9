"""docs/first-hour.md, run as written: its Python blocks run in order in one namespace (each builds on the
ones before), and every ``# -> text`` comment is the next line they print. The FastAPI block is then served
on a real port and called over the mounted prefix."""

from __future__ import annotations

import contextlib
import io
import re
import threading
from typing import Any

import httpx
import uvicorn

from conftest import ROOT, free_port

DOC = ROOT / "docs" / "first-hour.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
EXPECT = re.compile(r"#\s*->\s*(.*)$")


def test_the_guide_runs_as_written() -> None:
    namespace: dict[str, Any] = {"__name__": "first_hour"}
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 4
    for code in blocks:
        expected = [m.group(1).strip() for line in code.splitlines() if (m := EXPECT.search(line))]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert out.getvalue().splitlines() == expected
    serve_mounted(namespace["app"])


class _Server(uvicorn.Server):
    """uvicorn, saying when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


def serve_mounted(app: Any) -> None:
    port = free_port()
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.listening.wait(15), "uvicorn did not start"
        with httpx.Client(timeout=10) as http:
            card = http.get(f"http://127.0.0.1:{port}/a2a/.well-known/agent-card.json")
            assert card.status_code == 200
            assert card.json()["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{port}/a2a/"
            body = {
                "message": {
                    "messageId": "m1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "Ada"}],
                    "metadata": {"skillId": "hello"},
                }
            }
            answer = http.post(
                f"http://127.0.0.1:{port}/a2a/message:send", json=body, headers={"A2A-Version": "1.0"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        server.should_exit = True
        thread.join(15)
