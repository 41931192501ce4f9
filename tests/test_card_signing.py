"""Signed agent cards, sans-IO (issue 12): the canonical form the spec lays down, JWS with real keys made
here, every refusal, and interoperation with the official a2a-sdk's signer and verifier both ways."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier
from google.api import field_behavior_pb2
from google.protobuf import json_format
from joserfc.jwk import ECKey, KeySet, OctKey, OKPKey, RSAKey
from jwt.api_jwk import PyJWK

from conftest import example_agent
from skillwire import CardSignatureError, CardSigner, verify_card
from skillwire.models import (
    AgentCapabilities,
    AgentCardSignature,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    SecurityRequirement,
)
from skillwire.protocol.models import StringList
from skillwire.types import AgentCard
from skillwire.wire import card_signing
from skillwire.wire.card_signing import ALGORITHMS, canonical_card, signed_part


def new_key(alg: str) -> Any:
    """A fresh private key for ``alg``."""
    if alg == "ES256":
        return ECKey.generate_key("P-256", private=True)
    if alg == "ES384":
        return ECKey.generate_key("P-384", private=True)
    if alg == "EdDSA":
        return OKPKey.generate_key("Ed25519", private=True)
    return RSAKey.generate_key(2048, private=True)


def jwks(*signers: CardSigner) -> dict[str, Any]:
    return {"keys": [signer.public_jwk() for signer in signers]}


def a_card(**changes: Any) -> AgentCard:
    card = AgentCard(
        name="Signed",
        description="An agent whose card is signed",
        supported_interfaces=[
            AgentInterface(url="https://agent.example/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        provider=AgentProvider(url="https://example.org", organization="Example"),
        version="1.2.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="greet", name="Greet", description="Says hello", tags=["hello"])],
    )
    return msgspec.structs.replace(card, **changes)


@pytest.fixture(scope="module")
def signer() -> CardSigner:
    return CardSigner(new_key("ES256"), kid="card-1")


# -- the canonical form ----------------------------------------------------------------------------------------


def test_canonical_form_is_jcs_without_signatures_and_follows_field_presence() -> None:
    card = AgentCard(
        name="A",
        description="",  # REQUIRED: kept even empty
        supported_interfaces=[],  # REQUIRED: kept even empty
        version="1",
        documentation_url=None,  # optional, unset: left out
        icon_url="",  # optional, set to its default: kept
        capabilities=AgentCapabilities(
            streaming=False, extensions=[AgentExtension(uri="urn:x", required=False)]
        ),
        default_input_modes=[],
        default_output_modes=[],
        skills=[AgentSkill(id="s", name="S", description="d", tags=[], examples=[])],
        signatures=[AgentCardSignature(protected="e30", signature="AA")],
    )
    assert canonical_card(card) == (
        b'{"capabilities":{"extensions":[{"uri":"urn:x"}],"streaming":false},"defaultInputModes":[],'
        b'"defaultOutputModes":[],"description":"","iconUrl":"","name":"A",'
        b'"skills":[{"description":"d","id":"s","name":"S","tags":[]}],"supportedInterfaces":[],"version":"1"}'
    )


def test_canonical_form_writes_jcs_numbers_and_unescaped_unicode() -> None:
    params = {"ratio": 1.0, "big": 1e21, "small": 5e-7, "name": "café ☕", "nested": {"b": 2, "a": 1}}
    card = a_card(capabilities=AgentCapabilities(extensions=[AgentExtension(uri="urn:p", params=params)]))
    text = canonical_card(card).decode("utf-8")
    assert '"params":{"big":1e+21,"name":"café ☕","nested":{"a":1,"b":2},"ratio":1,"small":5e-7}' in text


def test_security_schemes_follow_the_proto_and_drop_v03_members() -> None:
    """A card serving both versions carries v0.3 members inside each scheme (``type``, ``scheme``); members
    the lf.a2a.v1 message lacks, and non-REQUIRED ones at their default, are not part of the signed form."""
    both = {
        "httpAuthSecurityScheme": {"scheme": "Bearer", "description": "", "bearerFormat": "JWT"},
        "type": "http",
        "scheme": "Bearer",
    }
    oauth = {
        "oauth2SecurityScheme": {
            "flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {}, "refreshUrl": ""}},
        }
    }
    card = a_card(security_schemes={"bearer": both, "oauth": oauth})
    text = canonical_card(card).decode()
    assert '"bearer":{"httpAuthSecurityScheme":{"bearerFormat":"JWT","scheme":"Bearer"}}' in text
    assert (
        '"oauth":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"scopes":{},"tokenUrl":"https://t"}}}}'
        in text
    )


def _presence_of(descriptor: Any) -> dict[str, tuple[str, bool]]:
    out = {}
    for field in descriptor.fields:
        required = (
            field_behavior_pb2.REQUIRED in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        )
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            kind = "map"
        elif field.message_type is not None:
            kind = field.message_type.name
        else:
            kind = "bool" if field.type == field.TYPE_BOOL else "string"
        out[field.json_name] = (kind, required)
    return out


@pytest.mark.parametrize("message", sorted(card_signing._SCHEMES))
def test_the_security_scheme_table_is_the_proto(message: str) -> None:
    """The table the canonical form reads security schemes with says what lf.a2a.v1 says: every member,
    its kind and whether it is REQUIRED."""
    assert card_signing._SCHEMES[message] == _presence_of(getattr(pb, message).DESCRIPTOR)


# -- signing and verifying ----------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_a_card_signed_with_each_algorithm_verifies(alg: str) -> None:
    signer = CardSigner(
        new_key(alg), kid=f"k-{alg}", alg=alg, jku="https://agent.example/.well-known/jwks.json"
    )
    signed = signer.sign(a_card())
    assert signed.signatures[0] == verify_card(signed, jwks(signer))
    header = json.loads(base64.urlsafe_b64decode(signed.signatures[0].protected + "=="))
    assert header == {
        "alg": alg,
        "kid": f"k-{alg}",
        "typ": "JOSE",
        "jku": "https://agent.example/.well-known/jwks.json",
    }


def test_the_signing_input_is_the_detached_canonical_payload(signer: CardSigner) -> None:
    """JWS with a detached payload: BASE64URL(protected) "." BASE64URL(canonical card), checked here with
    the cryptography package directly rather than through joserfc."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    signature = signer.signature(a_card())
    payload = base64.urlsafe_b64encode(canonical_card(a_card())).rstrip(b"=")
    raw = base64.urlsafe_b64decode(signature.signature + "==")
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public = signer.key.public_key
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(der, signature.protected.encode() + b"." + payload, ec.ECDSA(hashes.SHA256()))


