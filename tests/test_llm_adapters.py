"""The model adapters (skillwire.llm) against a provider stand-in on a real port (tests/llm_standin.py), and
the stand-in against the official ``openai`` client, which proves it speaks the real format."""

from __future__ import annotations

import asyncio
import contextlib
import doctest
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import skillwire.llm
from conftest import serve_asgi
from llm_standin import WAIT, Hang, ProviderStandIn, Raw, RawStream, Reply, SlowStream, Status
from serving import bound_socket
from skillwire.errors import SkillwireError
from skillwire.llm import (
    Adapter,
    AdapterRegistry,
    GenerationParams,
    HTTPAdapter,
    OllamaAdapter,
    OpenAIAdapter,
    ProviderBadReply,
    ProviderConfigError,
    ProviderError,
    ProviderRateLimited,
    ProviderRefused,
    ProviderReplyTooLarge,
    ProviderTimeout,
    ProviderUnavailable,
    adapter_for,
    default_registry,
    register_adapter,
)
from skillwire.llm._http import retry_after
from skillwire.llm._ollama import ollama_host

VENDORS = ["openai", "ollama"]
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def standin() -> Iterator[ProviderStandIn]:
    provider = ProviderStandIn()
    provider.url, stop = serve_asgi(provider)
    yield provider
    stop()


