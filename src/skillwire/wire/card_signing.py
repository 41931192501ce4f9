"""Signed agent cards (A2A v1.0, "Agent Card signing"): a JWS (RFC 7515) with a detached payload over the
card's canonical form, checked against a JWKS the verifier trusts. Sans-IO: keys in, cards out::

    signer = CardSigner(private_key, kid="card-2026")     # a joserfc key, a PEM, or a JWK dict
    card = signer.sign(card)                               # one more AgentCardSignature on the card
    verify_card(card, {"keys": [signer.public_jwk()]})     # the signature that verified, or CardSignatureError

**The canonical form** (:func:`canonical_card`), as the specification lays it down:

1. ``signatures`` is dropped;
2. the proto field-presence rules: unset optional fields and fields at their default are left out, optional
   fields set (even to their default) are kept, REQUIRED fields are kept even when empty (``"skills": []``),
   empty repeated fields that are not REQUIRED are left out. The Structs' own encoding already follows these
   rules (a field without a default is REQUIRED; ``X | None`` is an optional field; the others are left out
   at their default, ``omit_defaults``). ``securitySchemes``, which the model keeps as JSON, is brought to
   them by :data:`_SCHEMES`, a table of the ``lf.a2a.v1`` SecurityScheme messages (checked against the proto
   by the tests); members the proto does not have are dropped, such as the v0.3 ones a card serving both
   versions carries beside the v1.0 ones. Extension ``params`` and a signature's ``header`` are
   ``google.protobuf.Struct`` values, kept as they are;
3. RFC 8785 (JCS): sorted keys, ECMAScript numbers, no whitespace (the ``rfc8785`` package).

**A signature** is ``BASE64URL(protected) "." BASE64URL(signature)`` over ``BASE64URL(protected) "."
BASE64URL(canonical form)``; its protected header has ``alg``, ``kid``, ``typ: "JOSE"`` and, if given,
``jku``. JWS itself is joserfc's. Only the asymmetric algorithms of :data:`ALGORITHMS` are signed or accepted.

**Verification** (:func:`verify_card`) accepts the card when at least one signature verifies with a key of the
trusted JWKS found by its ``kid``; a signature whose ``alg`` is not allowed, whose ``kid`` is unknown, revoked
(``revoked=``) or names a key past its ``exp`` (a JWK member, seconds since the epoch), or whose bytes do not
match, does not count. ``jku`` is never followed: the keys are the verifier's to choose.

The official a2a-sdk (1.3) canonicalizes the same way except that it also drops empty strings, lists and
objects everywhere, REQUIRED fields and the inside of ``params`` included: cards without such empty values
(the usual ones) verify both ways (tests/test_card_signing.py).

joserfc and rfc8785 are imported on first use, so importing skillwire does not load them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from skillwire.errors import CardSignatureError
from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentCardSignature

if TYPE_CHECKING:
    from joserfc.jwk import Key, KeySet
    from joserfc.jws import JWSRegistry

__all__ = [
    "ALGORITHMS",
    "MAX_CARD_BYTES",
    "CardSigner",
    "canonical_card",
    "load_key_set",
    "signed_part",
    "verify_card",
]

#: The JWS algorithms cards are signed and verified with: asymmetric only (no ``none``, no HMAC).
ALGORITHMS = ("ES256", "ES384", "RS256", "PS256", "EdDSA")
#: What a key's type and curve sign with when no ``alg`` is given (RSA: RS256, the most widely verified).
_DEFAULT_ALG = {("EC", "P-256"): "ES256", ("EC", "P-384"): "ES384", ("RSA", None): "RS256"}
_DEFAULT_ALG |= {("OKP", "Ed25519"): "EdDSA"}

# -- the canonical form ------------------------------------------------------------------------------------

_S, _B, _MAP = "string", "bool", "map"
#: The lf.a2a.v1 messages the model keeps as JSON (under ``securitySchemes``): member -> (kind, REQUIRED).
#: A kind is a scalar, a string map, or the name of a message in this table; message members have presence.
_SCHEMES: dict[str, dict[str, tuple[str, bool]]] = {
    "SecurityScheme": {  # a oneof
        "apiKeySecurityScheme": ("APIKeySecurityScheme", False),
        "httpAuthSecurityScheme": ("HTTPAuthSecurityScheme", False),
        "oauth2SecurityScheme": ("OAuth2SecurityScheme", False),
        "openIdConnectSecurityScheme": ("OpenIdConnectSecurityScheme", False),
        "mtlsSecurityScheme": ("MutualTlsSecurityScheme", False),
    },
    "APIKeySecurityScheme": {"description": (_S, False), "location": (_S, True), "name": (_S, True)},
    "HTTPAuthSecurityScheme": {"description": (_S, False), "scheme": (_S, True), "bearerFormat": (_S, False)},
    "OAuth2SecurityScheme": {
        "description": (_S, False),
        "flows": ("OAuthFlows", True),
        "oauth2MetadataUrl": (_S, False),
    },
    "OAuthFlows": {  # a oneof
        "authorizationCode": ("AuthorizationCodeOAuthFlow", False),
        "clientCredentials": ("ClientCredentialsOAuthFlow", False),
        "implicit": ("ImplicitOAuthFlow", False),
        "password": ("PasswordOAuthFlow", False),
        "deviceCode": ("DeviceCodeOAuthFlow", False),
    },
    "AuthorizationCodeOAuthFlow": {
        "authorizationUrl": (_S, True),
        "tokenUrl": (_S, True),
        "refreshUrl": (_S, False),
        "scopes": (_MAP, True),
        "pkceRequired": (_B, False),
    },
    "ClientCredentialsOAuthFlow": {"tokenUrl": (_S, True), "refreshUrl": (_S, False), "scopes": (_MAP, True)},
    "ImplicitOAuthFlow": {
        "authorizationUrl": (_S, False),
        "refreshUrl": (_S, False),
        "scopes": (_MAP, False),
    },
    "PasswordOAuthFlow": {"tokenUrl": (_S, False), "refreshUrl": (_S, False), "scopes": (_MAP, False)},
    "DeviceCodeOAuthFlow": {
        "deviceAuthorizationUrl": (_S, True),
        "tokenUrl": (_S, True),
        "refreshUrl": (_S, False),
        "scopes": (_MAP, True),
    },
    "OpenIdConnectSecurityScheme": {"description": (_S, False), "openIdConnectUrl": (_S, True)},
    "MutualTlsSecurityScheme": {"description": (_S, False)},
}


def _present(message: str, value: Any) -> dict[str, Any]:
    """``value`` as the message ``message`` under the presence rules (unknown members dropped)."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    for name, (kind, required) in _SCHEMES[message].items():
        if name not in value:
            continue
        member = value[name]
        if kind in _SCHEMES:
            if member is not None:  # a message member has presence: set, even empty, is kept
                out[name] = _present(kind, member)
        elif required or (member not in ("", False, None) and member != {}):
            out[name] = member
    return out


