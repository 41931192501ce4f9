"""The paved path for code skills (issue 11): sync handlers run in a worker thread, typed parameters are the
input schema, code skills follow a manifest's rules, contradictions are refused, the card publishes every
skill's schemas (skill-schemas extension), and `skills list` / `skills check` see code skills."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from google.protobuf import json_format

from conftest import EXAMPLES, RunningServer, assert_proto
from skillwire import Agent, Client, Message, SkillContext, SkillwireError, Task, TaskState
from skillwire.cli.main import main
from skillwire.errors import InvalidParamsError
from skillwire.skills.registry import skill_from_function
from skillwire.skills.schema_card import (
    MAX_SKILL_SCHEMA_BYTES,
    SKILL_SCHEMAS_URI,
    read_skill_schemas,
)
from skillwire.types import Part, Role

WAIT = 10.0
Serve = Callable[[Any], RunningServer]


def data(value: Any, skill: str | None = None) -> Message:
    return Message(
        message_id="m",
        role=Role.USER,
        parts=[Part(data=value)],
        metadata={"skillId": skill} if skill else None,
    )


class Order(msgspec.Struct):
    item: str
    quantity: int = 1


def money() -> Agent:
    agent = Agent("Money", "Converts amounts.")

    @agent.skill(tags=["money"])
    def convert(amount: float, currency: str = "EUR") -> dict[str, Any]:
        """Converts an amount."""
        return {"amount": amount * 2, "currency": currency, "thread": threading.current_thread().name}

    @agent.skill(tags=["money"], output_schema={"type": "string"})
    async def whoami(ctx: SkillContext, who: str) -> str:
        """Says which skill and who."""
        return f"{ctx.skill.id}:{who}"

    @agent.skill(tags=["shop"])
    def order(params: Order, ctx: SkillContext) -> dict[str, Any]:
        """Orders an item."""
        return {"ordered": params.item, "count": params.quantity, "thread": threading.current_thread().name}

    return agent


# -- sync handlers and typed parameters, through a real server ------------------------------------------------


async def test_sync_handlers_run_in_a_worker_thread_not_on_the_loop(serve: Serve) -> None:
    srv = serve(money().asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        typed = await client.send(data({"amount": 2}, "convert"))
        whole = await client.send(data({"item": "tea"}, "order"))
    results = []
    for task in (typed, whole):
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED, task
        result = task.artifacts[0].parts[0].data
        assert isinstance(result, dict)
        results.append(result)
        # the server's event loop runs in srv.thread: the handler ran elsewhere
        assert result.pop("thread") not in (srv.thread.name, threading.main_thread().name)
    assert results == [{"amount": 4.0, "currency": "EUR"}, {"ordered": "tea", "count": 1}]


async def test_typed_parameters_are_validated_and_passed_as_keywords(serve: Serve) -> None:
    srv = serve(money().asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        good = await client.send(data({"amount": 1.5, "currency": "USD"}, "convert"))
        assert isinstance(good, Task) and good.status.state is TaskState.COMPLETED
        assert good.artifacts[0].parts[0].data["currency"] == "USD"  # type: ignore[index]
        for bad, where, reason in (
            ({"amount": "ten"}, "/amount", "expected number, got string"),
            ({"currency": "USD"}, "/", "missing required property 'amount'"),
            ({"amount": 1, "colour": "red"}, "/", "additional property 'colour' is not allowed"),
        ):
            with pytest.raises(InvalidParamsError) as info:
                await client.send(data(bad, "convert"))
            assert reason in info.value.message, info.value.message
            assert info.value.metadata["instancePath"] == where
        injected = await client.send(data({"who": "ada"}, "whoami"))
    assert isinstance(injected, Task) and injected.artifacts[0].parts[0].text == "whoami:ada"


def test_the_input_schema_of_typed_parameters_is_built_from_the_signature() -> None:
    skill = money().registry.get("convert")
    assert skill is not None and skill.input_schema is not None
    body = skill.input_schema  # the object itself, at the top
    assert "$defs" not in body and "title" not in body
    assert body["properties"] == {
        "amount": {"type": "number"},
        "currency": {"type": "string", "default": "EUR"},
    }
    assert body["required"] == ["amount"] and body["additionalProperties"] is False


# -- the rules every skill follows ----------------------------------------------------------------------------


def test_contradictory_input_declarations_are_refused_when_decorated() -> None:
    agent = Agent("A")
    with pytest.raises(
        SkillwireError, match=r"skill 'both': input_schema= and the annotation `params: Order`"
    ):

        @agent.skill(tags=["t"], input_schema={"type": "object"})
        async def both(params: Order, ctx: SkillContext) -> None:
            """Both."""

    with pytest.raises(
        SkillwireError, match=r"skill 'typed': input_schema= and the typed parameters \(a, b\)"
    ):

        @agent.skill(tags=["t"], input_schema={"type": "object"})
        def typed(a: int, b: str = "x") -> None:
            """Typed."""

    with pytest.raises(SkillwireError, match=r"skill 'star'.*cannot be one field of the input"):

        @agent.skill(tags=["t"])
        def star(*args: int) -> None:
            """Star."""

    assert len(agent.registry) == 0


def test_code_skills_need_a_description_and_tags_like_manifests() -> None:
    agent = Agent("A")

    def bare(params: Any, ctx: SkillContext) -> None:
        return None

    with pytest.raises(SkillwireError) as info:
        agent.skill()(bare)
    assert str(info.value).startswith("skill 'bare' has no description (pass description= or give")
    assert "and no tags (pass tags=[...]" in str(info.value)
    with pytest.raises(SkillwireError, match="skill 'bare' has no tags"):
        agent.skill(description="Bare.")(bare)
    with pytest.raises(SkillwireError, match="skill 'bare' has no description"):
        agent.skill(tags=["t"])(bare)
    with pytest.raises(SkillwireError, match="skill 'bare' has no tags"):
        agent.skill(tags=[" "], description="Bare.")(bare)
    with pytest.raises(
        SkillwireError, match=r"skill 'no spaces' : ?the id must match|skill 'no spaces': the id"
    ):
        skill_from_function(bare, id="no spaces", tags=["t"], description="Bare.")

    def documented(params: Any, ctx: SkillContext) -> None:
        """Does things.

        More about them."""

    skill = skill_from_function(documented, id="documented", tags=["t"])
    assert skill.agent_skill.description == "Does things."


# -- the card -------------------------------------------------------------------------------------------------


def test_the_card_publishes_the_schemas_in_a_strict_protobuf_extension(serve: Serve) -> None:
    agent = money()
    agent.card_v03_fields = False  # the v1.0 card alone, which protobuf parses strictly
    srv = serve(agent.asgi(store="memory://"))
    card = httpx.get(srv.url + "/.well-known/agent-card.json", timeout=WAIT).json()
    proto = assert_proto(card, "AgentCard")
    (extension,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == SKILL_SCHEMAS_URI]
    assert extension.get("required", False) is False  # ProtoJSON leaves a false bool out
    params = extension["params"]
    for skill in agent.registry:
        assert params[skill.id]["input"] == skill.input_schema
    assert params["whoami"]["output"] == {"type": "string"}
    assert params["convert"]["output"] == {"type": "object"}  # its return annotation, dict[str, Any]
    # Through protobuf's Struct the numbers are doubles; the schemas still compare equal as JSON.
    (parsed,) = [e for e in proto.capabilities.extensions if e.uri == SKILL_SCHEMAS_URI]
    assert json_format.MessageToDict(parsed.params) == params


def test_schemas_over_the_budget_or_beyond_doubles_are_left_out_and_named() -> None:
    agent = Agent("A")
    huge = {"enum": [f"value-{i:06d}" for i in range(MAX_SKILL_SCHEMA_BYTES // 10)]}

    @agent.skill(tags=["t"], input_schema=huge, output_schema={"type": "string"})
    async def big(params: Any, ctx: SkillContext) -> str:
        """Big."""
        return ""

    @agent.skill(tags=["t"], input_schema={"type": "integer", "maximum": 2**60})
    async def wide(params: Any, ctx: SkillContext) -> None:
        """Wide."""

    @agent.skill(tags=["t"])
    async def plain(params: Any, ctx: SkillContext) -> None:
        """No schema at all."""

    card = agent.card()
    assert_proto(msgspec.json.encode(card), "AgentCard")
    schemas = read_skill_schemas(card)
    assert "plain" not in schemas
    assert schemas["big"]["output"] == {"type": "string"} and "input" not in schemas["big"]
    assert f"over the {MAX_SKILL_SCHEMA_BYTES}-byte limit" in schemas["big"]["omitted"]["input"]
    assert "beyond 2**53" in schemas["wide"]["omitted"]["input"]


def test_an_agent_without_schemas_has_no_extension() -> None:
    agent = Agent("A")

    @agent.skill(tags=["t"])
    async def plain(params: Any, ctx: SkillContext) -> None:
        """Plain."""

    assert agent.card().capabilities.extensions == []


# -- the CLI --------------------------------------------------------------------------------------------------


def test_skills_list_prints_the_schemas_of_a_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skills", "list", str(EXAMPLES / "greeter")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("greet: Greets a person by name") and out[0].endswith("[greeting, example]")
    assert out[1].startswith('  input: {"type":"object","properties":{"name":')
    assert out[2] == '  output: {"type":"string","minLength":1}'


def test_skills_list_reads_the_extension_of_a_running_agent(
    serve: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = money()
    srv = serve(agent.asgi(store="memory://"))
    assert main(["skills", "list", srv.url, "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    convert = agent.registry.get("convert")
    assert convert is not None and rows["convert"]["input"] == convert.input_schema
    assert rows["whoami"]["output"] == {"type": "string"}
    assert main(["skills", "list", srv.url]) == 0
    out = capsys.readouterr().out
    assert "convert: Converts an amount. [money]\n  input: {" in out and '  output: {"type":"object"}' in out


def test_skills_check_reports_every_problem_of_code_skills(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_py = tmp_path / "agent.py"
    agent_py.write_text(
        "import msgspec\n"
        "from skillwire import Agent\n"
        "agent = Agent('A')\n"
        "class Order(msgspec.Struct):\n"
        "    item: str\n"
        "@agent.skill(tags=['t'])\n"
        "def fine(amount: float) -> float:\n"
        "    '''Fine.'''\n"
        "    return amount\n"
        "@agent.skill()\n"
        "async def untagged(params, ctx):\n"
        "    return 1\n"
        "@agent.skill(tags=['t'], input_schema={'type': 'object'})\n"
        "async def both(params: Order, ctx):\n"
        "    '''Both.'''\n"
    )
    assert main(["skills", "check", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{agent_py}:10: skill 'untagged' has no description" in err  # the line the decorator is on
    assert f"{agent_py}:13: skill 'both': input_schema= and the annotation `params: Order`" in err
    assert "2 problem(s) in 3 skill(s)" in err
    agent_py.write_text(agent_py.read_text().split("@agent.skill()")[0])
    assert main(["skills", "check", str(agent_py)]) == 0
    assert "1 skill(s) valid" in capsys.readouterr().out


def test_a_folder_skill_may_be_sync_too(tmp_path: Path) -> None:
    skill_dir = tmp_path / "hello"
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text(
        "---\nid: hello\nname: Hello\ndescription: Says hello.\ntags: [t]\n---\nHi\n"
    )
    (skill_dir / "skill.py").write_text("def run(params, ctx):\n    return 'hello'\n")
    (skill,) = Agent.from_folder(tmp_path).registry
    assert skill.handler.__name__ == "run"


def test_an_unresolvable_annotation_of_a_typed_parameter_is_refused() -> None:
    agent = Agent("A")

    def later(amount: float, when: Undefined) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Later."""

    with pytest.raises(SkillwireError, match="skill 'later': the annotation 'Undefined' of parameter 'when'"):
        agent.skill(tags=["t"])(later)

    def whole(params: Undefined, ctx: SkillContext) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Whole."""

    with pytest.raises(
        SkillwireError, match="skill 'whole': the annotation 'Undefined' of parameter 'params'"
    ):
        agent.skill(tags=["t"])(whole)


def test_the_schemas_round_trip_exactly_through_protobuf() -> None:
    from a2a.types import a2a_pb2

    from skillwire.protocol.models import AgentCard
    from skillwire.wire.protobuf import message_to_struct, struct_to_message

    agent = money()

    @agent.skill(
        tags=["t"], input_schema={"type": "integer", "minimum": 3, "multipleOf": 0.5, "maximum": 2**53}
    )
    async def bounded(params: Any, ctx: SkillContext) -> None:
        """Bounded."""

    card = agent.card()
    back = message_to_struct(struct_to_message(card, a2a_pb2.AgentCard), AgentCard, with_defaults=True)
    sent, received = read_skill_schemas(card), read_skill_schemas(back)
    assert json.dumps(received, sort_keys=True) == json.dumps(sent, sort_keys=True)  # 3 stays 3, not 3.0
    assert received["bounded"]["input"]["maximum"] == 2**53
