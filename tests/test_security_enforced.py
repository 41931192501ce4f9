"""Security enforced on every operation of every binding (issue 12), with a real server on 127.0.0.1: no
credentials is 401 (UNAUTHENTICATED on gRPC) before the request handler sees anything, tasks belong to the
principal that created them, tenants are granted by the policy, skills' requirements add to the agent's,
and a skill can ask for more (AUTH_REQUIRED)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from conftest import STREAM_WAIT, RunningServer
from skillwire import Agent, SkillContext, TaskState
from skillwire.client import JsonRpcTransport, RestTransport
from skillwire.client.grpc import GrpcTransport
from skillwire.errors import (
    A2AError,
    PermissionDeniedError,
    SkillwireError,
    TaskNotFoundError,
    UnauthenticatedError,
)
from skillwire.protocol import models as m
from skillwire.protocol.operations import OPERATIONS, Operation
from skillwire.security import APIKey, HTTPBasic, Principal, Security, hash_password
from skillwire.server.context import CallContext
from skillwire.server.handler import RequestHandler
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores.sqlite import SQLiteTaskStore
from test_operation_table import SAMPLES

KEYS = {"alice": "alice-key-7f3a9c", "bob": "bob-key-2e81d4"}
ALICE = {"X-API-Key": KEYS["alice"]}
BOB = {"X-API-Key": KEYS["bob"]}
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


class Spy(RequestHandler):
    """Stands in front of the runtime and counts what reaches it."""

    def __init__(self, inner: TaskRuntime) -> None:
        self.inner = inner
        self.calls: list[tuple[Operation, Principal]] = []

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        self.calls.append((operation, context.principal))
        return await self.inner.handle(operation, params, context)


def vault(**security: Any) -> Agent:
    """An agent with an API-key scheme (alice may use tenant ``acme`` and has scope ``admin``) and skills
    that show who runs them."""
    policy = Security(
        APIKey(keys=KEYS, scopes={"alice": ["admin"]}),
        tenants={"alice": ["acme"]},
        **security,
    )
    agent = Agent("Vault", "Keeps secrets", security=policy)

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who is calling."""
        return f"{ctx.principal.subject} via {ctx.principal.scheme}"

    @agent.skill(tags=["test"])
    async def plan(params: Any, ctx: SkillContext) -> str:
        """Keeps a plan until asked for its second line."""
        answer = await ctx.ask("Second line?")
        return f"secret plan: {params.get('text')} / {answer.text}"

    @agent.skill(tags=["test"], security=[{"apiKey": ["admin"]}])
    async def purge(params: Any, ctx: SkillContext) -> str:
        """Only for admins."""
        return "purged"

    return agent


def message(text: str, skill: str, **fields: Any) -> m.Message:
    return m.Message(
        message_id=m.new_id(),
        role=m.Role.USER,
        parts=[m.Part(text=text)],
        metadata={"skillId": skill},
        **fields,
    )


class Caller:
    """One binding's transport with one caller's credentials (or none)."""

    def __init__(
        self, srv: RunningServer, binding: str, headers: dict[str, str], http: httpx.AsyncClient
    ) -> None:
        self.binding = binding
        if binding == "GRPC":
            address = srv.app.grpc_address
            assert address is not None
            self.transport: Any = GrpcTransport(address, timeout=STREAM_WAIT, headers=headers)
        else:
            kind = JsonRpcTransport if binding == "JSONRPC" else RestTransport
            self.transport = kind(srv.url + "/", http, headers=headers)

    async def call(self, operation: Operation, request: Any) -> Any:
        if any(spec.operation is operation and spec.streaming for spec in OPERATIONS):
            return [event async for event in self.transport.stream(operation, request)]
        return await self.transport.send(operation, request)

    async def send(self, msg: m.Message, tenant: str = "") -> m.Task:
        result = await self.call(Operation.SEND_MESSAGE, m.SendMessageRequest(message=msg, tenant=tenant))
        task = result.task if isinstance(result, m.SendMessageResponse) else result
        assert isinstance(task, m.Task), result
        return task

    async def aclose(self) -> None:
        close = getattr(self.transport, "aclose", None)
        if close is not None:
            await close()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=STREAM_WAIT) as client:
        yield client


