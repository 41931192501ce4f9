"""The front door: ``skillwire.__all__`` is the intended public set, no more, no less (as httpx's
exported-members test). Adding or removing a name here is an API decision: change the docs with it."""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import skillwire

EXPORTED = [
    "A2AError",
    "APIKey",
    "Agent",
    "Answer",
    "BaseRequestHandler",
    "Bearer",
    "CallContext",
    "CardSignatureError",
    "CardSigner",
    "Client",
    "ClientError",
    "Executor",
    "HTTPBasic",
    "InvalidParamsError",
    "Limits",
    "McpServer",
    "Message",
    "MutualTLS",
    "OAuth2",
    "OpenIDConnect",
    "Outcome",
    "Principal",
    "PushSettings",
    "RequestContext",
    "RetryPolicy",
    "Security",
    "SkillCard",
    "SkillContext",
    "SkillError",
    "SkillwireError",
    "SyncClient",
    "Task",
    "TaskEvents",
    "TaskFailedError",
    "TaskNotFoundError",
    "TaskState",
    "WebhookPolicy",
    "__version__",
    "compile_schema",
    "validate_json",
    "verify_card",
]

#: The documented subpackages; every other module is internal (``skillwire.models`` is the former name of
#: ``skillwire.types``, kept working).
PUBLIC_MODULES = [
    "skillwire.client",
    "skillwire.errors",
    "skillwire.llm",
    "skillwire.models",
    "skillwire.security",
    "skillwire.server",
    "skillwire.stores",
    "skillwire.testing",
    "skillwire.testing.store_contract",
    "skillwire.types",
    "skillwire.webhooks",
]


def test_the_front_door_exports_the_intended_set() -> None:
    assert skillwire.__all__ == EXPORTED


@pytest.mark.parametrize("name", EXPORTED)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(skillwire, name) is not None


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_name_of_a_public_subpackage_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(set(module.__all__), key=module.__all__.index)  # no duplicates
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_dir_advertises_only_the_front_door_and_the_public_subpackages() -> None:
    public = [name for name in dir(skillwire) if not name.startswith("_")]
    modules = [name.removeprefix("skillwire.") for name in PUBLIC_MODULES if name.count(".") == 1]
    assert public == sorted([*(name for name in EXPORTED if not name.startswith("_")), *modules])


def test_the_namespace_holds_no_public_name_outside_all() -> None:
    # Importing the front door binds its internal submodules too (skillwire.agent, ...): modules are
    # covered by the docstring's list; any other public value must be exported.
    for name in ("Client", "SkillCard", "compile_schema"):  # resolve some lazy names first
        getattr(skillwire, name)
    extra = [
        name
        for name, value in vars(skillwire).items()
        if not name.startswith("_") and not isinstance(value, ModuleType) and name not in EXPORTED
    ]
    assert extra == []


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no attribute 'TaskRuntime'"):
        _ = skillwire.TaskRuntime  # type: ignore[attr-defined]


def test_public_subpackages_are_reachable_without_importing_them() -> None:
    code = "import skillwire; print(skillwire.testing.MockAgent.__name__, skillwire.errors.TaskNotFoundError.code)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["MockAgent", "-32001"]


def test_the_types_module_is_every_wire_type() -> None:
    from skillwire import models, types
    from skillwire.protocol import models as internal
    from skillwire.protocol.operations import Operation

    assert types.__all__ == sorted([*internal.__all__, "Operation"])
    assert all(getattr(types, name) is getattr(internal, name) for name in internal.__all__)
    assert types.Operation is Operation
    assert models.__all__ == types.__all__  # the former name, kept working


@pytest.mark.parametrize(
    ("name", "home"),
    [("AgentCard", "skillwire.types"), ("Part", "skillwire.types"), ("open_store", "skillwire.stores")],
)
def test_a_name_that_moved_still_resolves_with_a_warning_naming_its_module(name: str, home: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"import it from {home}"):
        value = getattr(skillwire, name)
    assert value is getattr(importlib.import_module(home), name)
    assert name not in vars(skillwire)  # not cached: each use warns


def test_the_front_door_holds_no_wire_type_but_what_callers_read() -> None:
    from skillwire import types

    assert sorted(set(EXPORTED) & set(types.__all__)) == ["Message", "Task", "TaskState"]


def test_the_server_package_loads_no_bus_driver_until_one_is_asked_for() -> None:
    code = (
        "import sys, skillwire.server as s; assert 'skillwire.server.buses.redis' not in sys.modules;"
        " s.RedisEventBus; print('skillwire.server.buses.redis' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]
