"""Model-backed skills (a SKILL.md with providerConfig and no skill.py) end to end: examples/llm-manifest and
examples/critic served by real uvicorn, called over JSON-RPC (httpx) and with ``skillwire.Client``, the
model provider a stand-in on a real port (tests/llm_standin.py) reached through OLLAMA_HOST and
OPENAI_BASE_URL, as an operator would point them at Ollama or an OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, EXAMPLES, RunningServer, Served, rpc, start_process
from llm_standin import WAIT, Hang, ProviderStandIn, Reply, SlowStream, Status
from skillwire import Agent, Client, TaskState
from skillwire.errors import ManifestError, SkillwireError, ValidationError
from skillwire.server.app import A2AApplication
from skillwire.skills.loader import check_skills_folder, load_skills_folder
from skillwire.skills.model import parse_reply, repair_request, wants_json
from skillwire.types import Part

READER = EXAMPLES / "llm-manifest"
CRITIC = EXAMPLES / "critic"
PROVIDER_TEXT = "internal provider text"  # what the stand-in's error bodies say: never shown to a caller
API_KEY = "sk-from-the-environment-only"


@pytest.fixture
def standin() -> Iterator[ProviderStandIn]:
    from conftest import serve_asgi

    provider = ProviderStandIn()
    provider.url, stop = serve_asgi(provider)
    yield provider
    stop()


@pytest.fixture
def provider(standin: ProviderStandIn, monkeypatch: pytest.MonkeyPatch) -> ProviderStandIn:
    """The stand-in, named by the variables the adapters read (OLLAMA_HOST written without a scheme, as
    Ollama's users do)."""
    for name, value in provider_env(standin).items():
        monkeypatch.setenv(name, value)
    return standin


def provider_env(standin: ProviderStandIn) -> dict[str, str]:
    return {
        "OLLAMA_HOST": standin.url.removeprefix("http://"),
        "OPENAI_BASE_URL": standin.url + "/v1",
        "OPENAI_API_KEY": API_KEY,
    }


@pytest.fixture
def reader(provider: ProviderStandIn, serve: Callable[[A2AApplication], RunningServer]) -> RunningServer:
    return serve(Agent.from_folder(READER).asgi(store="memory://"))


@pytest.fixture
def critic(provider: ProviderStandIn, serve: Callable[[A2AApplication], RunningServer]) -> RunningServer:
    return serve(Agent.from_folder(CRITIC).asgi(store="memory://"))


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT, headers=A2A_V1) as client:
        yield client


def message(skill: str, content: str | dict[str, Any]) -> dict[str, Any]:
    part = {"text": content} if isinstance(content, str) else {"data": content}
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [part],
        "metadata": {"skillId": skill},
    }


async def send(
    http: httpx.AsyncClient, url: str, skill: str, content: str | dict[str, Any]
) -> dict[str, Any]:
    """A blocking SendMessage over JSON-RPC: the task it answers."""
    response = await http.post(url, json=rpc("SendMessage", {"message": message(skill, content)}))
    body = response.json()
    assert "result" in body, body
    return body["result"]["task"]  # type: ignore[no-any-return]


def status_text(task: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in task["status"].get("message", {}).get("parts", []))


def output_error(folder: Path, skill: str, value: Any) -> str:
    """The validation error the skill's outputSchema gives ``value``, as the repair round states it."""
    [card] = [s.card for s in load_skills_folder(folder) if s.id == skill]
    assert card is not None and card.output_validator is not None
    with pytest.raises(ValidationError) as caught:
        card.output_validator.validate(value)
    return f"at {caught.value.instance_path or '/'}: {caught.value.reason}"


ARTICLE = "Ada met Charles in London on 5 June 1833."
EXTRACTED = {"people": ["Ada", "Charles"], "places": ["London"], "dates": ["5 June 1833"]}


# -- loading -------------------------------------------------------------------------------------------------