async def failure(call: Any) -> A2AError:
    with pytest.raises(A2AError) as caught:
        await call
    return caught.value


# -- declaring ---------------------------------------------------------------------------------------------


async def test_the_card_declares_the_schemes_and_requirements_and_parses_strictly(
    serve: Any, http: httpx.AsyncClient
) -> None:
    policy = Security(
        APIKey(keys=KEYS),
        HTTPBasic(users={"ops": hash_password("correct horse")}),
        require=[{"apiKey": []}, {"basic": []}],
    )
    agent = Agent("Vault", "Keeps secrets", security=policy, card_v03_fields=False)

    @agent.skill(tags=["test"], security=[{"basic": []}])
    async def audit(params: Any, ctx: SkillContext) -> str:
        """Ops only."""
        return "ok"

    srv = serve(agent.asgi(store="memory://"))
    response = await http.get(srv.url + "/.well-known/agent-card.json")  # the public card needs nothing
    assert response.status_code == 200
    card = response.json()
    assert card["securitySchemes"] == {
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
        "basic": {"httpAuthSecurityScheme": {"scheme": "basic"}},
    }
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}, {"schemes": {"basic": {}}}]
    assert card["skills"][0]["securityRequirements"] == [{"schemes": {"basic": {}}}]
    json_format.ParseDict(card, pb.AgentCard())  # the official types, unknown fields refused


def test_a_skill_naming_an_undeclared_scheme_is_refused_at_start_up() -> None:
    agent = Agent("A", security=Security(APIKey(keys=KEYS)))

    @agent.skill(tags=["test"], security=[{"oauth": ["write"]}])
    async def write(params: Any, ctx: SkillContext) -> str:
        """Writes."""
        return "written"

    with pytest.raises(
        SkillwireError, match=r"scheme 'oauth', which the agent does not declare \(declared: apiKey\)"
    ):
        agent.asgi(store="memory://")

    bare = Agent("B")

    @bare.skill(tags=["test"], security=[{"apiKey": []}])
    async def read(params: Any, ctx: SkillContext) -> str:
        """Reads."""
        return "read"

    with pytest.raises(SkillwireError, match="the agent declares no security"):
        bare.asgi(store="memory://")


def test_requirements_must_name_declared_schemes_and_cannot_be_empty() -> None:
    with pytest.raises(ValueError, match="'bearer', which is not declared"):
        Security(APIKey(keys=KEYS), require=[{"bearer": []}])
    with pytest.raises(ValueError, match="would let every caller in"):
        Security(APIKey(keys=KEYS), require=[])
    with pytest.raises(ValueError, match="would let every caller in"):
        Security(APIKey(keys=KEYS), require=[{}])
    with pytest.raises(ValueError, match="two security schemes are named 'apiKey'"):
        Security(APIKey(keys=KEYS), APIKey(keys={"c": "other-key"}))
    with pytest.raises(ValueError, match="hash_password"):
        HTTPBasic(users={"ops": "plain text password"})


# -- enforced before any work ------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_every_operation_without_credentials_is_refused_before_the_handler(
    serve: Any, http: httpx.AsyncClient, binding: str
) -> None:
    spies: list[Spy] = []

    def spy(runtime: TaskRuntime) -> Spy:
        spies.append(Spy(runtime))
        return spies[0]

    srv = serve(vault().asgi(store="memory://", wrap=spy, grpc_port=0))
    for headers in ({}, {"X-API-Key": "not-a-key"}):
        caller = Caller(srv, binding, headers, http)
        try:
            for spec in OPERATIONS:
                error = await failure(caller.call(spec.operation, SAMPLES[spec.operation]))
                assert isinstance(error, UnauthenticatedError), (spec.method, headers, error)
        finally:
            await caller.aclose()
    assert spies[0].calls == []  # nothing reached the runtime: no lookup, no task


