"""Every outbound read holds at most its budget, whatever the other side sends (docs/security.md): real gzip
bombs (256 MiB of zeros in 256 KiB of gzip) served on 127.0.0.1 to the model adapters, the JWKS and OpenID
discovery fetches, the client (card, unary answers, streams) and the push deliverer reading a webhook's
answer. Memory is measured with tracemalloc around each read (every thread: the bomb's server included)."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs

import msgspec
import pytest

from conftest import serve_asgi
from skillwire import PushSettings, WebhookPolicy
from skillwire.client import Client, InvalidResponseError, JsonRpcTransport, RestTransport
from skillwire.llm import ProviderBadReply, ProviderReplyTooLarge, adapter_for
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.security import OpenIDConnect
from skillwire.security.jwks import Documents, FetchError, KeyCache
from skillwire.security.schemes import Presented
from skillwire.server.notifications.push import PushService
from skillwire.stores import MemoryTaskStore
from skillwire.stores.base import write_task
from skillwire.stores.push import Outgoing, PushConfigRecord
from skillwire.testing.store_contract import make_task
from skillwire.webhooks import WebhookSigner, generate_key

MiB = 1024 * 1024
T = TypeVar("T")
#: What the bomb inflates to.
INFLATED = 256 * MiB
#: The most any read may add to the process while it runs: well under one inflated network read (a
#: 64 KiB read of this bomb inflates to about 64 MiB).
BOUND = 8 * MiB


def gzip_bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    zeros = bytes(MiB)
    out = [packer.compress(zeros) for _ in range(INFLATED // MiB)]
    return b"".join(out) + packer.flush()


@pytest.fixture(scope="module")
def bomb() -> Iterator[str]:
    """A server whose every answer is the bomb, ``Content-Encoding: gzip``, with the Content-Type the query's
    ``type`` names (JSON by default) and the status its ``status`` names (200)."""
    body = gzip_bomb()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):  # read the request through
            pass
        query = parse_qs(scope["query_string"].decode())
        headers = [
            (b"content-type", query.get("type", ["application/json"])[0].encode()),
            (b"content-encoding", b"gzip"),
            (b"content-length", str(len(body)).encode()),
        ]
        status = int(query.get("status", ["200"])[0])
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    url, stop = serve_asgi(app)
    yield url
    stop()


async def peak_of(work: Callable[[], Awaitable[T]]) -> tuple[int, T | BaseException]:
    """The most memory allocated while ``work`` ran (above what was allocated before), and what it returned
    or raised."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        outcome: T | BaseException
        try:
            outcome = await work()
        except Exception as exc:
            outcome = exc
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return peak, outcome


def test_the_bomb_is_one() -> None:
    body = gzip_bomb()
    assert len(body) < INFLATED // 500
    assert len(zlib.decompressobj(31).decompress(body, 1024)) == 1024


# -- the model adapters ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", ["openai", "ollama"])
@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "stream"])
async def test_a_model_reply_that_is_a_bomb_is_refused_unread(
    bomb: str, vendor: str, streaming: bool
) -> None:
    adapter = adapter_for({"vendor": vendor, "model": "m", "baseUrl": bomb}, env={})

    async def call() -> str:
        if not streaming:
            return await adapter.complete([{"role": "user", "content": "hi"}])
        return "".join([chunk async for chunk in adapter.stream([{"role": "user", "content": "hi"}])])

    peak, outcome = await peak_of(call)
    assert isinstance(outcome, ProviderBadReply) and "compressed (gzip)" in str(outcome)
    assert not isinstance(outcome, ProviderReplyTooLarge)
    assert peak < BOUND, peak


async def test_a_model_error_reply_that_is_a_bomb_is_refused_unread(bomb: str) -> None:
    adapter = adapter_for({"vendor": "openai", "model": "m", "baseUrl": bomb + "/?status=500"}, env={})
    peak, outcome = await peak_of(lambda: adapter.complete([{"role": "user", "content": "hi"}]))
    assert isinstance(outcome, ProviderBadReply)
    assert peak < BOUND, peak


# -- the identity provider's documents ------------------------------------------------------------------------


