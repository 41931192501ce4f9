"""The SSRF guard of webhook URLs (issue 13, the building block push notifications will call with).

Address classes are checked by literal; names resolve through an injected resolver stub (never real DNS);
delivery is real: an HTTPS receiver on 127.0.0.1 (asyncio's server, TLS from a trustme CA) reached through
the guarded httpx client. No outside traffic.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
import trustme

from conftest import EXAMPLES
from skillwire.cli.assembly import application
from skillwire.cli.main import _parse
from skillwire.cli.serve_options import as_env
from skillwire.errors import InvalidParamsError, SkillwireError, WebhookRefusedError
from skillwire.server.notifications.outbound import (
    IPAddress,
    Resolver,
    WebhookPolicy,
    address_refusal,
    resolve,
)
from skillwire.server.notifications.outbound_http import guarded_client

WAIT = 15.0  # the cap on every wait, in seconds

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.0.1", "link-local"),
    ("169.254.169.254", "cloud metadata"),
    ("100.100.100.200", "cloud metadata"),
    ("100.64.0.1", "shared address space"),
    ("100.127.255.254", "shared address space"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "private"),  # "this network", 0.0.0.0/8
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("192.0.0.8", "IETF protocol assignments"),
    ("192.0.2.1", "private"),  # documentation
    ("198.18.0.1", "benchmarking"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("fc00::1", "private (unique local)"),
    ("fd12:3456::1", "private (unique local)"),
    ("fd00:ec2::254", "cloud metadata"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "private"),  # documentation
    ("::ffff:127.0.0.1", "IPv4-mapped form of loopback"),
    ("::ffff:10.0.0.1", "IPv4-mapped form of private"),
    ("::ffff:169.254.169.254", "IPv4-mapped form of cloud metadata"),
    ("::ffff:100.64.0.1", "IPv4-mapped form of shared"),
    ("::127.0.0.1", "IPv4-compatible form of loopback"),
    ("::8.8.8.8", "IPv4-compatible address"),  # deprecated form, never reached
    ("64:ff9b::127.0.0.1", "NAT64 form of loopback"),
    ("64:ff9b::169.254.169.254", "NAT64 form of cloud metadata"),
    ("2002:7f00:1::", "6to4 form of loopback"),
    ("2002:a9fe:a9fe::1", "6to4 form of cloud metadata"),
    ("2002:c0a8:101::1", "6to4 form of private"),
]

PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8"]


def ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


def url_for(address: str) -> str:
    return f"https://[{address.replace('%', '%25')}]/hook" if ":" in address else f"https://{address}/hook"


# -- config time: what is known without DNS ---------------------------------------------------------------


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_a_refused_address_class_is_refused_by_literal(address: str, why: str) -> None:
    assert why in (address_refusal(ip(address)) or "")
    with pytest.raises(WebhookRefusedError, match=why.split(" (")[0]):
        WebhookPolicy().check_url(url_for(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_a_public_address_is_allowed(address: str) -> None:
    assert address_refusal(ip(address)) is None
    assert WebhookPolicy().check_url(url_for(address)).address == ip(address)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/", "scheme 'http': expected https"),
        ("ftp://hooks.example.com/", "scheme 'ftp'"),
        ("hooks.example.com/x", "scheme"),
        ("https://user:secret@hooks.example.com/", "userinfo"),
        ("https://hooks.example.com@127.0.0.1/", "userinfo"),
        ("https://@hooks.example.com/", "userinfo"),
        ("https:///hook", "no host"),
        ("https://:443/hook", "no host"),
        ("https://hooks.example.com:0/", "port 0"),
        ("https://hooks.example.com:65536/", "1-65535"),
        ("https://hooks.example.com:http/", "1-65535"),
        ("https://localhost/", "this machine"),
        ("https://LOCALHOST./", "this machine"),
        ("https://app.localhost/", "this machine"),
        ("https://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("https://127.1/", "numeric host"),
        ("https://0x7f.0.0.1/", "numeric host"),
        ("https://2130706433/", "numeric host"),
        ("https://017700000001/", "numeric host"),
        ("https://hooks.example.com\\@127.0.0.1/", "backslash"),
        ("https://hooks.example.com /", "whitespace"),
        ("https://hooks_ex$ample.com/", "not a host name"),
    ],
)
def test_a_url_refused_at_config_time_says_why(url: str, why: str) -> None:
    with pytest.raises(WebhookRefusedError) as refused:
        WebhookPolicy().check_url(url)
    assert why in refused.value.message


def test_a_config_time_refusal_is_invalid_params_for_the_caller() -> None:
    with pytest.raises(InvalidParamsError) as refused:
        WebhookPolicy().check_url("https://169.254.169.254/latest/meta-data/")
    assert (refused.value.code, refused.value.http_status, refused.value.reason) == (
        -32602,
        400,
        "INVALID_PARAMS",
    )
    assert refused.value.message.startswith("Webhook URL refused: cloud metadata address 169.254.169.254")


def test_http_is_refused_unless_allowed() -> None:
    with pytest.raises(WebhookRefusedError, match="expected https"):
        WebhookPolicy().check_url("http://hooks.example.com/a2a")
    target = WebhookPolicy(allow_http=True).check_url("http://hooks.example.com/a2a")
    assert (target.scheme, target.host, target.port, target.address) == (
        "http",
        "hooks.example.com",
        80,
        None,
    )
    with pytest.raises(WebhookRefusedError, match="loopback"):  # the scheme only: addresses still checked
        WebhookPolicy(allow_http=True).check_url("http://127.0.0.1/")


def test_the_allowlist_opens_a_literal_by_address_or_network() -> None:
    policy = WebhookPolicy(allow=["127.0.0.1", "10.0.0.0/8", "[::1]"])
    assert policy.check_url("https://127.0.0.1:8443/").port == 8443
    assert policy.check_url("https://10.20.30.40/").address == ip("10.20.30.40")
    assert policy.check_url("https://[::1]/").address == ip("::1")
    assert policy.check_url("https://[::ffff:10.1.2.3]/").host == "::ffff:10.1.2.3"  # the same socket address
    for still_refused in ("https://127.0.0.2/", "https://192.168.0.1/", "https://[fe80::1]/"):
        with pytest.raises(WebhookRefusedError):
            policy.check_url(still_refused)


def test_the_allowlist_opens_a_name_whatever_it_is() -> None:
    policy = WebhookPolicy(allow=["Hooks.Internal.Example.", "localhost"])
    assert policy.check_url("https://hooks.internal.example/a2a").host == "hooks.internal.example"
    assert policy.check_url("https://localhost:9000/").port == 9000
    with pytest.raises(WebhookRefusedError):
        policy.check_url("https://sub.localhost/")  # names match exactly: no wildcards


@pytest.mark.parametrize("entry", ["not a host", "10.0.0.0/33", "https://x.example/", ""])
def test_a_bad_allow_entry_is_refused_when_the_policy_is_made(entry: str) -> None:
    with pytest.raises(ValueError, match="webhook allow entry"):
        WebhookPolicy(allow=[entry])


# -- names: every resolved address is checked -------------------------------------------------------------


def stub(answers: dict[str, list[str]]) -> tuple[list[str], Resolver]:
    """A resolver answering from ``answers``, and the names it was asked (in order)."""
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [ip(address) for address in answers[host]]

    return asked, resolver


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (["127.0.0.1"], "loopback address 127.0.0.1"),
        (["169.254.169.254"], "cloud metadata address 169.254.169.254"),
        (["93.184.215.14", "10.0.0.7"], "private address 10.0.0.7"),  # a mixed answer is refused
        (["2606:4700::1", "::ffff:127.0.0.1"], "IPv4-mapped form of loopback"),
        ([], "resolved to no address"),
    ],
)
async def test_a_name_resolving_to_a_refused_address_is_refused(answer: list[str], why: str) -> None:
    asked, resolver = stub({"hooks.example.com": answer})
    with pytest.raises(WebhookRefusedError, match=why):
        await WebhookPolicy().checked_addresses("hooks.example.com", 443, resolver)
    assert asked == ["hooks.example.com"]


async def test_a_name_resolving_to_public_addresses_gives_them_all_once() -> None:
    _, resolver = stub({"hooks.example.com": ["93.184.215.14", "2606:4700::1", "93.184.215.14"]})
    addresses = await WebhookPolicy().checked_addresses("hooks.example.com", 443, resolver)
    assert addresses == [ip("93.184.215.14"), ip("2606:4700::1")]


async def test_an_allowlisted_network_opens_resolved_addresses_in_it() -> None:
    _, resolver = stub({"hooks.corp": ["10.1.2.3", "10.1.2.4"], "mixed.corp": ["10.1.2.3", "192.168.0.9"]})
    policy = WebhookPolicy(allow=["10.0.0.0/8"])
    assert await policy.checked_addresses("hooks.corp", 443, resolver) == [ip("10.1.2.3"), ip("10.1.2.4")]
    with pytest.raises(WebhookRefusedError, match=re.escape("192.168.0.9")):
        await policy.checked_addresses("mixed.corp", 443, resolver)


async def test_an_allowlisted_name_is_allowed_whatever_it_resolves_to() -> None:
    _, resolver = stub({"hooks.corp": ["127.0.0.1", "192.168.0.9"]})
    addresses = await WebhookPolicy(allow=["hooks.corp"]).checked_addresses("hooks.corp", 443, resolver)
    assert addresses == [ip("127.0.0.1"), ip("192.168.0.9")]


async def test_the_default_resolver_is_the_event_loops_getaddrinfo() -> None:
    assert await resolve("127.0.0.1", 443) == [ip("127.0.0.1")]  # numeric: no DNS is asked


# -- delivery: a real HTTPS receiver on 127.0.0.1 ---------------------------------------------------------


@dataclass
class Receiver:
    """An HTTPS server on 127.0.0.1 answering every request with ``status`` (and ``headers``); it records
    the SNI name each handshake offered and each request's head and body."""

    port: int = 0
    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    connections: int = 0
    server_names: list[str | None] = field(default_factory=list)
    requests: list[tuple[str, bytes]] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            self.requests.append((head, await reader.readexactly(length)))
            extra = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
            writer.write(
                f"HTTP/1.1 {self.status} X\r\ncontent-length: 0\r\n{extra}connection: close\r\n\r\n".encode()
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass  # a client that refused our certificate hangs up in the handshake
        finally:
            writer.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    """The client's SSL context: trusts ``ca`` only."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=None)
    context.load_verify_locations(cadata=ca.cert_pem.bytes().decode("ascii"))
    return context


async def start_receiver(ca: trustme.CA, *names: str) -> tuple[Receiver, asyncio.Server]:
    receiver = Receiver()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    context.sni_callback = lambda sock, name, ctx: receiver.server_names.append(name)  # type: ignore[func-returns-value]
    server = await asyncio.start_server(receiver.serve, "127.0.0.1", 0, ssl=context)
    receiver.port = server.sockets[0].getsockname()[1]
    return receiver, server


@pytest.fixture
async def hooks(ca: trustme.CA) -> AsyncIterator[Receiver]:
    """A receiver whose certificate names ``hooks.test`` only (not 127.0.0.1)."""
    receiver, server = await start_receiver(ca, "hooks.test")
    async with server:
        yield receiver


def hooks_test_resolver() -> tuple[list[str], Resolver]:
    return stub({"hooks.test": ["127.0.0.1"]})


async def test_delivery_connects_to_the_checked_address_and_verifies_the_host_name(
    ca: trustme.CA, hooks: Receiver
) -> None:
    asked, resolver = hooks_test_resolver()
    policy = WebhookPolicy(allow=["127.0.0.1"])
    async with guarded_client(policy, resolver=resolver, ssl_context=trusting(ca), timeout=WAIT) as client:
        response = await client.post(f"https://hooks.test:{hooks.port}/a2a", json={"task": "t-1"})
    assert response.status_code == 204
    assert asked == ["hooks.test"]  # resolved once, by our resolver (hooks.test is in no real DNS)
    assert hooks.server_names == ["hooks.test"]  # SNI is the host name, not the IP connected to
    head, body = hooks.requests[0]
    assert head.startswith("POST /a2a HTTP/1.1") and f"host: hooks.test:{hooks.port}" in head.lower()
    assert body == b'{"task":"t-1"}'


async def test_an_allowlisted_name_is_delivered_to_wherever_it_resolves(
    ca: trustme.CA, hooks: Receiver
) -> None:
    _, resolver = hooks_test_resolver()
    async with guarded_client(
        WebhookPolicy(allow=["hooks.test"]), resolver=resolver, ssl_context=trusting(ca), timeout=WAIT
    ) as client:
        assert (await client.post(f"https://hooks.test:{hooks.port}/a2a", content=b"{}")).status_code == 204


async def test_a_certificate_for_another_name_is_refused(ca: trustme.CA) -> None:
    receiver, server = await start_receiver(ca, "other.test", "127.0.0.1")  # valid for the IP, not the name
    _, resolver = hooks_test_resolver()
    async with server:
        client = guarded_client(
            WebhookPolicy(allow=["127.0.0.1"]), resolver=resolver, ssl_context=trusting(ca), timeout=WAIT
        )
        async with client:
            with pytest.raises(
                httpx.ConnectError, match=r"Hostname mismatch, certificate is not valid for .hooks\.test."
            ):
                await client.post(f"https://hooks.test:{receiver.port}/a2a", content=b"{}")
    assert receiver.requests == []


async def test_a_name_resolving_to_loopback_is_refused_before_connecting(
    ca: trustme.CA, hooks: Receiver
) -> None:
    _, resolver = hooks_test_resolver()
    async with guarded_client(
        WebhookPolicy(), resolver=resolver, ssl_context=trusting(ca), timeout=WAIT
    ) as client:
        with pytest.raises(
            WebhookRefusedError, match=re.escape("hooks.test resolves to a refused address: loopback")
        ):
            await client.post(f"https://hooks.test:{hooks.port}/a2a", content=b"{}")
        with pytest.raises(WebhookRefusedError, match=re.escape("loopback address 127.0.0.1")):
            await client.post(f"https://127.0.0.1:{hooks.port}/a2a", content=b"{}")
        with pytest.raises(WebhookRefusedError, match="expected https"):
            await client.post(f"http://hooks.test:{hooks.port}/a2a", content=b"{}")
    assert hooks.connections == 0


@pytest.mark.parametrize("host", ["127.1", "0x7f.0.0.1", "2130706433", "[::ffff:127.0.0.1]", "localhost"])
async def test_a_url_httpx_would_send_to_this_machine_is_refused_at_delivery(
    ca: trustme.CA, hooks: Receiver, host: str
) -> None:
    """httpx keeps ``127.1`` as a name, which getaddrinfo reads as 127.0.0.1: the request's own URL is checked."""
    async with guarded_client(WebhookPolicy(), ssl_context=trusting(ca), timeout=WAIT) as client:
        with pytest.raises(WebhookRefusedError):
            await client.post(f"https://{host}:{hooks.port}/a2a", content=b"{}")
    assert hooks.connections == 0


async def test_a_redirect_is_not_followed(ca: trustme.CA, hooks: Receiver) -> None:
    hooks.status, hooks.headers = 302, {"location": f"https://hooks.test:{hooks.port}/elsewhere"}
    _, resolver = hooks_test_resolver()
    policy = WebhookPolicy(allow=["127.0.0.1"])
    async with guarded_client(policy, resolver=resolver, ssl_context=trusting(ca), timeout=WAIT) as client:
        response = await client.post(f"https://hooks.test:{hooks.port}/a2a", content=b"{}")
    assert response.status_code == 302 and response.is_redirect  # the caller reports it as a failure
    assert [head.split(" ")[1] for head, _ in hooks.requests] == ["/a2a"]


# -- configuration: skillwire serve ------------------------------------------------------------------------


def serve_args(*flags: str) -> list[str]:
    return ["serve", str(EXAMPLES / "greeter"), "--store", "memory://", *flags]


def test_serve_builds_the_default_policy_without_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLWIRE_WEBHOOK_ALLOW", raising=False)
    monkeypatch.delenv("SKILLWIRE_WEBHOOK_ALLOW_HTTP", raising=False)
    _, app = application(_parse(serve_args()))
    assert app.webhook_policy == WebhookPolicy()


def test_serve_webhook_flags_make_the_apps_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLWIRE_WEBHOOK_ALLOW", "192.168.0.0/16")  # a flag wins over its variable
    args = _parse(
        serve_args("--webhook-allow", "127.0.0.1", "--webhook-allow", "hooks.test", "--webhook-allow-http")
    )
    _, app = application(args)
    assert app.webhook_policy == WebhookPolicy(allow=["127.0.0.1", "hooks.test"], allow_http=True)
    assert app.webhook_policy.check_url("http://hooks.test/").scheme == "http"


def test_serve_reads_the_webhook_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLWIRE_WEBHOOK_ALLOW", "10.0.0.0/8, [::1],hooks.test")
    monkeypatch.setenv("SKILLWIRE_WEBHOOK_ALLOW_HTTP", "1")
    _, app = application(_parse(serve_args()))
    assert app.webhook_policy == WebhookPolicy(allow=["10.0.0.0/8", "[::1]", "hooks.test"], allow_http=True)


def test_serve_refuses_a_bad_webhook_allow_entry() -> None:
    with pytest.raises(SkillwireError, match="--webhook-allow: webhook allow entry 'not a host'"):
        application(_parse(serve_args("--webhook-allow", "not a host")))


def test_serve_reload_hands_the_webhook_policy_to_its_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--reload`` rebuilds the app from SKILLWIRE_* variables: the policy survives the trip."""
    args = _parse(
        serve_args("--webhook-allow", "10.0.0.0/8", "--webhook-allow", "hooks.test", "--webhook-allow-http")
    )
    env = as_env(args)
    assert (env["SKILLWIRE_WEBHOOK_ALLOW"], env["SKILLWIRE_WEBHOOK_ALLOW_HTTP"]) == (
        "10.0.0.0/8,hooks.test",
        "1",
    )
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, app = application(_parse(["serve", "--store", "memory://"]))
    assert app.webhook_policy == WebhookPolicy(allow=["10.0.0.0/8", "hooks.test"], allow_http=True)
