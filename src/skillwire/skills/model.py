"""Model-backed skills: a SKILL.md with ``providerConfig`` and no ``skill.py``, run by a model adapter.

The loader makes one with :func:`model_skill` (the adapter is built then, which checks the providerConfig
without any network: a problem is a :class:`~skillwire.errors.ManifestError` at ``providerConfig.<key>``).
A run:

1. renders the body with the validated input (``ctx.prompt()``; an optional top-level input property that
   is absent renders as its schema ``default``, else as ``""``) and sends it as the user message, after a
   system message giving the outputSchema when the output is JSON;
2. calls the provider with ``GenerationParams.from_hints(executionHints)``, asking for JSON when
   :func:`wants_json` (an outputSchema for an object or an array); every call of the run shares the one
   ``timeoutSeconds`` budget;
3. reads the reply: JSON (a reply wrapped in a ````` fence is accepted) or text, validated against the
   outputSchema. On a failure, one repair round: the conversation, the model's reply, and a user message
   with the exact error (instance path and reason); a second failure fails the task with that reason;
4. returns the value (the executor makes it the artifact). On a call that a stream watches (``ctx.streaming``)
   with a text output, the tokens are emitted as chunks of one artifact instead and nothing is returned; if
   the whole text then fails its schema, the repaired reply replaces that artifact.

With tools (``providerConfig.tools``: ids of skills of this agent, MCP tools made skills included, and
skills of remote A2A agents, ``{agent: URL, skill: ID, credentialsEnv: [{scheme: S, variable: V}]}``,
called with :class:`skillwire.Client` and the credentials those variables hold), the run is a tool-calling loop instead of steps 2 to 4's single call: the model is offered each tool (the
skill's id, description and inputSchema) and either calls some, each call being run through ``ctx.skills``
with a WORKING status update ("Calling <skill>") and its result (or its error) given back to the model, or
answers; the answer is read as in step 3. ``providerConfig.toolSteps`` (default 8) is the most model turns
that call tools: one more fails the task, as the ``timeoutSeconds`` deadline does, which every model call
and tool call shares. Tokens are not streamed in a tool-calling run.

A provider error fails the task with its caller-safe message (``str(error)``); what the provider said
(``error.detail``) goes to the log at WARNING only. ``skillwire.llm`` is imported inside functions, so an
agent without model-backed skills never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, cast

import msgspec

from skillwire.errors import A2AError, ManifestError, RenderError, SkillError, ValidationError
from skillwire.protocol.models import Task, new_id
from skillwire.protocol.states import TaskState
from skillwire.skills.manifest import SkillCard
from skillwire.skills.registry import Skill, skill_from_manifest

if TYPE_CHECKING:
    from skillwire.client import Client
    from skillwire.llm import Adapter, ChatMessage, GenerationParams, ProviderError, Tool, ToolCall, ToolReply
    from skillwire.skills._yaml import LineMap
    from skillwire.skills.context import SkillContext

__all__ = ["check_provider_config", "model_skill", "parse_reply", "repair_request", "wants_json"]

log = logging.getLogger("skillwire.skills")

#: The status message of a task whose providerConfig fails when it runs (an unset variable it names).
MISCONFIGURED = "The skill's model provider is not configured correctly on this server."
#: The most characters of a validation problem repeated to the model and in a failed task's message.
PROBLEM_LIMIT = 500
_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)
_KEY_TOKEN = re.compile(r"[^.\[\]]+|\[\d+\]")
#: How many model turns that call tools a run may take unless providerConfig.toolSteps says otherwise.
DEFAULT_TOOL_STEPS = 8
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


# -- loading -------------------------------------------------------------------------------------------------


def model_skill(card: SkillCard, *, source: str, lines: LineMap | None = None) -> Skill:
    """The skill a manifest with ``providerConfig`` and no ``skill.py`` stands for."""
    adapter = check_provider_config(card, lines)

    async def run(params: Any, ctx: SkillContext) -> Any:
        return await ModelRun(card, adapter, ctx).run()

    return skill_from_manifest(card, run, source=source)


def check_provider_config(card: SkillCard, lines: LineMap | None = None) -> Adapter:
    """The adapter for ``card.provider_config`` (no network); a ManifestError at ``providerConfig.<key>``
    with the file and, given ``lines``, the line, when no adapter can serve it."""
    from skillwire.llm import ProviderConfigError, adapter_for

    config = card.provider_config or {}
    tools, steps = config.get("tools", []), config.get("toolSteps", DEFAULT_TOOL_STEPS)
    problem = None
    if not isinstance(tools, list) or not all(
        (isinstance(t, str) and t) or _is_remote_tool(t) for t in tools
    ):
        problem = (
            "tools",
            "expected a list of skill ids (skills of this agent, MCP tools included) or remote skills"
            " ({agent: URL, skill: ID, credentialsEnv: [{scheme: NAME, variable: VARIABLE}]})",
        )
    elif isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        problem = ("toolSteps", "expected a number of model turns above 0")
    if problem is not None:
        key, reason = problem
        line = _line_of(lines, key) if lines is not None else None
        raise ManifestError(reason, path=f"providerConfig.{key}", line=line, source=card.source)
    try:
        return adapter_for(card.provider_config or {})
    except ProviderConfigError as exc:
        path = "providerConfig" + (f".{exc.key}" if exc.key else "")
        reason = str(exc).removeprefix(f"{path}: ").removeprefix("providerConfig: ")
        line = _line_of(lines, exc.key) if lines is not None else None
        raise ManifestError(reason, path=path, line=line, source=card.source) from None


def _is_remote_tool(entry: Any) -> bool:
    """Whether ``entry`` names a remote agent's skill: ``{agent: http(s)://..., skill: ID}``, and maybe
    ``credentialsEnv``, a list of ``{scheme: <a scheme of the agent's card>, variable: <an environment
    variable>}`` (the secret is the variable's value; a manifest never holds one)."""
    if not isinstance(entry, Mapping) or set(entry) - {"agent", "skill", "credentialsEnv"}:
        return False
    agent, skill, env = entry.get("agent"), entry.get("skill"), entry.get("credentialsEnv", [])
    return (
        isinstance(agent, str)
        and agent.startswith(("http://", "https://"))
        and isinstance(skill, str)
        and bool(skill)
        and isinstance(env, list)
        and all(
            isinstance(item, Mapping)
            and set(item) == {"scheme", "variable"}
            and all(isinstance(v, str) and v for v in item.values())
            for item in env
        )
    )


def _line_of(lines: LineMap, key: str) -> int | None:
    path: list[str | int] = ["providerConfig"]
    for token in _KEY_TOKEN.findall(key):
        path.append(int(token[1:-1]) if token.startswith("[") else token)
    for end in range(len(path), 0, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return None


# -- reading a reply -----------------------------------------------------------------------------------------


def wants_json(schema: Mapping[str, Any] | None) -> bool:
    """Whether an outputSchema asks for JSON: its ``type`` is object or array (one of them in a list of
    types without string), or it has no type but object or array keywords (``properties``, ``items``)."""
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind in ("object", "array")
    if isinstance(kind, list):
        return "string" not in kind and bool({"object", "array"} & set(kind))
    return any(key in schema for key in ("properties", "required", "additionalProperties", "items"))


def parse_reply(reply: str, *, as_json: bool) -> Any:
    """The value of a reply: the text, or the JSON it holds (inside a ````` fence or not; ValueError when it
    holds none).

    >>> parse_reply('```json\\n{"ok": true}\\n```', as_json=True)
    {'ok': True}
    """
    if not as_json:
        return reply
    fenced = _FENCE.match(reply)
    text = fenced.group(1) if fenced else reply
    try:
        return msgspec.json.decode(text.strip())
    except msgspec.DecodeError as exc:
        raise ValueError(f"the reply is not JSON ({exc})") from None
    except RecursionError:
        raise ValueError("the reply is JSON nested too deep") from None


def repair_request(problem: str, *, as_json: bool) -> str:
    """The user message of the repair round: what was wrong, and what to send instead."""
    wanted = (
        "a single JSON value that matches the JSON Schema given, with no code fence and no explanation"
        if as_json
        else "the corrected text, with no explanation"
    )
    return f"Your reply is not valid: {problem}. Reply again with only {wanted}."


# -- running -------------------------------------------------------------------------------------------------


class ModelRun:
    """One run of a model-backed skill (see the module's docstring)."""

    def __init__(self, card: SkillCard, adapter: Adapter, ctx: SkillContext) -> None:
        self.card, self.adapter, self.ctx = card, adapter, ctx
        self.as_json = wants_json(card.output_schema)
        self.validator = card.output_validator
        timeout = card.execution_hints.timeout_seconds
        self.deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout

    async def run(self) -> Any:
        messages = self.messages()
        tools = (self.card.provider_config or {}).get("tools")
        if tools:
            return await self.with_tools(messages, list(tools))
        if not self.as_json and self.ctx.streaming:
            return await self.streamed(messages)
        reply = await self.call(messages)
        try:
            return self.checked(reply)
        except ValueError as exc:
            return await self.repaired(messages, reply, str(exc))

    def messages(self) -> list[ChatMessage]:
        try:
            prompt = self.ctx.prompt(self._absent_inputs())
        except RenderError as exc:
            raise SkillError(f"The skill's prompt could not be rendered: {exc}") from None
        messages: list[ChatMessage] = []
        if self.as_json:
            schema = json.dumps(self.card.output_schema, separators=(",", ":"), ensure_ascii=False)
            messages.append(
                {
                    "role": "system",
                    "content": "Reply with a single JSON value that matches this JSON Schema, with no code"
                    f" fence and no explanation: {schema}",
                }
            )
        messages.append({"role": "user", "content": prompt})
        return messages

    def _absent_inputs(self) -> dict[str, Any]:
        """Optional top-level inputs not given: their default, else "" (a missing variable does not render)."""
        schema, params = self.card.input_schema, self.ctx.params
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping) or not isinstance(params, Mapping):
            return {}
        return {
            name: prop.get("default", "") if isinstance(prop, Mapping) else ""
            for name, prop in properties.items()
            if name not in params
        }

    def checked(self, reply: str) -> Any:
        """The reply's value, valid against the outputSchema (ValueError with the problem if not)."""
        value = parse_reply(reply, as_json=self.as_json)
        if self.validator is not None:
            try:
                self.validator.validate(value)
            except ValidationError as exc:
                problem = f"at {exc.instance_path or '/'}: {exc.reason}"
                raise ValueError(problem[:PROBLEM_LIMIT]) from None
        return value

    async def repaired(self, messages: list[ChatMessage], reply: str, problem: str) -> Any:
        """One repair round: the model sees its reply and the problem, and answers again."""
        log.info("skill %s on task %s: repair round: %s", self.card.id, self.ctx.task_id, problem)
        again: list[ChatMessage] = [
            *messages,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": repair_request(problem, as_json=self.as_json)},
        ]
        second = await self.call(again)
        try:
            return self.checked(second)
        except ValueError as exc:
            log.warning(
                "skill %s on task %s: the model's reply still fails after a repair round: %s",
                self.card.id,
                self.ctx.task_id,
                exc,
            )
            raise SkillError(
                f"The model's reply does not match the skill's outputSchema, even after a repair round: {exc}."
            ) from None

    async def streamed(self, messages: list[ChatMessage]) -> None:
        """The reply as chunks of one artifact: each chunk is sent when the next one arrives, so that the
        last is marked ``last_chunk``. Nothing is returned (the artifact is the result)."""
        from skillwire.llm import ProviderError

        artifact_id = new_id()
        held: str | None = None
        parts: list[str] = []
        try:
            # an adapter's stream is an async generator: closed at once when left (cancel closes upstream)
            stream = cast(AsyncGenerator[str, None], self.adapter.stream(messages, self.params()))
            async with contextlib.aclosing(stream) as chunks:
                async for chunk in chunks:
                    if held is not None:
                        await self._chunk(artifact_id, held, append=bool(parts))
                        parts.append(held)
                    held = chunk
        except ProviderError as exc:
            raise self._failed(exc) from None
        await self._chunk(artifact_id, held or "", append=bool(parts), last_chunk=True)
        reply = "".join([*parts, held or ""])
        try:
            self.checked(reply)
        except ValueError as exc:
            fixed = await self.repaired(messages, reply, str(exc))
            # the repaired text replaces the streamed one whole (the same artifact, not appended to)
            await self._chunk(artifact_id, fixed, append=False, last_chunk=True)

    async def _chunk(self, artifact_id: str, text: str, *, append: bool, last_chunk: bool = False) -> None:
        await self.ctx.artifact(
            text, artifact_id=artifact_id, name="result", append=append, last_chunk=last_chunk
        )

    async def with_tools(self, messages: list[ChatMessage], entries: list[Any]) -> Any:
        """The tool-calling loop (see the module's docstring)."""
        async with contextlib.AsyncExitStack() as stack:
            tools, by_name = await self.tools(entries, stack)
            return await self.loop(messages, tools, by_name)

    async def loop(self, messages: list[ChatMessage], tools: list[Tool], by_name: dict[str, Target]) -> Any:
        steps = int((self.card.provider_config or {}).get("toolSteps", DEFAULT_TOOL_STEPS))
        for step in range(steps + 1):
            reply = await self.call_tools(messages, tools)
            if not reply.calls:
                try:
                    return self.checked(reply.text)
                except ValueError as exc:
                    return await self.repaired(messages, reply.text, str(exc))
            if step == steps:
                raise SkillError(
                    f"The model was still calling tools after {steps} turns, the skill's budget"
                    " (providerConfig.toolSteps)."
                )
            messages.append({"role": "assistant", "content": reply.text, "tool_calls": list(reply.calls)})
            for call in reply.calls:
                messages.append(await self.tool_result(call, by_name))
        raise AssertionError("unreachable")  # pragma: no cover

    async def tools(
        self, entries: list[Any], stack: contextlib.AsyncExitStack
    ) -> tuple[list[Tool], dict[str, Target]]:
        """The tools offered to the model, and what each tool name calls: a skill id, or a remote skill
        (whose agent is reached now, for its card, and stays connected for the run). A name keeps to
        letters, digits, ``_`` and ``-``, as the APIs want: ``calc.multiply`` is offered as
        ``calc_multiply``."""
        from skillwire.llm import Tool

        calls = self.ctx.skills
        tools: list[Tool] = []
        by_name: dict[str, Target] = {}
        for entry in entries:
            target: Target
            if isinstance(entry, str):
                skill = calls.get(entry) if calls is not None else None
                if skill is None:
                    raise SkillError(f"The skill's tool {entry!r} is not a skill this agent serves.")
                target, description, schema = entry, skill.agent_skill.description, skill.input_schema
                named = entry
            else:
                target = await RemoteSkill.connect(entry, stack)
                description, schema, named = target.description, target.input_schema, target.skill_id
            name = _TOOL_NAME.sub("_", named)[:60]
            while name in by_name:  # a remote skill named like a local one
                name += "_"
            by_name[name] = target
            parameters = schema if schema is not None else {"type": "object"}
            tools.append(Tool(name=name, description=description, parameters=parameters))
        return tools, by_name

    async def tool_result(self, call: ToolCall, by_name: dict[str, Target]) -> ChatMessage:
        """Run one tool call (a WORKING status update says which); the message giving the model its result,
        or its error."""
        target = by_name.get(call.name)
        await self.ctx.working(f"Calling {target if target is not None else call.name}")
        running: Awaitable[Any] | None = None
        if isinstance(target, RemoteSkill):
            running = target.call(call.arguments)
        elif target is not None and self.ctx.skills is not None:
            running = self.ctx.skills.call(target, call.arguments, self.ctx)
        if running is None:
            content = json.dumps({"error": f"there is no tool {call.name!r}"})
        else:
            try:
                value = await asyncio.wait_for(running, self.left())
            except SkillError as exc:
                content = json.dumps({"error": exc.message}, ensure_ascii=False)
            except TimeoutError:
                raise SkillError(f"The skill ran out of time while calling {target}.") from None
            else:
                content = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return {"role": "tool", "content": content, "tool_call_id": call.id, "name": call.name}

    def left(self) -> float | None:
        """Seconds left of the run's deadline (None: none)."""
        return (
            None if self.deadline is None else max(self.deadline - asyncio.get_running_loop().time(), 0.001)
        )

    async def call_tools(self, messages: list[ChatMessage], tools: list[Tool]) -> ToolReply:
        from skillwire.llm import ProviderError

        try:
            return await self.adapter.complete_tools(messages, tools, self.params())
        except ProviderError as exc:
            raise self._failed(exc) from None
        except NotImplementedError as exc:
            raise SkillError(f"The skill's model provider cannot call tools: {exc}") from None

    async def call(self, messages: list[ChatMessage]) -> str:
        from skillwire.llm import ProviderError

        try:
            return await self.adapter.complete(messages, self.params(), json=self.as_json)
        except ProviderError as exc:
            raise self._failed(exc) from None

    def params(self) -> GenerationParams:
        """The hints as parameters, the timeout being what is left of the run's budget."""
        from skillwire.llm import GenerationParams

        params = GenerationParams.from_hints(self.card.execution_hints)
        if self.deadline is None:
            return params
        left = max(self.deadline - asyncio.get_running_loop().time(), 0.001)
        return dataclasses.replace(params, timeout_seconds=left)

    def _failed(self, exc: ProviderError) -> SkillError:
        """A provider error as the task's failure: its caller-safe message; the provider's text is logged."""
        from skillwire.llm import ProviderConfigError

        if isinstance(exc, ProviderConfigError):  # an unset variable: the operator's business
            log.warning("skill %s on task %s: %s", self.card.id, self.ctx.task_id, exc)
            return SkillError(MISCONFIGURED)
        log.warning(
            "skill %s on task %s: %s: %s (URL %s; HTTP status %s; the provider said: %s)",
            self.card.id,
            self.ctx.task_id,
            type(exc).__name__,
            exc,
            exc.url,
            exc.status,
            exc.detail,
        )
        return SkillError(str(exc))


class RemoteSkill:
    """A remote A2A agent's skill as a tool: ``{agent: URL, skill: ID, credentialsEnv: [{scheme: S,
    variable: V}]}``, called with :class:`skillwire.Client` (one blocking SendMessage per call). Its description and input
    schema come from the agent's card (the skill-schemas extension, when the agent publishes it)."""

    def __init__(self, client: Client, url: str, skill_id: str) -> None:
        from skillwire.skills.schema_card import read_skill_schemas

        self.client, self.url, self.skill_id = client, url, skill_id
        entry = next((s for s in client.card.skills if s.id == skill_id), None)
        if entry is None:
            raise SkillError(f"The agent at {url} has no skill {skill_id!r}.")
        self.description: str = entry.description
        self.input_schema: dict[str, Any] | None = (
            read_skill_schemas(client.card).get(skill_id, {}).get("input")
        )

    def __str__(self) -> str:
        return f"{self.skill_id} at {self.url}"

    @classmethod
    async def connect(cls, entry: Mapping[str, Any], stack: contextlib.AsyncExitStack) -> RemoteSkill:
        from skillwire.client import Client

        url, skill_id = str(entry["agent"]), str(entry["skill"])
        credentials = {}
        for item in entry.get("credentialsEnv") or ():
            scheme, variable = str(item["scheme"]), str(item["variable"])
            if variable not in os.environ:
                log.warning("the remote skill %s at %s: the variable %s is not set", skill_id, url, variable)
                raise SkillError(MISCONFIGURED)
            credentials[scheme] = os.environ[variable]
        try:
            client = await Client.connect(url, credentials=credentials or None)
        except Exception as exc:
            log.warning("the remote skill %s at %s: %s", skill_id, url, exc)
            raise SkillError(f"The agent at {url} could not be reached.") from None
        await stack.enter_async_context(client)
        return cls(client, url, skill_id)

    async def call(self, arguments: Any) -> Any:
        """The remote task's result (its data, else its text), or SkillError with its status message."""
        try:
            result = await self.client.send(skill=self.skill_id, data=arguments)
        except A2AError as exc:
            raise SkillError(f"{self.skill_id} at {self.url} refused the call: {exc.message}") from None
        except Exception as exc:
            log.warning("the remote skill %s at %s: %s", self.skill_id, self.url, exc)
            raise SkillError(f"The agent at {self.url} could not be reached.") from None
        if not isinstance(result, Task):  # a direct reply
            return result.text()
        if result.status.state is not TaskState.COMPLETED:
            said = result.status.message.text() if result.status.message is not None else ""
            raise SkillError(said or f"{self.skill_id} at {self.url} ended {result.status.state.name}")
        return result.data if result.data is not None else result.text


#: What a tool name calls: a skill of this agent (its id), or a remote agent's skill.
Target = str | RemoteSkill
