"""The security policy of an agent: its schemes, the requirements a call must meet, and who may use which
tenant.

Requirements are the spec's: a list of alternatives (OR), each naming schemes that must all be satisfied
(AND), each with the scopes it needs::

    Security(
        APIKey(keys=...), Bearer(jwks_url=...),
        require=[{"apiKey": []}, {"bearer": ["agent:call"]}],   # an API key, or a token with that scope
    )

Without ``require``, any one declared scheme is enough. A request is authenticated once, before any work
or lookup: every scheme it presents credentials for is checked, then the requirements are matched against
the schemes that accepted them (a scheme that refused credentials another scheme accepted decides nothing:
two schemes may read the same header). No alternative met for lack of credentials is 401
(``UnauthenticatedError`` with each scheme's challenge); an alternative whose schemes are all present but
whose scopes fall short is 403 (``PermissionDeniedError``). A skill's ``securityRequirements`` are checked
the same way, on top of the agent's, when the skill is chosen.

Tenants: with security on, a caller uses the default tenant (``""``) and the tenants ``tenants`` grants it
(a mapping from subject to tenant names, ``"*"`` for any, or a callable taking the :class:`Principal`);
any other tenant is refused with 403 before the call runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from skillwire.errors import PermissionDeniedError, UnauthenticatedError
from skillwire.protocol.models import SecurityRequirement, StringList
from skillwire.security.principal import Principal
from skillwire.security.schemes import Presented, Scheme

__all__ = ["Requirement", "Security", "as_card", "requirement_sets"]

#: One alternative: scheme name -> the scopes it needs (all of them, with every scheme named).
Requirement = Mapping[str, Sequence[str]]
TenantRule = Mapping[str, Iterable[str]] | Callable[[Principal], Iterable[str]]

_Sets = tuple[tuple[tuple[str, frozenset[str]], ...], ...]


def requirement_sets(requirements: Iterable[SecurityRequirement | Requirement]) -> _Sets:
    """Card ``SecurityRequirement`` objects or plain mappings as a normalized OR of AND-sets."""
    out = []
    for req in requirements:
        items = (
            {name: scopes.list for name, scopes in req.schemes.items()}
            if isinstance(req, SecurityRequirement)
            else req
        )
        out.append(tuple((name, frozenset(scopes)) for name, scopes in items.items()))
    return tuple(out)


class Security:
    """An agent's schemes, its requirements, and the tenants its principals may use (see the module)."""

    def __init__(
        self,
        *schemes: Scheme,
        require: Sequence[Requirement] | None = None,
        tenants: TenantRule | None = None,
    ) -> None:
        if not schemes:
            raise ValueError("Security needs at least one scheme")
        self.schemes: dict[str, Scheme] = {}
        for scheme in schemes:
            if not isinstance(scheme, Scheme):
                raise TypeError(f"{scheme!r} is not a security scheme (skillwire.security.Scheme)")
            if scheme.name in self.schemes:
                raise ValueError(f"two security schemes are named {scheme.name!r}")
            self.schemes[scheme.name] = scheme
        if require is not None and not require:
            raise ValueError("require=[] would let every caller in: leave it out to accept any one scheme")
        sets = (
            requirement_sets(require)
            if require is not None
            else tuple(((name, frozenset()),) for name in self.schemes)
        )
        self.check_names(sets, "require")
        self.requirements = sets
        self._tenants = tenants
        self._challenges = [c for c in (s.challenge() for s in self.schemes.values()) if c]

    # -- the card --------------------------------------------------------------------------------------------

    def card_schemes(self) -> dict[str, Any]:
        return {name: scheme.card() for name, scheme in self.schemes.items()}

    def card_requirements(self) -> list[SecurityRequirement]:
        return as_card(self.requirements)

    def check_names(self, sets: _Sets, where: str) -> None:
        """Refuse a requirement that names a scheme this policy does not declare."""
        for alternative in sets:
            if not alternative:
                raise ValueError(f"{where}: an alternative with no scheme would let every caller in")
            for name, _ in alternative:
                if name not in self.schemes:
                    declared = ", ".join(sorted(self.schemes))
                    raise ValueError(
                        f"{where} names security scheme {name!r}, which is not declared ({declared})"
                    )

    # -- lifecycle --------------------------------------------------------------------------------------------

    async def start(self) -> None:
        for scheme in self.schemes.values():
            await scheme.start()

    async def close(self) -> None:
        for scheme in self.schemes.values():
            await scheme.close()

    # -- per request ----------------------------------------------------------------------------------------

    async def authenticate(self, presented: Presented) -> Principal:
        """The principal of a request that meets the agent's requirements; raises UnauthenticatedError (401)
        or PermissionDeniedError (403)."""
        found: dict[str, Principal] = {}
        refused: UnauthenticatedError | None = None
        for name, scheme in self.schemes.items():
            try:
                principal = await scheme.authenticate(presented)
            except UnauthenticatedError as error:
                # Two schemes may read the same credentials (a Bearer JWT scheme and an OAuth 2 one both
                # read Authorization): a scheme that refuses them decides nothing while another accepts.
                refused = refused or error
                continue
            if principal is not None:
                found[name] = principal
        if not found:
            if refused is not None:  # credentials were there and wrong: say so
                raise refused
            raise UnauthenticatedError(
                "This agent needs credentials: " + _describe(self.requirements), challenges=self._challenges
            )
        granted = {name: p.scopes for name, p in found.items()}
        try:
            alternative = self._match(granted, self.requirements)
        except UnauthenticatedError:
            if refused is not None:  # what was missing was presented, and refused
                raise refused from None
            raise
        primary = found[alternative[0][0]] if alternative else next(iter(found.values()))
        return Principal(
            subject=primary.subject,
            scheme=primary.scheme,
            scopes=frozenset().union(*granted.values()),
            claims=primary.claims,
            granted=granted,
            credential=primary.credential,
        )

    def authorize(self, principal: Principal, sets: _Sets, what: str = "This call") -> None:
        """Check ``principal`` against more requirements (a skill's); raises 401 when a scheme they name was
        not presented, 403 when scopes are missing."""
        if sets:
            self._match(principal.granted, sets, what)

    def _match(
        self, granted: Mapping[str, frozenset[str]], sets: _Sets, what: str = "This agent"
    ) -> tuple[tuple[str, frozenset[str]], ...]:
        short_of_scopes = False
        for alternative in sets:
            if all(name in granted for name, _ in alternative):
                if all(scopes <= granted[name] for name, scopes in alternative):
                    return alternative
                short_of_scopes = True
        if short_of_scopes:
            raise PermissionDeniedError(f"{what} needs {_describe(sets)}: the credentials do not grant it")
        missing = [name for alternative in sets for name, _ in alternative if name not in granted]
        challenges = [c for c in (self.schemes[n].challenge() for n in dict.fromkeys(missing)) if c]
        raise UnauthenticatedError(f"{what} needs {_describe(sets)}", challenges=challenges)

    def tenant_allowed(self, principal: Principal, tenant: str) -> bool:
        if not tenant:
            return True
        rule = self._tenants
        if rule is None:
            return False
        allowed = rule(principal) if callable(rule) else rule.get(principal.subject, ())
        allowed = set(allowed)
        return "*" in allowed or tenant in allowed

    def check_tenant(self, principal: Principal, tenant: str) -> None:
        if not self.tenant_allowed(principal, tenant):
            raise PermissionDeniedError(f"Tenant {tenant[:100]!r} is not granted to this caller")


def as_card(sets: _Sets) -> list[SecurityRequirement]:
    return [
        SecurityRequirement(schemes={name: StringList(list=sorted(scopes)) for name, scopes in alternative})
        for alternative in sets
    ]


def _describe(sets: _Sets) -> str:
    def one(alternative: tuple[tuple[str, frozenset[str]], ...]) -> str:
        parts = [
            name + (f" with scope {', '.join(sorted(scopes))}" if scopes else "")
            for name, scopes in alternative
        ]
        return " and ".join(parts)

    return " or ".join(one(a) for a in sets)
