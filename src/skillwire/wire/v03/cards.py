"""The agent card in its v0.3 form, both ways: a v1.0 AgentCard served to v0.3 clients (:func:`v03_card`,
and :func:`v03_card_fields` for one card serving both versions), and a v0.3 card read as a v1.0 AgentCard
(:func:`is_v03_card`, :func:`card_from_v03`).

* A v0.3 card's interfaces get its ``protocolVersion`` as Major.Minor (``"0.3"``). v1.0 OAuthFlows is a
  oneof: of several v0.3 flows the first of authorizationCode, clientCredentials, implicit, password is
  kept. ``stateTransitionHistory`` has no v1.0 member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import Struct

from skillwire.protocol import models as m
from skillwire.wire.jsonrpc import field_error
from skillwire.wire.v03.shapes import PROTOCOL_VERSION, Json

__all__ = ["card_from_v03", "is_v03_card", "v03_card", "v03_card_fields"]

# -- v1.0 -> v0.3: the card served to v0.3 clients ---------------------------------------------------------

_SCHEME_TYPES = {
    "apiKeySecurityScheme": "apiKey",
    "httpAuthSecurityScheme": "http",
    "oauth2SecurityScheme": "oauth2",
    "openIdConnectSecurityScheme": "openIdConnect",
    "mtlsSecurityScheme": "mutualTLS",
}
#: v1.0 member -> v0.3 member, per scheme type (members not listed have no v0.3 form).
_SCHEME_FIELDS = {
    "apiKey": {"description": "description", "location": "in", "name": "name"},
    "http": {"description": "description", "scheme": "scheme", "bearerFormat": "bearerFormat"},
    "oauth2": {"description": "description", "oauth2MetadataUrl": "oauth2MetadataUrl"},
    "openIdConnect": {"description": "description", "openIdConnectUrl": "openIdConnectUrl"},
    "mutualTLS": {"description": "description"},
}
# v0.3 has no deviceCode flow and no pkceRequired.
_FLOWS = ("authorizationCode", "clientCredentials", "implicit", "password")
_FLOW_FIELDS = ("authorizationUrl", "tokenUrl", "refreshUrl", "scopes")


def _security_scheme_out(scheme: Json, *, merged: bool = False) -> Json | None:
    """A v1.0 SecurityScheme (a oneof wrapper) in the v0.3 ``type``-tagged shape; None if unknown.

    ``merged``: for a card that carries both shapes, keep the v1.0 OAuth flows as they are (a v1.0
    ``flows`` object is a valid v0.3 one whose extra members v0.3 readers skip), so a v1.0 reader that
    rebuilds the scheme from its v0.3 members (a2a-sdk's card parser does) loses neither ``pkceRequired``
    nor ``deviceCode``.
    """
    for wrapper, kind in _SCHEME_TYPES.items():
        body = scheme.get(wrapper)
        if not isinstance(body, dict):
            continue
        out: Json = {"type": kind}
        for old, new in _SCHEME_FIELDS[kind].items():
            if body.get(old):
                out[new] = body[old]
        if kind == "oauth2":
            flows = body.get("flows") or {}
            if merged:
                out["flows"] = flows
                return out
            out["flows"] = {
                name: {"scopes": {}} | {k: flows[name][k] for k in _FLOW_FIELDS if flows[name].get(k)}
                for name in _FLOWS
                if isinstance(flows.get(name), dict)
            }
        return out
    return None


def _requirements_out(reqs: list[m.SecurityRequirement]) -> list[dict[str, list[str]]]:
    return [{name: list(scopes.list) for name, scopes in req.schemes.items()} for req in reqs]


def _interfaces_out(main_url: str, main_transport: str, others: list[tuple[str, str]]) -> list[Json]:
    # v0.3 section 5.6.2: additionalInterfaces SHOULD repeat the main url and transport.
    pairs = [(main_url, main_transport)]
    pairs += [p for p in others if p not in pairs]
    return [{"url": url, "transport": transport} for url, transport in pairs]


def v03_card_fields(
    card: m.AgentCard, *, jsonrpc_url: str, interfaces: list[tuple[str, str]]
) -> dict[str, Any]:
    """The v0.3 members to merge into the v1.0 card JSON, so one card serves both versions.

    ``interfaces`` are the other (url, transport) pairs a v0.3 client may use (``("…/", "HTTP+JSON")``).
    Members both versions name (``securitySchemes``, ``skills``) come back merged, carrying the v1.0 and
    the v0.3 shape at once, so ``card_json.update(v03_card_fields(...))`` is right::

        {"protocolVersion": "0.3.0", "url": jsonrpc_url, "preferredTransport": "JSONRPC",
         "additionalInterfaces": [{"url": jsonrpc_url, "transport": "JSONRPC"}, ...],
         "supportsAuthenticatedExtendedCard": false}
    """
    fields: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "url": jsonrpc_url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": _interfaces_out(jsonrpc_url, "JSONRPC", interfaces),
    }
    if card.capabilities.extended_agent_card is not None:
        fields["supportsAuthenticatedExtendedCard"] = card.capabilities.extended_agent_card
    if card.security_schemes:
        fields["securitySchemes"] = {
            name: scheme | (_security_scheme_out(scheme, merged=True) or {})
            for name, scheme in card.security_schemes.items()
        }
    if card.security_requirements:
        fields["security"] = _requirements_out(card.security_requirements)
    if any(skill.security_requirements for skill in card.skills):
        fields["skills"] = [
            m.to_builtins(skill) | {"security": _requirements_out(skill.security_requirements)}
            if skill.security_requirements
            else m.to_builtins(skill)
            for skill in card.skills
        ]
    return fields


def _endpoints(
    card: m.AgentCard, jsonrpc_url: str | None, interfaces: list[tuple[str, str]] | None
) -> tuple[str, str, list[tuple[str, str]]]:
    """The main (url, transport) and the others, given or read from the card's 0.3 interfaces."""
    if jsonrpc_url is not None:
        return jsonrpc_url, "JSONRPC", list(interfaces or ())
    legacy = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.")]
    pool = legacy or card.supported_interfaces
    if not pool:
        raise ValueError("the card lists no interface for a v0.3 client")
    main = next((i for i in pool if i.protocol_binding == "JSONRPC"), pool[0])
    others = [(i.url, i.protocol_binding) for i in pool if i is not main]
    return main.url, main.protocol_binding, others if interfaces is None else list(interfaces)


def _skill_out(skill: m.AgentSkill) -> Json:
    out: Json = m.to_builtins(skill)
    out.pop("securityRequirements", None)
    if skill.security_requirements:
        out["security"] = _requirements_out(skill.security_requirements)
    return out


def v03_card(
    card: m.AgentCard, *, jsonrpc_url: str | None = None, interfaces: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """``card`` as a v0.3 AgentCard: the result of ``agent/getAuthenticatedExtendedCard`` and
    ``GET /v1/card``.

    Without ``jsonrpc_url`` the endpoints come from the card's ``supportedInterfaces`` (those with a 0.x
    ``protocolVersion`` if any, JSON-RPC first).
    """
    url, transport, others = _endpoints(card, jsonrpc_url, interfaces)
    caps = card.capabilities
    out: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "name": card.name,
        "description": card.description,
        "url": url,
        "preferredTransport": transport,
        "additionalInterfaces": _interfaces_out(url, transport, others),
    }
    if card.icon_url:
        out["iconUrl"] = card.icon_url
    if card.provider is not None:
        out["provider"] = m.to_builtins(card.provider)
    out["version"] = card.version
    if card.documentation_url:
        out["documentationUrl"] = card.documentation_url
    out["capabilities"] = {
        k: v
        for k, v in (
            ("streaming", caps.streaming),
            ("pushNotifications", caps.push_notifications),
            ("extensions", m.to_builtins(caps.extensions) or None),
        )
        if v is not None
    }
    schemes = {n: s for n, s in ((n, _security_scheme_out(s)) for n, s in card.security_schemes.items()) if s}
    if schemes:
        out["securitySchemes"] = schemes
    if card.security_requirements:
        out["security"] = _requirements_out(card.security_requirements)
    out["defaultInputModes"] = list(card.default_input_modes)
    out["defaultOutputModes"] = list(card.default_output_modes)
    out["skills"] = [_skill_out(s) for s in card.skills]
    if caps.extended_agent_card is not None:
        out["supportsAuthenticatedExtendedCard"] = caps.extended_agent_card
    if card.signatures:
        out["signatures"] = m.to_builtins(card.signatures)
    return out


# -- v0.3 -> v1.0: a v0.3 card read by a v1.0 client -------------------------------------------------------


class _CardInterfaceIn(Struct, kw_only=True):
    url: str
    transport: str


class _CapabilitiesIn(Struct, rename="camel", kw_only=True):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[m.AgentExtension] = []


class _SkillIn(Struct, rename="camel", kw_only=True):
    id: str
    name: str
    description: str = ""
    tags: list[str] = []
    examples: list[str] = []
    input_modes: list[str] = []
    output_modes: list[str] = []
    security: list[dict[str, list[str]]] = []


class _CardIn(Struct, rename="camel", kw_only=True):
    """A v0.3 AgentCard, read leniently: only ``name`` and ``url`` are required."""

    protocol_version: str = PROTOCOL_VERSION
    name: str
    description: str = ""
    url: str
    preferred_transport: str = "JSONRPC"
    additional_interfaces: list[_CardInterfaceIn] = []
    icon_url: str | None = None
    provider: m.AgentProvider | None = None
    version: str = ""
    documentation_url: str | None = None
    capabilities: _CapabilitiesIn = msgspec.field(default_factory=_CapabilitiesIn)
    security_schemes: dict[str, Json] = {}
    security: list[dict[str, list[str]]] = []
    default_input_modes: list[str] = []
    default_output_modes: list[str] = []
    skills: list[_SkillIn] = []
    supports_authenticated_extended_card: bool | None = None
    signatures: list[m.AgentCardSignature] = []


_SCHEME_WRAPPERS = {kind: wrapper for wrapper, kind in _SCHEME_TYPES.items()}
#: The members of each v1.0 OAuth flow (v0.3 flows have the same names, less ``pkceRequired``).
_FLOW_MEMBERS = {
    "authorizationCode": ("authorizationUrl", "tokenUrl", "refreshUrl", "scopes"),
    "clientCredentials": ("tokenUrl", "refreshUrl", "scopes"),
    "implicit": ("authorizationUrl", "refreshUrl", "scopes"),
    "password": ("tokenUrl", "refreshUrl", "scopes"),
}
_BINDINGS = {"JSONRPC": "JSONRPC", "HTTP+JSON": "HTTP+JSON", "GRPC": "GRPC"}


def _flows_in(flows: Any) -> Json:
    # v1.0 OAuthFlows is a oneof: of several v0.3 flows the first, in _FLOWS order, is kept.
    for name in _FLOWS:
        flow = flows.get(name) if isinstance(flows, dict) else None
        if isinstance(flow, dict):
            return {name: {k: flow[k] for k in _FLOW_MEMBERS[name] if flow.get(k)}}
    return {}


def _security_scheme_in(scheme: Json) -> Json | None:
    """A v0.3 ``type``-tagged security scheme in the v1.0 oneof form (a scheme already in that form, as on a
    card that carries both versions, is kept as it is); None for an unknown type."""
    for v10_form in _SCHEME_TYPES:
        if isinstance(scheme.get(v10_form), dict):
            return {v10_form: scheme[v10_form]}
    kind = scheme.get("type")
    wrapper = _SCHEME_WRAPPERS.get(kind) if isinstance(kind, str) else None
    if kind is None or wrapper is None:
        return None
    body: Json = {new: scheme[old] for new, old in _SCHEME_FIELDS[kind].items() if scheme.get(old)}
    if kind == "oauth2":
        body["flows"] = _flows_in(scheme.get("flows"))
    return {wrapper: body}


def _requirements_in(reqs: list[dict[str, list[str]]]) -> list[m.SecurityRequirement]:
    return [
        m.SecurityRequirement(schemes={name: m.StringList(list=scopes) for name, scopes in req.items()})
        for req in reqs
    ]


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2]) or "0.3"