def signed_part(card: AgentCard) -> AgentCard:
    """``card`` as far as its signatures cover it: its security schemes without the members the proto lacks
    (the v0.3 ones beside the v1.0 ones) or holds at their default. What a client uses once it verified."""
    if not card.security_schemes:
        return card
    schemes = {name: _present("SecurityScheme", scheme) for name, scheme in card.security_schemes.items()}
    return msgspec.structs.replace(card, security_schemes=schemes)


def canonical_card(card: AgentCard) -> bytes:
    """The bytes a card's signatures sign: its JCS form under the proto presence rules (see the module).
    Raises CardSignatureError for a card that has none (an integer beyond 2**53, a string that is not
    Unicode)."""
    import rfc8785

    data = msgspec.to_builtins(msgspec.structs.replace(signed_part(card), signatures=[]))
    try:
        return rfc8785.dumps(data)
    except (rfc8785.CanonicalizationError, ValueError) as exc:
        raise CardSignatureError(f"the agent card has no canonical form: {exc}") from None


# -- keys ----------------------------------------------------------------------------------------------------


def _import_key(key: Any) -> Key:
    """A joserfc key from a joserfc key, a JWK dict, or a PEM (text or bytes); TypeError, ValueError."""
    from joserfc.errors import JoseError
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    types: dict[str, type[ECKey | RSAKey | OKPKey]] = {"EC": ECKey, "RSA": RSAKey, "OKP": OKPKey}
    if isinstance(key, ECKey | RSAKey | OKPKey):
        return key
    try:
        if isinstance(key, Mapping):
            kty = key.get("kty")
            if not isinstance(kty, str) or kty not in types:
                raise ValueError(f"a card key is an EC, RSA or OKP (Ed25519) key, not kty {kty!r}")
            return types[kty].import_key(dict(key))
        if isinstance(key, str | bytes):
            pem = key.encode() if isinstance(key, str) else key
            return types[_pem_type(pem)].import_key(pem)
    except JoseError as exc:
        raise ValueError(f"not a usable card key: {exc.description or exc}") from None
    raise TypeError(f"a card key is a joserfc key, a JWK dict or a PEM, not {type(key).__name__}")


