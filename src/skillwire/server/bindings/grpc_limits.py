"""The gRPC server's budgets: its grpc options, and the checks grpc has no option for.

Each comes from the server's :class:`~skillwire.protocol.limits.Limits`, through grpc's own option where
there is one (:func:`server_options`):

* requests up to ``max_body_bytes`` and answers up to ``max_response_bytes``, as on HTTP. An answer over it
  is ``FAILED_PRECONDITION`` with ErrorInfo ``RESPONSE_TOO_LARGE`` (metadata ``size``, ``limit`` and
  ``taskId`` when there is a task) and a message saying what to ask for instead (a shorter
  ``historyLength``): not grpc's RESOURCE_EXHAUSTED, which callers retry, as asking again cannot help. The
  answer is encoded once, measured, and handed to grpc as bytes. Its size is only known once the work is
  done (an agent may answer with a short message, or a task holding the request), so a SendMessage is not
  refused before it starts: its task goes on and stays readable, in parts, with GetTask.
* ``max_streams_per_connection`` calls at once per connection (HTTP/2 ``SETTINGS_MAX_CONCURRENT_STREAMS``;
  more wait for a free one), ``max_connections`` connections (one more is closed at once, which the client
  sees as UNAVAILABLE), ``max_header_bytes`` of metadata.
* a connection with no call is closed after ``keepalive_timeout`` (GOAWAY; clients reconnect when they next
  call), and one that does not complete the HTTP/2 handshake after ``header_timeout``. Client pings are
  accepted every :data:`MIN_CLIENT_PING_INTERVAL_MS` at most while no call runs (a client that pings more
  often is disconnected), and the server pings a connection with calls after
  :data:`SERVER_PING_INTERVAL_MS` of silence, so that a peer that vanished does not hold its calls.
* a stream write that waits more than ``write_timeout`` for the client to read ends the call with
  ``UNAVAILABLE``, ErrorInfo ``STREAM_WRITE_TIMEOUT``: the client sees it after the events already sent, if it
  reads again, and resumes with SubscribeToTask (skillwire's client does so by itself, as for a broken
  connection). The task goes on. What grpc holds for such a call is bounded by the one message it was
  given.

``max_connections`` is a budget of each listener (HTTP and gRPC), and is lowered to fit the open-file limit
as for HTTP (:mod:`skillwire.server.bindings.descriptors`).
"""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2

from skillwire.errors import ResponseTooLargeError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import Operation
from skillwire.server.bindings.descriptors import connection_ceiling

__all__ = [
    "MIN_CLIENT_PING_INTERVAL_MS",
    "SERVER_PING_INTERVAL_MS",
    "SERVER_PING_TIMEOUT_MS",
    "StreamWriteTimeoutError",
    "encode_answer",
    "server_options",
]

#: While no call runs, a client may ping this often at most; two pings more often and it is disconnected.
MIN_CLIENT_PING_INTERVAL_MS = 10_000
#: The server pings a connection that has calls but has been silent this long, and closes it if no answer
#: comes within SERVER_PING_TIMEOUT_MS.
SERVER_PING_INTERVAL_MS = 60_000
SERVER_PING_TIMEOUT_MS = 20_000


def server_options(limits: Limits) -> list[tuple[str, int]]:
    """The ``grpc.aio.server`` options that enforce ``limits`` (see the module)."""

    def ms(seconds: float) -> int:
        return max(1, round(seconds * 1000))

    connections = connection_ceiling(limits.max_connections, listeners=2, what="gRPC")
    return [
        ("grpc.max_receive_message_length", limits.max_body_bytes),
        ("grpc.max_send_message_length", limits.max_response_bytes),
        ("grpc.max_metadata_size", limits.max_header_bytes),
        ("grpc.max_concurrent_streams", limits.max_streams_per_connection),
        ("grpc.max_allowed_incoming_connections", connections),
        ("grpc.max_connection_idle_ms", ms(limits.keepalive_timeout)),
        ("grpc.server_handshake_timeout_ms", ms(limits.header_timeout)),
        ("grpc.keepalive_time_ms", SERVER_PING_INTERVAL_MS),
        ("grpc.keepalive_timeout_ms", SERVER_PING_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", 2),
    ]


class StreamWriteTimeoutError(StreamDroppedError):
    """A stream whose client did not read for ``write_timeout``: it was dropped and can be resumed."""

    reason = "STREAM_WRITE_TIMEOUT"
    default_message = "The stream was dropped: the client did not read in time"


#: What to ask for instead of an answer that is too large, by operation.
_SMALLER = {
    Operation.SEND_MESSAGE: "The task went on: read it with GetTask and a shorter historyLength, or send "
    "with configuration.historyLength",
    Operation.GET_TASK: "Ask for a shorter historyLength",
    Operation.CANCEL_TASK: "The cancel request was taken: read the task with GetTask and a shorter "
    "historyLength",
    Operation.LIST_TASKS: "Ask for a smaller pageSize or a shorter historyLength, or leave out "
    "includeArtifacts",
}
_SMALLER_EVENT = "The task goes on: read it with GetTask and a shorter historyLength"


def _task_id(message: Any) -> str:
    """The id of the task an answer is about ("" if none)."""
    if isinstance(message, a2a_pb2.Task):
        return str(message.id)
    which = message.WhichOneof("payload") if "payload" in message.DESCRIPTOR.oneofs_by_name else None
    if which == "task":
        return str(message.task.id)
    if which in ("status_update", "artifact_update", "message"):
        return str(getattr(message, which).task_id)
    return ""


def encode_answer(message: Any, operation: Operation, limit: int, *, event: bool = False) -> bytes:
    """``message`` serialized, or ResponseTooLargeError if it is over ``limit`` bytes."""
    data: bytes = message.SerializeToString()
    if len(data) <= limit:
        return data
    task_id = _task_id(message)
    what = f"An event of the stream of task {task_id}" if event else f"The answer to {operation.value}"
    hint = _SMALLER_EVENT if event else _SMALLER.get(operation, "Ask for less")
    metadata = {
        "size": len(data),
        "limit": limit,
        "budget": "max_response_bytes",
        **({"taskId": task_id} if task_id else {}),
    }
    raise ResponseTooLargeError(
        f"{what} is {len(data)} bytes, over this server's limit of {limit} (max_response_bytes). {hint}.",
        metadata=metadata,
    )