def test_the_kid_defaults_to_the_jwks_kid_then_the_thumbprint() -> None:
    key = ECKey.generate_key("P-256", private=True)
    assert CardSigner(key).kid == key.thumbprint()
    assert CardSigner({**key.as_dict(private=True), "kid": "mine"}).kid == "mine"


def test_keys_load_from_pem_and_jwk_files(tmp_path: Path) -> None:
    key = new_key("ES384")
    (tmp_path / "key.pem").write_bytes(key.as_pem(private=True))
    (tmp_path / "key.jwk").write_text(json.dumps({**key.as_dict(private=True), "kid": "from-file"}))
    from_pem = CardSigner.from_file(tmp_path / "key.pem", kid="pem")
    from_jwk = CardSigner.from_file(tmp_path / "key.jwk")
    assert (from_pem.alg, from_jwk.alg, from_jwk.kid) == ("ES384", "ES384", "from-file")
    verify_card(from_jwk.sign(a_card()), jwks(from_pem, from_jwk))


@pytest.mark.parametrize(
    ("key", "options", "problem"),
    [
        (lambda: new_key("ES256").as_dict(private=False), {}, "private key"),
        (lambda: new_key("ES256"), {"alg": "HS256"}, "expected one of"),
        (lambda: new_key("RS256"), {"alg": "ES256"}, "requires 'EC' key"),
        (lambda: new_key("ES384"), {"alg": "ES256"}, "P-256"),
        (lambda: OctKey.generate_key(256).as_dict(private=True), {}, "not kty 'oct'"),
        (lambda: b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", {}, "not a PEM key"),
    ],
)
def test_a_key_that_cannot_sign_cards_is_refused_at_once(
    key: Any, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        CardSigner(key(), **options)


def test_an_unsigned_card_is_refused(signer: CardSigner) -> None:
    with pytest.raises(CardSignatureError, match="not signed"):
        verify_card(a_card(), jwks(signer))


def _tamperings() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("name", {"name": "Evil"}),
        ("description", {"description": "trust me"}),
        (
            "url",
            {
                "supported_interfaces": [
                    AgentInterface(
                        url="https://evil.example/", protocol_binding="JSONRPC", protocol_version="1.0"
                    )
                ]
            },
        ),
        (
            "interface added",
            {
                "supported_interfaces": [
                    *a_card().supported_interfaces,
                    AgentInterface(
                        url="https://evil.example/", protocol_binding="HTTP+JSON", protocol_version="1.0"
                    ),
                ]
            },
        ),
        ("provider", {"provider": AgentProvider(url="https://evil.example", organization="Example")}),
        ("version", {"version": "1.2.1"}),
        ("documentationUrl", {"documentation_url": "https://evil.example/docs"}),
        ("capabilities", {"capabilities": AgentCapabilities(streaming=True, push_notifications=True)}),
        (
            "optional set to its default",
            {
                "capabilities": AgentCapabilities(
                    streaming=True, push_notifications=False, extended_agent_card=False
                )
            },
        ),
        ("securitySchemes", {"security_schemes": {}}),
        ("defaultInputModes", {"default_input_modes": ["text/html"]}),
        ("defaultOutputModes", {"default_output_modes": ["text/plain"]}),
        (
            "skill",
            {
                "skills": [
                    AgentSkill(id="greet", name="Greet", description="Says hello", tags=["hello", "admin"])
                ]
            },
        ),
        ("iconUrl", {"icon_url": "https://evil.example/icon.png"}),
    ]


@pytest.mark.parametrize(("what", "changes"), _tamperings(), ids=[t[0] for t in _tamperings()])
def test_tampering_with_any_field_is_refused(signer: CardSigner, what: str, changes: dict[str, Any]) -> None:
    signed = signer.sign(a_card())
    tampered = msgspec.structs.replace(signed, **changes)
    with pytest.raises(CardSignatureError, match="does not verify with key 'card-1'"):
        verify_card(tampered, jwks(signer))


def test_a_forged_signature_and_a_forged_header_are_refused(signer: CardSigner) -> None:
    signed = signer.sign(a_card())
    real = signed.signatures[0]
    other = CardSigner(new_key("ES256"), kid="card-1")  # same kid, another key
    forged = other.signature(a_card())
    for signature in (
        AgentCardSignature(protected=real.protected, signature=forged.signature),
        AgentCardSignature(protected=forged.protected, signature=real.signature[:-4] + "AAAA"),
    ):
        with pytest.raises(CardSignatureError, match="does not verify"):
            verify_card(msgspec.structs.replace(signed, signatures=[signature]), jwks(signer))


def _protected(header: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "ES256"}, "lacks alg or kid"),
        ({"alg": "none", "kid": "card-1"}, "'none' is not allowed"),
        ({"alg": "HS256", "kid": "card-1"}, "'HS256' is not allowed"),
        ({"alg": "ES256", "kid": "unknown"}, "'unknown' is not one of the trusted keys"),
    ],
)
def test_headers_outside_the_rules_are_refused(
    signer: CardSigner, header: dict[str, Any], reason: str
) -> None:
    real = signer.signature(a_card())
    card = a_card(signatures=[AgentCardSignature(protected=_protected(header), signature=real.signature)])
    with pytest.raises(CardSignatureError, match=reason):
        verify_card(card, jwks(signer))