def _pem_type(pem: bytes) -> str:
    """The JWK key type of a PEM key (joserfc warns when made to guess it)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        native: Any = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        try:
            native = serialization.load_pem_public_key(pem)
        except ValueError:
            raise ValueError("not a PEM key (an unencrypted private key, or a public key)") from None
    for kind, types in (
        ("EC", (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)),
        ("RSA", (rsa.RSAPrivateKey, rsa.RSAPublicKey)),
        ("OKP", (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)),
    ):
        if isinstance(native, types):
            return kind
    raise ValueError(f"a card key is an EC, RSA or Ed25519 key, not {type(native).__name__}")


def _default_alg(key: Key) -> str:
    jwk = key.as_dict(private=False)
    declared = jwk.get("alg")
    if isinstance(declared, str):
        return declared
    crv = jwk.get("crv")
    alg = _DEFAULT_ALG.get((str(jwk["kty"]), crv if isinstance(crv, str) else None))
    if alg is None:
        raise ValueError(f"no card signing algorithm for a {jwk['kty']} key on curve {crv}")
    return alg


def load_key_set(keys: Mapping[str, Any] | KeySet) -> KeySet:
    """A joserfc KeySet from a JWKS dict (``{"keys": [...]}``) or a KeySet; ValueError if it is neither."""
    from joserfc.errors import JoseError
    from joserfc.jwk import KeySet

    if isinstance(keys, KeySet):
        return keys
    if not isinstance(keys, Mapping) or not isinstance(keys.get("keys"), list):
        raise ValueError('card keys are a JWKS ({"keys": [...]}) or a joserfc KeySet')
    try:
        return KeySet([_import_key(jwk) for jwk in keys["keys"]])
    except JoseError as exc:
        raise ValueError(f"not a usable JWKS: {exc.description or exc}") from None


# -- signing -------------------------------------------------------------------------------------------------


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CardSigner:
    """Signs agent cards with one private key: ``Agent(card_signer=CardSigner(key, kid="2026-01"))`` signs
    the public and the extended card the agent serves, and publishes the public key (see docs/security.md).

    ``key`` is a joserfc key, a JWK dict or a PEM (text or bytes), an EC (P-256, P-384), RSA or Ed25519 private
    key. ``kid`` defaults to the JWK's own ``kid``, else its RFC 7638 thumbprint; ``alg`` (one of
    :data:`ALGORITHMS`) to the JWK's ``alg``, else the key's (ES256, ES384, RS256, EdDSA); ``jku`` is the URL
    of the JWKS holding the public key, written in each signature's protected header if given (a server
    writes the URL it publishes the key at when none is given)."""

    def __init__(self, key: Any, *, kid: str | None = None, alg: str | None = None, jku: str | None = None):
        self.key = _import_key(key)
        if not self.key.is_private:
            raise ValueError("a card signer needs the private key (this is a public one)")
        self.alg = alg or _default_alg(self.key)
        if self.alg not in ALGORITHMS:
            raise ValueError(f"card signing algorithm {self.alg!r}: expected one of {', '.join(ALGORITHMS)}")
        self.kid = kid or self.key.kid or self.key.thumbprint()
        self.jku = jku
        from joserfc.errors import JoseError

        try:  # a key that cannot sign with ``alg`` (ES256 with an RSA key) fails here, not when serving
            self.signature(_PROBE)
        except JoseError as exc:
            raise ValueError(f"this key cannot sign with {self.alg}: {exc.description or exc}") from None

    @classmethod
    def from_file(cls, path: str | Path, *, kid: str | None = None, alg: str | None = None) -> CardSigner:
        """The signer for a key file: a PEM, or a JWK in JSON; ValueError when it holds neither."""
        data = Path(path).read_bytes()
        if data.lstrip().startswith(b"{"):
            try:
                return cls(json.loads(data), kid=kid, alg=alg)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not a JWK: {exc}") from None
        return cls(data, kid=kid, alg=alg)

    def public_jwk(self) -> dict[str, Any]:
        """The public key as a JWK, with its ``kid``, ``alg`` and ``use: "sig"`` (for a JWKS)."""
        jwk = dict(self.key.as_dict(private=False))
        jwk.update(kid=self.kid, alg=self.alg, use="sig")
        return jwk

    def signature(self, card: AgentCard, *, jku: str | None = None) -> AgentCardSignature:
        """The signature of ``card`` (``jku``: the header's, instead of the signer's own)."""
        from joserfc import jws

        header: dict[str, Any] = {"alg": self.alg, "kid": self.kid, "typ": "JOSE"}
        if jku or self.jku:
            header["jku"] = jku or self.jku
        compact = jws.serialize_compact(header, canonical_card(card), self.key, registry=_registry(self.alg))
        protected, _, signature = compact.split(".")
        return AgentCardSignature(protected=protected, signature=signature)

    def sign(self, card: AgentCard) -> AgentCard:
        """``card`` with this signer's signature added after the ones it has."""
        return msgspec.structs.replace(card, signatures=[*card.signatures, self.signature(card)])

    def __repr__(self) -> str:
        return f"CardSigner(kid={self.kid!r}, alg={self.alg!r})"


