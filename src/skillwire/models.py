"""Every A2A v1.0 message as a msgspec Struct: what a request handler receives and returns, and what the
client's transports carry. The front door (``skillwire``) carries the ones most code needs (``Message``,
``Task``, ``Part``, ...); this module has all of them, request and response messages included::

    from skillwire import BaseRequestHandler, CallContext
    from skillwire.models import GetTaskRequest, Task

    class Tasks(BaseRequestHandler):
        async def on_get_task(self, request: GetTaskRequest, context: CallContext) -> Task: ...

Field names are snake_case in Python and camelCase on the wire (ProtoJSON); enums keep their proto names
(``TaskState.COMPLETED`` is ``"TASK_STATE_COMPLETED"``).
"""

from skillwire.protocol.models import *  # noqa: F403 - this module is the public name of that one
from skillwire.protocol.models import __all__ as __all__