def test_algorithms_narrow_what_is_accepted(signer: CardSigner) -> None:
    signed = signer.sign(a_card())
    with pytest.raises(CardSignatureError, match="'ES256' is not allowed"):
        verify_card(signed, jwks(signer), algorithms=["RS256"])
    with pytest.raises(ValueError, match="only"):
        verify_card(signed, jwks(signer), algorithms=["HS256"])


def test_an_expired_or_revoked_key_is_not_used(signer: CardSigner) -> None:
    signed = signer.sign(a_card())
    now = time.time()
    expired = {"keys": [{**signer.public_jwk(), "exp": int(now) - 60}]}
    with pytest.raises(CardSignatureError, match="key 'card-1' expired"):
        verify_card(signed, expired)
    assert verify_card(signed, {"keys": [{**signer.public_jwk(), "exp": int(now) + 3600}]})
    with pytest.raises(CardSignatureError, match="key 'card-1' is revoked"):
        verify_card(signed, jwks(signer), revoked=["card-1"])


def test_a_key_declared_for_another_algorithm_is_not_used(signer: CardSigner) -> None:
    signed = signer.sign(a_card())
    with pytest.raises(CardSignatureError, match="is for ES384"):
        verify_card(signed, {"keys": [{**signer.public_jwk(), "alg": "ES384"}]})


