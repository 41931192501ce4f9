"""Pure protocol rules: ProtoJSON golden vectors, the task-state table, versions, the operation table."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from conftest import assert_proto
from skillwire import Message, Task, TaskState
from skillwire.errors import VersionNotSupportedError
from skillwire.protocol.models import GetTaskRequest, ListTasksResponse, SendMessageRequest
from skillwire.protocol.operations import OPERATIONS_BY_METHOD, Capability
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TRANSITIONS, can_transition
from skillwire.protocol.versions import negotiate_version
from skillwire.types import (
    Artifact,
    Operation,
    Part,
    Role,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskStatus,
)

encode = msgspec.json.encode
T0 = datetime(2026, 11, 29, 12, 30, 5, 123000, tzinfo=UTC)


def test_task_golden_vector() -> None:
    task = Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=TaskState.COMPLETED, timestamp=T0),
        artifacts=[Artifact(artifact_id="a1", name="out", parts=[Part(text="hi")])],
        history=[
            Message(message_id="m1", context_id="c1", task_id="t1", role=Role.USER, parts=[Part(text="q")])
        ],
    )
    assert encode(task) == (
        b'{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED",'
        b'"timestamp":"2026-11-29T12:30:05.123000Z"},"artifacts":[{"artifactId":"a1","name":"out",'
        b'"parts":[{"text":"hi"}]}],"history":[{"messageId":"m1","contextId":"c1","taskId":"t1",'
        b'"role":"ROLE_USER","parts":[{"text":"q"}]}]}'
    )
    assert_proto(encode(task), "Task")
    assert msgspec.json.decode(encode(task), type=Task) == task


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (Part(text="t"), b'{"text":"t"}'),
        (
            Part(raw=b"tck", filename="a.txt", media_type="text/plain"),
            b'{"raw":"dGNr","filename":"a.txt","mediaType":"text/plain"}',
        ),
        (Part(url="https://x/y"), b'{"url":"https://x/y"}'),
        (Part(data={"k": [1, None]}), b'{"data":{"k":[1,null]}}'),
        (Part(data=None), b'{"data":null}'),
        (Part(data=3), b'{"data":3}'),
        (Part(text="t", metadata={"a": 1}), b'{"text":"t","metadata":{"a":1}}'),
    ],
)
def test_part_golden_vectors(part: Part, expected: bytes) -> None:
    assert encode(part) == expected
    assert_proto(expected, "Part")
    assert msgspec.json.decode(expected, type=Part) == part


@pytest.mark.parametrize("body", [b"{}", b'{"text":"a","url":"b"}', b'{"metadata":{}}'])
def test_part_needs_exactly_one_content(body: bytes) -> None:
    with pytest.raises(msgspec.ValidationError, match="exactly one"):
        msgspec.json.decode(body, type=Part)


def test_defaults_are_omitted_and_presence_is_kept() -> None:
    empty = Task(id="t", status=TaskStatus(state=TaskState.SUBMITTED))
    assert encode(empty) == b'{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}'
    zero = GetTaskRequest(id="t", history_length=0)
    assert encode(zero) == b'{"id":"t","historyLength":0}'
    assert msgspec.json.decode(encode(zero), type=GetTaskRequest).history_length == 0
    assert msgspec.json.decode(b'{"id":"t"}', type=GetTaskRequest).history_length is None


def test_list_tasks_response_always_prints_its_fields() -> None:
    page = ListTasksResponse(tasks=[], next_page_token="", page_size=0, total_size=0)
    assert encode(page) == b'{"tasks":[],"nextPageToken":"","pageSize":0,"totalSize":0}'
    assert_proto(encode(page), "ListTasksResponse")


def test_stream_response_is_one_member() -> None:
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="t",
            context_id="c",
            artifact=Artifact(artifact_id="a", parts=[Part(text="x")]),
            append=True,
        )
    )
    assert encode(event) == (
        b'{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a",'
        b'"parts":[{"text":"x"}]},"append":true}}'
    )
    assert_proto(encode(event), "StreamResponse")


def test_unknown_fields_are_ignored_and_required_ones_enforced() -> None:
    body = b'{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"extra":1},"more":true}'
    request = msgspec.json.decode(body, type=SendMessageRequest)
    assert request.message.parts[0].text == "x"
    with pytest.raises(msgspec.ValidationError, match="messageId"):
        msgspec.json.decode(
            b'{"message":{"role":"ROLE_USER","parts":[{"text":"x"}]}}', type=SendMessageRequest
        )
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}', type=SendMessageRequest
        )


# -- the state table ----------------------------------------------------------------------------------------

S = TaskState


@pytest.mark.parametrize(
    ("current", "new", "allowed"),
    [
        (S.SUBMITTED, S.WORKING, True),
        (S.SUBMITTED, S.COMPLETED, True),
        (S.SUBMITTED, S.REJECTED, True),
        (S.WORKING, S.WORKING, True),
        (S.WORKING, S.INPUT_REQUIRED, True),
        (S.INPUT_REQUIRED, S.WORKING, True),
        (S.AUTH_REQUIRED, S.WORKING, True),
        (S.WORKING, S.SUBMITTED, False),
        (S.INPUT_REQUIRED, S.SUBMITTED, False),
        (S.COMPLETED, S.WORKING, False),
        (S.COMPLETED, S.COMPLETED, False),
        (S.CANCELED, S.FAILED, False),
        (S.FAILED, S.COMPLETED, False),
        (S.REJECTED, S.WORKING, False),
    ],
)
def test_transitions(current: TaskState, new: TaskState, allowed: bool) -> None:
    assert can_transition(current, new) is allowed


def test_state_classes() -> None:
    assert (
        {s for s in S if s.is_terminal} == TERMINAL_STATES == {S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED}
    )
    assert {s for s in S if s.is_interrupted} == INTERRUPTED_STATES == {S.INPUT_REQUIRED, S.AUTH_REQUIRED}
    assert set(TRANSITIONS) == set(S)
    for state in TERMINAL_STATES:
        assert TRANSITIONS[state] == frozenset()
    for state in set(S) - TERMINAL_STATES - {S.UNSPECIFIED}:
        assert {S.CANCELED, S.FAILED} <= TRANSITIONS[state]


def test_state_names_match_the_official_enum() -> None:
    from a2a.types import a2a_pb2

    assert {s.value for s in S} == set(a2a_pb2.TaskState.keys())
    assert {r.value for r in Role} == set(a2a_pb2.Role.keys())


# -- versions and operations --------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["1.0", "1.0.0", "1.0.12", "01.0"])
def test_accepted_versions(header: str) -> None:
    assert negotiate_version(header) == "1.0"


@pytest.mark.parametrize("header", [None, "", " ", "0.3", "0.3.0"])
def test_absent_means_0_3(header: str | None) -> None:
    assert negotiate_version(header) == "0.3"
    with pytest.raises(VersionNotSupportedError, match=r"Supported versions: 1\.0\."):
        negotiate_version(header, ("1.0",))  # gRPC serves 1.0 only


@pytest.mark.parametrize("header", ["0.2", "1.2", "2.0", "1", "v1.0", "1.0.0.0", "x", "\u00b9.0"])
def test_refused_versions(header: str | None) -> None:
    with pytest.raises(VersionNotSupportedError) as info:
        negotiate_version(header)
    assert "1.0" in info.value.message
    assert info.value.code == -32009 and info.value.reason == "VERSION_NOT_SUPPORTED"


def test_operation_table_matches_the_official_service() -> None:
    from a2a.types import a2a_pb2

    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    rpcs = {m.name: m for m in service.methods}
    assert set(OPERATIONS_BY_METHOD) == set(rpcs) == {op.value for op in Operation}
    for name, spec in OPERATIONS_BY_METHOD.items():
        assert spec.streaming == rpcs[name].server_streaming, name
        assert spec.request_type.__name__ == rpcs[name].input_type.name, name
    gated = {name: spec.capability for name, spec in OPERATIONS_BY_METHOD.items() if spec.capability}
    assert gated["SendStreamingMessage"] is Capability.STREAMING
    assert gated["GetExtendedAgentCard"] is Capability.EXTENDED_AGENT_CARD
    assert sum(c is Capability.PUSH_NOTIFICATIONS for c in gated.values()) == 4