def env_for(vendor: str, url: str) -> dict[str, str]:
    """The variables that point ``vendor``'s adapter at ``url``: OPENAI_BASE_URL, or OLLAMA_HOST written as
    Ollama's users do (no scheme)."""
    if vendor == "openai":
        return {"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "sk-from-the-environment"}
    return {"OLLAMA_HOST": url.removeprefix("http://")}


def adapter(vendor: str, standin: ProviderStandIn, **config: Any) -> Adapter:
    options = {"max_reply_bytes": config.pop("max_reply_bytes")} if "max_reply_bytes" in config else {}
    return adapter_for(
        {"vendor": vendor, "model": "m1", **config}, env=env_for(vendor, standin.url), **options
    )


async def gone(standin: ProviderStandIn) -> bool:
    """Whether the stand-in saw its client close the connection (within the cap)."""
    return await asyncio.to_thread(standin.disconnected.wait, WAIT)


# -- valid replies -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_valid_reply_is_its_text(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Reply("Hello there."))
    assert await adapter(vendor, standin).complete(HELLO) == "Hello there."
    [request] = standin.requests
    assert request.method == "POST"
    assert request.path == ("/v1/chat/completions" if vendor == "openai" else "/api/chat")
    assert request.body["model"] == "m1"
    assert request.body["messages"] == HELLO
    assert request.body.get("stream", False) is False  # Ollama is told explicitly: it streams by default


@pytest.mark.parametrize("vendor", VENDORS)
async def test_json_mode_asks_the_provider_for_json(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Reply('{"greeting": "hi"}'))
    assert await adapter(vendor, standin).complete(HELLO, json=True) == '{"greeting": "hi"}'
    body = standin.requests[0].body
    if vendor == "openai":
        assert body["response_format"] == {"type": "json_object"}
    else:
        assert body["format"] == "json"


async def test_the_seed_crate_manifest_runs_as_written(standin: ProviderStandIn) -> None:
    config = {"vendor": "ollama", "model": "llama3.1", "endpoint": "/api/chat", "format": "json"}
    standin.will(Reply('{"ok": true}'))
    reply = await adapter_for(config, env=env_for("ollama", standin.url)).complete(HELLO)
    assert reply == '{"ok": true}'
    [request] = standin.requests
    assert (request.path, request.body["model"], request.body["format"]) == ("/api/chat", "llama3.1", "json")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_execution_hints_map_to_the_provider_parameters(vendor: str, standin: ProviderStandIn) -> None:
    params = GenerationParams.from_hints(
        {"maxTokens": 64, "temperature": 0.3, "topP": 0.9, "retryable": True}
    )
    standin.will(Reply())
    await adapter(vendor, standin).complete(HELLO, params)
    body = standin.requests[0].body
    if vendor == "openai":
        assert (body["max_tokens"], body["temperature"], body["top_p"]) == (64, 0.3, 0.9)
    else:
        assert body["options"] == {"num_predict": 64, "temperature": 0.3, "top_p": 0.9}


async def test_hints_not_given_are_not_sent(standin: ProviderStandIn) -> None:
    standin.will(Reply(), Reply())
    await adapter("openai", standin).complete(HELLO)
    await adapter("ollama", standin).complete(HELLO)
    openai_body, ollama_body = (r.body for r in standin.requests)
    assert set(openai_body) == {"model", "messages"}
    assert set(ollama_body) == {"model", "messages", "stream"}


async def test_ollama_options_from_the_manifest_sit_under_the_hints(standin: ProviderStandIn) -> None:
    standin.will(Reply())
    await adapter("ollama", standin, options={"num_ctx": 8192, "temperature": 1.0}).complete(
        HELLO, GenerationParams(temperature=0.1)
    )
    assert standin.requests[0].body["options"] == {"num_ctx": 8192, "temperature": 0.1}


def test_params_come_from_a_skill_cards_hints_too() -> None:
    from skillwire.skills.manifest import ExecutionHints

    hints = ExecutionHints(max_tokens=10, temperature=0.5, top_p=0.8, timeout_seconds=3.0, retryable=False)
    assert GenerationParams.from_hints(hints) == GenerationParams(
        max_tokens=10, temperature=0.5, top_p=0.8, timeout_seconds=3.0
    )
    assert GenerationParams.from_hints(None) == GenerationParams()


# -- streaming ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_streamed_chunks_arrive_in_order(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Reply("Hello, streaming world", chunks=["Hello", ", ", "streaming", " world"]))
    async with asyncio.timeout(WAIT):
        chunks = [chunk async for chunk in adapter(vendor, standin).stream(HELLO, json=True)]
    assert chunks == ["Hello", ", ", "streaming", " world"]
    body = standin.requests[0].body
    assert body["stream"] is True
    assert body.get("response_format", body.get("format")) in ({"type": "json_object"}, "json")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stream_that_ends_before_its_end_marker_is_a_bad_reply(
    vendor: str, standin: ProviderStandIn
) -> None:
    line = (
        b'data: {"choices": [{"delta": {"content": "Hel"}}]}'
        if vendor == "openai"
        else b'{"message": {"content": "Hel"}, "done": false}'
    )
    standin.will(RawStream([line + b"\n"]))
    chunks: list[str] = []
    with pytest.raises(ProviderBadReply, match="ended before the reply was complete"):
        async for chunk in adapter(vendor, standin).stream(HELLO):
            chunks.append(chunk)
    assert chunks == ["Hel"]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_lines_split_across_chunks_and_crlf_endings_are_read(
    vendor: str, standin: ProviderStandIn
) -> None:
    if vendor == "openai":
        lines = [
            b'data: {"choices": [{"delta": {"content": "h\xc3\xa9"}, "finish_reason": null}]}',
            b"",
            b"data: [DONE]",
        ]
    else:
        lines = [b'{"message": {"content": "h\xc3\xa9"}, "done": false}', b'{"done": true}']
    wire = b"\r\n".join(lines) + b"\r\n"
    # cut inside the two-byte UTF-8 sequence of the e-acute, and byte by byte near the end
    cut = wire.index(b"\xc3") + 1
    standin.will(RawStream([wire[:4], wire[4:cut], wire[cut:-3], *(bytes([b]) for b in wire[-3:])]))
    assert [c async for c in adapter(vendor, standin).stream(HELLO)] == ["h\u00e9"]


@pytest.mark.parametrize(
    ("vendor", "line"),
    [
        ("openai", b"data: {not json"),
        ("openai", b'data: {"choices": [{"delta": {"content": 42}}]}'),
        ("openai", b'data: {"error": {"message": "internal provider text"}}'),
        ("ollama", b"<html>internal provider text</html>"),
        ("ollama", b'{"message": {"content": ["a"]}, "done": false}'),
        ("ollama", b'{"error": "internal provider text"}'),
        ("ollama", b"\xff\xfe not utf-8"),
    ],
)
async def test_nonsense_in_a_stream_is_a_bad_reply(
    vendor: str, line: bytes, standin: ProviderStandIn
) -> None:
    standin.will(RawStream([line + b"\n"]))
    with pytest.raises(ProviderBadReply) as caught:
        async for _ in adapter(vendor, standin).stream(HELLO):
            pass
    assert "internal provider text" not in str(caught.value)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_cancel_mid_stream_closes_the_upstream_connection(
    vendor: str, standin: ProviderStandIn
) -> None:
    standin.will(SlowStream(["one ", "two "]))
    seen: list[str] = []
    both = asyncio.Event()

    async def consume() -> None:
        async for chunk in adapter(vendor, standin).stream(HELLO):
            seen.append(chunk)
            if len(seen) == 2:
                both.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(WAIT):
        await both.wait()
    assert not standin.disconnected.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(standin)
    assert seen == ["one ", "two "]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stream_left_early_and_closed_closes_the_upstream_connection(
    vendor: str, standin: ProviderStandIn
) -> None:
    standin.will(SlowStream(["one ", "two "]))
    async with contextlib.aclosing(adapter(vendor, standin).stream(HELLO)) as chunks:
        async for chunk in chunks:
            assert chunk == "one "
            break
    assert await gone(standin)


# -- failures ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_cancelling_a_waiting_call_closes_the_upstream_connection(
    vendor: str, standin: ProviderStandIn
) -> None:
    standin.will(Hang())
    task = asyncio.create_task(adapter(vendor, standin).complete(HELLO))
    await asyncio.to_thread(standin.wait_for_requests, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(standin)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_provider_slower_than_the_timeout_is_a_timeout(
    vendor: str, streaming: bool, standin: ProviderStandIn
) -> None:
    standin.will(SlowStream(["partial "]) if streaming else Hang())
    params = GenerationParams(timeout_seconds=0.3)
    with pytest.raises(ProviderTimeout, match=r"did not answer within 0\.3 seconds") as caught:
        if streaming:
            async for _ in adapter(vendor, standin).stream(HELLO, params):
                pass
        else:
            await adapter(vendor, standin).complete(HELLO, params)
    assert caught.value.timeout == 0.3
    assert await gone(standin)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_429_is_retried_after_its_retry_after(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Status(429, headers={"Retry-After": "0"}), Reply("at last"))
    reply = await adapter(vendor, standin).complete(HELLO, GenerationParams(timeout_seconds=WAIT))
    assert reply == "at last"
    first, second = standin.requests
    assert first.body == second.body


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_429_is_retried_for_a_stream_too(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Status(429, headers={"Retry-After": "0"}), Reply("ab", chunks=["a", "b"]))
    assert [c async for c in adapter(vendor, standin).stream(HELLO)] == ["a", "b"]
    assert len(standin.requests) == 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_429_whose_retry_after_exceeds_the_timeout_is_rate_limited(
    vendor: str, standin: ProviderStandIn
) -> None:
    standin.will(Status(429, body="internal provider text", headers={"Retry-After": "60"}))
    with pytest.raises(ProviderRateLimited, match="retry after 60 seconds") as caught:
        await adapter(vendor, standin).complete(HELLO, GenerationParams(timeout_seconds=5))
    assert caught.value.retry_after == 60.0
    assert caught.value.status == 429
    assert "internal provider text" not in str(caught.value)
    assert caught.value.detail == "internal provider text"
    assert len(standin.requests) == 1  # it did not wait to be refused again


async def test_a_provider_that_keeps_answering_429_is_rate_limited(standin: ProviderStandIn) -> None:
    standin.will(*[Status(429, headers={"Retry-After": "0"})] * (skillwire.llm.RATE_LIMIT_RETRIES + 1))
    with pytest.raises(ProviderRateLimited):
        await adapter("openai", standin).complete(HELLO)
    assert len(standin.requests) == skillwire.llm.RATE_LIMIT_RETRIES + 1


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_500_is_a_bad_reply_that_does_not_leak_the_provider_text(
    vendor: str, standin: ProviderStandIn
) -> None:
    standin.will(Status(500))
    with pytest.raises(ProviderBadReply, match=r"HTTP 500") as caught:
        await adapter(vendor, standin).complete(HELLO)
    assert caught.value.status == 500
    assert "internal provider text" not in str(caught.value)
    assert "internal provider text" in (caught.value.detail or "")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_4xx_is_a_refusal(vendor: str, standin: ProviderStandIn) -> None:
    standin.will(Status(401))
    with pytest.raises(ProviderRefused, match=r"refused the request \(HTTP 401\)") as caught:
        await adapter(vendor, standin).complete(HELLO)
    assert "internal provider text" not in str(caught.value)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_refused_connection_is_unavailable(vendor: str, streaming: bool) -> None:
    with bound_socket() as closed:  # bound, never listening: a connection to it is refused
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        provider = adapter_for({"vendor": vendor, "model": "m1"}, env=env_for(vendor, url))
        with pytest.raises(ProviderUnavailable, match="could not be reached"):
            if streaming:
                async for _ in provider.stream(HELLO):
                    pass
            else:
                await provider.complete(HELLO)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    "body",
    [
        b"<html>internal provider text</html>",
        b"[1, 2, 3]",
        b'{"choices": "internal provider text"}',
        b'{"choices": [], "message": null}',
        b'{"choices": [{"message": {"content": null}}], "message": {"content": 7}}',
        b'{"error": "internal provider text"}',
        b"[" * 100_000,
    ],
)
async def test_nonsense_json_is_a_bad_reply(vendor: str, body: bytes, standin: ProviderStandIn) -> None:
    standin.will(Raw(body))
    with pytest.raises(ProviderBadReply, match=f"the reply is not a {vendor} chat reply") as caught:
        await adapter(vendor, standin).complete(HELLO)
    assert "internal provider text" not in str(caught.value)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_over_the_size_budget_is_too_large(
    vendor: str, streaming: bool, standin: ProviderStandIn
) -> None:
    standin.will(Reply("x" * 5000, chunks=["x" * 1000] * 5))
    provider = adapter(vendor, standin, max_reply_bytes=4000)
    with pytest.raises(ProviderReplyTooLarge, match="over 4000 bytes"):
        if streaming:
            async for _ in provider.stream(HELLO):
                pass
        else:
            await provider.complete(HELLO)


