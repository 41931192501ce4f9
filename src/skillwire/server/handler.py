"""The request-handler seam.

Every binding turns a call into ``(operation, params, context)`` and hands it to one object through one
entry, ``handle``. The params are the decoded v1.0 request Struct; the result is the v1.0 response Struct,
or, for the two streaming operations, an async iterator of ``StreamResponse``. Errors are raised as
:class:`A2AError` and each binding renders them its own way.

:class:`BaseRequestHandler` maps operations to ``on_*`` methods; an operation whose method a subclass does
not define answers ``MethodNotFoundError`` (-32601, "not implemented"). Wrap a handler by holding another
and forwarding ``handle``.

:class:`Dispatcher` sits in front of the handler for every binding and enforces the capability gates of the
agent card, so that a closed gate gives the same error on every binding whatever the handler is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from skillwire.errors import (
    ExtensionSupportRequiredError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentInterface
from skillwire.protocol.operations import Capability, Operation, spec_of
from skillwire.server.context import CallContext

__all__ = ["BaseRequestHandler", "Dispatcher", "RequestHandler"]


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
        result = await self.handler.handle(operation, params, context)
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
