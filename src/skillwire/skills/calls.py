"""The agent's skills as one skill may call them: ``ctx.skills`` (a model-backed skill's tools).

A call runs the other skill's handler inside the calling task, as its caller: the skill must be served
(read-only mode applies), its securityRequirements are checked against the task's principal, its input is
validated against its schema and its result against its output schema. What it reports is not the task's:
its WORKING messages are (as the caller's status), its artifacts are collected and are its result when its
handler returns none; a question (``ctx.ask``), an authorization request or a delegation is refused, since
nobody can answer it in the middle of another skill's run. Every refusal and failure is a
:class:`~skillwire.errors.SkillError` whose message says what went wrong, for the caller to pass on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from skillwire.errors import A2AError, SkillError, ValidationError
from skillwire.protocol.models import Artifact, Message, Part
from skillwire.protocol.states import TaskState
from skillwire.skills.context import AuthNeeded, InputNeeded, SkillContext

if TYPE_CHECKING:
    from skillwire.security.policy import Security
    from skillwire.server.tasks.executor import TaskEvents
    from skillwire.skills.registry import Skill, SkillRegistry

__all__ = ["SkillCalls"]


class SkillCalls:
    def __init__(
        self,
        registry: SkillRegistry,
        *,
        read_only: bool = False,
        security: Security | None = None,
        schema_steps: int | None = None,
    ) -> None:
        self.registry = registry
        self.read_only = read_only
        self.security = security
        self.schema_steps = schema_steps

    def get(self, skill_id: str) -> Skill | None:
        """The served skill ``skill_id``, or None."""
        skill = self.registry.get(skill_id)
        return skill if skill is not None and (skill.read_only or not self.read_only) else None

    async def call(self, skill_id: str, arguments: Any, caller: SkillContext) -> Any:
        """Run the skill ``skill_id`` with ``arguments`` for ``caller``; its result (JSON), or SkillError."""
        skill = self.get(skill_id)
        if skill is None:
            raise SkillError(f"There is no skill {skill_id!r} to call.")
        if self.security is not None and skill.security_sets:
            try:
                self.security.authorize(caller.principal, skill.security_sets, f"Skill {skill_id!r}")
            except A2AError as exc:
                raise SkillError(exc.message) from None
        try:
            params = skill.validate_input(arguments, max_steps=self.schema_steps)
        except ValidationError as exc:
            raise SkillError(
                f"Invalid input for {skill_id}: {exc.instance_path or '/'}: {exc.reason}"
            ) from None
        events = _CalledEvents(caller.events, skill_id)
        ctx = SkillContext(
            skill,
            events,  # type: ignore[arg-type]
            message=caller.message,
            call=caller.call,
            task=None,
            params=params,
            output_modes=[],
            skills=self,
        )
        try:
            result = await skill.handler(params, ctx)
        except (InputNeeded, AuthNeeded):
            raise SkillError(
                f"{skill_id} asked a question, which cannot be answered when it is called"
            ) from None
        except SkillError:
            raise
        except Exception as exc:
            raise SkillError(f"{skill_id} failed ({type(exc).__name__})") from exc
        if result is None:
            return events.collected()
        value = skill.output_json(result)
        try:
            skill.validate_output(value, max_steps=self.schema_steps)
        except ValidationError as exc:
            raise SkillError(
                f"{skill_id} gave output that does not match its outputSchema: {exc.reason}"
            ) from None
        return value


class _CalledEvents:
    """The caller's events, as the called skill sees them: WORKING goes through, artifacts are kept."""

    def __init__(self, events: TaskEvents, skill_id: str) -> None:
        self._events = events
        self._skill_id = skill_id
        self._artifacts: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._events, name)

    async def status(self, state: TaskState, message: Message | str | None = None) -> None:
        if state is not TaskState.WORKING:
            raise SkillError(f"{self._skill_id} asked for {state.name}, which it cannot when it is called")
        await self._events.status(state, message)

    async def artifact(self, content: Any, **_: Any) -> None:
        self._artifacts.append(content)

    async def set_metadata(self, key: str, value: Any) -> None:
        raise SkillError(f"{self._skill_id} delegated its work, which it cannot when it is called")

    def collected(self) -> Any:
        """The artifacts' content as one value: their text, or the one data value, or None."""
        parts: list[Part] = []
        for content in self._artifacts:
            if isinstance(content, str):
                parts.append(Part(text=content))
            elif isinstance(content, Artifact):
                parts.extend(content.parts)
            else:
                parts.extend(content)
        texts = [p.text for p in parts if isinstance(p.text, str)]
        if texts:
            return "".join(texts)
        data = [p.data for p in parts if p.data is not UNSET]
        return data[0] if len(data) == 1 else (data or None)