def test_provider_errors_are_one_tree() -> None:
    for cls in (
        ProviderConfigError,
        ProviderUnavailable,
        ProviderTimeout,
        ProviderRateLimited,
        ProviderRefused,
    ):
        assert issubclass(cls, ProviderError)
    assert issubclass(ProviderReplyTooLarge, ProviderBadReply)
    assert issubclass(ProviderError, SkillwireError)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("0", 0.0), ("1", 1.0), ("2.5", 2.5), ("-3", 0.0), ("nan", None), ("soon", None), (None, None)],
)
def test_retry_after_is_read_as_seconds(header: str | None, seconds: float | None) -> None:
    assert retry_after(header) == seconds


def test_retry_after_may_be_an_http_date() -> None:
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: at once
    assert (retry_after("Fri, 01 Jan 2100 00:00:00 GMT") or 0) > 1e9


# -- where requests go, and credentials ------------------------------------------------------------------


async def test_the_key_comes_from_openai_api_key_by_default(standin: ProviderStandIn) -> None:
    standin.will(Reply())
    await adapter("openai", standin).complete(HELLO)
    assert standin.requests[0].headers["authorization"] == "Bearer sk-from-the-environment"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_key_comes_from_the_variable_the_config_names(
    vendor: str, standin: ProviderStandIn
) -> None:
    env = env_for(vendor, standin.url) | {"TEAM_LLM_KEY": "sk-team-key"}
    standin.will(Reply())
    provider = adapter_for({"vendor": vendor, "model": "m1", "apiKeyEnv": "TEAM_LLM_KEY"}, env=env)
    await provider.complete(HELLO)
    assert standin.requests[0].headers["authorization"] == "Bearer sk-team-key"