def _v03_interfaces(card: _CardIn) -> list[m.AgentInterface]:
    """The card's main endpoint, then its additional interfaces (without repeats), at its 0.x version."""
    version = _major_minor(card.protocol_version)
    pairs: list[tuple[str, str]] = []
    for url, transport in [(card.url, card.preferred_transport)] + [
        (i.url, i.transport) for i in card.additional_interfaces
    ]:
        pair = (url, _BINDINGS.get(transport.upper(), transport))
        if pair not in pairs:
            pairs.append(pair)
    return [m.AgentInterface(url=u, protocol_binding=b, protocol_version=version) for u, b in pairs]


def is_v03_card(obj: Mapping[str, Any]) -> bool:
    """Whether a decoded agent card JSON is a v0.3 one: it has no ``supportedInterfaces``, or it declares a
    0.x ``protocolVersion`` (a card serving both versions does both: :func:`card_from_v03` reads it whole)."""
    version = obj.get("protocolVersion")
    return not isinstance(obj.get("supportedInterfaces"), list) or (
        isinstance(version, str) and version.startswith("0.")
    )


def card_from_v03(obj: Mapping[str, Any]) -> m.AgentCard:
    """A v0.3 agent card (decoded JSON) as a v1.0 AgentCard whose ``supportedInterfaces`` are its endpoints
    at protocol version ``0.3`` (``url`` with ``preferredTransport`` first, then ``additionalInterfaces``).

    Security schemes become the v1.0 oneof form (``{"type": "http", "scheme": "bearer"}`` ->
    ``{"httpAuthSecurityScheme": {"scheme": "bearer"}}``), ``security`` the security requirements,
    ``supportsAuthenticatedExtendedCard`` ``capabilities.extendedAgentCard``. What v1.0 cannot hold is left
    out: ``stateTransitionHistory``, all OAuth flows but the first, schemes of an unknown type.

    A card serving both versions (``supportedInterfaces`` beside the v0.3 members, as skillwire serves) reads
    as its v1.0 self, with its v0.3 endpoints appended when they are not listed already. A card that is
    neither raises msgspec.ValidationError (a ValueError) naming the field (``card.skills[0].id``).
    """
    try:
        if isinstance(obj.get("supportedInterfaces"), list):
            return _card_of_both(msgspec.convert(obj, m.AgentCard), obj)
        card = msgspec.convert(obj, _CardIn)
    except msgspec.ValidationError as exc:
        path, reason = field_error(exc, "card")
        raise msgspec.ValidationError(f"not an A2A agent card: {path}: {reason}") from None
    caps = card.capabilities
    return m.AgentCard(
        name=card.name,
        description=card.description,
        supported_interfaces=_v03_interfaces(card),
        provider=card.provider,
        version=card.version,
        documentation_url=card.documentation_url,
        capabilities=m.AgentCapabilities(
            streaming=caps.streaming,
            push_notifications=caps.push_notifications,
            extensions=caps.extensions,
            extended_agent_card=card.supports_authenticated_extended_card,
        ),
        security_schemes={
            name: converted
            for name, converted in ((n, _security_scheme_in(s)) for n, s in card.security_schemes.items())
            if converted is not None
        },
        security_requirements=_requirements_in(card.security),
        default_input_modes=card.default_input_modes,
        default_output_modes=card.default_output_modes,
        skills=[
            m.AgentSkill(
                id=s.id,
                name=s.name,
                description=s.description,
                tags=s.tags,
                examples=s.examples,
                input_modes=s.input_modes,
                output_modes=s.output_modes,
                security_requirements=_requirements_in(s.security),
            )
            for s in card.skills
        ],
        signatures=card.signatures,
        icon_url=card.icon_url,
    )


def _card_of_both(card: m.AgentCard, obj: Mapping[str, Any]) -> m.AgentCard:
    """A v1.0 card that may carry v0.3 members too: its v0.3 endpoints are appended unless listed, its
    security schemes keep only their v1.0 form."""
    extra: list[m.AgentInterface] = []
    if isinstance(obj.get("url"), str):
        try:
            legacy = msgspec.convert(obj, _CardIn)
        except msgspec.ValidationError:
            legacy = None  # a v0.3 part that does not read is ignored: the v1.0 card stands on its own
        if legacy is not None:
            listed = {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
            extra = [
                i
                for i in _v03_interfaces(legacy)
                if (i.url, i.protocol_binding, i.protocol_version) not in listed
            ]
    schemes = {name: _security_scheme_in(s) or s for name, s in card.security_schemes.items()}
    return msgspec.structs.replace(
        card, supported_interfaces=card.supported_interfaces + extra, security_schemes=schemes
    )
