"""The bearer-token verifier of the HTTP layer on its own (no server): cached principals,
a bounded cache, and tokens refused for a critical header or an unusable subject."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.api.auth import TokenVerifier
from ledger.crypto.jwks import JwksSource
from ledger.errors import Unauthenticated

ISSUER, AUDIENCE = "https://idp.example", "ledger.example"
KEY = Ed25519PrivateKey.generate()


def _source() -> JwksSource:
    jwk = json.loads(jwt.algorithms.get_default_algorithms()["EdDSA"].to_jwk(KEY.public_key()))
    jwk.update(kid="k1", alg="EdDSA", use="sig")
    return JwksSource(fixed={"keys": [jwk]})


def _token(sub: Any = "svc-1", headers: dict[str, Any] | None = None) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "role": "auditor", "iat": now,
              "exp": now + 600}
    return jwt.encode(claims, KEY, algorithm="EdDSA",
                      headers={"kid": "k1", "typ": "JWT", **(headers or {})})


def _verifier() -> TokenVerifier:
    return TokenVerifier(_source(), issuer=ISSUER, audience=AUDIENCE, typs=("jwt",))


def test_a_verified_token_is_answered_from_the_cache():
    v = _verifier()
    token = _token()
    first = v.verify(token)
    assert (first.role, first.subject) == ("auditor", "svc-1")
    assert v.verify(token) is first and v.cached(token) is first


def test_a_full_cache_is_emptied_before_the_next_token_goes_in():
    v = _verifier()
    v.CACHE_SIZE = 2
    tokens = [_token(f"svc-{i}") for i in range(3)]
    for t in tokens:
        v.verify(t)
    assert v.cached(tokens[2]) is not None
    assert v.cached(tokens[0]) is None and v.cached(tokens[1]) is None


@pytest.mark.parametrize("token", [_token(headers={"crit": ["exp"]}), _token(sub="s" * 257),
                                   _token(sub=7)], ids=["crit header", "long sub", "int sub"])
def test_tokens_the_verifier_refuses(token):
    with pytest.raises(Unauthenticated) as caught:
        _verifier().verify(token)
    assert caught.value.code == "invalid_token"
