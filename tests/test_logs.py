"""JSON logs (`skillwire serve --log-format json`) from real server processes: every line parses, and says
which request, task, context and trace it belongs to; message contents stay out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from conftest import Served, rpc, start_process, user_message

ROOT = Path(__file__).parents[1]
V1 = {"A2A-Version": "1.0"}

AGENT = '''
import logging

from skillwire import Agent, SkillContext

agent = Agent("Logger", "Logs while it works")
log = logging.getLogger("logger.skill")


@agent.skill(tags=["test"])
async def work(params, ctx: SkillContext) -> str:
    """Logs a line, then answers."""
    log.info("working on it")
    return "done"


@agent.skill(tags=["test"])
async def crash(params, ctx: SkillContext) -> str:
    """Raises."""
    raise RuntimeError("the skill broke")
'''


def lines_of(served: Served) -> list[dict[str, Any]]:
    """The JSON lines the server printed so far (the banner's plain lines left out)."""
    return [json.loads(line) for line in served.lines if line.startswith("{")]


def one(served: Served, text: str) -> dict[str, Any]:
    line = served.wait_for_output(text)
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def send(served: Served, text: str, skill: str | None = None, **headers: str) -> dict[str, Any]:
    message = user_message(text, **({"metadata": {"skillId": skill}} if skill else {}))
    answer = httpx.post(
        served.url + "/", json=rpc("SendMessage", {"message": message}), headers={**V1, **headers}
    )
    result: dict[str, Any] = answer.json()["result"]["task"]
    return result


def test_the_access_line_is_json_with_the_request_id(processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", ROOT, "--log-format", "json")
    processes.append(served)
    task = send(served, "Ada Secretname", **{"X-Request-Id": "req-123"})
    access = one(served, '"logger": "skillwire.access"')
    assert access["level"] == "INFO"
    assert access["request_id"] == "req-123"
    assert access["binding"] == "JSONRPC"
    assert access["operation"] == "SendMessage"
    assert access["outcome"] == "COMPLETED"
    assert access["task_id"] == task["id"]
    assert isinstance(access["duration_ms"], float)
    assert access["time"].endswith("Z")
    assert "Secretname" not in json.dumps(lines_of(served))  # message contents are never logged


def test_a_runs_lines_carry_its_task_and_request(tmp_path: Path, processes: list[Served]) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    served = start_process(str(tmp_path / "agent.py"), "memory://", ROOT, "--log-format", "json")
    processes.append(served)
    task = send(served, "go", skill="work", **{"X-Request-Id": "req-work"})
    line = one(served, "working on it")
    assert line["logger"] == "logger.skill"
    assert line["task_id"] == task["id"]
    assert line["context_id"] == task["contextId"]
    assert line["request_id"] == "req-work"  # the request that started the run


def test_an_exception_is_one_line_with_its_traceback(tmp_path: Path, processes: list[Served]) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    served = start_process(str(tmp_path / "agent.py"), "memory://", ROOT, "--log-format", "json")
    processes.append(served)
    task = send(served, "go", skill="crash")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    line = one(served, "the skill broke")
    assert line["level"] in ("ERROR", "WARNING")
    assert line["task_id"] == task["id"]
    assert "RuntimeError: the skill broke" in line.get("exception", "") + line["message"]


def test_a_request_id_that_is_not_a_token_is_replaced(processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", ROOT, "--log-format", "json")
    processes.append(served)
    send(served, "Ada", **{"X-Request-Id": 'bad id "with" quotes'})
    access = one(served, '"logger": "skillwire.access"')
    assert len(access["request_id"]) == 16 and int(access["request_id"], 16) >= 0


def test_the_trace_ids_are_on_the_line(processes: list[Served]) -> None:
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    env = {**__import__("os").environ, "OTEL_TRACES_EXPORTER": "none"}
    served = start_process("examples/greeter", "memory://", ROOT, "--log-format", "json", "--otel", env=env)
    processes.append(served)
    send(served, "Ada", traceparent=f"00-{trace_id}-{parent_id}-01")
    access = one(served, '"logger": "skillwire.access"')
    assert access["trace_id"] == trace_id
    assert len(access["span_id"]) == 16 and access["span_id"] != parent_id  # the request's own span
