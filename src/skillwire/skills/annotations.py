"""A code skill's Python types as one JSON Schema, and the conversions between JSON and those types.

The schema made here is the one the card publishes, ``skillwire skills list`` prints, the console draws
and the executor validates with (compiled by :mod:`skillwire.skills.schema`); the conversion then gives the
handler Python values of its types, and turns a result into JSON. Two engines, each the library made for
the job, so that nothing here re-derives what they already do:

* **msgspec** (always installed): builtins, ``Optional``, ``Literal``, ``Enum``, ``list``/``dict``/
  ``tuple``/``set``, msgspec Structs, dataclasses, ``TypedDict``, ``datetime``/``UUID``/``Decimal``,
  ``Annotated[..., msgspec.Meta(...)]``. The schema is ``msgspec.json.schema``, loading ``msgspec.convert``,
  dumping ``msgspec.to_builtins``.
* **pydantic** (when installed, and only for an annotation that uses it: a ``BaseModel``, a pydantic
  dataclass, ``Field(...)``, a pydantic type): the schema is pydantic's own (``model_json_schema`` for a
  model), validation and dumping are pydantic's. pydantic is never imported here: an annotation can only
  use it if its author imported it.

Written here, and why:

* ``annotated-types`` constraints (``Gt``, ``Ge``, ``Lt``, ``Le``, ``MultipleOf``, ``MinLen``, ``MaxLen``,
  ``Len``, ``Interval``: the ones pydantic uses) become ``msgspec.Meta``, and a plain string in
  ``Annotated`` the description: msgspec reads only its own ``Meta`` and would drop them silently.
* Refusals: metadata neither engine enforces (``annotated_types.Predicate``, an unknown object), such
  metadata inside a Struct, dataclass or TypedDict field (msgspec would ignore it there), and a type with
  no JSON Schema, are refused when the skill is declared, naming the parameter: a skill never publishes a
  constraint it does not enforce.
* msgspec writes a Struct as ``{"$ref": "#/$defs/Order", "$defs": {...}}``; the object is hoisted to the
  top (as pydantic writes a model), so readers of the card see its properties at once.
* Errors of either engine become :class:`~skillwire.errors.ValidationError` with a JSON pointer.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import msgspec

from skillwire.errors import SkillwireError, ValidationError

__all__ = ["Typed", "dump_result", "no_schema", "plain_json", "pointer", "typed", "typed_fields"]

#: Python annotations that say nothing about the value: no schema, nothing checked.
_OPEN: tuple[Any, ...] = (Any, object)
_NO_DEFAULT = dataclasses.MISSING


@dataclass(frozen=True, slots=True)
class Typed:
    """One annotation (or a function's typed parameters) as a schema and its two conversions."""

    #: The JSON Schema (2020-12) of the JSON form.
    schema: dict[str, Any]
    #: A JSON value the schema accepted -> the Python value (raises ValidationError).
    load: Callable[[Any], Any]
    #: A Python value of the annotation -> its JSON form.
    dump: Callable[[Any], Any]
    #: Which engine made it: ``"msgspec"`` or ``"pydantic"``.
    engine: str = "msgspec"


def no_schema(hint: Any) -> bool:
    """Whether ``hint`` says nothing about the value (absent, ``Any``, ``object``, ``None``)."""
    return hint is None or hint is type(None) or any(hint is open_ for open_ in _OPEN)


_PLAIN: tuple[Any, ...] = (dict, list, str, int, float, bool, type(None), Any, object, Union, types.UnionType)


def plain_json(hint: Any) -> bool:
    """Whether ``hint`` is made of JSON's own Python types only (``dict``, ``list[str]``, ``str | None``):
    it converts nothing, so an explicit schema may say more about the same value."""
    for part, _ in _parts(hint):
        origin = typing.get_origin(part)
        if not any(part is plain or origin is plain for plain in _PLAIN):
            return False
    return True


def pointer(path: str) -> str:
    """msgspec's ``$.a.b[0]`` as the JSON pointer ``/a/b/0``."""
    out = []
    for token in path.removeprefix("$").replace("[", ".").replace("]", "").split("."):
        if token:
            out.append(token.replace("~", "~0").replace("/", "~1"))
    return "".join("/" + t for t in out)


def typed(hint: Any, *, where: str, output: bool = False) -> Typed:
    """The schema and conversions of one annotation (a whole input, or with ``output`` a return value, whose
    schema is the form it is dumped in); ``where`` names it in a refusal (``skill 'add': the return
    annotation``)."""
    if _uses_pydantic(hint):
        return _pydantic(hint, where, mode="serialization" if output else "validation")
    return _msgspec(_translate(hint, where), where)


def typed_fields(name: str, fields: list[tuple[str, Any, Any]], *, where: str) -> Typed:
    """The schema and conversions of typed parameters ``[(name, annotation, default or MISSING)]``: an
    object with one property per parameter, unknown properties refused; ``load`` gives an object whose
    attributes are the parameters. ``where`` names the skill (``skill 'add'``)."""
    if any(_uses_pydantic(hint) for _, hint, _ in fields):
        return _pydantic_fields(name, fields, where)
    translated = []
    for field, hint, default in fields:
        hint = _translate(hint, f"{where}: parameter {field!r}")
        _msgspec_schema(hint, f"{where}: parameter {field!r}")  # one refusal per parameter, named
        translated.append((field, hint) if default is _NO_DEFAULT else (field, hint, default))
    try:
        struct = msgspec.defstruct(name, translated, forbid_unknown_fields=True, kw_only=True)
        schema = msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        raise SkillwireError(f"{where}: its parameters make no input schema: {exc}") from None
    schema = _hoisted(schema)
    schema.pop("title", None)  # the Struct is made here, its name is nobody's
    return Typed(schema, _msgspec_loader(struct), msgspec.to_builtins)


def dump_result(value: Any) -> Any:
    """A result without a declared type as JSON where its type says how (a Struct, a dataclass, a pydantic
    model, an Enum); anything else as it is, for the executor to check."""
    if isinstance(value, msgspec.Struct | enum.Enum) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return msgspec.to_builtins(value)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return value


# -- walking an annotation -------------------------------------------------------------------------------


def _fields_of(cls: Any) -> dict[str, Any]:
    """The annotated fields of a Struct, dataclass or TypedDict (empty for any other class)."""
    is_struct = isinstance(cls, type) and issubclass(cls, msgspec.Struct)
    if not (is_struct or dataclasses.is_dataclass(cls) or typing.is_typeddict(cls)):
        return {}
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a forward reference msgspec will name when it fails on it
        return {}


def _parts(hint: Any) -> Iterator[tuple[Any, str]]:
    """Every type and metadata object in ``hint``, with the field path that leads to it ("" at the top)
    through the fields of Structs, dataclasses and TypedDicts (each class visited once)."""
    seen: set[int] = set()
    pending: list[tuple[Any, str]] = [(hint, "")]
    while pending:
        item, path = pending.pop()
        yield item, path
        origin = typing.get_origin(item)
        if origin is Annotated:
            base, *metadata = typing.get_args(item)
            pending.append((base, path))
            pending.extend((meta, path) for meta in metadata)
        elif origin is Literal:
            continue
        elif origin is not None:
            pending.extend((arg, path) for arg in typing.get_args(item))
        elif isinstance(item, type) and id(item) not in seen:
            seen.add(id(item))
            for name, field in _fields_of(item).items():
                pending.append(
                    (field, f"{path}.{item.__name__}.{name}" if path else f"{item.__name__}.{name}")
                )


def _module(obj: Any) -> str:
    owner = obj if isinstance(obj, type) else type(obj)
    return str(getattr(owner, "__module__", "") or "")


def _uses_pydantic(hint: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return False  # nothing can use pydantic unless its author imported it
    for part, _ in _parts(hint):
        if _module(part).split(".")[0] in ("pydantic", "pydantic_core"):
            return True
        if isinstance(part, type) and (
            issubclass(part, pydantic.BaseModel) or hasattr(part, "__pydantic_validator__")
        ):
            return True  # a model, or a pydantic dataclass
    return False


# -- msgspec ------------------------------------------------------------------------------------------------

_BOUNDS = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le", "MultipleOf": "multiple_of"}
_LENGTHS = {"MinLen": "min_length", "MaxLen": "max_length"}


def _as_meta(meta: Any, where: str) -> list[msgspec.Meta]:
    """``Annotated`` metadata as msgspec's Meta; refused when msgspec would not enforce it."""
    if isinstance(meta, msgspec.Meta):
        return [meta]
    if isinstance(meta, str):
        return [msgspec.Meta(description=meta)]
    kind = type(meta).__name__
    if _module(meta) == "annotated_types":
        if isinstance(meta, sys.modules["annotated_types"].GroupedMetadata):  # Interval, Len: their parts
            return [m for part in meta for m in _as_meta(part, where)]
        if kind in _BOUNDS:
            key = _BOUNDS[kind]
            return [msgspec.Meta(**{key: getattr(meta, key)})]
        if kind in _LENGTHS:
            key = _LENGTHS[kind]
            return [msgspec.Meta(**{key: getattr(meta, key)})]
    raise SkillwireError(
        f"{where}: the annotation's metadata {meta!r} is not a constraint skillwire can publish and enforce"
        " (msgspec.Meta, annotated-types Gt/Ge/Lt/Le/MultipleOf/MinLen/MaxLen/Len/Interval, or a string"
        " as the description; with pydantic installed, pydantic's Field and types)"
    )


def _translate(hint: Any, where: str) -> Any:
    """``hint`` with annotated-types constraints and descriptions as msgspec Meta; refuses metadata in the
    fields of classes, where msgspec would ignore what is not its own Meta."""
    for part, path in _parts(hint):
        if path and typing.get_origin(part) is Annotated:
            for meta in typing.get_args(part)[1:]:
                if not isinstance(meta, msgspec.Meta):
                    raise SkillwireError(
                        f"{where}: field {path} is annotated with {meta!r}, which msgspec does not enforce"
                        " inside a Struct, dataclass or TypedDict; use msgspec.Meta(...) there (or, with"
                        " pydantic installed, a pydantic model)"
                    )
    return _rebuilt(hint, where)


def _rebuilt(hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is None or origin is Literal:
        return hint
    args = typing.get_args(hint)
    if origin is Annotated:
        base = _rebuilt(args[0], where)
        metas = [m for meta in args[1:] for m in _as_meta(meta, where)]
        return Annotated[(base, *metas)] if metas else base
    rebuilt = tuple(_rebuilt(arg, where) for arg in args)
    if all(new is old for new, old in zip(rebuilt, args, strict=True)):
        return hint
    if origin is Union or origin is types.UnionType:
        return Union[rebuilt]  # noqa: UP007 - built from a tuple
    return origin[rebuilt if len(rebuilt) != 1 else rebuilt[0]]


def _msgspec_schema(hint: Any, where: str) -> dict[str, Any]:
    try:
        schema = msgspec.json.schema(hint)
        msgspec.json.Decoder(hint)  # what it cannot convert (a Meta that does not fit the type)
    except (TypeError, ValueError) as exc:
        raise SkillwireError(f"{where}: {_show(hint)} has no JSON Schema: {exc}") from None
    return _hoisted(schema)


def _msgspec(hint: Any, where: str) -> Typed:
    return Typed(_msgspec_schema(hint, where), _msgspec_loader(hint), msgspec.to_builtins)


def _msgspec_loader(hint: Any) -> Callable[[Any], Any]:
    def load(value: Any) -> Any:
        try:
            return msgspec.convert(value, hint)
        except msgspec.ValidationError as exc:
            reason, found, where = str(exc).rpartition(" - at `")
            if not found:
                reason, where = str(exc), "$"
            raise ValidationError(reason, instance_path=pointer(where.rstrip("`"))) from None

    return load


def _hoisted(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"$ref": "#/$defs/X", "$defs": {...}}`` with X at the top, when nothing else refers to it."""
    ref, defs = schema.get("$ref"), schema.get("$defs")
    if set(schema) != {"$ref", "$defs"} or not isinstance(ref, str) or not isinstance(defs, dict):
        return schema
    name = ref.removeprefix("#/$defs/")
    if name not in defs or json.dumps(defs).count(json.dumps(ref)) > 0:
        return schema  # recursive: the top must stay a reference
    rest = {key: value for key, value in defs.items() if key != name}
    return {**defs[name], **({"$defs": rest} if rest else {})}


def _show(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if isinstance(hint, type) else None
    return text or re.sub(r"\btyping\.", "", repr(hint))


# -- pydantic -----------------------------------------------------------------------------------------------


def _pydantic(hint: Any, where: str, mode: str = "validation") -> Typed:
    import pydantic

    try:
        adapter: Any = pydantic.TypeAdapter(hint)
        if isinstance(hint, type) and issubclass(hint, pydantic.BaseModel):
            schema = hint.model_json_schema(mode=mode)  # type: ignore[arg-type]
        else:
            schema = adapter.json_schema(mode=mode)
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise SkillwireError(f"{where}: {_show(hint)} has no JSON Schema: {exc}") from None
    return Typed(schema, _pydantic_loader(adapter), _pydantic_dumper(adapter), engine="pydantic")


def _pydantic_fields(name: str, fields: list[tuple[str, Any, Any]], where: str) -> Typed:
    import pydantic

    specs = []
    for field, hint, default in fields:
        _pydantic(hint, f"{where}: parameter {field!r}")  # one refusal per parameter, named
        spec = dataclasses.field() if default is _NO_DEFAULT else dataclasses.field(default=default)
        specs.append((field, hint, spec))
    made: Any = dataclasses.make_dataclass(name, specs, kw_only=True)
    made.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")
    typed_ = _pydantic(made, where)
    typed_.schema.pop("title", None)  # the dataclass is made here, its name is nobody's
    return typed_


def _pydantic_loader(adapter: Any) -> Callable[[Any], Any]:
    import pydantic

    def load(value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            errors = exc.errors(include_url=False)
            first = errors[0]
            path = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in first["loc"])
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ValidationError(f"{first['msg']}{more}", instance_path=path) from None

    return load


def _pydantic_dumper(adapter: Any) -> Callable[[Any], Any]:
    def dump(value: Any) -> Any:
        # a value not of the declared type (a dict for a model) is dumped as it is; the schema judges it
        return adapter.dump_python(value, mode="json", warnings=False)

    return dump
