"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

The A2A v0.3 <-> v1.0 codec (sans-IO): one v1.0 request handler serves v0.3 clients. The bindings and
transports use it through :mod:`skillwire.wire.v03.codec` (the codec objects of
:mod:`skillwire.wire.codec`); the functions below are what those objects are made of.

A v0.3 request decodes straight into the v1.0 request Struct of its operation, and a v1.0 result encodes
into the v0.3 JSON a v0.3 client expects. Storage stays v1.0, so a task made through one version reads the
same through the other. ::

    operation, request = decode_request("message/send", params)      # v0.3 JSON-RPC params
    result = await handler.handle(operation, request)                # the one v1.0 handler
    body = encode_result(operation, result)                          # the v0.3 `result` value

    for event in stream:                                             # message/stream, tasks/resubscribe
        frame = encode_stream_event(event, final=is_final(event))

    match_rest("POST", "/v1/message:send", {}, body)                 # v0.3 HTTP+JSON, ProtoJSON bodies
    encode_rest_result(operation, result)

The client direction runs the other way, so a v1.0 client can call a v0.3 agent::

    card = card_from_v03(card_json) if is_v03_card(card_json) else ...   # interfaces at version "0.3"
    method, params = encode_request(operation, request)              # a v1.0 request Struct
    response = decode_result(operation, result_json)                 # the v1.0 response Struct
    event = decode_event(event_result_json)                          # a v1.0 StreamResponse
    error = decode_error(error_json)                                 # the A2AError of its code

    verb, path, body, query = encode_rest_request(operation, request)    # v0.3 HTTP+JSON, under /v1
    decode_rest_result(operation, body); decode_rest_event(data); rest_error(operation, status, json)

Import the names from here (``from skillwire.wire import v03``). The modules behind them, each saying in
its docstring how it decides where v0.3 and v1.0 do not map one to one:

* :mod:`~skillwire.wire.v03.codec`: the two codec objects (JSON-RPC, HTTP+JSON) over the modules below.
* :mod:`~skillwire.wire.v03.shapes`: the v0.3 JSON-RPC objects and their conversions both ways.
* :mod:`~skillwire.wire.v03.rest_shapes`: the v0.3 HTTP+JSON (ProtoJSON) objects and their conversions.
* :mod:`~skillwire.wire.v03.server`: v0.3 JSON-RPC requests in, v1.0 results out as v0.3.
* :mod:`~skillwire.wire.v03.rest`: the same over v0.3 HTTP+JSON (paths under ``/v1``).
* :mod:`~skillwire.wire.v03.client`: v1.0 requests out as v0.3, v0.3 results in, over both bindings.
* :mod:`~skillwire.wire.v03.cards`: the agent card, both ways.
* :mod:`~skillwire.wire.v03.errors`: error codes and ``data``, both ways, and the v0.3 SDKs' REST errors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillwire.wire.v03.cards import card_from_v03, is_v03_card, v03_card, v03_card_fields
    from skillwire.wire.v03.client import (
        decode_event,
        decode_rest_event,
        decode_rest_result,
        decode_result,
        encode_request,
        encode_rest_request,
    )
    from skillwire.wire.v03.errors import decode_error, error_code, error_data, rest_error
    from skillwire.wire.v03.rest import encode_rest_result, encode_rest_stream_event, match_rest
    from skillwire.wire.v03.server import (
        METHODS,
        decode_request,
        encode_result,
        encode_stream_event,
        is_final,
    )
    from skillwire.wire.v03.shapes import DATA_PART_COMPAT, PROTOCOL_VERSION

# Each name is imported on its first use: a client decoding a card that also carries the v0.3 fields needs
# the card codec only, not the server's and the client's request codecs (tests/test_import_cost.py).
_LAZY = {
    "DATA_PART_COMPAT": "skillwire.wire.v03.shapes",
    "METHODS": "skillwire.wire.v03.server",
    "PROTOCOL_VERSION": "skillwire.wire.v03.shapes",
    "card_from_v03": "skillwire.wire.v03.cards",
    "decode_error": "skillwire.wire.v03.errors",
    "decode_event": "skillwire.wire.v03.client",
    "decode_request": "skillwire.wire.v03.server",
    "decode_rest_event": "skillwire.wire.v03.client",
    "decode_rest_result": "skillwire.wire.v03.client",
    "decode_result": "skillwire.wire.v03.client",
    "encode_request": "skillwire.wire.v03.client",
    "encode_rest_request": "skillwire.wire.v03.client",
    "encode_rest_result": "skillwire.wire.v03.rest",
    "encode_rest_stream_event": "skillwire.wire.v03.rest",
    "encode_result": "skillwire.wire.v03.server",
    "encode_stream_event": "skillwire.wire.v03.server",
    "error_code": "skillwire.wire.v03.errors",
    "error_data": "skillwire.wire.v03.errors",
    "is_final": "skillwire.wire.v03.server",
    "is_v03_card": "skillwire.wire.v03.cards",
    "match_rest": "skillwire.wire.v03.rest",
    "rest_error": "skillwire.wire.v03.errors",
    "v03_card": "skillwire.wire.v03.cards",
    "v03_card_fields": "skillwire.wire.v03.cards",
}


__all__ = [
    "DATA_PART_COMPAT",
    "METHODS",
    "PROTOCOL_VERSION",
    "card_from_v03",
    "decode_error",
    "decode_event",
    "decode_request",
    "decode_rest_event",
    "decode_rest_result",
    "decode_result",
    "encode_request",
    "encode_rest_request",
    "encode_rest_result",
    "encode_rest_stream_event",
    "encode_result",
    "encode_stream_event",
    "error_code",
    "error_data",
    "is_final",
    "is_v03_card",
    "match_rest",
    "rest_error",
    "v03_card",
    "v03_card_fields",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
