"""A caller cannot forge or flood the server's log lines (docs/security.md): real ``skillwire serve``
processes, text and JSON logs, sent ids with line breaks, terminal escapes and a 1 MiB id."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from conftest import Served, rpc, start_process, user_message
from skillwire.server.observability.logs import MAX_MESSAGE, JsonFormatter, TextFormatter, printable

ROOT = Path(__file__).parents[1]
V1 = {"A2A-Version": "1.0"}
FORGED = (
    "FORGED-LINE INFO skillwire.access: JSONRPC SendMessage caller=apiKey:admin skill=purge COMPLETED 0.1 ms"
)
HOSTILE_IDS = [
    f"greet\n{FORGED}",
    f"greet\r{FORGED}",
    "greet\x1b[2J\x1b[31mred\x1b[0m",
    "greet\u202egnp.exe",
    "s" * (1 << 20),
]
#: The longest line a record may make: a message at its limit, and the level and logger before it.
LONGEST = MAX_MESSAGE + 200


def attack(served: Served) -> None:
    """Send every hostile id as a skill id and as a task id, then a marker, whose line ends the attack."""
    with httpx.Client(base_url=served.url, headers=V1, timeout=30) as http:
        for hostile in HOSTILE_IDS:
            message = user_message("hi", metadata={"skillId": hostile})
            http.post("/", json=rpc("SendMessage", {"message": message}))
            http.post("/", json=rpc("GetTask", {"id": hostile}))
            http.get("/tasks/" + quote(hostile[:2000], safe=""))
        http.post("/", json=rpc("GetTask", {"id": "marker-end"}))
    served.wait_for_output("marker-end")


@pytest.mark.slow
def test_text_logs_keep_one_line_per_record(processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", ROOT)
    processes.append(served)
    attack(served)
    lines = list(served.lines)
    assert not [line for line in lines if line.startswith("FORGED-LINE")]
    assert not [line for line in lines if "\x1b" in line or "\u202e" in line]
    assert max(len(line) for line in lines) <= LONGEST
    access = [line for line in lines if line.startswith("INFO skillwire.access:")]
    assert any("skill=greet?FORGED-LINE" in line for line in access), access
    assert all(len(line) < 600 for line in access)  # each field is cut at 100 characters


@pytest.mark.slow
def test_json_logs_keep_one_line_per_record(processes: list[Served]) -> None:
    served = start_process("examples/greeter", "memory://", ROOT, "--log-format", "json")
    processes.append(served)
    attack(served)
    records = [json.loads(line) for line in served.lines if line.startswith("{")]
    raw = "".join(served.lines)
    assert "\\u001b" not in raw and "\x1b" not in raw and "\u202e" not in raw
    assert max(len(line) for line in served.lines) <= 2 * LONGEST
    for record in records:
        for value in record.values():
            if isinstance(value, str):
                assert value.isprintable(), record
    access = [r for r in records if r["logger"] == "skillwire.access"]
    assert any(r.get("skill_id", "").startswith("greet?FORGED-LINE") for r in access), access


# -- the formatters, on records a caller's value reaches -----------------------------------------------------


def record(msg: str, *args: Any, exc: BaseException | None = None, **extra: Any) -> logging.LogRecord:
    made = logging.makeLogRecord({"name": "skillwire.test", "levelname": "WARNING", "msg": msg, "args": args})
    if exc is not None:
        made.exc_info = (type(exc), exc, None)
    made.__dict__.update(extra)
    return made


def test_each_argument_is_cut_and_the_message_made_printable() -> None:
    text = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        record("task %s: %s", "t" * 100_000, f"bad\n{FORGED}")
    )
    assert "\n" not in text and "\\nFORGED-LINE" in text
    assert len(text) < 2_200  # 1,024 of the id, the rest of the line


def test_a_traceback_is_indented_so_no_line_of_it_passes_for_a_record() -> None:
    try:
        raise ValueError(f"caller said\n{FORGED}\x1b[31m")
    except ValueError as exc:
        text = TextFormatter("%(levelname)s %(name)s: %(message)s").format(record("failed", exc=exc))
    first, *rest = text.split("\n")
    assert first == "WARNING skillwire.test: failed"
    assert rest and all(line.startswith("  ") for line in rest)
    assert "\x1b" not in text


def test_json_fields_are_printable_and_cut() -> None:
    line = JsonFormatter().format(record("skill %s", "x\x1b" * 10, skill_id="s" * 5000, count=3))
    parsed = json.loads(line)
    assert parsed["message"] == "skill " + "x\\x1b" * 10
    assert len(parsed["skill_id"]) < 1100 and parsed["count"] == 3


def test_printable_keeps_what_is_already_printable() -> None:
    assert printable("plain id-123") == "plain id-123"
    assert printable("é ü 漢字") == "é ü 漢字"
    assert printable("a\tb") == "a\\tb"
