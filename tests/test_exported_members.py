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
    "Agent",
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentProvider",
    "AgentSkill",
    "Answer",
    "Artifact",
    "BaseRequestHandler",
    "CallContext",
    "CardSignatureError",
    "CardSigner",
    "Client",
    "ClientError",
    "Executor",
    "Limits",
    "MemoryTaskStore",
    "Message",
    "Operation",
    "Outcome",
    "Part",
    "PushSettings",
    "RequestContext",
    "RetryPolicy",
    "Role",
    "SQLiteTaskStore",
    "SendMessageConfiguration",
    "SkillCard",
    "SkillContext",
    "SkillError",
    "SkillwireError",
    "StreamResponse",
    "SyncClient",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskEvents",
    "TaskFailedError",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskStore",
    "WebhookPolicy",
    "__version__",
    "compile_schema",
    "open_store",
    "validate_json",
    "verify_card",
]

#: The documented subpackages; every other module is internal.
PUBLIC_MODULES = [
    "skillwire.client",
    "skillwire.errors",
    "skillwire.models",
    "skillwire.security",
    "skillwire.testing",
    "skillwire.testing.store_contract",
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
    assert public == sorted(
        [
            *(name for name in EXPORTED if not name.startswith("_")),
            "client",
            "errors",
            "models",
            "security",
            "testing",
            "webhooks",
        ]
    )


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


def test_the_models_module_is_every_wire_model() -> None:
    from skillwire import models
    from skillwire.protocol import models as internal

    assert models.__all__ == internal.__all__
    assert all(getattr(models, name) is getattr(internal, name) for name in models.__all__)
