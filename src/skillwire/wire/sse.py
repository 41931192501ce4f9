"""Server-Sent Events codec (sans-IO): frames out, events in."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["KEEPALIVE", "SSEDecoder", "encode_event"]

#: A comment line: ignored by every SSE client, keeps idle connections and proxies alive.
KEEPALIVE = b": keep-alive\n\n"


def encode_event(data: bytes, event: str | None = None, event_id: int = 0) -> bytes:
    """One ``data:`` event, with an ``id:`` line when ``event_id`` is given (a task generation, which a
    client sends back as ``Last-Event-ID`` to resume after it). ``data`` is compact JSON (no newlines), so
    one data line suffices."""
    if event_id:
        return b"id: %d\n" % event_id + encode_event(data, event)
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        body = b"".join(b"data: " + line + b"\n" for line in lines)
    else:
        body = b"data: " + data + b"\n"
    if event:
        return b"event: " + event.encode() + b"\n" + body + b"\n"
    return body + b"\n"


class SSEDecoder:
    """Incremental decoder: feed bytes, get the ``data`` of each complete event (comments are skipped)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._buffer += chunk
        while True:
            idx = self._buffer.find(b"\n")
            if idx < 0:
                return
            line = self._buffer[:idx].rstrip(b"\r")
            self._buffer = self._buffer[idx + 1 :]
            if not line:
                if self._data:
                    yield b"\n".join(self._data)
                    self._data = []
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self._data.append(value)