async def test_no_key_in_the_environment_sends_no_authorization(standin: ProviderStandIn) -> None:
    standin.will(Reply(), Reply())
    await adapter_for({"vendor": "openai", "model": "m1", "baseUrl": standin.url + "/v1"}, env={}).complete(
        HELLO
    )
    await adapter("ollama", standin).complete(HELLO)
    assert all("authorization" not in r.headers for r in standin.requests)


async def test_a_named_variable_that_is_unset_is_a_config_error() -> None:
    provider = adapter_for({"vendor": "openai", "model": "m1", "apiKeyEnv": "MISSING_KEY"}, env={})
    with pytest.raises(ProviderConfigError, match="MISSING_KEY is not set") as caught:
        await provider.complete(HELLO)
    assert caught.value.key == "apiKeyEnv"


async def test_the_base_url_variable_may_be_named_and_base_url_wins(standin: ProviderStandIn) -> None:
    standin.will(Reply(), Reply())
    env = {"MY_BASE": standin.url + "/proxy/v1", "OPENAI_BASE_URL": "http://127.0.0.1:9/nowhere"}
    await adapter_for({"vendor": "openai", "model": "m1", "baseUrlEnv": "MY_BASE"}, env=env).complete(HELLO)
    config = {"vendor": "openai", "model": "m1", "baseUrl": standin.url + "/direct/v1"}
    await adapter_for(config, env=env).complete(HELLO)
    assert [r.path for r in standin.requests] == ["/proxy/v1/chat/completions", "/direct/v1/chat/completions"]