#: The card a new signer signs once, so that a key that cannot sign with its ``alg`` fails at once.
_PROBE = AgentCard(
    name="probe",
    description="probe",
    supported_interfaces=[],
    version="0",
    capabilities=AgentCapabilities(),
    default_input_modes=[],
    default_output_modes=[],
    skills=[],
)


#: The largest canonical card signed or verified (joserfc's own default is 128 kB, which a card with many
#: skills and their schemas can pass).
MAX_CARD_BYTES = 16 * 1024 * 1024


@functools.cache
def _registry(alg: str) -> JWSRegistry:
    """joserfc's JWS rules for card signatures with ``alg`` (one registry per algorithm, made once): only
    ``alg``; header members it does not know are ignored (RFC 7515 section 4, unless named in ``crit``); a
    ``jku`` of null is taken as absent (a2a-sdk's signer writes one when its header's ``jku`` is None).

    ``EdDSA`` is looked up without joserfc's warning that RFC 9864 deprecates it for ``Ed25519``: the A2A
    ecosystem (a2a-sdk's PyJWT) signs and verifies ``EdDSA``, the same algorithm for an Ed25519 key."""
    from joserfc.errors import UnsupportedAlgorithmError
    from joserfc.jws import JWSRegistry
    from joserfc.registry import HeaderParameter, is_url

    def optional_url(value: Any) -> None:
        if value is not None:
            is_url(value)

    class CardRegistry(JWSRegistry):
        def get_alg(self, name: str) -> Any:  # joserfc's JWSAlgModel
            if name != alg or name not in self.algorithms:
                raise UnsupportedAlgorithmError(f"Algorithm of '{name}' is not allowed")
            return self.algorithms[name]

    registry = CardRegistry(
        header_registry={"jku": HeaderParameter("JWK Set URL", optional_url)},
        algorithms=[alg],
        strict_check_header=False,
    )
    registry.max_payload_length = MAX_CARD_BYTES
    registry.max_header_length = 8192
    return registry


