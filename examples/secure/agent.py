"""An agent that knows who calls it: ``skillwire serve examples/secure``.

Two security schemes, either one enough:

* ``apiKey``: an ``X-API-Key`` header, the keys read at start-up from ``SECURE_EXAMPLE_KEYS``
  (comma-separated ``principal:key`` pairs: ``SECURE_EXAMPLE_KEYS="alice:k-alice,bob:k-bob"``);
* ``bearer``: a JWT verified with the keys at ``SECURE_EXAMPLE_JWKS_URL`` (left off the card when it is
  unset), its issuer and audience checked when ``SECURE_EXAMPLE_ISSUER`` and ``SECURE_EXAMPLE_AUDIENCE`` say
  what they must be.

Its one skill answers with the caller's name::

    SECURE_EXAMPLE_KEYS="alice:k-alice" skillwire serve examples/secure
    skillwire send http://127.0.0.1:8000 hello --credential apiKey=k-alice     # Hello, alice (apiKey)
"""

import logging
import os

from skillwire import Agent, SkillContext
from skillwire.security import APIKey, Bearer, Scheme, Security, keys_from_env

keys = keys_from_env("SECURE_EXAMPLE_KEYS")
if not keys:
    logging.getLogger("skillwire").warning(
        "SECURE_EXAMPLE_KEYS is not set: no API key is accepted (set it to principal:key pairs)"
    )
schemes: list[Scheme] = [APIKey("apiKey", keys=keys, parameter="X-API-Key")]
jwks_url = os.environ.get("SECURE_EXAMPLE_JWKS_URL")
if jwks_url:
    schemes.append(
        Bearer(
            "bearer",
            jwks_url=jwks_url,
            # None turns a check off on purpose: set both in production
            issuer=os.environ.get("SECURE_EXAMPLE_ISSUER") or None,
            audience=os.environ.get("SECURE_EXAMPLE_AUDIENCE") or None,
        )
    )

agent = Agent("Secure", "Answers with the name of whoever calls it", security=Security(*schemes))


@agent.skill(tags=["security", "example"], examples=["hello"])
async def whoami(params: dict[str, str], ctx: SkillContext) -> str:
    """Says hello to the authenticated caller, by the name their credentials carry."""
    return f"Hello, {ctx.principal.subject} ({ctx.principal.scheme})"