async def test_the_endpoint_overrides_the_path(standin: ProviderStandIn) -> None:
    standin.will(Reply("custom"))
    assert await adapter("ollama", standin, endpoint="/custom/chat").complete(HELLO) == "custom"
    assert standin.requests[0].path == "/custom/chat"


@pytest.mark.parametrize(
    "config",
    [
        {"apiKey": "sk-secret-in-manifest"},
        {"api_key": "sk-secret-in-manifest"},
        {"token": "sk-secret-in-manifest"},
        {"password": "sk-secret-in-manifest"},
        {"clientSecret": "sk-secret-in-manifest"},
        {"headers": {"Authorization": "Bearer sk-secret-in-manifest"}},
        {"baseUrl": "https://user:sk-secret-in-manifest@api.example.com/v1"},
        {"baseUrl": "https://api.example.com/v1?api_key=sk-secret-in-manifest"},
        {"apiKeyEnv": "sk-secret-in-manifest"},  # the key pasted where a variable's name belongs
    ],
)
@pytest.mark.parametrize("vendor", VENDORS)
def test_credentials_in_the_provider_config_are_refused(vendor: str, config: dict[str, Any]) -> None:
    with pytest.raises(
        ProviderConfigError, match=r"credentials never come from the manifest|environment"
    ) as caught:
        adapter_for({"vendor": vendor, "model": "m1", **config})
    assert "sk-secret-in-manifest" not in str(caught.value)


