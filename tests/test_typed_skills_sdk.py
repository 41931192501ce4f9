"""Typed skills called by the official a2a-sdk 1.3 client on JSON-RPC, HTTP+JSON and gRPC.

The sdk carries a data part as a ``google.protobuf.Value``, whose numbers are doubles: ``{"times": 2}``
arrives as ``2.0``. JSON Schema 2020-12 says 2.0 is an integer, so a skill's ``int`` parameter (a code
skill) or ``type: integer`` property (a manifest skill) must take it and the handler must receive the
Python ``int`` 2; 2.5 is refused with -32602 naming where, before any task exists.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import grpc
import httpx
import msgspec
import pydantic
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format, struct_pb2

from conftest import RunningServer
from skillwire import Agent, SkillCard

WAIT = 15.0

MANIFEST = """---
id: echo_times
name: Echo times
description: Says a word so many times.
tags: [typed]
inputSchema:
  type: object
  properties:
    word: {type: string}
    times: {type: integer, minimum: 0}
  required: [word, times]
---
"""


class Person(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)

    @pydantic.field_validator("name")
    @classmethod
    def capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("the name must start with a capital letter")
        return value


def typed_agent() -> Agent:
    agent = Agent("Typed", "Typed skills")

    @agent.skill(tags=["typed"])
    def repeat(word: str, times: int) -> str:
        """Says a word so many times."""
        assert type(times) is int, type(times)
        return " ".join([word] * times)

    @agent.skill(tags=["typed"])
    def at_least(n: Annotated[int, msgspec.Meta(ge=0)]) -> int:
        """Takes a count that must not be negative."""
        assert type(n) is int, type(n)
        return n

    @agent.skill(tags=["typed"])
    def register(params: Person) -> Person:
        """Registers a person."""
        assert type(params.age) is int, type(params.age)
        return params

    def echo_times(params: dict[str, Any], ctx: Any) -> str:
        times = params["times"]
        assert type(times) is int, type(times)
        return " ".join([params["word"]] * times)

    agent.registry.register_manifest(SkillCard.parse(MANIFEST, source="echo_times/SKILL.md"), echo_times)
    return agent


@pytest.fixture(params=["JSONRPC", "HTTP+JSON", "GRPC"])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


Send = Callable[[str, dict[str, Any]], Awaitable[pb.Task]]


@pytest.fixture
async def send(serve: Callable[[Any], RunningServer], binding: str) -> AsyncIterator[Send]:
    srv = serve(typed_agent().asgi(store="memory://", grpc_port=0 if binding == "GRPC" else None))
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await A2ACardResolver(http, srv.url).get_agent_card()
        config = ClientConfig(
            httpx_client=http,
            streaming=False,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = ClientFactory(config).create(card)

        async def _send(skill: str, data: dict[str, Any]) -> pb.Task:
            value = struct_pb2.Value()
            value.struct_value.update(data)
            message = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(data=value)])
            message.metadata.update({"skillId": skill})
            (response,) = [r async for r in client.send_message(pb.SendMessageRequest(message=message))]
            assert response.WhichOneof("payload") == "task", response
            return response.task

        try:
            yield _send
        finally:
            await client.close()


def result_of(task: pb.Task) -> Any:
    assert task.status.state == pb.TASK_STATE_COMPLETED, task.status
    (artifact,) = task.artifacts
    (part,) = artifact.parts
    if part.HasField("text"):
        return part.text
    return json_format.MessageToDict(part.data)


@pytest.mark.parametrize("skill", ["repeat", "echo_times"])
async def test_an_integral_double_reaches_an_integer_parameter_as_int(send: Send, skill: str) -> None:
    task = await send(skill, {"word": "hi", "times": 2})  # a protobuf Value: 2.0 on the wire

    assert result_of(task) == "hi hi"


@pytest.mark.parametrize("skill", ["repeat", "echo_times"])
async def test_a_fractional_number_for_an_integer_is_refused_with_its_location(
    send: Send, skill: str
) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        await send(skill, {"word": "hi", "times": 2.5})

    assert "/times" in str(refused.value)
    assert "integer" in str(refused.value) or "int" in str(refused.value)


async def test_an_annotated_constraint_is_enforced(send: Send) -> None:
    assert result_of(await send("at_least", {"n": 3})) == 3

    with pytest.raises(InvalidParamsError) as refused:
        await send("at_least", {"n": -5})

    assert "/n" in str(refused.value)


async def test_a_pydantic_model_is_validated_by_pydantic_with_its_location(send: Send) -> None:
    assert result_of(await send("register", {"name": "Ada", "age": 36})) == {"name": "Ada", "age": 36}

    with pytest.raises(InvalidParamsError) as refused:
        await send("register", {"name": "ada", "age": 36})

    assert "/name" in str(refused.value) and "capital letter" in str(refused.value)
