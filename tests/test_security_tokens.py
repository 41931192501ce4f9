"""The bearer-token schemes against a real IdP on 127.0.0.1 (tests/idp.py): real keys, real signatures, a
real JWKS, discovery and introspection over HTTP. Time moves by the schemes' ``clock=``, never by sleeping."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import pytest
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey

from conftest import assert_proto, free_port
from idp import AUDIENCE, CLIENT, REALM, Clock, IdP, b64, running_idp
from skillwire.errors import PermissionDeniedError, ServerBusyError, UnauthenticatedError
from skillwire.security import (
    Bearer,
    Introspection,
    KeyCache,
    OAuth2,
    OpenIDConnect,
    Presented,
    Principal,
    Scheme,
    Security,
)

S = TypeVar("S", bound=Scheme)
FLOWS = {"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {"read": "Read tasks"}}}


@pytest.fixture(scope="module")
def idp_server() -> Iterator[IdP]:
    with running_idp() as idp:
        yield idp


@pytest.fixture
def idp(idp_server: IdP) -> IdP:
    """The module's IdP, as it was at the start: its first keys, counters at zero, answering."""
    idp_server.clock.now = Clock().now
    idp_server.published = [idp_server.rsa, idp_server.ec]
    idp_server.cache_control = "max-age=300"
    idp_server.jwks_body = None
    idp_server.failing = False
    idp_server.opaque.clear()
    idp_server.fetches.update(dict.fromkeys(idp_server.fetches, 0))
    return idp_server


@pytest.fixture
async def closing() -> AsyncIterator[Callable[[S], S]]:
    """``closing(scheme)`` returns the scheme and closes it (its HTTP client) after the test."""
    made: list[Scheme] = []

    def keep(scheme: S) -> S:
        made.append(scheme)
        return scheme

    yield keep
    for scheme in made:
        await scheme.close()


def bearer(token: str) -> Presented:
    return Presented(headers={"authorization": f"Bearer {token}"})


def jwks_bearer(idp: IdP, **options: Any) -> Bearer:
    options = {"issuer": idp.issuer, "audience": AUDIENCE, "clock": idp.clock, **options}
    return Bearer(jwks_url=idp.issuer + "/jwks", **options)


async def refused(scheme: Scheme, token: str, match: str) -> UnauthenticatedError:
    with pytest.raises(UnauthenticatedError, match=match) as caught:
        await scheme.authenticate(bearer(token))
    return caught.value


# -- valid tokens ----------------------------------------------------------------------------------------------


