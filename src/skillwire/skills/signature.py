"""How a code skill's function is called, read from its signature.

A handler takes its input in one of two forms, and either may be ``def`` (run in a worker thread, as FastAPI
and FastMCP run sync functions) or ``async def`` (awaited on the event loop):

* **one input parameter**, the first, named ``params`` or annotated with a msgspec Struct: it receives the
  whole input (the Struct instance, when annotated with one); ``async def order(params: Order, ctx)``.
* **typed parameters**, FastMCP-style: each parameter is one field of the input object, its annotation the
  field's type and its default the field's default; ``def convert(amount: float, currency: str = "EUR")``.
  The input schema is built from the signature (a Struct made with ``msgspec.defstruct``, unknown fields
  refused), the input is validated against it and the function is called with keyword arguments.

In both forms the parameter annotated with :class:`~skillwire.skills.context.SkillContext` (or, without an
annotation, named ``ctx``) receives the context. Contradictions are refused when the skill is made:
``input_schema=`` together with a Struct annotation or with typed parameters (two sources for one schema).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from skillwire.errors import SkillwireError

__all__ = ["Call", "in_thread", "read_signature"]

_KEYWORDABLE = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True, slots=True)
class Call:
    """What the signature says: the Struct the input converts to (None: taken as it is), and the handler
    the executor calls as ``await handler(params, ctx)``."""

    struct: type[msgspec.Struct] | None
    handler: Callable[[Any, Any], Any]
    #: True when the input is the function's typed parameters (the Struct was built from them).
    typed: bool = False


_UNRESOLVED = object()


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
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
    return hints


def _is_context(param: inspect.Parameter, hint: Any) -> bool:
    from skillwire.skills.context import SkillContext

    if isinstance(hint, type) and issubclass(hint, SkillContext):
        return True
    annotation = param.annotation
    if isinstance(annotation, str):
        return annotation.rpartition(".")[2] == "SkillContext"
    return annotation is inspect.Parameter.empty and param.name == "ctx"


def _is_struct(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, msgspec.Struct)


def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a coroutine function that runs it in a worker thread (``asyncio.to_thread``)."""

    async def run(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return functools.update_wrapper(run, fn)


def read_signature(fn: Callable[..., Any], *, skill_id: str, input_schema: Any) -> Call:
    """How to call ``fn`` for the skill ``skill_id``; raises SkillwireError for a signature it cannot call
    or a contradiction with ``input_schema=``."""
    if not callable(fn):
        raise SkillwireError(f"skill {skill_id!r}: the handler must be a function, got {fn!r}")
    target = fn if inspect.iscoroutinefunction(fn) else in_thread(fn)
    params = list(inspect.signature(fn).parameters.values())
    hints = _hints(fn)
    context = [p for p in params if _is_context(p, hints.get(p.name))]
    if len(context) > 1:
        raise SkillwireError(f"skill {skill_id!r}: more than one SkillContext parameter ({context[0].name})")
    inputs = [p for p in params if p not in context]
    first = inputs[0] if inputs else None
    if first is not None and (first.name == "params" or _is_struct(hints.get(first.name))):
        return _whole_input(target, skill_id, first, hints.get(first.name), context, input_schema, params)
    return _typed(target, skill_id, inputs, hints, context[0].name if context else None, input_schema)


def _whole_input(
    target: Callable[..., Any],
    skill_id: str,
    first: inspect.Parameter,
    hint: Any,
    context: list[inspect.Parameter],
    input_schema: Any,
    params: list[inspect.Parameter],
) -> Call:
    struct = hint if _is_struct(hint) else None
    if struct is not None and input_schema is not None:
        raise SkillwireError(
            f"skill {skill_id!r}: input_schema= and the Struct annotation `{first.name}: {struct.__name__}`"
            " both declare the input schema; keep one"
        )
    if params.index(first) != 0 or len(params) > 2:
        raise SkillwireError(
            f"skill {skill_id!r}: a handler taking the whole input is `(params, ctx)`; for typed parameters,"
            f" do not name one `params`"
        )
    if len(params) == 1:
        return Call(struct, lambda value, ctx: target(value))
    return Call(struct, target)


def _typed(
    target: Callable[..., Any],
    skill_id: str,
    inputs: list[inspect.Parameter],
    hints: dict[str, Any],
    context: str | None,
    input_schema: Any,
) -> Call:
    if inputs and input_schema is not None:
        names = ", ".join(p.name for p in inputs)
        raise SkillwireError(
            f"skill {skill_id!r}: input_schema= and the typed parameters ({names}) both declare the input"
            " schema; keep one (or take the whole input as `params`)"
        )
    if not inputs:  # takes no input (maybe the context): whatever comes, unless input_schema= says more
        return Call(None, lambda value, ctx: target(**({context: ctx} if context else {})))
    fields: list[Any] = []
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
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, hint))
        else:
            fields.append((param.name, hint, param.default))
    name = re.sub(r"\W", "_", skill_id) + "_input"
    try:
        struct = msgspec.defstruct(name, fields, forbid_unknown_fields=True, kw_only=True)
        msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        raise SkillwireError(f"skill {skill_id!r}: its parameters make no input schema: {exc}") from None
    keys = [p.name for p in inputs]

    def call(value: Any, ctx: Any) -> Any:
        kwargs = {key: getattr(value, key) for key in keys}
        if context is not None:
            kwargs[context] = ctx
        return target(**kwargs)

    return Call(struct, call, typed=True)