def manifest(folder: Path, skill: str, frontmatter: str, body: str = "Do it: {{ text }}") -> Path:
    (folder / skill).mkdir(parents=True)
    text = f"---\nid: {skill}\nname: {skill}\ndescription: A skill.\ntags: [test]\n{frontmatter}---\n{body}\n"
    (folder / skill / "SKILL.md").write_text(text)
    return folder / skill / "SKILL.md"


def test_a_manifest_with_provider_config_and_no_code_is_a_model_backed_skill() -> None:
    skills = {skill.id: skill for skill in load_skills_folder(READER)}
    assert sorted(skills) == ["extract", "summarize"]
    assert skills["extract"].card is not None
    assert skills["extract"].card.provider_config == {
        "vendor": "ollama",
        "model": "llama3.1",
        "endpoint": "/api/chat",
        "format": "json",
    }
    assert check_skills_folder(READER).problems == []
    assert check_skills_folder(CRITIC).problems == []


def test_a_manifest_with_neither_code_nor_provider_config_keeps_its_error(tmp_path: Path) -> None:
    manifest(tmp_path, "plain", "")
    with pytest.raises(SkillwireError, match=r"no skill\.py next to SKILL\.md"):
        load_skills_folder(tmp_path)
    [problem] = check_skills_folder(tmp_path).problems
    assert "no skill.py next to the manifest" in str(problem)


@pytest.mark.parametrize(
    ("config", "path", "line"),
    [
        ("providerConfig: {vendor: nobody, model: m}\n", "providerConfig.vendor", 6),
        ("providerConfig:\n  vendor: ollama\n", "providerConfig.model", 6),
        (
            "providerConfig:\n  vendor: openai\n  model: m\n  apiKey: sk-in-the-file\n",
            "providerConfig.apiKey",
            9,
        ),
        (
            "providerConfig:\n  vendor: ollama\n  model: m\n  baseUrlEnv: not a name\n",
            "providerConfig.baseUrlEnv",
            9,
        ),
    ],
)
def test_a_provider_config_no_adapter_can_use_is_a_manifest_error_at_its_key(
    tmp_path: Path, config: str, path: str, line: int
) -> None:
    file = manifest(tmp_path, "broken", config)
    with pytest.raises(ManifestError) as caught:
        load_skills_folder(tmp_path)
    error = caught.value
    assert (error.path, error.source, error.line) == (path, str(file), line)
    assert "sk-in-the-file" not in str(error)
    # `skillwire skills check` says the same, importing no code
    [problem] = check_skills_folder(tmp_path).problems
    assert (problem.path, problem.source, problem.line, problem.reason) == (
        path,
        str(file),
        line,
        error.reason,
    )


def test_loading_a_model_backed_skill_needs_no_provider_and_no_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    manifest(tmp_path, "s", "providerConfig: {vendor: openai, model: m, apiKeyEnv: MY_KEY}\n")
    [skill] = load_skills_folder(tmp_path)  # the variable is read when the skill runs
    assert skill.source.startswith("folder:")


def test_a_skill_py_next_to_a_provider_config_is_still_the_code(tmp_path: Path) -> None:
    manifest(tmp_path, "coded", "providerConfig: {vendor: whatever}\n")
    (tmp_path / "coded" / "skill.py").write_text("async def run(params, ctx):\n    return 'code'\n")
    [skill] = load_skills_folder(tmp_path)  # providerConfig stays opaque for a code skill
    assert skill.handler.__module__.startswith("skillwire_skill_")


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (None, False),
        ({"type": "string"}, False),
        ({"type": "object"}, True),
        ({"type": "array", "items": {"type": "string"}}, True),
        ({"type": ["object", "null"]}, True),
        ({"type": ["string", "object"]}, False),
        ({"properties": {"a": {}}}, True),
        ({"enum": ["a", "b"]}, False),
    ],
)
def test_json_is_asked_for_when_the_output_schema_wants_an_object_or_array(
    schema: dict[str, Any] | None, expected: bool
) -> None:
    assert wants_json(schema) is expected