def test_rotation_two_signatures_verify_with_either_key() -> None:
    old, new = CardSigner(new_key("RS256"), kid="old"), CardSigner(new_key("EdDSA"), kid="new")
    signed = new.sign(old.sign(a_card()))
    assert verify_card(signed, jwks(old)).signature == signed.signatures[0].signature
    assert verify_card(signed, jwks(new)).signature == signed.signatures[1].signature  # old kid gone
    keys = KeySet.import_key_set(jwks(new))  # a joserfc KeySet does as well as a dict
    assert verify_card(signed, keys) == signed.signatures[1]
    with pytest.raises(CardSignatureError) as refused:
        verify_card(signed, jwks(CardSigner(new_key("ES256"), kid="third")))
    assert len(refused.value.reasons) == 2


def test_a_card_verifies_after_a_json_round_trip_with_v03_members_beside_it(signer: CardSigner) -> None:
    """What a client does: the served JSON (v0.3 members beside the v1.0 ones) decoded as a v1.0 card."""
    signed = signer.sign(a_card())
    served = {**msgspec.to_builtins(signed), "protocolVersion": "0.3.0", "url": "https://agent.example/"}
    served["securitySchemes"]["bearer"] |= {"type": "http", "scheme": "Bearer"}
    verify_card(msgspec.convert(served, AgentCard), jwks(signer))


# -- the official a2a-sdk, both ways ----------------------------------------------------------------------------


def _interop_cards() -> list[AgentCard]:
    agent_cards = [example_agent(name).card() for name in ("echo", "greeter")]
    interfaces = a_card().supported_interfaces
    return [
        a_card(),
        *(msgspec.structs.replace(card, supported_interfaces=interfaces) for card in agent_cards),
    ]


def _sdk_verifier(signer: CardSigner) -> Any:
    return create_signature_verifier(lambda kid, jku: PyJWK(signer.public_jwk()), list(ALGORITHMS))


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_a_card_signed_here_verifies_with_a2a_sdk(alg: str) -> None:
    signer = CardSigner(new_key(alg), kid="ours", alg=alg)
    for card in _interop_cards():
        signed = signer.sign(card)
        proto = json_format.Parse(msgspec.json.encode(signed), pb.AgentCard(), ignore_unknown_fields=False)
        _sdk_verifier(signer)(proto)  # raises when no signature verifies


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_a_card_signed_by_a2a_sdk_verifies_here(alg: str) -> None:
    key = new_key(alg)
    public = CardSigner(key, kid="theirs", alg=alg)
    # the sdk's ProtectedHeader has every member: an unused jku goes out as null, which is taken as absent
    sdk_signer = create_agent_card_signer(
        PyJWK(key.as_dict(private=True)), {"kid": "theirs", "alg": alg, "typ": "JOSE", "jku": None}
    )
    for card in _interop_cards():
        proto = json_format.Parse(msgspec.json.encode(card), pb.AgentCard())
        signed = msgspec.json.decode(json_format.MessageToJson(sdk_signer(proto)), type=AgentCard)
        verify_card(signed, jwks(public))


@pytest.mark.parametrize(
    "changes",
    [
        {"description": ""},  # a REQUIRED field, empty
        # a security requirement without scopes, as bearer and API-key schemes have
        {"security_requirements": [SecurityRequirement(schemes={"bearer": StringList()})]},
    ],
    ids=["empty description", "requirement without scopes"],
)
def test_a2a_sdk_differs_on_empty_values(changes: dict[str, Any]) -> None:
    """Where a2a-sdk 1.3 leaves the spec: it drops every empty value, REQUIRED fields and scope-less
    security requirements included, so such a card signed here does not verify there (and the sdk's
    signature would not cover those fields). Recorded so that a change on either side is seen."""
    signer = CardSigner(new_key("ES256"), kid="ours")
    signed = signer.sign(a_card(**changes))
    verify_card(signed, jwks(signer))
    proto = json_format.Parse(msgspec.json.encode(signed), pb.AgentCard())
    from a2a.utils.signing import InvalidSignaturesError

    with pytest.raises(InvalidSignaturesError):
        _sdk_verifier(signer)(proto)


def test_the_signed_part_of_a_card_drops_what_its_signatures_do_not_cover() -> None:
    both = {"httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Basic"}
    card = a_card(security_schemes={"bearer": both})
    assert signed_part(card).security_schemes == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    assert canonical_card(signed_part(card)) == canonical_card(card)


def test_importing_skillwire_and_serving_unsigned_loads_no_signing_library() -> None:
    """joserfc, rfc8785 and cryptography load only once a card is signed or verified."""
    import subprocess
    import sys

    code = (
        "import sys, skillwire\n"
        "skillwire.Agent('A', 'a', executor=lambda ctx, events: None).asgi(store='memory://')\n"
        "print(sorted(m for m in ('joserfc', 'rfc8785', 'cryptography') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
