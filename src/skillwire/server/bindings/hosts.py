"""Which ``Host`` a request may name, and the base URL its agent card is built for.

The card's interface URLs are absolute, so they are built for some host; the ``Host`` header is the
client's to write, and a card built from any Host an attacker sends (``Host: evil.example``) would point
clients there, for as long as a cache in front keeps it. So the Host header is never trusted as such:

* ``public_url`` set: every card names it; the Host header is not read (unless ``allowed_hosts`` is also
  given, which then refuses the others).
* ``allowed_hosts`` given (``["agent.example", "10.0.0.5:8000"]``): a request whose Host is not one of them is
  refused on every route, 400 (a JSON-RPC error at the JSON-RPC path, AIP-193 elsewhere); an allowed one is
  the card's host, and the card is served with ``Vary: Host``. An entry without a port allows every port.
* neither (the default of ``agent.asgi()``): the card names the address the connection reached (the ASGI
  ``server``: the socket's own address under uvicorn, the URL's host under an in-process transport), never
  the Host header; no Host is refused.

``skillwire serve`` and ``agent.run()`` on a loopback address allow ``127.0.0.1``, ``localhost`` and
``[::1]`` (at any port) when given neither, so a local agent refuses a page whose name rebinds to 127.0.0.1
(DNS rebinding); on any other address they warn that cards name the address reached until ``--public-url``
or ``--allowed-host`` says better.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote

from skillwire.errors import InvalidRequestError
from skillwire.server.bindings.asgi import Scope

__all__ = [
    "AllowedHosts",
    "base_url_of",
    "is_loopback",
    "local_hosts",
    "parse_host",
    "served_hosts",
    "split_hosts",
]

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def parse_host(text: str) -> tuple[str, int | None]:
    """``host[:port]`` (a Host header, an allowed-host entry) as (lower-case host, port or None); IPv6 in
    brackets (``[::1]:8000``). ValueError when it is not one."""
    text = text.strip().lower()
    port_text = ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] not in ("", ":"):
            raise ValueError(f"not a host[:port]: {text!r}")
        host, port_text = text[: end + 1], text[end + 2 :]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host = text
    host = host.rstrip(".")
    if not host or any(c in host for c in "/?#@ \t\\") or (":" in host and not host.startswith("[")):
        raise ValueError(f"not a host[:port]: {text!r}")
    if port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        raise ValueError(f"not a port: {port_text!r} in {text!r}")
    return host, int(port_text) if port_text else None


#: Host headers whose answer an AllowedHosts keeps (those past it are parsed each time).
_REMEMBERED_ANSWERS = 64


class AllowedHosts:
    """The hosts requests may name: ``AllowedHosts(["agent.example", "127.0.0.1:8000"])`` (ValueError for an
    entry that is not ``host[:port]``)."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(entries)
        self._any_port: set[str] = set()
        self._with_port: set[tuple[str, int]] = set()
        #: (Host header, scheme) -> the answer, for the few headers a server is sent (every request asks,
        #: twice: the check and the base URL); bounded, since a caller chooses what it sends.
        self._answers: dict[tuple[str, str], bool] = {}
        for entry in self.entries:
            host, port = parse_host(entry)
            if port is None:
                self._any_port.add(host)
            else:
                self._with_port.add((host, port))

    def allows(self, host_header: str | None, scheme: str = "http") -> bool:
        """Whether a request with this Host header (None: none sent) may be served."""
        if not host_header:
            return False
        answer = self._answers.get((host_header, scheme))
        if answer is None:
            answer = self._answer(host_header, scheme)
            if len(self._answers) < _REMEMBERED_ANSWERS:
                self._answers[host_header, scheme] = answer
        return answer

    def _answer(self, host_header: str, scheme: str) -> bool:
        try:
            host, port = parse_host(host_header)
        except ValueError:
            return False
        if host in self._any_port:
            return True
        return (host, port if port is not None else _DEFAULT_PORTS.get(scheme, 80)) in self._with_port

    def refusal(self, host_header: str | None) -> InvalidRequestError:
        shown = repr(host_header[:100]) if host_header else "(none)"
        return InvalidRequestError(
            f"Host {shown} is not served here: this agent answers to {', '.join(self.entries)}",
            metadata={"host": (host_header or "")[:100]},
        )

    def __repr__(self) -> str:
        return f"AllowedHosts({list(self.entries)!r})"


def is_loopback(host: str) -> bool:
    """Whether a bind address is a loopback one (``127.0.0.1``, ``::1``, ``localhost``)."""
    import ipaddress  # only when a server starts: importing skillwire need not load it

    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_hosts(bind: str) -> list[str]:
    """The names a server bound to the loopback address ``bind`` is reached by, at any port: it,
    ``127.0.0.1``, ``localhost`` and ``[::1]``. (Only local processes reach a loopback address; what the
    check keeps out is a name that is not a loopback one, which a port would not change, and any port lets
    ``--port 0`` work.)"""
    names = ["127.0.0.1", "localhost", "[::1]"]
    own = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    return names if own.lower() in names else [own, *names]


def split_hosts(text: str | None) -> list[str]:
    """``SKILLWIRE_ALLOWED_HOSTS``: hosts separated by commas (or spaces)."""
    return [part for part in (text or "").replace(",", " ").split() if part]


def served_hosts(
    bind: str,
    given: Sequence[str] | None,
    *,
    env: str | None = None,
    public_url: str | None = None,
) -> list[str] | None:
    """The allowed hosts of a server bound to ``bind`` (``skillwire serve``, ``agent.run()``): those
    given, else those of ``env`` (``SKILLWIRE_ALLOWED_HOSTS``), else none with a ``public_url`` (the card names
    it), else the loopback names on a loopback address (:func:`local_hosts`), else none (the card names the
    address each connection reached). ValueError for an entry that is not ``host[:port]``."""
    hosts = list(given or ()) or split_hosts(env)
    for entry in hosts:
        parse_host(entry)
    if hosts:
        return hosts
    if public_url or not is_loopback(bind):
        return None
    return local_hosts(bind)


def base_url_of(scope: Scope, headers: Mapping[str, str], allowed: AllowedHosts | None) -> str:
    """The base URL a request's card is built for (see the module): its Host when ``allowed`` allows it,
    else the address the connection reached; under the prefix the app is mounted at (``root_path``)."""
    scheme = scope.get("scheme", "http")
    host = headers.get("host") if allowed is not None else None
    if host is None or allowed is None or not allowed.allows(host, scheme):
        host = _reached(scope, scheme)
    root = scope.get("root_path", "").rstrip("/")
    return f"{scheme}://{host}{quote(root) if root else ''}"


def _reached(scope: Scope, scheme: str) -> str:
    """``host[:port]`` of the address the connection reached (the default port left out)."""
    server = scope.get("server")
    if not server or server[1] is None:  # none given, or a Unix socket
        return "localhost"
    host, port = str(server[0]), int(server[1])
    if ":" in host:
        host = f"[{host}]"
    return host if _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