async def test_a_key_set_or_discovery_document_that_is_a_bomb_is_refused_unread(bomb: str) -> None:
    documents = Documents(KeyCache())
    try:
        for path in ("/jwks", "/.well-known/openid-configuration"):
            peak, outcome = await peak_of(lambda path=path: documents.get(bomb + path))  # type: ignore[misc]
            assert isinstance(outcome, FetchError) and "compressed" in str(outcome)
            assert peak < BOUND, peak
    finally:
        await documents.close()


async def test_an_oidc_scheme_whose_discovery_is_a_bomb_says_try_again(bomb: str) -> None:
    from skillwire.errors import ServerBusyError

    scheme = OpenIDConnect(
        discovery_url=bomb + "/.well-known/openid-configuration", issuer=bomb, audience="a"
    )
    token = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ4In0.c2ln"
    try:
        peak, outcome = await peak_of(
            lambda: scheme.authenticate(Presented(headers={"authorization": f"Bearer {token}"}))
        )
        assert isinstance(outcome, ServerBusyError) and "try again" in str(outcome), outcome
        assert peak < BOUND, peak
    finally:
        await scheme.close()


# -- the client -------------------------------------------------------------------------------------------------


async def test_a_card_that_is_a_bomb_is_refused_unread(bomb: str) -> None:
    peak, outcome = await peak_of(lambda: Client.connect(bomb, retries=0))
    assert isinstance(outcome, InvalidResponseError) and "compressed (gzip)" in str(outcome)
    assert peak < BOUND, peak


@pytest.mark.parametrize("transport", [JsonRpcTransport, RestTransport])
async def test_an_answer_or_a_stream_that_is_a_bomb_is_refused_unread(
    bomb: str, transport: type[Any]
) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
        unary = transport(bomb, http)
        peak, outcome = await peak_of(lambda: unary.send(Operation.GET_TASK, m.GetTaskRequest(id="t")))
        assert isinstance(outcome, InvalidResponseError), outcome
        assert peak < BOUND, peak
        streaming = transport(bomb + "/?type=text/event-stream", http)

        async def events() -> list[Any]:
            request = m.SubscribeToTaskRequest(id="t")
            return [e async for e in streaming.stream(Operation.SUBSCRIBE_TO_TASK, request)]

        peak, outcome = await peak_of(events)
        assert isinstance(outcome, InvalidResponseError), outcome
        assert peak < BOUND, peak


async def test_an_uncompressed_answer_past_the_budget_is_cut_off(serve: Any) -> None:
    """The budget counts the bytes as they arrive: a plain answer longer than it is not held either."""
    import httpx

    from conftest import example_agent

    srv = serve(example_agent("echo").asgi(store="memory://"))
    async with httpx.AsyncClient() as http:
        transport = JsonRpcTransport(srv.url, http)
        transport.max_response_bytes = 64  # less than any task
        with pytest.raises(InvalidResponseError, match="more than 64 bytes"):
            await transport.send(Operation.LIST_TASKS, m.ListTasksRequest())


# -- a webhook's answer -------------------------------------------------------------------------------------------


async def test_a_webhook_answer_that_is_a_bomb_is_never_inflated(bomb: str, tmp_path: Path) -> None:
    store = MemoryTaskStore()
    await store.open()
    push = PushService(
        store,
        WebhookSigner(generate_key(tmp_path / "key.pem"), issuer="https://agent.example"),
        policy=WebhookPolicy(allow=["127.0.0.1"], allow_http=True),
        settings=PushSettings(max_attempts=1),
    )
    task = make_task()
    config = msgspec.json.encode({"url": bomb + "/hook", "taskId": task.id})
    await store.put_push_config(PushConfigRecord("", task.id, "c1", config), 10)
    await push.start()

    async def deliver() -> None:
        write = write_task(task, version=1)
        await store.commit(msgspec.structs.replace(write, deliveries=(Outgoing("c1", b"{}"),)))
        push.ready("", task.id, {"c1": "1.0"}, 1)
        await push.deliverer.idle()

    try:
        peak, outcome = await peak_of(deliver)
        assert outcome is None
        assert push.deliverer.stats.delivered == 1  # a 2xx: delivered; its body was never inflated
        assert peak < BOUND, peak
    finally:
        await push.stop()
        await store.close()
