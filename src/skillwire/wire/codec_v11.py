"""The A2A 1.1 codecs, as drafted (``dev-1.1``): v1.0's, with the generation fields kept in answers.

1.1 adds ``generation`` to Task and to the status and artifact update events, ``currentGeneration`` to
GetTask and ``ifGenerationMatch`` to SendMessage's configuration (:mod:`skillwire.protocol.models` has them
all); the envelopes, routes and errors are v1.0's. A v1.0 call that activates the generations extension is
encoded with these codecs too (:func:`skillwire.wire.generations.codec_version`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation
from skillwire.wire.codec_v10 import JsonRpc10, Rest10

__all__ = ["JSONRPC", "REST", "JsonRpc11", "Rest11"]

_encoder = msgspec.json.Encoder()


def _logged_v11(event: StreamResponse, logged: bytes) -> bytes:
    """A 1.1 event is the logged JSON as it is: the log encodes the same StreamResponse the same way."""
    return logged


class JsonRpc11(JsonRpc10):
    version = "1.1"

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return _encoder.encode(result)

    #: msgspec's encoder itself: an event is the StreamResponse message as it is (one call per event)
    encode_event: Callable[[StreamResponse], bytes] = _encoder.encode
    encode_logged_event: Callable[[StreamResponse, bytes], bytes] = staticmethod(_logged_v11)


class Rest11(Rest10):
    version = "1.1"

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return b"{}" if result is None else _encoder.encode(result)

    encode_event: Callable[[StreamResponse], bytes] = _encoder.encode
    encode_logged_event: Callable[[StreamResponse, bytes], bytes] = staticmethod(_logged_v11)


JSONRPC = JsonRpc11()
REST = Rest11()