async def test_the_http_answer_is_401_with_a_challenge_and_never_reads_the_body(
    serve: Any, http: httpx.AsyncClient
) -> None:
    srv = serve(vault().asgi(store="memory://"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    answer = await http.post(srv.url + "/", json=body, headers={"A2A-Version": "1.0"})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'ApiKey in="header", name="X-API-Key"'
    assert answer.json()["error"]["code"] == -32040
    assert answer.json()["error"]["data"][0]["reason"] == "UNAUTHENTICATED"
    rest = await http.get(srv.url + "/tasks/x", headers={"A2A-Version": "1.0"})
    assert rest.status_code == 401
    assert rest.json()["error"]["status"] == "UNAUTHENTICATED"
    assert "www-authenticate" in rest.headers
    # a body larger than the budget is not even read without credentials: still 401, not 413
    big = b"x" * (srv.app.limits.max_body_bytes + 1)
    refused = await http.post(
        srv.url + "/", content=big, headers={"A2A-Version": "1.0", "Content-Type": "application/json"}
    )
    assert refused.status_code == 401


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_principal_reaches_the_skill(serve: Any, http: httpx.AsyncClient, binding: str) -> None:
    srv = serve(vault().asgi(store="memory://", grpc_port=0))
    caller = Caller(srv, binding, ALICE, http)
    try:
        task = await caller.send(message("hi", "whoami"))
    finally:
        await caller.aclose()
    assert task.status.state is TaskState.COMPLETED
    assert task.artifacts[0].parts[0].text == "alice via apiKey"


# -- tasks belong to their caller ----------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_another_callers_task_is_not_found_on_every_operation(
    serve: Any, http: httpx.AsyncClient, binding: str
) -> None:
    srv = serve(vault().asgi(store="memory://", grpc_port=0))
    alice, bob = Caller(srv, binding, ALICE, http), Caller(srv, binding, BOB, http)
    try:
        task = await alice.send(message("take the north gate", "plan"))
        assert task.status.state is TaskState.INPUT_REQUIRED

        def not_found_text(error: A2AError, task_id: str) -> tuple[str, str, dict[str, str]]:
            assert isinstance(error, TaskNotFoundError), error
            return (error.message.replace(task_id, "ID"), error.reason, {**error.metadata, "taskId": "ID"})

        missing = m.new_id()
        reads = {
            Operation.GET_TASK: lambda i: m.GetTaskRequest(id=i),
            Operation.CANCEL_TASK: lambda i: m.CancelTaskRequest(id=i),
            Operation.SUBSCRIBE_TO_TASK: lambda i: m.SubscribeToTaskRequest(id=i),
            Operation.SEND_MESSAGE: lambda i: m.SendMessageRequest(
                message=message("and?", "plan", task_id=i)
            ),
        }
        for operation, request in reads.items():
            theirs = await failure(bob.call(operation, request(task.id)))
            nobodys = await failure(bob.call(operation, request(missing)))
            # the answer does not say whether the task exists
            assert not_found_text(theirs, task.id) == not_found_text(nobodys, missing), operation
        listed = await bob.call(Operation.LIST_TASKS, m.ListTasksRequest())
        assert listed.tasks == [] and listed.total_size == 0
        # the owner still has it, untouched by bob's attempts
        mine = await alice.call(Operation.LIST_TASKS, m.ListTasksRequest())
        assert [t.id for t in mine.tasks] == [task.id]
        assert mine.tasks[0].status.state is TaskState.INPUT_REQUIRED
        done = await alice.send(message("then west", "plan", task_id=task.id))
        assert done.artifacts[0].parts[0].text == "secret plan: take the north gate / then west"
    finally:
        await alice.aclose()
        await bob.aclose()


@pytest.mark.parametrize("binding", BINDINGS)
async def test_tenants_are_granted_by_the_policy(serve: Any, http: httpx.AsyncClient, binding: str) -> None:
    srv = serve(vault().asgi(store="memory://", grpc_port=0))
    alice, bob = Caller(srv, binding, ALICE, http), Caller(srv, binding, BOB, http)
    try:
        error = await failure(bob.call(Operation.LIST_TASKS, m.ListTasksRequest(tenant="acme")))
        assert isinstance(error, PermissionDeniedError)
        error = await failure(bob.send(message("hi", "whoami"), tenant="acme"))
        assert isinstance(error, PermissionDeniedError)
        in_acme = await alice.send(message("hi", "whoami"), tenant="acme")
        assert in_acme.status.state is TaskState.COMPLETED
        # a tenant is a partition of its own: the default tenant does not show acme's task
        default = await alice.call(Operation.LIST_TASKS, m.ListTasksRequest())
        acme = await alice.call(Operation.LIST_TASKS, m.ListTasksRequest(tenant="acme"))
        assert default.tasks == [] and [t.id for t in acme.tasks] == [in_acme.id]
        error = await failure(alice.call(Operation.LIST_TASKS, m.ListTasksRequest(tenant="globex")))
        assert isinstance(error, PermissionDeniedError)
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_a_tenant_with_nul_is_refused_as_invalid(serve: Any, http: httpx.AsyncClient) -> None:
    srv = serve(vault().asgi(store="memory://"))
    caller = Caller(srv, "JSONRPC", ALICE, http)
    error = await failure(caller.call(Operation.LIST_TASKS, m.ListTasksRequest(tenant="acme\x00apiKey:bob")))
    assert error.code == -32602


# -- requirements with scopes -----------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_skills_requirements_add_to_the_agents(
    serve: Any, http: httpx.AsyncClient, binding: str
) -> None:
    srv = serve(vault().asgi(store="memory://", grpc_port=0))
    alice, bob = Caller(srv, binding, ALICE, http), Caller(srv, binding, BOB, http)
    try:
        error = await failure(bob.send(message("now", "purge")))
        assert isinstance(error, PermissionDeniedError)
        assert "Skill 'purge' needs apiKey with scope admin" in error.message
        assert (await bob.call(Operation.LIST_TASKS, m.ListTasksRequest())).tasks == []  # no task was made
        assert (await alice.send(message("now", "purge"))).artifacts[0].parts[0].text == "purged"
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_agent_requirements_with_scopes_answer_403_when_short(
    serve: Any, http: httpx.AsyncClient
) -> None:
    srv = serve(vault(require=[{"apiKey": ["admin"]}]).asgi(store="memory://"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    refused = await http.post(srv.url + "/", json=body, headers={"A2A-Version": "1.0", **BOB})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == -32041
    allowed = await http.post(srv.url + "/", json=body, headers={"A2A-Version": "1.0", **ALICE})
    assert allowed.status_code == 200 and "result" in allowed.json()


async def test_http_basic_against_a_hash(serve: Any, http: httpx.AsyncClient) -> None:
    agent = Agent("Ops", security=Security(HTTPBasic(users={"ops": hash_password("correct horse")})))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who."""
        return ctx.principal.subject

    srv = serve(agent.asgi(store="memory://"))

    def basic(pair: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode(), "A2A-Version": "1.0"}

    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    for wrong in ("ops:battery staple", "nobody:correct horse", "no-colon"):
        answer = await http.post(srv.url + "/", json=body, headers=basic(wrong))
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith('Basic realm="skillwire"')
    for _ in range(2):  # the second one is served from the verified-credentials cache
        assert (
            await http.post(srv.url + "/", json=body, headers=basic("ops:correct horse"))
        ).status_code == 200


# -- in-task authorization ----------------------------------------------------------------------------------


def step_up_agent() -> Agent:
    """carol has two keys: a plain one, and one that grants ``deploy``."""

    def verify(key: str) -> Principal | None:
        grants = {"carol-plain-key": (), "carol-deploy-key": ("deploy",), "dave-deploy-key": ("deploy",)}
        if key not in grants:
            return None
        return Principal(subject=key.split("-")[0], scopes=frozenset(grants[key]))

    agent = Agent("Deployer", security=Security(APIKey(keys=verify)))

    @agent.skill(tags=["test"])
    async def deploy(params: Any, ctx: SkillContext) -> str:
        """Deploys, with a token that may deploy."""
        who = await ctx.require(["deploy"], message="Deploying needs the deploy scope: send a deploy key")
        return f"deployed by {who.subject}"

    return agent


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_skill_demands_more_and_the_task_waits_in_auth_required(
    serve: Any, http: httpx.AsyncClient, binding: str
) -> None:
    srv = serve(step_up_agent().asgi(store="memory://", grpc_port=0))
    plain = Caller(srv, binding, {"X-API-Key": "carol-plain-key"}, http)
    deploy = Caller(srv, binding, {"X-API-Key": "carol-deploy-key"}, http)
    dave = Caller(srv, binding, {"X-API-Key": "dave-deploy-key"}, http)
    try:
        task = await plain.send(message("ship it", "deploy"))
        assert task.status.state is TaskState.AUTH_REQUIRED
        assert task.status.message is not None
        assert task.status.message.parts[0].text == "Deploying needs the deploy scope: send a deploy key"
        # another subject's credentials do not reach the task, however much they grant
        assert isinstance(
            await failure(dave.send(message("go", "deploy", task_id=task.id))), TaskNotFoundError
        )
        # the same caller, without the scope: still waiting
        again = await plain.send(message("please", "deploy", task_id=task.id))
        assert again.status.state is TaskState.AUTH_REQUIRED
        done = await deploy.send(message("here is my deploy key", "deploy", task_id=task.id))
        assert done.status.state is TaskState.COMPLETED
        assert done.artifacts[0].parts[0].text == "deployed by carol"
    finally:
        for caller in (plain, deploy, dave):
            await caller.aclose()


async def test_delegated_work_keeps_its_principal_across_a_restart(tmp_path: Path) -> None:
    def make(steps: asyncio.Queue[None]) -> Agent:
        agent = Agent("Releaser", security=Security(APIKey(keys=KEYS, scopes={"alice": ["release"]})))

        async def follow(ref: Any, ctx: SkillContext) -> str:
            await steps.get()
            return f"released {ref['v']} as {ctx.principal.subject} with {sorted(ctx.principal.scopes)}"

        @agent.skill(tags=["test"], follow=follow)
        async def release(params: Any, ctx: SkillContext) -> None:
            """Releases elsewhere."""
            await ctx.delegate({"v": "1.2"})

        return agent

    alice = Principal(
        subject="alice",
        scheme="apiKey",
        scopes=frozenset({"release"}),
        granted={"apiKey": frozenset({"release"})},
    )
    call = CallContext(principal=alice)
    store = SQLiteTaskStore(tmp_path / "t.db")
    await store.open()
    first = make(asyncio.Queue()).asgi(store=store).runtime
    assert first is not None
    sent = await first.on_send_message(m.SendMessageRequest(message=message("go", "release")), call)
    result = sent.task
    assert isinstance(result, m.Task) and result.status.state is TaskState.WORKING
    await store.close()  # the process is gone while the release runs elsewhere

    store2 = SQLiteTaskStore(tmp_path / "t.db")
    await store2.open()
    steps: asyncio.Queue[None] = asyncio.Queue()
    second = make(steps).asgi(store=store2).runtime
    assert second is not None
    await second.start()
    assert await second.recovered() == []  # taken back by its skill's follow()
    stream = await second.on_subscribe_to_task(m.SubscribeToTaskRequest(id=result.id), call)
    steps.put_nowait(None)
    async for event in stream:
        if event.status_update is not None and event.status_update.status.state.is_terminal:
            break
    done = await second.on_get_task(m.GetTaskRequest(id=result.id), call)
    assert done.status.state is TaskState.COMPLETED
    assert done.artifacts[-1].parts[0].text == "released 1.2 as alice with ['release']"
    # and it is still alice's alone
    bob = CallContext(principal=msgspec.structs.replace(alice, subject="bob"))
    with pytest.raises(TaskNotFoundError):
        await second.on_get_task(m.GetTaskRequest(id=result.id), bob)
    await second.stop()
    await store2.close()
    await first.stop(0)


# -- the extended card --------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_needs_credentials_and_may_vary_by_caller(
    serve: Any, http: httpx.AsyncClient, binding: str
) -> None:
    agent = vault()
    public = agent.card()

    def extended(principal: Principal) -> m.AgentCard:
        return msgspec.structs.replace(public, name=f"Vault for {principal.subject}")

    agent.extended_card, agent.extended_card_enabled = extended, True
    srv = serve(agent.asgi(store="memory://", grpc_port=0))
    anonymous, alice = Caller(srv, binding, {}, http), Caller(srv, binding, ALICE, http)
    try:
        error = await failure(
            anonymous.call(Operation.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest())
        )
        assert isinstance(error, UnauthenticatedError)
        card = await alice.call(Operation.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest())
        assert card.name == "Vault for alice"
    finally:
        await anonymous.aclose()
        await alice.aclose()


# -- an official client as the peer -------------------------------------------------------------------------


async def test_the_a2a_sdk_client_passes_credentials_from_the_card(serve: Any) -> None:
    from a2a.client import ClientCallContext, ClientConfig, ClientFactory
    from a2a.client.auth import AuthInterceptor, CredentialService

    class Keys(CredentialService):
        async def get_credentials(
            self, security_scheme_name: str, context: ClientCallContext | None
        ) -> str | None:
            return KEYS["alice"] if security_scheme_name == "apiKey" else None

    srv = serve(vault().asgi(store="memory://"))
    async with httpx.AsyncClient(timeout=STREAM_WAIT) as http:
        served = (await http.get(srv.url + "/.well-known/agent-card.json")).json()
        # as the SDK's own card resolver reads it: the v0.3 members beside the v1.0 ones are skipped
        card = json_format.ParseDict(served, pb.AgentCard(), ignore_unknown_fields=True)
        factory = ClientFactory(
            ClientConfig(supported_protocol_bindings=["JSONRPC"], httpx_client=http, streaming=False)
        )
        client = factory.create(card, interceptors=[AuthInterceptor(Keys())])
        request = pb.SendMessageRequest(
            message=pb.Message(
                message_id="sdk-1",
                role=pb.ROLE_USER,
                parts=[pb.Part(text="hi")],
                metadata=json_format.ParseDict({"skillId": "whoami"}, pb.Message().metadata),
            ),
        )
        events = [event async for event in client.send_message(request)]
    task = events[-1].task if events[-1].HasField("task") else None
    assert task is not None and task.artifacts[0].parts[0].text == "alice via apiKey"


# -- where a key travels, and schemes that fail ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "send"),
    [
        ("query", lambda url, key: httpx.post(url + "/?api_key=" + key, json=LIST, headers=V1)),
        (
            "cookie",
            lambda url, key: httpx.post(url + "/", json=LIST, headers={**V1, "Cookie": f"api_key={key}"}),
        ),
    ],
)
def test_an_api_key_in_a_query_parameter_or_a_cookie(serve: Any, location: str, send: Any) -> None:
    agent = Agent("Q", security=Security(APIKey(keys=KEYS, location=location, parameter="api_key")))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who."""
        return ctx.principal.subject

    srv = serve(agent.asgi(store="memory://"))
    assert agent.card().security_schemes["apiKey"] == {
        "apiKeySecurityScheme": {"location": location, "name": "api_key"}
    }
    assert send(srv.url, KEYS["bob"]).status_code == 200
    assert send(srv.url, "not-a-key").status_code == 401
    assert httpx.post(srv.url + "/", json=LIST, headers=V1).status_code == 401


def test_a_verifier_that_raises_is_an_internal_error_not_a_traceback(serve: Any) -> None:
    def broken(key: str) -> str:
        raise RuntimeError("the key service is down")

    agent = Agent("B", security=Security(APIKey(keys=broken)))

    @agent.skill(tags=["test"])
    async def whoami(params: Any, ctx: SkillContext) -> str:
        """Says who."""
        return ctx.principal.subject

    srv = serve(agent.asgi(store="memory://"))
    answer = httpx.post(srv.url + "/", json=LIST, headers={**V1, "X-API-Key": "anything"})
    assert answer.status_code == 200  # JSON-RPC: the error is in the body
    assert answer.json()["error"]["code"] == -32603
    assert "key service" not in answer.text and "Traceback" not in answer.text
    rest = httpx.get(srv.url + "/tasks", headers={**V1, "X-API-Key": "anything"})
    assert rest.status_code == 500 and rest.json()["error"]["status"] == "INTERNAL"
    assert "key service" not in rest.text


@pytest.mark.parametrize(
    "authorization",
    ["Basic", "Basic !!!", "Basic " + base64.b64encode(b"\xff\xfe").decode(), "Basic " + "A" * 5000],
)
def test_malformed_basic_credentials_are_401(serve: Any, authorization: str) -> None:
    srv = serve(
        Agent("O", security=Security(HTTPBasic(users={"ops": hash_password("pw")})), executor=_echo).asgi(
            store="memory://"
        )
    )
    answer = httpx.post(srv.url + "/", json=LIST, headers={**V1, "Authorization": authorization})
    assert answer.status_code == 401


async def _echo(context: Any, events: Any) -> None:
    await events.reply(context.text)


LIST = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
V1 = {"A2A-Version": "1.0"}


# -- a skill calls another service as its caller ---------------------------------------------------------------


async def test_a_skill_calls_the_host_api_as_its_caller(serve: Any) -> None:
    """The XL Release case: the skill's calls to its host are permission-checked as the caller. Here the
    host is another agent behind the same IdP, and the skill passes the caller's token on."""
    import time

    from idp import AUDIENCE, Clock, running_idp
    from skillwire import Client
    from skillwire.security import Bearer

    with running_idp(Clock(time.time())) as idp:

        def bearer() -> Security:
            return Security(Bearer(jwks_url=idp.document()["jwks_uri"], issuer=idp.issuer, audience=AUDIENCE))

        host = Agent("Host", security=bearer())

        @host.skill(tags=["test"])
        async def whoami(params: Any, ctx: SkillContext) -> str:
            """The host's view of the caller."""
            return f"host sees {ctx.principal.subject}"

        host_srv = serve(host.asgi(store="memory://"))
        front = Agent("Front", security=bearer())

        @front.skill(tags=["test"])
        async def relay(params: Any, ctx: SkillContext) -> str:
            """Asks the host, as the caller."""
            assert "credential=<hidden>" in repr(ctx.principal) and ctx.principal.credential not in repr(
                ctx.principal
            )
            async with await Client.connect(
                host_srv.url, credentials={"bearer": ctx.principal.credential}
            ) as host_client:
                task = await host_client.send("who?")
            assert isinstance(task, m.Task)
            return f"front got: {task.artifacts[0].parts[0].text}"

        front_srv = serve(front.asgi(store="memory://"))
        token = idp.token(sub="dana")
        async with await Client.connect(front_srv.url, credentials={"bearer": token}) as client:
            task = await client.send("go")
        assert isinstance(task, m.Task)
        assert task.artifacts[0].parts[0].text == "front got: host sees dana"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_access_log_names_the_caller_and_shows_refusals(
    serve: Any, http: httpx.AsyncClient, binding: str, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="skillwire.access")
    srv = serve(vault().asgi(store="memory://", grpc_port=0))
    alice, nobody = Caller(srv, binding, ALICE, http), Caller(srv, binding, {}, http)
    try:
        await alice.call(Operation.LIST_TASKS, m.ListTasksRequest())
        await failure(nobody.call(Operation.LIST_TASKS, m.ListTasksRequest()))
    finally:
        await alice.aclose()
        await nobody.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "skillwire.access"]
    assert any(line.startswith(f"{binding} ListTasks caller=apiKey:alice OK") for line in lines), lines
    refused = [line for line in lines if "UNAUTHENTICATED" in line]
    assert len(refused) == 1 and KEYS["alice"] not in " ".join(lines)
