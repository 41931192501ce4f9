"""Declaring and enforcing who may call an agent: schemes, the policy, the principal.

    from skillwire import Agent
    from skillwire.security import APIKey, Security, keys_from_env

    agent = Agent("Vault", security=Security(APIKey(keys=keys_from_env("VAULT_KEYS"))))

See docs/security.md for each scheme, the requirements, tenants and the threat model.
"""

from skillwire.security.introspection import Introspection
from skillwire.security.jwks import KeyCache
from skillwire.security.policy import Requirement, Security, requirement_sets
from skillwire.security.principal import ANONYMOUS, Principal
from skillwire.security.schemes import (
    APIKey,
    Certificate,
    HTTPBasic,
    MutualTLS,
    Presented,
    Scheme,
    hash_password,
    keys_from_env,
)
from skillwire.security.tokens import Bearer, OAuth2, OpenIDConnect

__all__ = [
    "ANONYMOUS",
    "APIKey",
    "Bearer",
    "Certificate",
    "HTTPBasic",
    "Introspection",
    "KeyCache",
    "MutualTLS",
    "OAuth2",
    "OpenIDConnect",
    "Presented",
    "Principal",
    "Requirement",
    "Scheme",
    "Security",
    "hash_password",
    "keys_from_env",
    "requirement_sets",
]
