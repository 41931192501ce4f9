"""The ``security:`` section of an agent.yaml: the agent's schemes, requirements and tenants as data.

::

    security:
      schemes:
        apiKey:   {type: apiKey, location: header, name: X-API-Key, keysFromEnv: AGENT_KEYS}
        bearer:   {type: bearer, jwksUrl: https://idp.example/jwks.json, issuer: https://idp.example,
                   audience: my-agent}
        basic:    {type: basic, usersFromEnv: AGENT_USERS}        # user:hash pairs (hash_password)
        oidc:     {type: openIdConnect, issuer: https://accounts.example, audience: my-agent}
        oauth2:   {type: oauth2, issuer: https://auth.example, audience: my-agent,
                   flows: {clientCredentials: {tokenUrl: https://auth.example/token, scopes: {read: Read}}}}
        mtls:     {type: mutualTLS, subjects: ["CN=ci,O=Example"]}
      require:                     # optional: OR of AND-sets; without it, any one scheme
        - {apiKey: []}
        - {bearer: [agent:call]}
      tenants: {alice: [acme]}     # optional: the tenants each subject may use

Secrets never live in the file: API keys and password hashes come from environment variables named by
``keysFromEnv`` / ``usersFromEnv`` (comma-separated ``principal:value`` pairs), read when the agent is
built. Any string value may instead be given as ``<key>FromEnv: VARIABLE`` (``jwksUrlFromEnv``); a scheme
whose ``...FromEnv`` variable is unset is a clear error, unless the scheme says ``optional: true``, in which
case it is left off the card and not enforced.

:func:`parse_security` checks the shape (used by ``skills check``, which reads no environment);
:func:`build_security` makes the :class:`~skillwire.security.Security` object at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skillwire.errors import ManifestError
from skillwire.security.policy import Security
from skillwire.security.schemes import APIKey, HTTPBasic, MutualTLS, Scheme, keys_from_env

__all__ = ["SecuritySpec", "build_security", "parse_security"]

_TYPES: dict[str, set[str]] = {
    "apiKey": {"location", "name", "keys", "scopes"},
    "basic": {"users", "scopes", "realm"},
    "bearer": {"jwksUrl", "issuer", "audience", "algorithms", "leeway", "subjectClaim", "requiredClaims"},
    "oauth2": {"flows", "issuer", "metadataUrl", "audience", "algorithms", "leeway", "subjectClaim"},
    "openIdConnect": {"issuer", "discoveryUrl", "audience", "algorithms", "leeway", "subjectClaim"},
    "mutualTLS": {"subjects", "scopes"},
}
_COMMON = {"type", "description", "optional"}


@dataclass(frozen=True)
class SecuritySpec:
    """A checked ``security:`` section: scheme name -> its settings, the requirements, the tenants."""

    schemes: dict[str, dict[str, Any]]
    require: list[dict[str, list[str]]] | None = None
    tenants: dict[str, list[str]] = field(default_factory=dict)
    source: str = "agent.yaml"

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.schemes)


def parse_security(value: Any, *, source: str, lines: Mapping[tuple[Any, ...], int]) -> SecuritySpec:
    def fail(reason: str, *path: Any) -> ManifestError:
        return ManifestError(
            reason,
            path=".".join(str(p) for p in ("security", *path)),
            line=lines.get(("security", *path)),
            source=source,
        )

    if not isinstance(value, dict):
        raise fail("expected a mapping with `schemes` (and optional `require`, `tenants`)")
    unknown = set(value) - {"schemes", "require", "tenants"}
    if unknown:
        raise fail(f"unknown key {sorted(unknown)[0]!r}; allowed: require, schemes, tenants")
    schemes = value.get("schemes")
    if not isinstance(schemes, dict) or not schemes:
        raise fail("`schemes` must map each scheme name to its settings", "schemes")
    checked: dict[str, dict[str, Any]] = {}
    for name, settings in schemes.items():
        if not isinstance(settings, dict):
            raise fail("expected a mapping", "schemes", name)
        kind = settings.get("type")
        if kind not in _TYPES:
            raise fail(f"`type` must be one of {', '.join(sorted(_TYPES))}", "schemes", name, "type")
        allowed = _TYPES[kind] | _COMMON
        for key in settings:
            base = key[: -len("FromEnv")] if isinstance(key, str) and key.endswith("FromEnv") else key
            if base not in allowed:
                raise fail(
                    f"unknown key {key!r} for a {kind} scheme; allowed: {', '.join(sorted(allowed))}",
                    "schemes",
                    name,
                    key,
                )
        if kind == "apiKey" and "keys" in settings:
            raise fail(
                "API keys are secrets: give `keysFromEnv: VARIABLE`, not `keys`", "schemes", name, "keys"
            )
        if kind == "basic" and "users" in settings:
            raise fail("give `usersFromEnv: VARIABLE` (user:hash pairs)", "schemes", name, "users")
        checked[str(name)] = dict(settings)
    require = value.get("require")
    if require is not None:
        if not isinstance(require, list) or not require:
            raise fail("`require` must be a non-empty list of {scheme: [scopes]} mappings", "require")
        for i, alternative in enumerate(require):
            if not isinstance(alternative, dict) or not alternative:
                raise fail("each alternative maps scheme names to scope lists", "require", i)
            for scheme, scopes in alternative.items():
                if scheme not in checked:
                    raise fail(f"names scheme {scheme!r}, which `schemes` does not declare", "require", i)
                if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
                    raise fail("scopes must be a list of strings", "require", i, scheme)
    tenants = value.get("tenants") or {}
    if not isinstance(tenants, dict) or not all(
        isinstance(t, list) and all(isinstance(x, str) for x in t) for t in tenants.values()
    ):
        raise fail("`tenants` maps each subject to a list of tenant names", "tenants")
    return SecuritySpec(checked, require, {str(k): list(v) for k, v in tenants.items()}, source)


def build_security(spec: SecuritySpec, env: Mapping[str, str] | None = None) -> Security | None:
    """The Security object of ``spec``, reading its ``...FromEnv`` variables from ``env`` (the process
    environment by default); None when every scheme is optional and left out."""
    env = os.environ if env is None else env
    schemes: list[Scheme] = []
    for name, settings in spec.schemes.items():
        try:
            resolved = _resolve(settings, env)
        except _Unset as unset:
            if settings.get("optional"):
                continue
            raise ManifestError(
                f"security scheme {name!r}: the environment variable {unset.variable} is not set",
                path=f"security.schemes.{name}",
                source=spec.source,
            ) from None
        try:
            schemes.append(_scheme(name, resolved, env))
        except (ValueError, TypeError) as exc:
            raise ManifestError(
                f"security scheme {name!r}: {exc}", path=f"security.schemes.{name}", source=spec.source
            ) from None
    if not schemes:
        return None
    kept = {s.name for s in schemes}
    require = None
    if spec.require is not None:
        require = [alt for alt in spec.require if set(alt) <= kept] or None
        if require is None:
            raise ManifestError(
                "every alternative of `require` names a scheme left out (optional, its variable unset)",
                path="security.require",
                source=spec.source,
            )
    return Security(*schemes, require=require, tenants=spec.tenants or None)


class _Unset(Exception):
    def __init__(self, variable: str) -> None:
        self.variable = variable


def _resolve(settings: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in settings.items():
        if key.endswith("FromEnv") and key not in ("keysFromEnv", "usersFromEnv"):
            if item not in env or not env[item]:
                raise _Unset(str(item))
            out[key[: -len("FromEnv")]] = env[item]
        else:
            out[key] = item
    for key in ("keysFromEnv", "usersFromEnv"):
        if key in out and (out[key] not in env or not env[out[key]]):
            raise _Unset(str(out[key]))
    return out


def _scheme(name: str, s: Mapping[str, Any], env: Mapping[str, str]) -> Scheme:
    kind, description = s["type"], s.get("description", "")
    if kind == "apiKey":
        keys = _pairs(s["keysFromEnv"], env) if "keysFromEnv" in s else None
        if keys is None:
            raise ValueError("an API key scheme needs keysFromEnv")
        return APIKey(
            name,
            keys=keys,
            location=s.get("location", "header"),
            parameter=s.get("name", "X-API-Key"),
            scopes=s.get("scopes"),
            description=description,
        )
    if kind == "basic":
        if "usersFromEnv" not in s:
            raise ValueError("a basic scheme needs usersFromEnv")
        return HTTPBasic(
            name,
            users=_pairs(s["usersFromEnv"], env),
            realm=s.get("realm", "skillwire"),
            scopes=s.get("scopes"),
            description=description,
        )
    if kind == "mutualTLS":
        return MutualTLS(name, subjects=s.get("subjects"), scopes=s.get("scopes"), description=description)
    from skillwire.security.tokens import Bearer, OAuth2, OpenIDConnect

    # issuer and audience pass only when given: the schemes refuse to leave them out by accident
    common: dict[str, Any] = {}
    for key, arg in (
        ("audience", "audience"),
        ("algorithms", "algorithms"),
        ("leeway", "leeway"),
        ("subjectClaim", "subject_claim"),
    ):
        if key in s:
            common[arg] = s[key]
    if kind == "bearer":
        if "requiredClaims" in s:
            common["required_claims"] = s["requiredClaims"]
        if "issuer" in s:
            common["issuer"] = s["issuer"]
        return Bearer(name, jwks_url=s.get("jwksUrl"), description=description, **common)
    if kind == "oauth2":
        return OAuth2(
            name,
            flows=s.get("flows") or {},
            issuer=s.get("issuer"),
            metadata_url=s.get("metadataUrl"),
            description=description,
            **common,
        )
    return OpenIDConnect(
        name, issuer=s.get("issuer"), discovery_url=s.get("discoveryUrl"), description=description, **common
    )


def _pairs(variable: str, env: Mapping[str, str]) -> dict[str, str]:
    return keys_from_env(variable, env)
