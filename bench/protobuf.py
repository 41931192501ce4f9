"""Micro-benchmark of the gRPC conversions: one SendMessageRequest and one Task, each way, through the old
ProtoJSON route (``json_format``) and the direct one (:mod:`skillwire.wire.protobuf`). Needs the grpc extra.

    python bench/protobuf.py
"""

import datetime
import timeit
from typing import Any

import msgspec
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from skillwire.protocol import models as m
from skillwire.wire.protobuf import message_to_struct, struct_to_message


def _number(lit):
    v = float(lit)
    return int(v) if v.is_integer() and abs(v) <= 2**53 else v


def json_to_struct(msg, t, wd):
    return msgspec.json.Decoder(t, float_hook=_number).decode(
        json_format.MessageToJson(msg, always_print_fields_with_no_presence=wd, indent=None)
    )


def json_to_message(s, t):
    x = t()
    json_format.Parse(msgspec.json.encode(s), x)
    return x


simple = m.SendMessageRequest(
    message=m.Message(
        message_id="4f1c2d7e-0000-4000-8000-000000000001", role=m.Role.USER, parts=[m.Part(text="hello")]
    )
)
rich = m.SendMessageRequest(
    message=m.Message(
        message_id="m1",
        context_id="c1",
        role=m.Role.USER,
        parts=[m.Part(text="hello"), m.Part(data={"n": 1, "xs": [1.5, None, True]})],
        metadata={"skillId": "echo", "trace": {"depth": 2}},
    ),
    configuration=m.SendMessageConfiguration(history_length=0, accepted_output_modes=["text/plain"]),
)
now = datetime.datetime.now(datetime.UTC)
msg = m.Message(
    message_id="m1", role=m.Role.USER, parts=[m.Part(text="hello")], context_id="c1", task_id="t1"
)
task = m.Task(
    id="t1",
    context_id="c1",
    status=m.TaskStatus(state=m.TaskState.COMPLETED, timestamp=now),
    history=[msg],
    artifacts=[m.Artifact(artifact_id="a1", parts=[m.Part(text="hello")])],
)
cases = [
    ("SendMessageRequest (bench: one text part)", simple, pb.SendMessageRequest, False),
    ("SendMessageRequest (metadata, data part, config)", rich, pb.SendMessageRequest, False),
    ("Task (echo result: 1 history msg, 1 artifact)", task, pb.Task, True),
]


def best(f, n=3000):
    return min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6


print("| object | direction | ProtoJSON route (µs) | direct (µs) | speed-up |")
print("|---|---|---:|---:|---:|")


def measure(label: str, s: Any, t: Any, wd: bool) -> None:
    pbm = json_to_message(s, t)
    assert struct_to_message(s, t) == pbm and message_to_struct(
        pbm, type(s), with_defaults=wd
    ) == json_to_struct(pbm, type(s), wd)
    a, b = best(lambda: json_to_message(s, t)), best(lambda: struct_to_message(s, t))
    print(f"| {label} | Struct -> message | {a:.1f} | {b:.1f} | {a / b:.1f}x |")
    a, b = (
        best(lambda: json_to_struct(pbm, type(s), wd)),
        best(lambda: message_to_struct(pbm, type(s), with_defaults=wd)),
    )
    print(
        f"| {label} | message -> Struct{' (client, with defaults)' if wd else ' (server)'} | {a:.1f} | {b:.1f} | {a / b:.1f}x |"
    )


for case in cases:
    measure(*case)
