"""A pytest plugin that makes the A2A conformance suite (TCK) send credentials, which it has no option for.

The TCK's transports open plain ``httpx.Client`` objects and ``grpc.insecure_channel`` channels; this
plugin, loaded into the TCK's own pytest run, gives every such client a header and every channel the same
metadata, from the environment::

    TCK_AUTH_HEADER="X-API-Key: k-tck-0001" PYTHONPATH=/path/to/skillwire/bench/tck \\
        python run_tck.py --sut-host http://127.0.0.1:9999 -- -p credentials

Nothing of the TCK is copied or changed: its requests simply carry the header, as a deployment's clients
would (docs/conformance.md, "With security on").
"""

from __future__ import annotations

import os
from typing import Any

import grpc
import httpx


def _credential() -> tuple[str, str]:
    raw = os.environ.get("TCK_AUTH_HEADER", "")
    name, sep, value = raw.partition(":")
    if not sep or not name.strip() or not value.strip():
        raise RuntimeError('set TCK_AUTH_HEADER to "Name: value", e.g. "X-API-Key: k-tck-0001"')
    return name.strip(), value.strip()


class _Metadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, name: str, value: str) -> None:
        self.pair = (name.lower(), value)

    def _with(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), self.pair]
        return (
            details._replace(metadata=metadata)
            if hasattr(details, "_replace")
            else _Details(details, metadata)
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with(details), request)


class _Details(grpc.ClientCallDetails):  # type: ignore[misc]
    def __init__(self, base: Any, metadata: list[tuple[str, str]]) -> None:
        self.method, self.timeout, self.metadata = base.method, base.timeout, metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


def pytest_configure(config: Any) -> None:
    name, value = _credential()
    plain_init = httpx.Client.__init__

    def init(self: httpx.Client, *args: Any, **kwargs: Any) -> None:
        kwargs["headers"] = {**(kwargs.get("headers") or {}), name: value}
        plain_init(self, *args, **kwargs)

    httpx.Client.__init__ = init  # type: ignore[method-assign]
    plain_channel = grpc.insecure_channel

    def channel(target: str, *args: Any, **kwargs: Any) -> grpc.Channel:
        return grpc.intercept_channel(plain_channel(target, *args, **kwargs), _Metadata(name, value))

    grpc.insecure_channel = channel