# -- verification --------------------------------------------------------------------------------------------


def verify_card(
    card: AgentCard,
    keys: Mapping[str, Any] | KeySet,
    *,
    algorithms: Collection[str] = ALGORITHMS,
    revoked: Iterable[str] = (),
    now: float | None = None,
) -> AgentCardSignature:
    """The first of ``card``'s signatures that verifies with a key of ``keys`` (a JWKS dict or a joserfc
    KeySet), found by its ``kid``; CardSignatureError when the card has none that does, saying why each
    failed. ``algorithms`` narrows :data:`ALGORITHMS`; ``revoked`` are kids never to trust; a key whose JWK
    has ``exp`` at or before ``now`` (default: the current time) has expired.

    Verify the card as it was signed: parsed as a v1.0 AgentCard (members it does not know are dropped),
    not one rebuilt from v0.3 members."""
    allowed = set(algorithms)
    if not allowed <= set(ALGORITHMS):
        raise ValueError(f"card signatures are verified with {', '.join(ALGORITHMS)} only")
    key_set = load_key_set(keys)
    if not card.signatures:
        raise CardSignatureError("the agent card is not signed")
    payload = canonical_card(card)
    moment = time.time() if now is None else now
    reasons = []
    for number, signature in enumerate(card.signatures, 1):
        reason = _check(signature, payload, key_set, allowed, frozenset(revoked), moment)
        if reason is None:
            return signature
        reasons.append(f"signature {number}: {reason}")
    raise CardSignatureError(
        "no signature of the agent card verifies: " + "; ".join(reasons), reasons=reasons
    )


def _check(
    signature: AgentCardSignature,
    payload: bytes,
    keys: KeySet,
    allowed: set[str],
    revoked: frozenset[str],
    now: float,
) -> str | None:
    """Why ``signature`` does not verify, or None when it does."""
    from joserfc import jws
    from joserfc.errors import JoseError

    try:
        header = json.loads(_unb64(signature.protected))
    except (ValueError, binascii.Error):
        return "its protected header is not base64url JSON"
    if not isinstance(header, dict):
        return "its protected header is not a JSON object"
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(kid, str) or not isinstance(alg, str):
        return "its protected header lacks alg or kid"
    if alg not in allowed:
        return f"algorithm {alg!r} is not allowed (kid {kid!r})"
    if kid in revoked:
        return f"key {kid!r} is revoked"
    key = next((k for k in keys if k.kid == kid), None)
    if key is None:
        return f"key {kid!r} is not one of the trusted keys"
    expires = key.get("exp")
    if isinstance(expires, int | float) and not isinstance(expires, bool) and expires <= now:
        return f"key {kid!r} expired"
    if key.alg is not None and key.alg != alg:
        return f"key {kid!r} is for {key.alg}, the signature says {alg}"
    try:
        jws.deserialize_compact(
            f"{signature.protected}..{signature.signature}", key, registry=_registry(alg), payload=payload
        )
    except JoseError as exc:
        return f"it does not verify with key {kid!r} ({exc.error})"
    except ValueError:
        return f"it is not a JWS signature (kid {kid!r})"
    return None