@pytest.mark.parametrize(
    "reply",
    ['{"a": 1}', '```json\n{"a": 1}\n```', '```\n{"a": 1}\n```\n', '  {"a": 1}\n'],
)
def test_a_json_reply_may_be_fenced(reply: str) -> None:
    assert parse_reply(reply, as_json=True) == {"a": 1}


def test_a_reply_that_is_not_json_says_so() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_reply("Sure! Here it is: {", as_json=True)
    assert parse_reply("```plain text```", as_json=False) == "```plain text```"


# -- running: valid output -------------------------------------------------------------------------------------


async def test_a_text_skill_renders_its_body_and_returns_the_reply(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    provider.will(Reply("Ada and Charles met in London."))
    task = await send(http, reader.rpc_url, "summarize", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    [artifact] = task["artifacts"]
    assert artifact["parts"] == [{"text": "Ada and Charles met in London."}]
    [request] = provider.requests
    assert (request.path, request.body["model"], request.body["stream"]) == ("/api/chat", "llama3.1", False)
    # no system message for text; the optional `sentences` renders as its default
    assert request.body["messages"] == [
        {
            "role": "user",
            "content": "Summarize the text below in at most 3 sentences. Reply with the summary only.\n\n"
            f"{ARTICLE}\n",
        }
    ]
    assert request.body["options"] == {"num_predict": 300, "temperature": 0.2}
    assert "format" not in request.body


async def test_the_seed_crate_manifest_runs_unchanged(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    provider.will(Reply("```json\n" + json.dumps(EXTRACTED) + "\n```"))  # a fenced reply is accepted
    task = await send(http, reader.rpc_url, "extract", {"text": ARTICLE})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["data"] == EXTRACTED
    [request] = provider.requests
    assert (request.path, request.body["model"], request.body["format"]) == ("/api/chat", "llama3.1", "json")
    system, user = request.body["messages"]
    assert system["role"] == "system" and '"required":["people","places","dates"]' in system["content"]
    assert user == {"role": "user", "content": user["content"]} and ARTICLE in user["content"]


# -- the repair round ------------------------------------------------------------------------------------------


async def test_invalid_output_is_repaired_once_with_the_validation_error(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    bad = {"people": ["Ada"], "places": "London"}
    provider.will(Reply(json.dumps(bad)), Reply(json.dumps(EXTRACTED)))
    task = await send(http, reader.rpc_url, "extract", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["data"] == EXTRACTED
    first, second = provider.requests
    error = output_error(READER, "extract", bad)
    assert second.body["messages"] == [
        *first.body["messages"],
        {"role": "assistant", "content": json.dumps(bad)},
        {"role": "user", "content": repair_request(error, as_json=True)},
    ]
    assert error in second.body["messages"][-1]["content"]
    assert second.body["format"] == "json"


async def test_a_reply_that_is_not_json_is_repaired_too(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    provider.will(Reply("Sure! People: Ada."), Reply(json.dumps(EXTRACTED)))
    task = await send(http, reader.rpc_url, "extract", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert "the reply is not JSON" in provider.requests[1].body["messages"][-1]["content"]


async def test_a_reply_still_invalid_after_the_repair_fails_the_task_with_the_reason(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    bad = {"people": ["Ada"], "places": [], "dates": [], "mood": "happy"}
    provider.will(Reply(json.dumps(bad)), Reply(json.dumps(bad)))
    task = await send(http, reader.rpc_url, "extract", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    reason = status_text(task)
    assert "even after a repair round" in reason and output_error(READER, "extract", bad) in reason
    assert "artifacts" not in task
    assert len(provider.requests) == 2  # one repair round, no more


async def test_a_text_reply_that_fails_its_schema_is_repaired(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    provider.will(Reply(""), Reply("A summary."))
    task = await send(http, reader.rpc_url, "summarize", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"] == [{"text": "A summary."}]
    last = provider.requests[1].body["messages"][-1]["content"]
    assert output_error(READER, "summarize", "") in last and "corrected text" in last


# -- streaming -------------------------------------------------------------------------------------------------


async def test_a_streaming_call_gets_the_tokens_as_artifact_chunks(
    reader: RunningServer, provider: ProviderStandIn
) -> None:
    provider.will(Reply("Ada met Charles.", chunks=["Ada", " met", " Charles", "."]))
    async with await Client.connect(reader.url, timeout=WAIT) as client:
        events = [e async for e in client.stream(ARTICLE, skill="summarize")]
        updates = [e.artifact_update for e in events if e.artifact_update is not None]
        assert [u.artifact.parts[0].text for u in updates] == ["Ada", " met", " Charles", "."]
        assert [u.append for u in updates] == [False, True, True, True]
        assert [u.last_chunk for u in updates] == [False, False, False, True]
        assert len({u.artifact.artifact_id for u in updates}) == 1
        task_id = updates[0].task_id
        task = await client.get_task(task_id)
    assert task.status.state is TaskState.COMPLETED
    [artifact] = task.artifacts  # the whole text, once: the handler returned nothing more
    assert "".join(part.text for part in artifact.parts) == "Ada met Charles."
    assert provider.requests[0].body["stream"] is True


async def test_a_streamed_text_that_fails_its_schema_is_replaced_by_the_repaired_one(
    reader: RunningServer, provider: ProviderStandIn
) -> None:
    provider.will(Reply("", chunks=[]), Reply("A summary."))  # an empty reply: minLength 1
    async with await Client.connect(reader.url, timeout=WAIT) as client:
        events = [e async for e in client.stream(ARTICLE, skill="summarize")]
        updates = [e.artifact_update for e in events if e.artifact_update is not None]
        task = await client.get_task(updates[0].task_id)
    assert [(u.artifact.parts[0].text, u.append, u.last_chunk) for u in updates] == [
        ("", False, True),
        ("A summary.", False, True),  # the same artifact, replaced whole
    ]
    assert task.status.state is TaskState.COMPLETED
    [artifact] = task.artifacts
    assert artifact.parts == [Part(text="A summary.")]
    assert [r.body["stream"] for r in provider.requests] == [True, False]
    assert "corrected text" in provider.requests[1].body["messages"][-1]["content"]


async def test_json_output_is_never_streamed_as_chunks(
    reader: RunningServer, provider: ProviderStandIn
) -> None:
    provider.will(Reply(json.dumps(EXTRACTED)))
    async with await Client.connect(reader.url, timeout=WAIT) as client:
        events = [e async for e in client.stream(ARTICLE, skill="extract")]
    [update] = [e.artifact_update for e in events if e.artifact_update is not None]
    assert update.artifact.parts[0].data == EXTRACTED and not update.append
    assert provider.requests[0].body["stream"] is False


async def test_a_blocking_call_is_not_streamed(reader: RunningServer, provider: ProviderStandIn) -> None:
    provider.will(Reply("A summary."))
    async with await Client.connect(reader.url, timeout=WAIT) as client:
        task = await client.send(ARTICLE, skill="summarize")
    assert task.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert task.artifacts[0].parts == [Part(text="A summary.")]  # type: ignore[union-attr]
    assert provider.requests[0].body["stream"] is False


async def test_cancel_mid_stream_stops_the_upstream_request(
    reader: RunningServer, provider: ProviderStandIn
) -> None:
    provider.will(SlowStream(["Once", " upon"]))
    async with await Client.connect(reader.url, timeout=WAIT) as client:
        stream = client.stream(ARTICLE, skill="summarize")
        first = await anext(stream)
        task_id = first.task.id if first.task is not None else ""
        assert task_id, first
        assert await asyncio.to_thread(provider.stalled.wait, WAIT)
        canceled = await client.cancel_task(task_id)
        assert canceled.status.state is TaskState.CANCELED
        rest = [e async for e in stream]
        assert await asyncio.to_thread(provider.disconnected.wait, WAIT)
        task = await client.get_task(task_id)
    assert task.status.state is TaskState.CANCELED
    chunks = [e.artifact_update.artifact.parts[0].text for e in [first, *rest] if e.artifact_update]
    assert chunks == chunks[:1]  # a chunk is sent when the next arrives: "Once" at most, before the cancel


# -- deadlines and provider errors --------------------------------------------------------------------------


async def test_timeout_seconds_bounds_the_call(
    tmp_path: Path, provider: ProviderStandIn, serve: Callable[[A2AApplication], RunningServer]
) -> None:
    manifest(
        tmp_path,
        "slow",
        "executionHints: {timeoutSeconds: 0.5}\nproviderConfig: {vendor: ollama, model: m}\n",
    )
    srv = serve(Agent.from_folder(tmp_path).asgi(store="memory://"))
    provider.will(Hang())
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        task = await client.send("now")
    assert task.status.state is TaskState.FAILED  # type: ignore[union-attr]
    assert "0.5 seconds" in task.status.message.text()  # type: ignore[union-attr]
    assert await asyncio.to_thread(provider.disconnected.wait, WAIT)


async def test_a_429_is_retried_after_its_retry_after(
    reader: RunningServer, provider: ProviderStandIn, http: httpx.AsyncClient
) -> None:
    provider.will(Status(429, headers={"Retry-After": "0"}), Reply("A summary."))
    task = await send(http, reader.rpc_url, "summarize", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert len(provider.requests) == 2


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (
            Status(429, headers={"Retry-After": "120"}),
            "is rate limiting requests (it asks to retry after 120",
        ),
        (Status(500), "answered badly: it failed (HTTP 500)"),
        (Status(401), "refused the request (HTTP 401)"),
    ],
)
async def test_a_provider_error_fails_the_task_without_its_text(
    reader: RunningServer,
    provider: ProviderStandIn,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    behaviour: Status,
    reason: str,
) -> None:
    provider.will(behaviour)
    with caplog.at_level(logging.WARNING, logger="skillwire"):
        task = await send(http, reader.rpc_url, "summarize", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    assert f"The model provider (ollama) {reason}" in status_text(task)
    assert PROVIDER_TEXT not in json.dumps(task)
    [logged] = [r for r in caplog.records if PROVIDER_TEXT in r.getMessage()]
    assert logged.levelno == logging.WARNING and logged.name.startswith("skillwire")


async def test_a_provider_that_is_down_fails_the_task_and_the_log_names_the_url(
    reader: RunningServer,
    http: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from conftest import free_port

    port = free_port()
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="skillwire"):
        task = await send(http, reader.rpc_url, "summarize", ARTICLE)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    assert status_text(task) == "The model provider (ollama) could not be reached."
    assert f"127.0.0.1:{port}" not in json.dumps(task)  # the caller is not told where
    [logged] = [r.getMessage() for r in caplog.records if "ProviderUnavailable" in r.getMessage()]
    assert f"URL http://127.0.0.1:{port}/api/chat;" in logged  # the operator is


async def test_a_variable_the_config_names_but_is_unset_fails_without_naming_it(
    tmp_path: Path,
    provider: ProviderStandIn,
    serve: Callable[[A2AApplication], RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("READER_KEY", raising=False)
    manifest(tmp_path, "s", "providerConfig: {vendor: openai, model: m, apiKeyEnv: READER_KEY}\n")
    srv = serve(Agent.from_folder(tmp_path).asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        task = await client.send("now")
    assert task.status.state is TaskState.FAILED  # type: ignore[union-attr]
    assert "not configured correctly" in task.status.message.text()  # type: ignore[union-attr]
    assert "READER_KEY" not in task.status.message.text()  # type: ignore[union-attr]
    assert provider.requests == []


# -- the CLI path ----------------------------------------------------------------------------------------------


def test_skillwire_serve_runs_the_manifest_only_agent(
    standin: ProviderStandIn, tmp_path: Path, processes: list[Served]
) -> None:
    folder = tmp_path / "reader"
    shutil.copytree(READER, folder)  # the folder as an operator has it: SKILL.md files only
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["SKILL.md", "SKILL.md", "agent.yaml"]
    env = {**os.environ, **provider_env(standin)}
    served = start_process(str(folder), "memory://", tmp_path, env=env)
    processes.append(served)
    standin.will(Reply(json.dumps(EXTRACTED)))
    answer = served.call("SendMessage", {"message": message("extract", ARTICLE)})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer
    assert task["artifacts"][0]["parts"][0]["data"] == EXTRACTED
    assert standin.requests[0].body["format"] == "json"


# -- examples/critic -------------------------------------------------------------------------------------------

VERDICT = {"verdict": "revise", "score": 0.6, "reasons": ["The second claim has no source."]}


async def test_the_critic_returns_a_structured_verdict(
    critic: RunningServer, provider: ProviderStandIn
) -> None:
    provider.will(Reply(json.dumps(VERDICT)))
    async with await Client.connect(critic.url, timeout=WAIT) as client:
        task = await client.send(
            skill="review", data={"artifact": "The Moon is made of cheese.", "criteria": "factual accuracy"}
        )
    assert task.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert task.artifacts[0].parts[0].data == VERDICT  # type: ignore[union-attr]
    [request] = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"  # from OPENAI_API_KEY, never the manifest
    assert request.body["response_format"] == {"type": "json_object"}
    assert (request.body["model"], request.body["max_tokens"], request.body["temperature"]) == (
        "gpt-4o-mini",
        500,
        0,
    )
    prompt = request.body["messages"][-1]["content"]
    assert "against these criteria: factual accuracy." in prompt and "made of cheese" in prompt


async def test_the_critic_repairs_a_verdict_out_of_range(
    critic: RunningServer, provider: ProviderStandIn
) -> None:
    bad = {**VERDICT, "score": 6}
    provider.will(Reply(json.dumps(bad)), Reply(json.dumps(VERDICT)))
    async with await Client.connect(critic.url, timeout=WAIT) as client:
        task = await client.send("Text to review.", skill="review")  # text fills `artifact`
    assert task.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert task.artifacts[0].parts[0].data == VERDICT  # type: ignore[union-attr]
    first, second = provider.requests
    assert "criteria: correctness, clarity and completeness." in first.body["messages"][-1]["content"]
    assert output_error(CRITIC, "review", bad) in second.body["messages"][-1]["content"]
    assert second.body["messages"][-2] == {"role": "assistant", "content": json.dumps(bad)}


async def test_the_critic_fails_a_verdict_that_stays_invalid(
    critic: RunningServer, provider: ProviderStandIn
) -> None:
    bad = {"verdict": "maybe", "score": 0.5, "reasons": ["unsure"]}
    provider.will(Reply(json.dumps(bad)), Reply(json.dumps(bad)))
    async with await Client.connect(critic.url, timeout=WAIT) as client:
        task = await client.send("Text to review.", skill="review")
    assert task.status.state is TaskState.FAILED  # type: ignore[union-attr]
    assert output_error(CRITIC, "review", bad) in task.status.message.text()  # type: ignore[union-attr]


async def test_a_provider_echoing_the_key_does_not_put_it_in_the_log(
    critic: RunningServer, provider: ProviderStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    echoed = (
        f'{{"error": {{"message": "Incorrect API key provided: {API_KEY}", "sent": "Bearer {API_KEY}"}}}}'
    )
    provider.will(Status(401, body=echoed))
    with caplog.at_level(logging.WARNING, logger="skillwire"):
        async with await Client.connect(critic.url, timeout=WAIT) as client:
            task = await client.send("Text to review.", skill="review")
    assert task.status.state is TaskState.FAILED  # type: ignore[union-attr]
    [logged] = [r.getMessage() for r in caplog.records if "Incorrect API key provided" in r.getMessage()]
    assert API_KEY not in logged and API_KEY[:12] not in logged
    assert "Incorrect API key provided: [redacted]" in logged
