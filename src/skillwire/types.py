"""The A2A v1.0 wire types, in one module: every protocol message as a msgspec Struct (the request and
response messages a :class:`~skillwire.BaseRequestHandler` receives and returns among them), the task
states, the roles and the operations::

    from skillwire import BaseRequestHandler, CallContext
    from skillwire.types import GetTaskRequest, Part, Task

    class Tasks(BaseRequestHandler):
        async def on_get_task(self, request: GetTaskRequest, context: CallContext) -> Task: ...

Field names are snake_case in Python and camelCase on the wire (ProtoJSON); enums are valued by their proto
names (``TaskState.COMPLETED.value`` is ``"TASK_STATE_COMPLETED"``; ``str()`` of a state is its readable
name, ``"completed"``). The front door (``skillwire``) carries the few a caller needs most: ``Task``,
``Message`` and ``TaskState``.
"""

from skillwire.protocol.models import *  # noqa: F403 - this module is the public name of those
from skillwire.protocol.models import __all__ as _models
from skillwire.protocol.operations import Operation as Operation

__all__ = sorted([*_models, "Operation"])
