"""The error tree: the table drawn in errors.py's docstring says what the classes say, and there is one root."""

from __future__ import annotations

import inspect
import re

import pytest

import skillwire.errors as errors
from skillwire.errors import (
    A2AError,
    SkillError,
    SkillInvalidRequestError,
    SkillRejectedError,
    SkillwireError,
    TaskNotFoundError,
)

#: ``+-- Name  code  http  GRPC_STATUS  REASON`` after any tree drawing (``|`` and spaces).
ROW = re.compile(r"^[ |]*\+-- (\w+)\s+(-\d+)\s+(\d{3})\s+([A-Z_]+)\s+([A-Z_]+)$")


def table() -> dict[str, tuple[int, int, str, str]]:
    doc = errors.__doc__ or ""
    rows = {}
    for line in doc.splitlines():
        match = ROW.match(line)
        if match:
            name, code, http, grpc, reason = match.groups()
            rows[name] = (int(code), int(http), grpc, reason)
    return rows


def protocol_errors() -> dict[str, type[A2AError]]:
    return {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, A2AError) and cls is not A2AError
    }


def test_the_docstring_table_has_a_row_for_every_protocol_error() -> None:
    assert sorted(table()) == sorted(protocol_errors())


@pytest.mark.parametrize("name", sorted(protocol_errors()))
def test_each_docstring_row_says_what_its_class_declares(name: str) -> None:
    cls = protocol_errors()[name]
    assert table()[name] == (cls.code, cls.http_status, cls.grpc_status, cls.reason)


def test_the_docstring_draws_each_error_under_its_base_class() -> None:
    """The tree's indentation is the class hierarchy: a row's parent is the nearest row above it drawn less
    deep, and the rows drawn least deep derive from A2AError."""
    parents: list[tuple[int, type[A2AError]]] = [(-1, A2AError)]
    drawn = 0
    for line in (errors.__doc__ or "").splitlines():
        if not ROW.match(line):
            continue
        depth = line.index("+--")
        while parents[-1][0] >= depth:
            parents.pop()
        cls = protocol_errors()[line[depth + 4 :].split()[0]]
        assert cls.__bases__ == (parents[-1][1],), line
        parents.append((depth, cls))
        drawn += 1
    assert drawn == len(protocol_errors())


def test_every_error_has_one_root() -> None:
    classes = [cls for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, Exception)]
    assert all(issubclass(cls, SkillwireError) for cls in classes)
    assert issubclass(A2AError, SkillwireError)


def test_skill_error_kinds_are_types() -> None:
    invalid = SkillError.invalid_request("no date")
    rejected = SkillError.rejected("over budget")
    assert type(invalid) is SkillInvalidRequestError and invalid.message == "no date"
    assert type(rejected) is SkillRejectedError and rejected.message == "over budget"
    assert isinstance(invalid, SkillError) and isinstance(rejected, SkillError)
    assert not isinstance(rejected, SkillInvalidRequestError)


def test_task_not_found_is_built_in_one_place() -> None:
    error = TaskNotFoundError.for_task("t-1")
    assert error.message == "Task t-1 not found" and error.metadata == {"taskId": "t-1"}


def test_the_kinds_of_an_internal_error_are_decoded_by_their_reason_and_only_those() -> None:
    from typing import Any

    from skillwire.errors import ERROR_INFO_TYPE, InternalError, ServiceUnavailableError
    from skillwire.wire.errors import error_from_jsonrpc

    def decoded(reason: str, metadata: dict[str, str] | None = None) -> Any:
        info = {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": "a2a-protocol.org"}
        return error_from_jsonrpc(
            {"code": -32603, "message": "m", "data": [{**info, "metadata": metadata or {}}]}
        )

    busy = decoded("SERVICE_UNAVAILABLE", {"retryAfter": "7"})
    assert type(busy) is ServiceUnavailableError and busy.retry_after == 7 and busy.message == "m"
    assert decoded("SERVICE_UNAVAILABLE").retry_after == 1  # no retryAfter said: the default
    assert type(decoded("INTERNAL_ERROR")) is InternalError
    # a reason that names no kind of -32603 does not change the class the code gives
    assert type(decoded("TASK_NOT_FOUND")) is InternalError
