"""A code skill's Python types are its schema, exactly: one table of annotations, each with the schema it
must publish, values it must take (and what the handler then receives) and values it must refuse (with
-32602 and where). The schema is the card's, and the one validation uses.

Where pydantic has a schema for the same annotation, the published one must accept and refuse the same
sample values as pydantic's own (checked with the ``jsonschema`` reference implementation); for pydantic
models the published schema is pydantic's ``model_json_schema`` itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import socket
from typing import Annotated, Any, Literal, Optional

import annotated_types as at
import jsonschema
import msgspec
import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic reads a TypedDict from typing only on Python 3.12+

from skillwire import Agent, SkillContext, SkillwireError
from skillwire.errors import InvalidParamsError
from skillwire.protocol.states import TaskState
from skillwire.skills.registry import Skill
from skillwire.types import AgentSkill, Part


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(msgspec.Struct):
    x: int
    y: int = 0


@dataclasses.dataclass
class Pair:
    left: str
    right: list[int] = dataclasses.field(default_factory=list)


class Movie(TypedDict, total=False):
    title: str
    year: int


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=1)
    age: int = pydantic.Field(ge=0, le=150)
    email: str | None = None

    @pydantic.field_validator("name")
    @classmethod
    def capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("the name must start with a capital letter")
        return value


NO = object()  # in a row: the value is refused


@dataclasses.dataclass
class Row:
    annotation: Any
    schema: dict[str, Any]
    #: (JSON value sent, the Python value the handler receives)
    takes: list[tuple[Any, Any]]
    #: (JSON value sent, the JSON pointer the refusal names under /x)
    refuses: list[tuple[Any, str]]
    #: whether pydantic's own schema for the annotation is compared (it has none for a msgspec Struct)
    pydantic: bool = True


ROWS = {
    "int": Row(int, {"type": "integer"}, [(3, 3), (3.0, 3)], [(2.5, ""), ("3", ""), (True, "")]),
    "float": Row(float, {"type": "number"}, [(2, 2.0), (2.5, 2.5)], [("2", ""), (None, "")]),
    "str": Row(str, {"type": "string"}, [("a", "a")], [(1, "")]),
    "bool": Row(bool, {"type": "boolean"}, [(True, True)], [(1, ""), ("true", "")]),
    "optional": Row(
        Optional[int],  # noqa: UP045 - the spelling under test
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        [(None, None), (4.0, 4)],
        [("4", "")],
    ),
    "literal": Row(Literal["a", "b"], {"enum": ["a", "b"]}, [("b", "b")], [("c", "")]),
    "enum": Row(
        Color,
        {"$ref": "#/$defs/Color"},
        [("red", Color.RED)],
        [("green", ""), ("RED", "")],
    ),
    "list": Row(
        list[int], {"type": "array", "items": {"type": "integer"}}, [([1.0, 2], [1, 2])], [([1.5], "/0")]
    ),
    "dict": Row(
        dict[str, int],
        {"type": "object", "additionalProperties": {"type": "integer"}},
        [({"a": 1.0}, {"a": 1})],
        [({"a": "1"}, "/a")],
    ),
    "tuple": Row(
        tuple[int, str],
        {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
        },
        [([1, "a"], (1, "a"))],
        [([1], ""), ([1, "a", 2], ""), (["a", "a"], "/0")],
    ),
    "struct": Row(
        Point,
        {"$ref": "#/$defs/Point"},
        [({"x": 1.0}, Point(1, 0))],
        [({"y": 1}, ""), ({"x": "1"}, "/x")],
        pydantic=False,
    ),
    "dataclass": Row(
        Pair, {"$ref": "#/$defs/Pair"}, [({"left": "l"}, Pair("l", []))], [({"left": 1}, "/left"), ({}, "")]
    ),
    "typeddict": Row(
        Movie, {"$ref": "#/$defs/Movie"}, [({"year": 1999.0}, {"year": 1999})], [({"year": "1999"}, "/year")]
    ),
    "meta": Row(
        Annotated[int, msgspec.Meta(ge=0)],
        {"type": "integer", "minimum": 0},
        [(0, 0)],
        [(-5, "")],
        pydantic=False,  # pydantic does not read msgspec's Meta
    ),
    "ge": Row(Annotated[int, at.Ge(0)], {"type": "integer", "minimum": 0}, [(0.0, 0)], [(-5, "")]),
    "lengths": Row(
        Annotated[str, at.MinLen(1), at.MaxLen(3)],
        {"type": "string", "minLength": 1, "maxLength": 3},
        [("abc", "abc")],
        [("", ""), ("abcd", "")],
    ),
    "interval": Row(
        Annotated[float, at.Interval(gt=0, le=1)],
        {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        [(1, 1.0), (0.5, 0.5)],
        [(0, ""), (1.5, "")],
    ),
    "len": Row(
        Annotated[list[int], at.Len(1, 2)],
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
        [([1], [1])],
        [([], ""), ([1, 2, 3], "")],
    ),
    "multiple": Row(
        Annotated[int, at.MultipleOf(5)], {"type": "integer", "multipleOf": 5}, [(10, 10)], [(7, "")]
    ),
    "nested constraint": Row(
        list[Annotated[int, at.Gt(0)]],
        {"type": "array", "items": {"type": "integer", "exclusiveMinimum": 0}},
        [([1, 2.0], [1, 2])],
        [([1, 0], "/1")],
    ),
    "description": Row(
        Annotated[str, "The city"],
        {"type": "string", "description": "The city"},
        [("Oslo", "Oslo")],
        [(1, "")],
    ),
    "datetime": Row(
        datetime.datetime,
        {"type": "string"},
        [("2024-05-01T10:00:00Z", datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC))],
        [(1, ""), ("not a date", "")],
        pydantic=False,  # pydantic's says format date-time, an annotation both check the same way
    ),
}


def typed_skill(annotation: Any) -> tuple[Agent, list[Any]]:
    agent = Agent("Typed")
    got: list[Any] = []

    def take(x: Any, note: str = "") -> None:
        """Takes x."""
        got.append(x)

    take.__annotations__ = {"x": annotation, "note": str, "return": None}
    agent.skill(tags=["t"])(take)
    return agent, got


def schema_of(skill: Skill) -> tuple[dict[str, Any], dict[str, Any]]:
    """The input schema, and the property schema of x."""
    schema = skill.input_schema
    assert schema is not None
    assert (
        schema["type"] == "object" and schema["required"] == ["x"] and schema["additionalProperties"] is False
    )
    return schema, schema["properties"]["x"]


@pytest.mark.parametrize("name", ROWS)
def test_an_annotation_is_published_as_its_schema(name: str) -> None:
    row = ROWS[name]
    agent, _ = typed_skill(row.annotation)
    skill = agent.registry.get("take")
    assert skill is not None
    whole, prop = schema_of(skill)
    assert prop == row.schema
    card = agent.card()
    (extension,) = card.capabilities.extensions
    assert extension.params is not None and extension.params["take"]["input"] == whole  # the card's is it


@pytest.mark.parametrize("name", ROWS)
async def test_an_annotation_takes_and_refuses_what_its_schema_says(name: str) -> None:
    row = ROWS[name]
    agent, got = typed_skill(row.annotation)
    async with agent.test_client() as client:
        for value, expected in row.takes:
            task = await client.send(skill="take", data={"x": value})
            assert task.status.state is TaskState.COMPLETED, (value, task.status)
            assert got[-1] == expected and type(got[-1]) is type(expected), (value, got[-1])
        for value, where in row.refuses:
            with pytest.raises(InvalidParamsError) as refused:
                await client.send(skill="take", data={"x": value})
            assert refused.value.metadata["instancePath"] == "/x" + where, (value, refused.value)
    assert len(got) == len(row.takes)  # nothing refused reached the handler


@pytest.mark.parametrize("name", [name for name, row in ROWS.items() if row.pydantic])
def test_the_published_schema_judges_values_as_pydantics_own(name: str) -> None:
    row = ROWS[name]
    agent, _ = typed_skill(row.annotation)
    skill = agent.registry.get("take")
    assert skill is not None
    ours = jsonschema.Draft202012Validator(skill.input_schema)
    theirs = jsonschema.Draft202012Validator(
        pydantic.TypeAdapter(dict[str, row.annotation]).json_schema()  # type: ignore[name-defined]
    )
    for value in [v for v, _ in row.takes] + [v for v, _ in row.refuses]:
        assert ours.is_valid({"x": value}) == theirs.is_valid({"x": value}), value


# -- pydantic models --------------------------------------------------------------------------------------


def people() -> tuple[Agent, list[Any]]:
    agent = Agent("People")
    got: list[Any] = []

    @agent.skill(tags=["t"])
    def register(params: Person) -> Person:
        """Registers a person."""
        got.append(params)
        return params

    @agent.skill(tags=["t"])
    def greet(person: Person, times: Annotated[int, pydantic.Field(ge=1)] = 1) -> str:
        """Greets a person."""
        got.append((person, times))
        return " ".join([f"Hello {person.name}"] * times)

    return agent, got


def test_a_pydantic_model_is_published_as_pydantics_own_schema() -> None:
    agent, _ = people()
    register, greet = agent.registry.get("register"), agent.registry.get("greet")
    assert register is not None and greet is not None
    assert register.input_schema == Person.model_json_schema()
    assert register.output_schema == Person.model_json_schema(mode="serialization")
    assert greet.input_schema is not None and greet.output_schema == {"type": "string"}
    assert greet.input_schema["properties"]["person"] == {"$ref": "#/$defs/Person"}
    assert greet.input_schema["$defs"]["Person"] == Person.model_json_schema()
    assert greet.input_schema["properties"]["times"] == {
        "default": 1,
        "minimum": 1,
        "title": "Times",
        "type": "integer",
    }
    assert greet.input_schema["additionalProperties"] is False


async def test_a_pydantic_model_is_validated_by_pydantic_with_locations() -> None:
    agent, got = people()
    async with agent.test_client() as client:
        task = await client.send(skill="register", data={"name": "Ada", "age": 36.0})
        assert task.status.state is TaskState.COMPLETED
        assert got[-1] == Person(name="Ada", age=36) and type(got[-1].age) is int
        assert task.artifacts[0].parts[0].data == {"name": "Ada", "age": 36, "email": None}
        task = await client.send(skill="greet", data={"person": {"name": "Bo", "age": 3}, "times": 2})
        assert task.artifacts[0].parts[0].text == "Hello Bo Hello Bo"
        for skill, data, where, reason in [
            ("register", {"name": "Ada", "age": -1}, "/age", "minimum"),  # the schema: pydantic's own
            ("register", {"name": "ada", "age": 1}, "/name", "must start with a capital letter"),  # pydantic
            ("greet", {"person": {"name": "ada", "age": 1}}, "/person/name", "capital letter"),
            ("greet", {"person": {"name": "Bo", "age": 1}, "times": 0}, "/times", "minimum"),
            ("greet", {"person": {"name": "Bo", "age": 1}, "extra": 1}, "/", "extra"),
        ]:
            with pytest.raises(InvalidParamsError) as refused:
                await client.send(skill=skill, data=data)
            assert refused.value.metadata["instancePath"] == where, (data, refused.value)
            assert reason in refused.value.message, refused.value.message
    assert len(got) == 2


# -- return annotations -----------------------------------------------------------------------------------


class Out(msgspec.Struct):
    total: int
    colors: list[Color] = []


async def test_the_return_annotation_is_the_output_schema_and_is_checked() -> None:
    agent = Agent("Out")

    @agent.skill(tags=["t"])
    def total(values: list[int], colors: list[Color] = [], lie: bool = False) -> Out:  # noqa: B006
        """Adds values up."""
        return {"total": "many"} if lie else Out(sum(values), colors)  # type: ignore[return-value]

    @agent.skill(tags=["t"])
    def count(text: str) -> Annotated[int, at.Ge(0)]:
        """Counts words."""
        return len(text.split()) if text else -1

    out, counted = agent.registry.get("total"), agent.registry.get("count")
    assert out is not None and counted is not None
    assert out.output_schema is not None and out.output_schema["title"] == "Out"
    assert out.output_schema["properties"]["total"] == {"type": "integer"}
    assert counted.output_schema == {"type": "integer", "minimum": 0}
    async with agent.test_client() as client:
        task = await client.send(skill="total", data={"values": [1, 2.0], "colors": ["red"]})
        assert task.artifacts[0].parts[0].data == {"total": 3, "colors": ["red"]}
        task = await client.send(skill="count", data={"text": "a b c"})
        assert task.artifacts[0].parts[0].data == 3
        for skill, data in [("total", {"values": [], "lie": True}), ("count", {"text": ""})]:
            task = await client.send(skill=skill, data=data)
            assert task.status.state is TaskState.FAILED
            assert task.status.message is not None
            assert "does not match its outputSchema" in task.status.message.text()


# -- refused when declared ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Bounded:
    n: Annotated[int, at.Ge(0)]


def refusal(annotations: dict[str, Any]) -> str:
    def handler(**kwargs: Any) -> Any:
        """A handler."""

    handler.__annotations__ = annotations
    handler.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in annotations if name != "return"]
    )
    with pytest.raises(SkillwireError) as refused:
        Agent("A").skill(id="odd", tags=["t"])(handler)
    return str(refused.value)


@pytest.mark.parametrize(
    ("annotations", "named", "why"),
    [
        ({"sock": socket.socket}, "parameter 'sock'", "has no JSON Schema"),
        ({"n": Annotated[int, at.Predicate(lambda n: n % 2 == 0)]}, "parameter 'n'", "not a constraint"),
        ({"n": Annotated[int, object()]}, "parameter 'n'", "not a constraint"),
        ({"s": Annotated[str, msgspec.Meta(ge=0)]}, "parameter 's'", "has no JSON Schema"),
        ({"b": Bounded}, "parameter 'b'", "field Bounded.n is annotated with Ge(ge=0)"),
        ({"return": socket.socket}, "the return annotation", "has no JSON Schema"),
        ({"p": Person, "sock": socket.socket}, "parameter 'sock'", "has no JSON Schema"),
    ],
)
def test_an_annotation_that_cannot_be_expressed_is_refused_when_declared(
    annotations: dict[str, Any], named: str, why: str
) -> None:
    message = refusal(annotations)
    assert message.startswith(f"skill 'odd': {named}: "), message
    assert why in message, message


def test_skill_ids_are_the_function_names() -> None:
    agent = Agent("A")

    @agent.skill(tags=["t"])
    def count_words(text: str) -> int:
        """Counts words."""
        return len(text.split())

    @agent.skill(id="tally", tags=["t"])
    def count_more(text: str) -> int:
        """Counts more."""
        return 0

    assert [s.id for s in agent.registry] == ["count_words", "tally"]
    assert [s.id for s in agent.card().skills] == ["count_words", "tally"]


def test_a_context_parameter_is_not_part_of_the_schema() -> None:
    agent = Agent("A")

    @agent.skill(tags=["t"])
    async def hello(name: str, ctx: SkillContext) -> str:
        """Says hello."""
        return name

    skill = agent.registry.get("hello")
    assert skill is not None and skill.input_schema is not None
    assert list(skill.input_schema["properties"]) == ["name"]


# -- the example in docs/skills.md ----------------------------------------------------------------------------


def docs_example() -> dict[str, Any]:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "skills.md").read_text()
    (block,) = [b for b in text.split("```python\n") if b.startswith("# docs/skills.md: typed skills")]
    namespace: dict[str, Any] = {"__name__": "docs_skills_example"}
    exec(compile(block.split("```")[0], "docs/skills.md", "exec", dont_inherit=True), namespace)
    return namespace


async def test_the_docs_example_of_typed_skills_does_what_the_page_says() -> None:
    example = docs_example()
    agent: Agent = example["agent"]
    assert [s.id for s in agent.card().skills] == ["order", "count_words"]
    async with agent.test_client() as client:
        task = await client.send(skill="order", data={"lines": [{"item": "tea", "quantity": 2.0}]})
        assert task.data == 2
        task = await client.send(skill="count_words", data={"text": "one two three"})
        assert task.data == 3
        with pytest.raises(InvalidParamsError, match="/lines/0/quantity"):
            await client.send(skill="order", data={"lines": [{"item": "tea", "quantity": 0}]})


def test_the_readme_example_of_code_skills_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    (block,) = [b.split("```")[0] for b in text.split("```python\n") if "class Order(msgspec.Struct)" in b]
    exec(compile(block, "README.md", "exec", dont_inherit=True), {"__name__": "readme_example"})
    printed = capsys.readouterr().out.strip()
    said = block.rsplit("# ", 1)[1].strip()
    assert printed == said == "completed {'ordered': 'tea', 'count': 2}"


# -- the descriptor is the contract ---------------------------------------------------------------------------


async def echo_handler(params: Any, ctx: Any) -> Any:
    return params


def test_a_skill_whose_card_names_another_id_is_refused() -> None:
    entry = AgentSkill(id="shown", name="Shown", description="d", tags=["t"])
    with pytest.raises(SkillwireError, match="its card entry has the id 'shown'; requests are routed by"):
        Skill(id="routed", agent_skill=entry, handler=echo_handler)


async def test_a_skill_added_directly_enforces_the_schema_it_publishes() -> None:
    agent = Agent("A")
    agent.add_skill(
        Skill(
            id="add",
            agent_skill=AgentSkill(id="add", name="Add", description="Adds.", tags=["t"]),
            handler=echo_handler,
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            output_schema={"type": "object", "required": ["n"]},
        )
    )
    async with agent.test_client() as client:
        assert (await client.send(skill="add", data={"n": 2.0})).data == {"n": 2}
        with pytest.raises(InvalidParamsError, match="/n"):
            await client.send(skill="add", data={"n": "two"})
    with pytest.raises(SkillwireError, match="its input schema is not valid"):
        Skill(
            id="bad",
            agent_skill=AgentSkill(id="bad", name="Bad", description="d", tags=["t"]),
            handler=echo_handler,
            input_schema={"type": "integr"},
        )


async def test_declared_output_modes_are_honoured() -> None:
    agent = Agent("Modes")

    @agent.skill(tags=["t"], output_modes=["text/plain"])
    def words(n: int) -> Any:
        """Text only."""
        return "one two" if n == 2 else {"n": n}

    @agent.skill(tags=["t"], output_modes=["application/json"])
    def label(name: str) -> str:
        """JSON only."""
        return name.upper()

    assert [s.output_modes for s in agent.card().skills] == [["text/plain"], ["application/json"]]
    async with agent.test_client() as client:
        assert (await client.send(skill="words", data={"n": 2})).text == "one two"
        refused = await client.send(skill="words", data={"n": 3})
        assert refused.status.state is TaskState.FAILED and refused.status.message is not None
        assert refused.status.message.text() == (
            "The skill produced a result of type application/json, which its outputModes (text/plain) do not"
            " include."
        )
        converted = await client.send(skill="label", data={"name": "ada"})
        assert converted.data == "ADA" and converted.artifacts[0].parts[0].media_type == "application/json"


async def test_the_agents_default_output_modes_hold_for_a_skill_without_its_own() -> None:
    agent = Agent("Texts", default_output_modes=["text/plain"])

    @agent.skill(tags=["t"])
    async def shape(kind: str, ctx: SkillContext) -> Any:
        """Text, or not."""
        if kind == "file":
            await ctx.artifact([Part(raw=b"x", media_type="image/png")])
        return kind if kind == "text" else {"kind": kind}

    async with agent.test_client() as client:
        assert (await client.send(skill="shape", data={"kind": "text"})).text == "text"
        for kind, what in [
            ("data", "a result of type application/json"),
            ("file", "an artifact part of type image/png"),
        ]:
            task = await client.send(skill="shape", data={"kind": kind})
            assert task.status.state is TaskState.FAILED and task.status.message is not None
            assert what in task.status.message.text() and "(text/plain)" in task.status.message.text()
