"""The request-handler seam.

Every binding turns a call into ``(operation, params, context)`` and hands it to one object through one
entry, ``handle``. The params are the decoded v1.0 request Struct; the result is the v1.0 response Struct,
or, for the two streaming operations, an async iterator of ``StreamResponse``. Errors are raised as
:class:`A2AError` and each binding renders them its own way.

:class:`BaseRequestHandler` maps operations to ``on_*`` methods; an operation whose method a subclass does
not define answers ``MethodNotFoundError`` (-32601, "not implemented"). Wrap a handler by holding another
and forwarding ``handle``.

:class:`Dispatcher` sits in front of the handler for every binding and enforces the capability gates of the
agent card, so that a closed gate gives the same error on every binding whatever the handler is, and checks
what the handler answers against the operation table's response type (:func:`checked_result`): a result of
another type is logged with the handler's name and answered as an internal error on every binding, never
passed on as ``null``, ``{}`` or whatever the handler made. SendMessage takes a bare Task or Message too (what
the operation answers), wrapped as its SendMessageResponse.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from skillwire.errors import (
    ExtensionSupportRequiredError,
    InternalError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from skillwire.protocol.models import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from skillwire.protocol.operations import Capability, Operation, spec_of
from skillwire.server.context import CallContext

__all__ = ["BaseRequestHandler", "Dispatcher", "RequestHandler", "TypedStream", "checked_result"]

log = logging.getLogger("skillwire.handler")


@runtime_checkable
class RequestHandler(Protocol):
    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any: ...


class BaseRequestHandler:
    """Dispatches to ``on_<operation>`` methods; missing ones answer -32601."""

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        method = getattr(self, spec_of(operation).handler, None)
        if method is None:
            raise MethodNotFoundError(f"{operation.value} is not implemented by this agent")
        return await method(params, context)


class Dispatcher:
    """The one entry every binding calls: capability gates first, then the handler."""

    def __init__(
        self,
        handler: RequestHandler,
        capabilities: Callable[[], AgentCapabilities],
        interfaces: Callable[[str], list[AgentInterface]] | None = None,
        sign_card: Callable[[AgentCard, str], AgentCard] | None = None,
    ) -> None:
        self.handler = handler
        self._capabilities = capabilities
        #: base URL -> the public card's interfaces, for an extended card that lists none of its own
        self._interfaces = interfaces
        #: (extended card, base URL) -> the card signed, when the agent signs its cards
        self._sign_card = sign_card

    async def call(self, operation: Operation, params: Any, context: CallContext) -> Any:
        caps = self._capabilities()
        for extension in caps.extensions:
            if extension.required and extension.uri not in context.extensions:
                raise ExtensionSupportRequiredError(
                    f"This agent requires the extension {extension.uri}: activate it with the A2A-Extensions header",
                    metadata={"extension": extension.uri},
                )
        gate = spec_of(operation).capability
        if gate is not None:
            if gate is Capability.STREAMING and not caps.streaming:
                raise UnsupportedOperationError(
                    f"{operation.value} needs streaming, which this agent does not offer"
                )
            if gate is Capability.PUSH_NOTIFICATIONS and not caps.push_notifications:
                raise PushNotificationNotSupportedError()
            if gate is Capability.EXTENDED_AGENT_CARD and not caps.extended_agent_card:
                raise UnsupportedOperationError("This agent offers no extended agent card")
        if operation in _SENDS:
            config = params.configuration
            pushes = config is not None and config.task_push_notification_config is not None
            if pushes and not caps.push_notifications:
                raise PushNotificationNotSupportedError(
                    "configuration.taskPushNotificationConfig was given, but this agent does not send"
                    " push notifications"
                )
        result = checked_result(
            operation, await self.handler.handle(operation, params, context), self.handler
        )
        if (
            operation is Operation.GET_EXTENDED_AGENT_CARD
            and isinstance(result, AgentCard)
            and not result.supported_interfaces
            and self._interfaces is not None
        ):
            # An extended card is usually the public one plus more skills, built without interfaces: it
            # gets the public card's, as served to this client (the card must list at least one).
            interfaces = self._interfaces(context.base_url)
            if interfaces:
                result = msgspec.structs.replace(result, supported_interfaces=interfaces)
        if operation is Operation.GET_EXTENDED_AGENT_CARD and self._sign_card is not None:
            result = self._sign_card(result, context.base_url)
        return result


_SENDS = frozenset({Operation.SEND_MESSAGE, Operation.SEND_STREAMING_MESSAGE})


def handler_name(handler: Any, operation: Operation) -> str:
    """The handler's method that served ``operation``, for the log: ``Class.on_get_task`` for a
    BaseRequestHandler that defines it, else ``Class.handle``."""
    kind = type(handler).__qualname__
    method = spec_of(operation).handler
    return f"{kind}.{method}" if callable(getattr(handler, method, None)) else f"{kind}.handle"


class TypedStream:
    """A stream whose every event is a StreamResponse by construction (the task runtime's own): passed on
    unchecked. Checked, each event cost two calls more (measured by bench/instructions.py --stream: 2.7% of
    the server's instructions for a streamed chunk)."""

    __slots__ = ()


def checked_result(operation: Operation, result: Any, handler: Any) -> Any:
    """``result`` as the operation answers it, or InternalError (logged with the handler's name) when it is
    of another type. A streaming operation's events are checked as they come (unless it is a TypedStream)."""
    spec = spec_of(operation)
    if spec.streaming:
        if isinstance(result, TypedStream):
            return result
        if not hasattr(result, "__anext__"):
            raise _wrong(handler, operation, result, "an async iterator of StreamResponse")
        return _CheckedEvents(result, handler, operation)
    expected = spec.response_type
    if expected is None:
        return None  # nothing is answered (the delete): whatever came back is dropped
    if isinstance(result, SendMessageResponse) and (result.task is None) == (result.message is None):
        raise _wrong(handler, operation, result, "a SendMessageResponse with one of task or message")
    if isinstance(result, expected):
        return result
    if operation is Operation.SEND_MESSAGE:
        if isinstance(result, Task):
            return SendMessageResponse(task=result)
        if isinstance(result, Message):
            return SendMessageResponse(message=result)
        raise _wrong(handler, operation, result, "a Task, a Message or a SendMessageResponse")
    raise _wrong(handler, operation, result, f"a {expected.__name__}")


def _wrong(handler: Any, operation: Operation, result: Any, expected: str) -> InternalError:
    shown = repr(result)
    log.error(
        "request handler %s returned %s for %s, not %s: answered as an internal error",
        handler_name(handler, operation),
        shown if len(shown) <= 80 else f"{shown[:77]}...",
        operation.value,
        expected,
    )
    return InternalError()


class _CheckedEvents:
    """A handler's stream, whose every event must be a StreamResponse (else the stream ends with
    InternalError, logged)."""

    __slots__ = ("_events", "_handler", "_logged", "_operation", "_poll")

    def __init__(self, events: AsyncIterator[Any], handler: Any, operation: Operation) -> None:
        self._events = events
        self._handler = handler
        self._operation = operation
        self._poll: Callable[[], Any] | None = getattr(events, "next_nowait", None)
        self._logged: Callable[[Any], bytes | None] | None = getattr(events, "logged", None)

    def __aiter__(self) -> _CheckedEvents:
        return self

    @property
    def opens_at_once(self) -> bool:
        """The wrapped stream's (see :class:`~skillwire.server.tasks.runtime.EventStream`); True by default."""
        return bool(getattr(self._events, "opens_at_once", True))

    async def __anext__(self) -> StreamResponse:
        event = await anext(self._events)
        if type(event) is StreamResponse or isinstance(event, StreamResponse):
            return event
        raise _wrong(self._handler, self._operation, event, "a StreamResponse event")

    def next_nowait(self) -> StreamResponse | None:
        """The wrapped stream's next event if it is at hand now (see
        :meth:`~skillwire.server.tasks.runtime.EventStream.next_nowait`); None if it has no such method."""
        event = self._poll() if self._poll is not None else None
        if event is None or type(event) is StreamResponse or isinstance(event, StreamResponse):
            return event
        raise _wrong(self._handler, self._operation, event, "a StreamResponse event")

    def logged(self, event: StreamResponse) -> bytes | None:
        """The wrapped stream's logged JSON of ``event`` (see
        :meth:`~skillwire.server.tasks.runtime.EventStream.logged`); None if it has no such method."""
        return self._logged(event) if self._logged is not None else None

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()
