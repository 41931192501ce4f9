"""How a code skill's function is called, read from its signature; its types are its schemas.

A handler takes its input in one of two forms, and either may be ``def`` (run in a worker thread, as FastAPI
and FastMCP run sync functions) or ``async def`` (awaited on the event loop):

* **one input parameter**, the first, named ``params``, or the only one and annotated with a msgspec
  Struct or a pydantic model (as FastAPI takes a lone model as the whole body): it receives the whole
  input, converted to its annotation (``async def order(params: Order, ctx)`` gets an ``Order``); its
  annotation is the input schema (none for ``Any`` or no annotation).
* **typed parameters**, FastMCP-style: each parameter is one field of the input object, its annotation the
  field's type and its default the field's default; ``def convert(amount: float, currency: str = "EUR")``.
  The input schema is an object of those fields, unknown fields refused; the function is called with
  keyword arguments of the converted values.

The return annotation is the output schema (none for ``Any``, ``object``, ``None`` or no annotation), and
a result is turned into JSON by it. :mod:`skillwire.skills.annotations` makes the schemas and conversions;
an annotation it cannot express is refused here, naming the parameter.

In both forms the parameter annotated with :class:`~skillwire.skills.context.SkillContext` (or, without an
annotation, named ``ctx``) receives the context. Contradictions are refused when the skill is made:
``input_schema=`` together with an annotated input, ``output_schema=`` with a return annotation (two
sources for one schema).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import sys
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any

import msgspec

from skillwire.errors import SkillwireError
from skillwire.skills.annotations import Typed, no_schema, plain_json, typed, typed_fields

__all__ = ["Invocation", "in_thread", "read_signature"]

_KEYWORDABLE = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True, slots=True)
class Invocation:
    """What the signature says: the handler the executor calls as ``await handler(params, ctx)``, and the
    schemas and conversions of its input and output (None: no schema, taken as it is)."""

    handler: Callable[[Any, Any], Any]
    input: Typed | None = None
    output: Typed | None = None
    #: True when the input is the function's typed parameters.
    typed: bool = False


_UNRESOLVED = object()


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # one unresolvable annotation (a name imported under TYPE_CHECKING): resolve each alone
        pass
    hints: dict[str, Any] = {}
    names = getattr(fn, "__globals__", {})
    for param in inspect.signature(fn).parameters.values():
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            continue
        try:  # what get_type_hints does for each string annotation: the author's own code, in its module
            hints[param.name] = eval(annotation, names) if isinstance(annotation, str) else annotation
        except Exception:
            hints[param.name] = _UNRESOLVED
    returned = inspect.signature(fn).return_annotation
    if returned is not inspect.Signature.empty:
        try:
            hints["return"] = eval(returned, names) if isinstance(returned, str) else returned
        except Exception:
            hints["return"] = _UNRESOLVED
    return hints


def _is_context(param: inspect.Parameter, hint: Any) -> bool:
    from skillwire.skills.context import SkillContext

    if isinstance(hint, type) and issubclass(hint, SkillContext):
        return True
    annotation = param.annotation
    if isinstance(annotation, str):
        return annotation.rpartition(".")[2] == "SkillContext"
    return annotation is inspect.Parameter.empty and param.name == "ctx"


def _is_whole(hint: Any) -> bool:
    """Whether an annotation of the first parameter makes it the whole input: a Struct or pydantic model."""
    if not isinstance(hint, type):
        return False
    pydantic = sys.modules.get("pydantic")
    return issubclass(hint, msgspec.Struct) or (pydantic is not None and issubclass(hint, pydantic.BaseModel))


def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a coroutine function that runs it in a worker thread (``asyncio.to_thread``)."""

    async def run(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return functools.update_wrapper(run, fn)


def read_signature(
    fn: Callable[..., Any], *, skill_id: str, input_schema: Any, output_schema: Any = None
) -> Invocation:
    """How to call ``fn`` for the skill ``skill_id``; raises SkillwireError for a signature it cannot call,
    an annotation it cannot express or a contradiction with ``input_schema=`` / ``output_schema=``."""
    if not callable(fn):
        raise SkillwireError(f"skill {skill_id!r}: the handler must be a function, got {fn!r}")
    target = fn if inspect.iscoroutinefunction(fn) else in_thread(fn)
    params = list(inspect.signature(fn).parameters.values())
    hints = _hints(fn)
    context = [p for p in params if _is_context(p, hints.get(p.name))]
    if len(context) > 1:
        raise SkillwireError(f"skill {skill_id!r}: more than one SkillContext parameter ({context[0].name})")
    inputs = [p for p in params if p not in context]
    output = _output(skill_id, hints.get("return"), output_schema)
    first = inputs[0] if inputs else None
    if first is not None and (
        first.name == "params" or (inputs == [first] and _is_whole(hints.get(first.name)))
    ):
        call = _whole_input(target, skill_id, first, hints.get(first.name), input_schema, params)
    else:
        call = _typed(target, skill_id, inputs, hints, context[0].name if context else None, input_schema)
    return Invocation(call.handler, call.input, output, call.typed)


def _output(skill_id: str, hint: Any, output_schema: Any) -> Typed | None:
    """The return annotation's schema and conversion (None when it says nothing about the value)."""
    if hint is _UNRESOLVED:
        raise SkillwireError(
            f"skill {skill_id!r}: the return annotation cannot be resolved (is it imported only under"
            " TYPE_CHECKING?), so it cannot type the output"
        )
    if no_schema(hint) or (output_schema is not None and plain_json(hint)):
        return None  # an explicit schema says more than `-> dict`: it is the one
    if output_schema is not None:
        raise SkillwireError(
            f"skill {skill_id!r}: output_schema= and the return annotation both declare the output schema;"
            " keep one"
        )
    return typed(hint, where=f"skill {skill_id!r}: the return annotation", output=True)


def _whole_input(
    target: Callable[..., Any],
    skill_id: str,
    first: inspect.Parameter,
    hint: Any,
    input_schema: Any,
    params: list[inspect.Parameter],
) -> Invocation:
    if hint is _UNRESOLVED:
        raise SkillwireError(
            f"skill {skill_id!r}: the annotation {first.annotation!r} of parameter {first.name!r} cannot be"
            " resolved (is it imported only under TYPE_CHECKING?), so it cannot type the input"
        )
    if params.index(first) != 0 or len(params) > 2:
        raise SkillwireError(
            f"skill {skill_id!r}: a handler taking the whole input is `(params, ctx)`; for typed parameters,"
            f" do not name one `params`"
        )
    if no_schema(hint) or (input_schema is not None and plain_json(hint)):
        given = None  # an explicit schema says more than `params: dict`: it is the one
    else:
        given = typed(hint, where=f"skill {skill_id!r}: parameter {first.name!r}")
    if given is not None and input_schema is not None:
        raise SkillwireError(
            f"skill {skill_id!r}: input_schema= and the annotation `{first.name}: {_name(hint)}` both declare"
            " the input schema; keep one"
        )
    if len(params) == 1:
        return Invocation(lambda value, ctx: target(value), given)
    return Invocation(target, given)


def _name(hint: Any) -> str:
    return str(getattr(hint, "__name__", None) or hint).replace("typing.", "")


def _typed(
    target: Callable[..., Any],
    skill_id: str,
    inputs: list[inspect.Parameter],
    hints: dict[str, Any],
    context: str | None,
    input_schema: Any,
) -> Invocation:
    if inputs and input_schema is not None:
        names = ", ".join(p.name for p in inputs)
        raise SkillwireError(
            f"skill {skill_id!r}: input_schema= and the typed parameters ({names}) both declare the input"
            " schema; keep one (or take the whole input as `params`)"
        )
    if not inputs:  # takes no input (maybe the context): whatever comes, unless input_schema= says more
        return Invocation(lambda value, ctx: target(**({context: ctx} if context else {})))
    fields: list[tuple[str, Any, Any]] = []
    for param in inputs:
        if param.kind not in _KEYWORDABLE:
            raise SkillwireError(
                f"skill {skill_id!r}: parameter {param.name!r} ({param.kind.description}) cannot be one"
                " field of the input; use named parameters"
            )
        hint = hints.get(param.name, Any)
        if hint is _UNRESOLVED:
            raise SkillwireError(
                f"skill {skill_id!r}: the annotation {param.annotation!r} of parameter {param.name!r} cannot be"
                " resolved (is it imported only under TYPE_CHECKING?), so it cannot type the input"
            )
        default = MISSING if param.default is inspect.Parameter.empty else param.default
        fields.append((param.name, hint, default))
    name = re.sub(r"\W", "_", skill_id) + "_input"
    given = typed_fields(name, fields, where=f"skill {skill_id!r}")
    keys = [p.name for p in inputs]

    def call(value: Any, ctx: Any) -> Any:
        kwargs = {key: getattr(value, key) for key in keys}
        if context is not None:
            kwargs[context] = ctx
        return target(**kwargs)

    return Invocation(call, given, typed=True)