async def test_valid_rs256_token_gives_subject_scopes_and_claims(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    principal = await scheme.authenticate(bearer(idp.token(scope="read write", tenant="t1")))
    assert principal is not None
    assert (principal.subject, principal.scheme) == ("alice", "bearer")
    assert principal.scopes == {"read", "write"}
    assert principal.granted == {"bearer": frozenset({"read", "write"})}
    assert principal.claims["tenant"] == "t1" and principal.claims["iss"] == idp.issuer
    assert idp.fetches["jwks"] == 1


async def test_valid_es256_token_verifies_with_the_ec_key(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    principal = await scheme.authenticate(bearer(idp.token(key=idp.ec, sub="carol")))
    assert principal is not None and principal.subject == "carol"


async def test_no_authorization_header_is_no_credentials(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    assert await scheme.authenticate(Presented(headers={})) is None
    assert await scheme.authenticate(Presented(headers={"authorization": "Basic YTpi"})) is None
    assert idp.fetches["jwks"] == 0


@pytest.mark.parametrize("form", ["jwk", "jwks", "pem", "key", "keyset", "list"])
async def test_static_keys_in_every_form_verify(idp: IdP, form: str) -> None:
    public = RSAKey.import_key(idp.rsa.as_dict(private=False))
    keys: Any = {
        "jwk": idp.rsa.as_dict(private=False),
        "jwks": {"keys": [idp.rsa.as_dict(private=False), idp.ec.as_dict(private=False)]},
        "pem": idp.rsa.as_pem(private=False).decode(),
        "key": public,
        "keyset": KeySet([public, idp.ec]),
        "list": [idp.ec.as_dict(private=False), idp.rsa.as_pem(private=False)],
    }[form]
    scheme = Bearer(keys=keys, issuer=idp.issuer, audience=AUDIENCE, clock=idp.clock)
    principal = await scheme.authenticate(bearer(idp.token()))
    assert principal is not None and principal.subject == "alice"


async def test_static_pem_key_without_kid_verifies_a_token_naming_a_kid(idp: IdP) -> None:
    scheme = Bearer(keys=idp.ec.as_pem(private=False), issuer=None, audience=None, clock=idp.clock)
    assert await scheme.authenticate(bearer(idp.token(key=idp.ec))) is not None


async def test_hs256_with_a_shared_secret_given_in_code(idp: IdP) -> None:
    secret = OctKey.import_key("a shared secret of enough length, 32+")
    scheme = Bearer(keys=secret, algorithms=["HS256"], issuer=idp.issuer, audience=AUDIENCE, clock=idp.clock)
    from joserfc import jwt

    token = jwt.encode({"alg": "HS256"}, idp.claims(), secret)
    principal = await scheme.authenticate(bearer(token))
    assert principal is not None and principal.subject == "alice"


@pytest.mark.parametrize(
    ("claims", "scopes"),
    [
        ({"scope": "read write"}, {"read", "write"}),
        ({"scp": ["read", "admin"]}, {"read", "admin"}),
        ({"scp": "read write"}, {"read", "write"}),
        ({"scope": "a", "scp": ["b"]}, {"a", "b"}),
        ({}, set()),
    ],
)
async def test_scopes_from_scope_and_scp(
    idp: IdP, claims: dict[str, Any], scopes: set[str], closing: Any
) -> None:
    scheme = closing(jwks_bearer(idp))
    principal = await scheme.authenticate(bearer(idp.token(**claims)))
    assert principal is not None and principal.scopes == scopes


async def test_subject_claim_and_required_claims(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, subject_claim="email", required_claims=["email_verified"]))
    principal = await scheme.authenticate(bearer(idp.token(email="a@example.com", email_verified=True)))
    assert principal is not None and principal.subject == "a@example.com"
    await refused(scheme, idp.token(email="a@example.com"), "lacks the claim email_verified")
    await refused(scheme, idp.token(email_verified=True), r"names no subject \(email\)")


# -- refused tokens ----------------------------------------------------------------------------------------


async def test_expired_token_is_refused_beyond_the_leeway(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, leeway=60))
    now = int(idp.clock())
    assert await scheme.authenticate(bearer(idp.token(exp=now - 30))) is not None  # within the clock skew
    error = await refused(scheme, idp.token(exp=now - 61), "The token has expired")
    assert error.challenges == [
        'Bearer realm="skillwire", error="invalid_token", error_description="The token has expired"'
    ]
    assert error.message == "The token has expired (security scheme 'bearer')"


async def test_token_expires_as_the_clock_moves(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, leeway=0))
    token = idp.token()
    assert await scheme.authenticate(bearer(token)) is not None
    idp.clock.advance(301)
    await refused(scheme, token, "expired")


async def test_token_without_exp_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    await refused(scheme, idp.token(exp=None), "lacks the claim exp")


async def test_nbf_in_the_future_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, leeway=60))
    now = int(idp.clock())
    assert await scheme.authenticate(bearer(idp.token(nbf=now + 30))) is not None
    await refused(scheme, idp.token(nbf=now + 120), r"not valid yet \(nbf\)")


async def test_iat_in_the_future_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, leeway=60))
    await refused(scheme, idp.token(iat=int(idp.clock()) + 600), r"issued in the future \(iat\)")


async def test_wrong_issuer_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    await refused(scheme, idp.token(iss="https://evil.example"), r"issuer \(iss\) is not accepted")
    await refused(scheme, idp.token(iss=None), "lacks the claim iss")


async def test_audience_as_string_or_list(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, audience=[AUDIENCE, "other-agent"]))
    assert await scheme.authenticate(bearer(idp.token(aud=["x", AUDIENCE]))) is not None
    assert await scheme.authenticate(bearer(idp.token(aud="other-agent"))) is not None
    await refused(scheme, idp.token(aud="https://elsewhere.example"), r"not meant for this agent \(aud\)")
    await refused(scheme, idp.token(aud=["a", "b"]), r"\(aud\)")
    await refused(scheme, idp.token(aud=None), "lacks the claim aud")


async def test_issuer_and_audience_must_be_given_or_turned_off_on_purpose(idp: IdP) -> None:
    with pytest.raises(ValueError, match="give audience="):
        Bearer(jwks_url=idp.issuer + "/jwks", issuer=idp.issuer)
    with pytest.raises(ValueError, match="give issuer="):
        Bearer(jwks_url=idp.issuer + "/jwks", audience=AUDIENCE)
    with pytest.raises(ValueError, match="keys= or jwks_url="):
        Bearer(issuer=None, audience=None)
    scheme = Bearer(keys=idp.rsa.as_dict(private=False), issuer=None, audience=None, clock=idp.clock)
    assert await scheme.authenticate(bearer(idp.token(iss="anyone", aud="anything"))) is not None


