"""The benchmark echo agent written with fasta2a 2.1.1 (pydantic's A2A server library): bench/run.py's
``fasta2a`` target. It runs in bench/peers/.venv-fasta2a (bench/peers/install.sh), not in the project's
virtualenv.

It behaves like skillwire's ``examples/echo`` agent and ``bench/a2a_sdk_echo.py``:

* ``stream N``: the task goes WORKING, N chunks of one artifact are published (``chunk 0`` ..
  ``chunk N-1``, ``append`` from the second, ``lastChunk`` on the last), then it completes, the whole
  artifact kept in storage;
* any other text: the task completes with the text echoed back as one artifact, ``echo``.

fasta2a's own pieces, as its README assembles them: ``InMemoryStorage``, ``InMemoryBroker`` and a
``Worker`` started from the app's lifespan, in the server's process and event loop. Unlike the other
targets, fasta2a answers ``message/send`` as soon as the task is stored and handed to the broker: the
answer is the task as it then is (usually ``submitted``), and the worker completes it afterwards.
``message/stream`` relays what the worker publishes until the task ends. JSON-RPC only (``POST /``)::

    BENCH_PORT=8000 bench/peers/.venv-fasta2a/bin/python -m uvicorn fasta2a_echo:app \\
        --app-dir bench/peers --host 127.0.0.1 --port 8000

``BENCH_HOST`` / ``BENCH_PORT`` only decide the URL the agent card advertises; uvicorn's own ``--host``
/ ``--port`` decide where it listens, so keep them equal.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fasta2a import FastA2A, Skill, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Message, Part, TaskIdParams, TaskSendParams
from fasta2a.storage import InMemoryStorage

_STREAM_COMMAND = re.compile(r"^\s*stream\s+(\d+)\s*$")
MAX_CHUNKS = 100_000


class EchoWorker(Worker[list[Message]]):
    """Echoes the user's text, or streams ``N`` chunks for ``stream N``."""

    async def run_task(self, params: TaskSendParams) -> None:
        task_id, context_id = params["id"], params["context_id"]
        text = "".join(part.get("text", "") for part in params["message"]["parts"])
        command = _STREAM_COMMAND.match(text)
        if command is None:
            artifact = Artifact(artifact_id=str(uuid.uuid4()), name="echo", parts=[Part(text=text)])
            await self.storage.update_task(task_id, state="completed", new_artifacts=[artifact])
            await self.publish_artifact(task_id, context_id, artifact)
            return

        count = min(int(command.group(1)), MAX_CHUNKS)
        await self.storage.update_task(task_id, state="working")
        await self.publish_status(task_id, context_id, "working")
        artifact_id = f"{task_id}-stream"
        parts = []
        for i in range(count):
            part = Part(text=f"chunk {i}")
            parts.append(part)
            chunk = Artifact(artifact_id=artifact_id, name="stream", parts=[part])
            await self.publish_artifact(task_id, context_id, chunk, append=i > 0, last_chunk=i == count - 1)
        whole = Artifact(artifact_id=artifact_id, name="stream", parts=parts)
        # The worker base class publishes the final state once this returns, and ends the stream.
        await self.storage.update_task(task_id, state="completed", new_artifacts=[whole])

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Message]) -> list[Any]:
        return history

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return [Artifact(artifact_id=str(uuid.uuid4()), name="echo", parts=[Part(text=str(result))])]


def create_app(host: str, port: int) -> FastA2A:
    storage: InMemoryStorage[list[Message]] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = EchoWorker(broker=broker, storage=storage)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    return FastA2A(
        storage=storage,
        broker=broker,
        name="Echo (fasta2a)",
        url=f"http://{host}:{port}/",
        description="Benchmark echo agent built on fasta2a.",
        skills=[
            Skill(
                id="echo",
                name="Echo",
                description="Echoes the text back; 'stream N' streams N chunks.",
                tags=["benchmark"],
                examples=["hello", "stream 10"],
                input_modes=["text/plain"],
                output_modes=["text/plain"],
            )
        ],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        docs_url=None,
        lifespan=lifespan,
    )


app = create_app(os.environ.get("BENCH_HOST", "127.0.0.1"), int(os.environ.get("BENCH_PORT", "8000")))