def test_keys_that_name_variables_or_parameters_are_not_credentials() -> None:
    config = {"vendor": "openai", "model": "m1", "apiKeyEnv": "K", "baseUrlEnv": "B", "maxTokens": 5}
    assert isinstance(adapter_for(config, env={}), OpenAIAdapter)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model": "m1"}, "vendor"),
        ({"vendor": "nobody", "model": "m1"}, "vendor"),
        ({"vendor": "openai"}, "model"),
        ({"vendor": "ollama", "model": ""}, "model"),
        ({"vendor": "ollama", "model": "m1", "endpoint": "http://elsewhere/api/chat"}, "endpoint"),
        ({"vendor": "openai", "model": "m1", "baseUrl": "ftp://host/v1"}, "baseUrl"),
        ({"vendor": "ollama", "model": "m1", "options": [1]}, "options"),
    ],
)
def test_a_provider_config_the_adapter_cannot_use_is_a_config_error(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        adapter_for(config)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"providerConfig.{key}")


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("127.0.0.1:11434", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("ollama.internal:8080", "http://ollama.internal:8080"),
        ("http://ollama.internal", "http://ollama.internal:80"),
        ("https://ollama.example/base", "https://ollama.example:443/base"),
        ("[::1]:11434", "http://[::1]:11434"),
        ("", "http://127.0.0.1:11434"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(value: str, url: str) -> None:
    assert ollama_host(value) == url


def test_vendor_names_ignore_case() -> None:
    assert isinstance(adapter_for({"vendor": "Ollama", "model": "m1"}), OllamaAdapter)


# -- your own adapter ------------------------------------------------------------------------------------


async def test_a_registered_adapter_serves_its_vendor() -> None:
    class Echo(Adapter):
        async def complete(
            self, messages: Any, params: GenerationParams | None = None, *, json: bool = False
        ) -> str:
            return f"{self.config['model']}: {messages[-1]['content']}"

    register_adapter("echo-test", Echo)
    try:
        provider = adapter_for({"vendor": "echo-test", "model": "parrot"})
        assert await provider.complete(HELLO) == "parrot: Say hello."
        assert [chunk async for chunk in provider.stream(HELLO)] == ["parrot: Say hello."]
        with pytest.raises(ValueError, match="already registered"):
            register_adapter("echo-test", Echo)
        with pytest.raises(ProviderConfigError, match="credentials"):
            adapter_for({"vendor": "echo-test", "token": "t"})
    finally:
        default_registry.unregister("echo-test")
    assert "echo-test" not in default_registry.vendors()


async def test_an_http_adapter_for_another_api_is_three_hooks(standin: ProviderStandIn) -> None:
    class Shouty(HTTPAdapter):
        """An API that takes a prompt and answers {"text": ...}, here the stand-in's Ollama route."""

        default_base_url_env = "SHOUTY_URL"
        default_endpoint = "/api/chat"

        def request_body(
            self, messages: list[dict[str, str]], params: GenerationParams, *, json: bool, stream: bool
        ) -> dict[str, Any]:
            return {"model": self.model, "messages": messages, "stream": stream}

        def reply_text(self, reply: Any) -> str:
            return str(reply["message"]["content"]).upper()

        def stream_text(self, line: str) -> tuple[str, bool]:
            chunk = self.decode_json(line)
            return chunk["message"]["content"].upper(), chunk["done"]

    registry = AdapterRegistry({"shouty": Shouty})
    provider = registry.adapter_for({"vendor": "shouty", "model": "m1"}, env={"SHOUTY_URL": standin.url})
    standin.will(Reply("hi"), Reply("ab", chunks=["a", "b"]))
    assert await provider.complete(HELLO) == "HI"
    assert [c async for c in provider.stream(HELLO)] == ["A", "B"]
    assert "shouty" not in default_registry.vendors()


def test_the_docstring_examples_run() -> None:
    from skillwire.llm import _adapter, _http, _ollama

    for module in (skillwire.llm, _adapter, _http, _ollama):
        failed, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert tried and not failed, module.__name__


def test_the_core_never_imports_the_adapters() -> None:
    code = (
        "import sys\n"
        "import skillwire, skillwire.agent, skillwire.skills, skillwire.server.app, skillwire.cli.main\n"
        "skillwire.Agent('a', 'b')\n"
        "assert not [m for m in sys.modules if m.startswith('skillwire.llm')], sorted(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# -- the stand-in speaks the real format: the official openai client -------------------------------------


async def test_the_openai_client_reads_the_standin_chat_completion(standin: ProviderStandIn) -> None:
    import openai  # the test extra has it: a missing client is a failure, not a skip

    standin.will(Reply("Hello from the stand-in."))
    async with openai.AsyncOpenAI(base_url=standin.url + "/v1", api_key="sk-client", max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="m1", messages=[{"role": "user", "content": "hi"}], max_tokens=5, temperature=0.5
        )
    assert completion.choices[0].message.content == "Hello from the stand-in."
    assert completion.choices[0].finish_reason == "stop"
    [request] = standin.requests
    assert request.headers["authorization"] == "Bearer sk-client"
    assert (request.body["max_tokens"], request.body["temperature"]) == (5, 0.5)


async def test_the_openai_client_reads_the_standin_stream(standin: ProviderStandIn) -> None:
    import openai  # the test extra has it: a missing client is a failure, not a skip

    standin.will(Reply("Hello world", chunks=["Hello", " world"]))
    async with openai.AsyncOpenAI(base_url=standin.url + "/v1", api_key="sk-client", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="m1", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello world"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert standin.requests[0].body["stream"] is True


@pytest.mark.parametrize(
    "said",
    [
        "your key {key} is not valid",
        '{{"error": "bad Authorization header: Bearer {key}"}}',
        "api_key={key}&model=m1",
        "token: tok_live_0123456789",
        "Incorrect API key provided: sk-proj-0123456789abcdef",
    ],
)
async def test_the_providers_text_keeps_no_credential(standin: ProviderStandIn, said: str) -> None:
    key = env_for("openai", standin.url)["OPENAI_API_KEY"]
    standin.will(Status(401, body=said.format(key=key)))
    with pytest.raises(ProviderRefused) as caught:
        await adapter("openai", standin).complete(HELLO)
    detail = caught.value.detail or ""
    assert key not in detail and "0123456789" not in detail
    assert "[redacted]" in detail
