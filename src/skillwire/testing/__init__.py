"""Public test kit: a mock agent for testing clients, a streaming in-process transport, and (in
:mod:`skillwire.testing.store_contract`, which needs pytest) the store contract suite.

::

    from skillwire.testing import MockAgent

    mock = MockAgent()
    mock.on(text="weather").complete("sunny")
    async with mock.client() as client:
        task = await client.send("weather?")
"""

from skillwire.testing.client import AgentTestClient
from skillwire.testing.mock import (
    MockAgent,
    Pause,
    ReceivedRequest,
    Rule,
    artifact,
    status,
)
from skillwire.testing.transport import StreamingASGITransport

__all__ = [
    "AgentTestClient",
    "MockAgent",
    "Pause",
    "ReceivedRequest",
    "Rule",
    "StreamingASGITransport",
    "artifact",
    "status",
]