async def test_algorithm_not_in_the_allowlist_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, algorithms=["RS256"]))
    await refused(scheme, idp.token(key=idp.ec), "algorithm 'ES256' is not accepted")
    assert idp.fetches["jwks"] == 0  # refused before any key was looked up


async def test_alg_none_is_refused_and_cannot_be_allowed(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    await refused(scheme, idp.unsigned({"alg": "none", "typ": "JWT"}), "algorithm 'none' is not accepted")
    await refused(scheme, idp.unsigned({"alg": "None", "kid": "rsa-1"}), "is not accepted")
    with pytest.raises(ValueError, match="'none'"):
        jwks_bearer(idp, algorithms=["RS256", "none"])


async def test_hs256_signed_with_the_public_key_is_refused(idp: IdP, closing: Any) -> None:
    """Algorithm confusion: the RSA public key's bytes used as an HMAC secret."""
    pem = idp.rsa.as_pem(private=False)
    header = b64({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"})
    payload = b64(idp.claims(sub="mallory"))
    signature = hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    forged = f"{header}.{payload}.{b64(signature)}"
    await refused(closing(jwks_bearer(idp)), forged, "algorithm 'HS256' is not accepted")
    # Even with HS256 allowed (for a shared secret), an RSA key is never an HMAC secret.
    static = Bearer(
        keys=[pem, OctKey.import_key("another secret, long enough for HS256!", {"kid": "k"})],
        algorithms=["RS256", "HS256"],
        issuer=idp.issuer,
        audience=AUDIENCE,
        clock=idp.clock,
    )
    await refused(static, forged, "No key 'rsa-1' verifies HS256 tokens")
    # And fetched keys never allow HMAC at all.
    with pytest.raises(ValueError, match="HS256 needs a shared secret"):
        jwks_bearer(idp, algorithms=["RS256", "HS256"])


async def test_symmetric_keys_in_a_fetched_jwks_are_ignored(idp: IdP, closing: Any) -> None:
    secret = OctKey.import_key("published secret, which is no secret", {"kid": "oct-1"})
    idp.published = [secret, idp.rsa]
    scheme = closing(jwks_bearer(idp))
    assert await scheme.authenticate(bearer(idp.token())) is not None
    assert [key.kid for key in scheme._keys.held] == ["rsa-1"]  # type: ignore[union-attr]


async def test_bad_signature_is_refused(idp: IdP, closing: Any) -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
    await refused(closing(jwks_bearer(idp)), idp.token(key=other), "signature does not verify")


@pytest.mark.parametrize(
    "token",
    ["not-a-jwt", "a.b.c", "a.b.c.d.e", b64({"alg": "RS256"}) + ".!!!.x", b64(b"[1]") + ".e30.x"],
)
async def test_malformed_tokens_are_refused(idp: IdP, token: str, closing: Any) -> None:
    await refused(closing(jwks_bearer(idp)), token, "not a JWT")


async def test_empty_bearer_token_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    with pytest.raises(UnauthenticatedError, match="empty"):
        await scheme.authenticate(Presented(headers={"authorization": "Bearer "}))


async def test_oversized_token_is_refused_before_parsing(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, max_token_bytes=16 * 1024))
    big = idp.token(padding="x" * 17_000)
    await refused(scheme, big, "longer than 16384 bytes")
    await refused(scheme, "!" * 20_000, "longer than 16384 bytes")  # not even base64: never parsed
    assert idp.fetches["jwks"] == 0


# -- fetching the keys -------------------------------------------------------------------------------------


async def test_unknown_kid_refetches_once_on_key_rotation(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    old_token = idp.token()
    assert await scheme.authenticate(bearer(old_token)) is not None
    assert idp.fetches["jwks"] == 1

    rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
    idp.published = [rotated, idp.rsa]  # the IdP signs with a new key and still publishes the old one
    idp.clock.advance(31)  # past the refresh interval since the first fetch, far from the TTL
    principal = await scheme.authenticate(bearer(idp.token(key=rotated, sub="dave")))
    assert principal is not None and principal.subject == "dave"
    assert idp.fetches["jwks"] == 2
    assert await scheme.authenticate(bearer(old_token)) is not None  # still published: still good
    assert idp.fetches["jwks"] == 2

    idp.published = [rotated]  # the old key retired
    idp.clock.advance(300)  # the set's max-age passes
    await refused(scheme, old_token, "No key 'rsa-1' verifies RS256 tokens")
    assert idp.fetches["jwks"] == 3


async def test_flood_of_unknown_kids_fetches_at_most_once_per_interval(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp, cache=KeyCache(refresh_interval=30)))
    assert await scheme.authenticate(bearer(idp.token())) is not None
    idp.clock.advance(31)

    async def attempt(n: int) -> BaseException | None:
        try:
            await scheme.authenticate(bearer(idp.token(header={"kid": f"made-up-{n}"})))
        except UnauthenticatedError as error:
            return error
        return None

    results = await asyncio.gather(*(attempt(n) for n in range(50)))
    assert all(isinstance(r, UnauthenticatedError) for r in results)
    for n in range(50, 100):  # and one after another, within the same interval
        assert isinstance(await attempt(n), UnauthenticatedError)
    assert idp.fetches["jwks"] == 2
    idp.clock.advance(31)
    assert isinstance(await attempt(100), UnauthenticatedError)
    assert idp.fetches["jwks"] == 3


async def test_concurrent_first_requests_share_one_fetch(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    tokens = [idp.token(sub=f"user-{n}", key=idp.ec if n % 2 else idp.rsa) for n in range(20)]
    principals = await asyncio.gather(*(scheme.authenticate(bearer(t)) for t in tokens))
    assert [p.subject for p in principals if p] == [f"user-{n}" for n in range(20)]
    assert idp.fetches["jwks"] == 1


async def test_key_set_is_kept_for_its_max_age_within_bounds(idp: IdP, closing: Any) -> None:
    idp.cache_control = "public, max-age=100"
    scheme = closing(jwks_bearer(idp, cache=KeyCache(min_ttl=60, max_ttl=3600)))

    def fresh() -> str:  # a new token each time: a verified one is remembered, and checks no keys
        return idp.token(exp=int(idp.clock()) + 100_000, jti=uuid.uuid4().hex)

    assert await scheme.authenticate(bearer(fresh())) is not None
    idp.clock.advance(99)
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 1
    idp.clock.advance(2)
    idp.cache_control = "max-age=5"  # below min_ttl: kept 60 s all the same
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 2
    idp.clock.advance(59)
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 2
    idp.clock.advance(2)
    idp.cache_control = "max-age=999999"  # above max_ttl: kept an hour
    assert await scheme.authenticate(bearer(fresh())) is not None
    idp.clock.advance(3599)
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 3
    idp.clock.advance(2)
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 4


def test_key_cache_ttl_reads_cache_control() -> None:
    cache = KeyCache(min_ttl=60, default_ttl=300, max_ttl=3600)
    assert cache.ttl(None) == 300
    assert cache.ttl("max-age=120, must-revalidate") == 120
    assert cache.ttl("no-cache") == 60
    assert cache.ttl("s-maxage=10") == 300
    with pytest.raises(ValueError):
        KeyCache(min_ttl=600, default_ttl=300)


async def test_idp_down_cached_keys_still_verify(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))

    def fresh() -> str:  # a new token each time: a verified one is remembered, and checks no keys
        return idp.token(exp=int(idp.clock()) + 100_000, jti=uuid.uuid4().hex)

    assert await scheme.authenticate(bearer(fresh())) is not None
    idp.failing = True
    idp.clock.advance(400)  # past the set's max-age: a refresh is due, and fails
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert await scheme.authenticate(bearer(idp.token(key=idp.ec))) is not None
    assert idp.fetches["jwks"] == 2  # one failed attempt, not one per request
    # A kid we do not hold while the IdP is down: we cannot tell, so "try again", not "bad token".
    with pytest.raises(ServerBusyError) as caught:
        await scheme.authenticate(bearer(idp.token(header={"kid": "rsa-new"})))
    assert caught.value.http_status == 503 and caught.value.retry_after >= 1
    idp.failing = False
    idp.clock.advance(31)
    assert await scheme.authenticate(bearer(fresh())) is not None
    assert idp.fetches["jwks"] == 3


async def test_idp_down_without_keys_is_503_saying_nothing_of_the_idp(idp: IdP, closing: Any) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    scheme = closing(
        Bearer(
            jwks_url=nobody + "/jwks",
            issuer=idp.issuer,
            audience=AUDIENCE,
            clock=idp.clock,
            cache=KeyCache(timeout=5),
        )
    )
    with pytest.raises(ServerBusyError) as caught:
        await scheme.authenticate(bearer(idp.token()))
    error = caught.value
    assert error.http_status == 503 and error.grpc_status == "UNAVAILABLE"
    assert 1 <= error.retry_after <= 30
    assert error.message == (
        "The signing keys cannot be fetched from the identity provider (security scheme 'bearer'): "
        "try again shortly"
    )
    assert "127.0.0.1" not in str(error.details())
    # the same answer while the refresh interval lasts, without another attempt
    with pytest.raises(ServerBusyError):
        await scheme.authenticate(bearer(idp.token()))
    assert scheme._keys.fetches == 1  # type: ignore[union-attr]


async def test_idp_answering_errors_without_keys_is_503(idp: IdP, closing: Any) -> None:
    idp.failing = True
    with pytest.raises(ServerBusyError):
        await closing(jwks_bearer(idp)).authenticate(bearer(idp.token()))


@pytest.mark.parametrize(
    "body",
    [
        b'{"keys": ['
        + b",".join([b'{"kty": "RSA", "n": "' + b"A" * 1000 + b'", "e": "AQAB"}'] * 300)
        + b"]}",
        b"not json",
        b'["a", "list"]',
        b'{"no": "keys"}',
    ],
    ids=["too-large", "not-json", "not-an-object", "no-keys"],
)
async def test_a_jwks_that_is_not_one_is_unavailable(idp: IdP, body: bytes, closing: Any) -> None:
    idp.jwks_body = body
    scheme = closing(jwks_bearer(idp, cache=KeyCache(max_bytes=64 * 1024)))
    with pytest.raises(ServerBusyError):
        await scheme.authenticate(bearer(idp.token()))


# -- the card and the challenge ------------------------------------------------------------------------


async def test_bearer_card_entry_and_challenge(idp: IdP) -> None:
    scheme = Bearer(keys=idp.rsa.as_dict(private=False), issuer=None, audience=None, description="IdP tokens")
    assert scheme.card() == {
        "httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT", "description": "IdP tokens"}
    }
    assert_proto(scheme.card(), "SecurityScheme")
    assert scheme.challenge() == 'Bearer realm="skillwire"'
    error = await refused(scheme, "x.y", "not a JWT")
    assert error.challenges == [
        'Bearer realm="skillwire", error="invalid_token", '
        'error_description="The token is not a JWT (a signed JWS in compact form)"'
    ]
    quoted = Bearer(keys=idp.rsa.as_dict(private=False), issuer=None, audience=None, realm='a "b"\\c\n')
    assert quoted.challenge() == 'Bearer realm="a ?b??c?"'


# -- OAuth 2 ---------------------------------------------------------------------------------------------


def oauth2(idp: IdP, **options: Any) -> OAuth2:
    options = {"flows": FLOWS, "issuer": idp.issuer, "audience": AUDIENCE, "clock": idp.clock, **options}
    return OAuth2(**options)


def introspection(idp: IdP, **options: Any) -> Introspection:
    return Introspection(idp.issuer + "/introspect", *CLIENT, clock=idp.clock, **options)


async def test_oauth2_verifies_jwts_through_rfc8414_metadata(idp: IdP, closing: Any) -> None:
    scheme = closing(oauth2(idp))
    assert scheme.metadata_url == f"{idp.base}/.well-known/oauth-authorization-server{REALM}"
    principal = await scheme.authenticate(bearer(idp.token(scope="read")))
    assert principal is not None and principal.scheme == "oauth2" and principal.scopes == {"read"}
    assert (idp.fetches["oauth"], idp.fetches["jwks"]) == (1, 1)
    await refused(scheme, idp.token(iss=idp.base), r"issuer \(iss\)")


async def test_oauth2_card_entry(idp: IdP) -> None:
    scheme = oauth2(idp)
    entry = scheme.card()
    assert entry == {
        "oauth2SecurityScheme": {
            "flows": FLOWS,
            "oauth2MetadataUrl": f"{idp.base}/.well-known/oauth-authorization-server{REALM}",
        }
    }
    assert_proto(entry, "SecurityScheme")
    for flows in (
        {
            "authorizationCode": {
                "authorizationUrl": "https://i/a",
                "tokenUrl": "https://i/t",
                "scopes": {},
                "pkceRequired": True,
            }
        },
        {
            "deviceCode": {
                "deviceAuthorizationUrl": "https://i/d",
                "tokenUrl": "https://i/t",
                "scopes": {"r": "R"},
            }
        },
    ):
        assert_proto(oauth2(idp, flows=flows).card(), "SecurityScheme")


@pytest.mark.parametrize(
    ("flows", "match"),
    [
        ({}, "exactly one flow"),
        ({**FLOWS, "deviceCode": FLOWS["clientCredentials"]}, "exactly one flow"),
        ({"implicit": {"authorizationUrl": "https://i/a", "scopes": {}}}, "deprecated"),
        ({"clientCredentials": {"scopes": {}}}, "lacks \\['tokenUrl'\\]"),
        (
            {"clientCredentials": {"token_url": "x", "tokenUrl": "x", "scopes": {}}},
            "unknown \\['token_url'\\]",
        ),
        ({"clientCredentials": {"tokenUrl": "x", "scopes": ["read"]}}, "scopes must map"),
    ],
)
def test_oauth2_flows_are_checked(idp: IdP, flows: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        oauth2(idp, flows=flows)


def test_oauth2_needs_a_way_to_verify(idp: IdP) -> None:
    with pytest.raises(ValueError, match="give issuer= or metadata_url="):
        OAuth2(flows=FLOWS)
    with pytest.raises(ValueError, match="give audience="):
        OAuth2(flows=FLOWS, issuer=idp.issuer)
    with pytest.raises(ValueError, match="not both"):
        OAuth2(flows=FLOWS, introspection=introspection(idp), verifier=lambda t: None)


async def test_oauth2_metadata_whose_issuer_differs_is_not_trusted(idp: IdP, closing: Any) -> None:
    scheme = closing(
        oauth2(idp, issuer=None, metadata_url=f"{idp.base}/.well-known/oauth-authorization-server{REALM}")
    )
    assert await scheme.authenticate(bearer(idp.token())) is not None  # the metadata's issuer is the iss
    impostor = closing(
        oauth2(
            idp,
            issuer="https://other.example",
            metadata_url=f"{idp.base}/.well-known/oauth-authorization-server{REALM}",
        )
    )
    with pytest.raises(ServerBusyError):
        await impostor.authenticate(bearer(idp.token()))


async def test_introspection_active_token(idp: IdP, closing: Any) -> None:
    scheme = closing(OAuth2(flows=FLOWS, introspection=introspection(idp, issuer=idp.issuer)))
    token = idp.opaque_token(scope="read write", client_id="cli")
    principal = await scheme.authenticate(bearer(token))
    assert principal is not None
    assert (principal.subject, principal.scheme, principal.scopes) == ("bob", "oauth2", {"read", "write"})
    assert principal.claims["client_id"] == "cli"


async def test_introspection_inactive_and_unknown_tokens_are_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(OAuth2(flows=FLOWS, introspection=introspection(idp)))
    await refused(scheme, "never-issued", "The token is not active")
    revoked = idp.opaque_token(active=False)
    await refused(scheme, revoked, "The token is not active")


async def test_introspection_expired_token_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(OAuth2(flows=FLOWS, introspection=introspection(idp, leeway=0)))
    await refused(scheme, idp.opaque_token(exp=int(idp.clock()) - 1), "expired")
    await refused(scheme, idp.opaque_token(nbf=int(idp.clock()) + 120), "not valid yet")


async def test_introspection_checks_issuer_and_audience(idp: IdP, closing: Any) -> None:
    check = introspection(idp, issuer=idp.issuer, audience=AUDIENCE)
    scheme = closing(OAuth2(flows=FLOWS, introspection=check))
    assert await scheme.authenticate(bearer(idp.opaque_token(aud=[AUDIENCE, "x"]))) is not None
    await refused(scheme, idp.opaque_token(aud="x"), r"\(aud\)")
    await refused(scheme, idp.opaque_token(), r"\(aud\)")
    await refused(scheme, idp.opaque_token(aud=AUDIENCE, iss="https://other"), r"\(iss\)")
    await refused(scheme, idp.opaque_token(aud=[{"not": "a string"}, 1]), r"\(aud\)")


async def test_introspection_answer_with_a_nan_expiry_is_refused(idp: IdP, closing: Any) -> None:
    scheme = closing(OAuth2(flows=FLOWS, introspection=introspection(idp)))
    await refused(scheme, idp.opaque_token(exp=float("nan")), "exp or nbf is not a date")
    await refused(scheme, idp.opaque_token(exp=True), "exp or nbf is not a date")


async def test_introspection_answers_are_cached_briefly_and_never_past_exp(idp: IdP, closing: Any) -> None:
    check = introspection(idp, cache_seconds=60, leeway=0)
    scheme = closing(OAuth2(flows=FLOWS, introspection=check))
    token = idp.opaque_token(exp=int(idp.clock()) + 100)
    for _ in range(3):
        assert await scheme.authenticate(bearer(token)) is not None
    assert idp.fetches["introspect"] == 1
    assert hashlib.sha256(token.encode()).digest() in check._answers  # keyed by a hash, never the token
    assert token not in repr(check._answers)
    idp.clock.advance(61)
    assert await scheme.authenticate(bearer(token)) is not None
    assert idp.fetches["introspect"] == 2
    idp.clock.advance(40)  # past exp, although cached only 39 s ago
    await refused(scheme, token, "expired")
    assert idp.fetches["introspect"] == 3


async def test_introspection_cache_is_bounded(idp: IdP, closing: Any) -> None:
    check = introspection(idp, cache_size=3)
    scheme = closing(OAuth2(flows=FLOWS, introspection=check))
    for _ in range(5):
        assert await scheme.authenticate(bearer(idp.opaque_token())) is not None
    assert len(check._answers) == 3


async def test_introspection_endpoint_failing_is_503(idp: IdP, closing: Any) -> None:
    wrong_secret = Introspection(idp.issuer + "/introspect", CLIENT[0], "wrong", clock=idp.clock)
    with pytest.raises(ServerBusyError, match="introspection endpoint cannot be reached"):
        await closing(OAuth2(flows=FLOWS, introspection=wrong_secret)).authenticate(bearer("opaque"))
    idp.failing = True
    with pytest.raises(ServerBusyError):
        await closing(OAuth2(flows=FLOWS, introspection=introspection(idp))).authenticate(bearer("opaque"))


async def test_oauth2_with_jwts_and_introspection_routes_by_form(idp: IdP, closing: Any) -> None:
    scheme = closing(oauth2(idp, introspection=introspection(idp)))
    assert await scheme.authenticate(bearer(idp.token(sub="jwt-user"))) is not None
    principal = await scheme.authenticate(bearer(idp.opaque_token(sub="opaque-user")))
    assert principal is not None and principal.subject == "opaque-user"
    assert (idp.fetches["jwks"], idp.fetches["introspect"]) == (1, 1)


async def test_oauth2_opaque_verifier_callable(idp: IdP) -> None:
    async def verify(token: str) -> Principal | None:
        if token == "good":
            return Principal(subject="svc", scheme="whatever", scopes=frozenset({"read"}))
        return None

    scheme = OAuth2(flows=FLOWS, verifier=verify)
    principal = await scheme.authenticate(bearer("good"))
    assert principal is not None
    assert (principal.subject, principal.scheme, principal.granted) == (
        "svc",
        "oauth2",
        {"oauth2": frozenset({"read"})},
    )
    await refused(scheme, "bad", "The token is not valid")
    plain = OAuth2(flows=FLOWS, verifier=lambda token: "someone" if token == "ok" else None)
    principal = await plain.authenticate(bearer("ok"))
    assert principal is not None and principal.subject == "someone"


# -- OpenID Connect -------------------------------------------------------------------------------------------


async def test_oidc_verifies_through_discovery(idp: IdP, closing: Any) -> None:
    scheme = closing(OpenIDConnect(issuer=idp.issuer, audience=AUDIENCE, clock=idp.clock))
    assert scheme.card() == {
        "openIdConnectSecurityScheme": {"openIdConnectUrl": f"{idp.issuer}/.well-known/openid-configuration"}
    }
    assert_proto(scheme.card(), "SecurityScheme")
    principal = await scheme.authenticate(bearer(idp.token(key=idp.ec, scope="openid read")))
    assert principal is not None and principal.scheme == "oidc" and principal.scopes == {"openid", "read"}
    assert (idp.fetches["openid"], idp.fetches["jwks"]) == (1, 1)


async def test_oidc_iss_must_equal_the_discovery_issuer(idp: IdP, closing: Any) -> None:
    url = f"{idp.issuer}/.well-known/openid-configuration"
    scheme = closing(OpenIDConnect(discovery_url=url, audience=AUDIENCE, clock=idp.clock))
    assert await scheme.authenticate(bearer(idp.token())) is not None
    await refused(scheme, idp.token(iss=idp.issuer + "/"), r"issuer \(iss\)")
    mismatch = closing(OpenIDConnect(issuer=idp.base, discovery_url=url, audience=AUDIENCE, clock=idp.clock))
    with pytest.raises(ServerBusyError):  # the discovery document speaks for another issuer
        await mismatch.authenticate(bearer(idp.token(iss=idp.base)))


async def test_oidc_discovery_down_keeps_the_document_and_keys(idp: IdP, closing: Any) -> None:
    scheme = closing(OpenIDConnect(issuer=idp.issuer, audience=AUDIENCE, clock=idp.clock))
    token = idp.token(exp=int(idp.clock()) + 100_000)
    assert await scheme.authenticate(bearer(token)) is not None
    idp.failing = True
    idp.clock.advance(1000)
    assert await scheme.authenticate(bearer(token)) is not None


# -- through the Security policy ----------------------------------------------------------------------------


async def test_security_requirement_with_a_scope_end_to_end(idp: IdP, closing: Any) -> None:
    scheme = closing(oauth2(idp))
    security = Security(scheme, require=[{"oauth2": ["read"]}])
    await security.start()
    principal = await security.authenticate(
        Presented(headers={"authorization": f"Bearer {idp.token(scope='read x')}"})
    )
    assert (principal.subject, principal.scheme) == ("alice", "oauth2")
    assert principal.scopes == {"read", "x"} and principal.owner == "oauth2:alice"
    with pytest.raises(PermissionDeniedError, match="oauth2 with scope read"):
        await security.authenticate(bearer(idp.token(scope="write")))
    with pytest.raises(UnauthenticatedError) as caught:
        await security.authenticate(Presented(headers={}))
    assert caught.value.challenges == ['Bearer realm="skillwire"']
    with pytest.raises(UnauthenticatedError, match="expired"):
        await security.authenticate(bearer(idp.token(scope="read", exp=int(idp.clock()) - 3600)))
    assert security.card_schemes() == {"oauth2": scheme.card()}
    await security.close()


def test_importing_skillwire_loads_neither_joserfc_nor_httpx() -> None:
    code = (
        "import sys, skillwire, skillwire.security\n"
        "from skillwire.security import Bearer\n"
        "assert 'joserfc' not in sys.modules, 'joserfc'\n"
        "assert 'httpx' not in sys.modules, 'httpx'\n"
        "assert 'cryptography' not in sys.modules, 'cryptography'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_a_token_without_kid_needs_exactly_one_fitting_key(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    assert await scheme.authenticate(bearer(idp.token(header={"kid": None}))) is not None  # one RSA key
    second = RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
    idp.published = [idp.rsa, second, idp.ec]
    ambiguous = closing(jwks_bearer(idp))
    await refused(ambiguous, idp.token(header={"kid": None}), "names no key")
    await refused(ambiguous, idp.token(header={"kid": "x" * 300}), "at most 256 characters")


async def test_oauth2_opaque_tokens_with_dots_go_to_introspection(idp: IdP, closing: Any) -> None:
    scheme = closing(oauth2(idp, introspection=introspection(idp)))
    token = "opaque.with.dots"
    idp.opaque[token] = {"active": True, "username": "erin", "exp": int(idp.clock()) + 60}
    principal = await scheme.authenticate(bearer(token))
    assert principal is not None and principal.subject == "erin"
    assert idp.fetches["jwks"] == 0


async def test_deeply_nested_json_in_a_token_is_refused_not_a_crash(idp: IdP, closing: Any) -> None:
    from joserfc import jws

    scheme = closing(jwks_bearer(idp))
    deep = "[" * 5000 + "]" * 5000
    await refused(scheme, f"{b64(deep.encode())}.e30.x", "not a JWT")
    claims = json.dumps(idp.claims())[:-1] + ', "deep": ' + deep + "}"
    signed = jws.serialize_compact({"alg": "RS256", "kid": "rsa-1"}, claims.encode(), idp.rsa)
    await refused(scheme, signed, "payload is not JSON")


async def test_a_critical_header_we_do_not_understand_is_refused(idp: IdP, closing: Any) -> None:
    from joserfc import jws

    header = {"alg": "RS256", "kid": "rsa-1", "crit": ["exp-policy"], "exp-policy": "strict"}
    registry = jws.JWSRegistry(header_registry={"exp-policy": jws.JWSRegistry.default_header_registry["kid"]})
    signed = jws.serialize_compact(header, json.dumps(idp.claims()).encode(), idp.rsa, registry=registry)
    await refused(closing(jwks_bearer(idp)), signed, r"header is not accepted \(crit")


async def test_a_verified_token_is_remembered_for_a_minute_at_most(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    token = idp.token(exp=int(idp.clock()) + 100_000)
    assert (await scheme.authenticate(bearer(token))).subject == "alice"
    # the IdP rotates rsa-1 out; a token of a new key makes the scheme fetch the set without rsa-1
    rotated = ECKey.generate_key("P-256", parameters={"kid": "ec-2"})
    idp.published = [rotated]
    idp.clock.advance(31)
    assert await scheme.authenticate(bearer(idp.token(key=rotated))) is not None
    assert idp.fetches["jwks"] == 2
    # the rsa-1 token verified before is remembered (no verification, no key needed) for at most 60 s ...
    assert (await scheme.authenticate(bearer(token))).subject == "alice"
    idp.clock.advance(30)
    with pytest.raises(UnauthenticatedError):  # ... then verified again: its key is gone
        await scheme.authenticate(bearer(token))


async def test_a_remembered_token_still_expires_on_time(idp: IdP, closing: Any) -> None:
    scheme = closing(jwks_bearer(idp))
    token = idp.token(exp=int(idp.clock()) + 5)
    assert await scheme.authenticate(bearer(token)) is not None
    idp.clock.advance(5 + 60 + 1)  # past exp and the 60 s leeway, within nothing the cache may stretch
    with pytest.raises(UnauthenticatedError, match="expired"):
        await scheme.authenticate(bearer(token))
