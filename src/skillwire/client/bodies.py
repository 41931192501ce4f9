"""What the client reads of an answer: at most a budget, and never a compressed body.

An agent, or whatever answers at its URL, chooses how large its answers are, and a compressed answer of a
few KiB can inflate to gigabytes (a "gzip bomb"), which httpx decodes whole, one network read at a time,
before anything counts it. So every read the client makes over HTTP (a unary answer, an SSE stream, the
agent card, the card's key set) asks for the body uncompressed (``Accept-Encoding: identity``), refuses one
that comes compressed anyway, and counts the bytes as they arrive: past :data:`MAX_RESPONSE_BYTES` for one
answer (or one stream event) it stops reading. Both raise :class:`InvalidResponseError`. gRPC's own limit on
a received message (decompressed) is the same budget.

Refusing compressed bodies rather than decoding them in bounded steps: skillwire's server never compresses
its answers, and a compliant server sends none to a client that asks for ``identity``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from skillwire.client.errors import InvalidResponseError

__all__ = ["IDENTITY", "MAX_RESPONSE_BYTES", "raw_chunks", "read_body"]

#: The most bytes the client reads of one answer, or of one event of a stream (the server's default
#: ``max_response_bytes``).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: The header every read sends.
IDENTITY = {"Accept-Encoding": "identity"}


def _check_encoding(response: httpx.Response) -> None:
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise InvalidResponseError(
            f"{response.request.url} answered compressed ({encoding[:40]}), which was not asked for"
        )


async def raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body of a streamed ``response`` as it arrives, refused if it is compressed."""
    _check_encoding(response)
    async for chunk in response.aiter_raw():
        yield chunk


async def read_body(response: httpx.Response, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """The whole body of a streamed ``response``, refused if it is compressed or once past ``limit`` bytes
    (before anything is read when its Content-Length says so)."""
    _check_encoding(response)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(response, limit)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > limit:
            raise _too_large(response, limit)
    return bytes(body)


def _too_large(response: httpx.Response, limit: int) -> InvalidResponseError:
    return InvalidResponseError(f"{response.request.url} answered more than {limit} bytes")
