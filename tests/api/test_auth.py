"""Authentication and authorization against a real server: every role against every
endpoint, and every way a token can be wrong."""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import make_url

from ledger.api.auth import POLICY
from ledger.demo.samples import math_verified
from ledger.ops.tokens import ROLES
from tests.api.server import (
    Server,
    api,  # noqa: F401 - fixture
    prepare_ledger,
    start_server,
    stop_process,
)

PUBLIC = {("GET", "/v1/health"), ("GET", "/.well-known/jwks.json"),
          # the console's static files: no data, no token (they fetch with the user's token)
          ("GET", "/console"), ("GET", "/console/"), ("GET", "/console/{name}")}


def submission(tag: str) -> dict[str, Any]:
    sub = math_verified(random.Random(tag).randrange(10**6), random.Random(tag))
    sub["subject"] = tag
    return sub


# (method, path, action, body factory)
ENDPOINTS: list[tuple[str, str, str | None]] = [
    ("POST", "/v1/entries", "append"),
    ("POST", "/v1/entries/batch", "append"),
    ("GET", "/v1/entries/0", "read"),
    ("GET", "/v1/entries?limit=2", "read"),
    ("GET", "/v1/entries/0?proof=true", "read"),
    ("GET", "/v1/checkpoint", "checkpoint"),
    ("GET", "/v1/checkpoints?limit=2", "checkpoint"),
    ("GET", "/v1/proofs/consistency?from=1&to=1", "checkpoint"),
    ("GET", "/v1/audits?limit=2", "audits"),
    ("GET", "/v1/reverify-runs?limit=2", "reverify_runs"),
    ("GET", "/v1/export?limit=2", "export"),
    ("GET", "/openapi.json", "schema"),
    ("GET", "/v1/health", None),
    ("GET", "/.well-known/jwks.json", None),
    ("GET", "/console/", None),
    ("GET", "/console/app.js", None),
]


def call(client: httpx.Client, method: str, path: str) -> httpx.Response:
    if path == "/v1/entries":
        return client.post(path, json=submission(uuid.uuid4().hex))
    if path == "/v1/entries/batch":
        return client.post(path, json=[submission(uuid.uuid4().hex)])
    return client.request(method, path)


@pytest.fixture
def seeded(api: Server) -> Server:  # noqa: F811
    with api.client("producer") as c:
        assert c.post("/v1/entries", json=submission("seed")).status_code in (200, 201)
    return api


@pytest.mark.parametrize("role", list(ROLES) + [None])
def test_every_role_against_every_endpoint(seeded: Server, role: str | None) -> None:
    """The table: allowed -> 2xx (404 no_checkpoint counts as reached); denied -> 403
    forbidden; no token -> 401 missing_token; public endpoints answer everybody."""
    with seeded.client(role) as c:
        for method, path, action in ENDPOINTS:
            r = call(c, method, path)
            if action is None:
                want = "allowed"
            elif role is None:
                want = "unauthenticated"
            else:
                want = "allowed" if role in POLICY[action] else "denied"
            where = f"{role} {method} {path}: {r.status_code} {r.text[:200]}"
            if want == "allowed":
                assert r.status_code < 300 or (r.status_code == 404 and r.json()["error"][
                    "code"] in ("no_checkpoint", "not_checkpointed")), where
            elif want == "denied":
                assert r.status_code == 403, where
                assert r.json()["error"]["code"] == "forbidden", where
            else:
                assert r.status_code == 401, where
                assert r.json()["error"]["code"] == "missing_token", where
                assert r.headers["www-authenticate"].startswith("Bearer"), where


def test_policy_table_is_what_the_issue_says() -> None:
    assert POLICY["append"] == {"producer", "auditor"}
    for action in ("read", "checkpoint", "export"):
        assert POLICY[action] == {"auditor", "developer", "agent"}
    assert POLICY["schema"] == set(ROLES)
    assert POLICY["audits"] == {"auditor"}  # findings carry layer-3 values (hashes, seqs)
    # projected per layer (ledger.ops.reverify_history.project)
    assert POLICY["reverify_runs"] == {"auditor", "developer", "agent"}


def test_every_route_is_guarded() -> None:
    """Structural: every route of every router but health and JWKS depends on require()."""
    from ledger.api import (
        routes_append,
        routes_console,
        routes_custody,
        routes_export,
        routes_history,
        routes_meta,
        routes_proofs,
        routes_read,
    )

    seen = set()
    for module in (routes_append, routes_read, routes_proofs, routes_export, routes_meta,
                   routes_custody, routes_history, routes_console):
        for route in module.router.routes:
            for method in route.methods - {"HEAD", "OPTIONS"}:  # type: ignore[attr-defined]
                key = (method, route.path)  # type: ignore[attr-defined]
                seen.add(key)
                actions = [getattr(d.call, "action", None)
                           for d in route.dependant.dependencies]  # type: ignore[attr-defined]
                if key in PUBLIC:
                    assert not any(actions), key
                else:
                    assert any(a in POLICY for a in actions), f"{key} has no role check"
    assert {(m, p.split("?")[0]) for m, p, _ in ENDPOINTS} <= seen | {
        ("GET", "/v1/entries/0"), ("GET", "/console/app.js")}
    assert ("GET", "/openapi.json") in seen


def _claims(srv: Server, **over: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": srv.origin, "aud": srv.origin, "sub": "x", "role": "auditor",
              "iat": now, "exp": now + 600}
    claims.update(over)
    return {k: v for k, v in claims.items() if v is not None}


def _ledger_key(srv: Server) -> tuple[str, Ed25519PrivateKey]:
    from ledger.crypto.keys import Keyring
    from ledger.crypto.tokens import ledger_signer

    s = ledger_signer(Keyring.load(srv.keys_dir), srv.origin)
    return s.kid, s.key


def bad_tokens(srv: Server) -> dict[str, tuple[str, str]]:
    """name -> (token, expected code)."""
    kid, key = _ledger_key(srv)
    good_hdr = {"kid": kid, "typ": "at+jwt"}
    pub_raw = key.public_key().public_bytes_raw()
    other = Ed25519PrivateKey.generate()
    p256 = ec.generate_private_key(ec.SECP256R1())
    with srv.client("producer") as c:
        receipt = c.post("/v1/entries", json=submission(uuid.uuid4().hex)).json()["receipt"]
    return {
        "garbage": ("not-a-jwt", "invalid_token"),
        "alg none": (jwt.encode(_claims(srv), None, algorithm="none",
                                headers=good_hdr), "invalid_token"),
        "HS256 with the public key as secret": (
            jwt.encode(_claims(srv), pub_raw, algorithm="HS256", headers=good_hdr),
            "invalid_token"),
        "expired": (jwt.encode(_claims(srv, iat=int(time.time()) - 7200,
                                       exp=int(time.time()) - 3600), key, algorithm="EdDSA",
                               headers=good_hdr), "token_expired"),
        "wrong audience": (jwt.encode(_claims(srv, aud="someone-else"), key, algorithm="EdDSA",
                                      headers=good_hdr), "invalid_token"),
        "wrong issuer": (jwt.encode(_claims(srv, iss="evil"), key, algorithm="EdDSA",
                                    headers=good_hdr), "invalid_token"),
        "no exp": (jwt.encode(_claims(srv, exp=None), key, algorithm="EdDSA",
                              headers=good_hdr), "invalid_token"),
        "no sub": (jwt.encode(_claims(srv, sub=None), key, algorithm="EdDSA",
                              headers=good_hdr), "invalid_token"),
        "typ JWT (not an access token)": (
            jwt.encode(_claims(srv), key, algorithm="EdDSA", headers={"kid": kid}),
            "invalid_token"),
        "a receipt": (receipt, "invalid_token"),
        "foreign key, our kid": (jwt.encode(_claims(srv), other, algorithm="EdDSA",
                                            headers=good_hdr), "invalid_token"),
        "ES256 by an unknown key": (jwt.encode(_claims(srv), p256, algorithm="ES256",
                                               headers=good_hdr), "invalid_token"),
        "crit header": (jwt.encode(_claims(srv), key, algorithm="EdDSA",
                                   headers={**good_hdr, "crit": ["exp"]}), "invalid_token"),
        "future nbf": (jwt.encode(_claims(srv, nbf=int(time.time()) + 3600), key,
                                  algorithm="EdDSA", headers=good_hdr), "invalid_token"),
        "huge": ("a" * 9000, "invalid_token"),
    }


def test_bad_tokens_are_401_with_a_code(api: Server) -> None:  # noqa: F811
    for name, (token, code) in bad_tokens(api).items():
        for path in ("/v1/entries?limit=1", "/openapi.json"):
            r = httpx.get(api.base_url + path, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 401, (name, r.text)
            assert r.json()["error"]["code"] == code, (name, r.text)


def test_malformed_authorization_headers(api: Server) -> None:  # noqa: F811
    for header in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer    x y", "token abc",
                   f"Bearer {api.tokens['auditor']} extra"):
        r = httpx.get(api.base_url + "/v1/entries", headers={"Authorization": header})
        assert r.status_code == 401, (header, r.text)
        assert r.json()["error"]["code"] in ("invalid_token", "missing_token")


def test_unknown_role_is_forbidden(api: Server) -> None:  # noqa: F811
    kid, key = _ledger_key(api)
    token = jwt.encode(_claims(api, role="admin"), key, algorithm="EdDSA",
                       headers={"kid": kid, "typ": "at+jwt"})
    r = httpx.get(api.base_url + "/v1/entries", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_producer_identity_is_recorded_from_the_token(api: Server) -> None:  # noqa: F811
    who = f"gateway-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex
    with httpx.Client(base_url=api.base_url, headers={
            "Authorization": f"Bearer {api.token('producer', who)}"}) as c:
        r = c.post("/v1/entries", json=submission(tag))
        assert r.status_code == 201, r.text
        seq = r.json()["seq"]
        # batch too
        rb = c.post("/v1/entries/batch", json=[submission(tag + "-b")])
        seq_b = rb.json()["results"][0]["seq"]
    with api.client("auditor") as c:
        for s in (seq, seq_b):
            assert c.get(f"/v1/entries/{s}").json()["entry"]["producer"] == who
        page = c.get("/v1/entries", params={"producer": who}).json()
        assert [e["seq"] for e in page["entries"]] == [seq, seq_b]


# -- an external issuer's JWKS (ES256 and EdDSA keys in a file that can change) ---------
ISSUER, AUDIENCE = "https://idp.example", "ledger-api"


def _jwk(key: Any, kid: str) -> dict[str, Any]:
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "EdDSA"
    doc = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key()))
    doc.update(kid=kid, alg=alg, use="sig")
    return doc


def _ext_token(key: Any, kid: str, role: str, sub: str, **over: Any) -> str:
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "EdDSA"
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "role": role, "iat": now,
              "exp": now + 600, **over}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid, "typ": "JWT"})


def test_external_issuer_jwks(db_url: str, tmp_path: Path) -> None:
    kind = make_url(db_url).get_backend_name()
    origin = f"test.example/ext-{kind}"
    prepare_ledger(db_url, tmp_path / "keys", origin)
    k1 = ec.generate_private_key(ec.SECP256R1())
    k2 = Ed25519PrivateKey.generate()
    jwks_file = tmp_path / "idp-jwks.json"
    jwks_file.write_text(json.dumps({"keys": [_jwk(k1, "k1")]}))
    proc, url = start_server(db_url, tmp_path / "keys", tmp_path / "serve.log",
                             "--jwks", str(jwks_file), "--issuer", ISSUER,
                             "--audience", AUDIENCE)
    try:
        def get(token: str, path: str = "/v1/entries?limit=1") -> httpx.Response:
            return httpx.get(url + path, headers={"Authorization": f"Bearer {token}"})

        prod = _ext_token(k1, "k1", "producer", "idp-gateway")
        r = httpx.post(url + "/v1/entries", json=submission("ext"),
                       headers={"Authorization": f"Bearer {prod}"})
        assert r.status_code == 201, r.text
        aud_tok = _ext_token(k1, "k1", "auditor", "idp-auditor")
        assert get(aud_tok, "/v1/entries/0").json()["entry"]["producer"] == "idp-gateway"
        # the ledger's own tokens are not accepted in this mode
        srv_tok = Server(kind, db_url, tmp_path / "keys", origin, proc, url,
                         tmp_path / "log").token("auditor", "x")
        assert get(srv_tok).status_code == 401
        # a key the issuer has not published yet ...
        t2 = _ext_token(k2, "k2", "agent", "idp-agent")
        assert get(t2).status_code == 401
        # ... is accepted once it appears in the JWKS file (re-read when it changes)
        jwks_file.write_text(json.dumps({"keys": [_jwk(k1, "k1"), _jwk(k2, "k2")]}))
        deadline = time.monotonic() + 10
        while get(t2).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert get(t2).status_code == 200
        # wrong audience / issuer from the right key
        assert get(_ext_token(k1, "k1", "auditor", "a", aud="other")).status_code == 401
        assert get(_ext_token(k1, "k1", "auditor", "a", iss="other")).status_code == 401
        # receipts are still signed by the ledger key and published at the JWKS endpoint
        jwks = httpx.get(url + "/.well-known/jwks.json").json()
        from ledger.api.receipts import verify_receipt

        assert verify_receipt(r.json()["receipt"], jwks, origin)["seq"] == 0
    finally:
        stop_process(proc)


def test_serve_refuses_to_start_without_a_signing_key(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = f"sqlite:///{tmp_path / 'l.db'}"
    from ledger.facade import Ledger

    Ledger.init(db, origin="test.example/nokey").close()
    r = subprocess.run([sys.executable, "-m", "ledger", "--db", db, "serve", "--port", "0",
                        "--keys", str(tmp_path / "empty")], capture_output=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert b"no_signing_key" in r.stderr


def test_token_issue_cli(api: Server) -> None:  # noqa: F811
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "ledger", "--db", api.db_url, "token", "issue",
                        "--role", "developer", "--subject", "dev-1", "--ttl", "5m",
                        "--keys", str(api.keys_dir)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    token = r.stdout.decode().strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["role"] == "developer" and claims["sub"] == "dev-1"
    assert 290 <= claims["exp"] - claims["iat"] <= 300
    resp = httpx.get(api.base_url + "/v1/entries?limit=1",
                     headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200 and resp.json()["layer"] == "developer"
    bad = subprocess.run([sys.executable, "-m", "ledger", "--db", api.db_url, "token",
                          "issue", "--role", "producer", "--subject", "p", "--ttl", "400d",
                          "--keys", str(api.keys_dir)], capture_output=True, timeout=60)
    assert bad.returncode == 2 and b"bad_ttl" in bad.stderr


def test_openapi_document_needs_a_token_and_lists_the_endpoints(api: Server,  # noqa: F811
                                                                 ) -> None:
    assert httpx.get(api.base_url + "/openapi.json").status_code == 401
    with api.client("agent") as c:
        doc = c.get("/openapi.json").json()
    paths = set(doc["paths"])
    assert {"/v1/entries", "/v1/entries/batch", "/v1/entries/{seq}", "/v1/checkpoint",
            "/v1/export", "/v1/health", "/.well-known/jwks.json"} <= paths
    assert doc["components"]["securitySchemes"]


def test_serve_hands_settings_to_the_app_under_the_agreed_name() -> None:
    from ledger.api.settings import ENV_VAR, Settings
    from ledger.cli.serve import SETTINGS_ENV

    assert SETTINGS_ENV == ENV_VAR
    s = Settings.from_env({ENV_VAR: json.dumps({"db_url": "sqlite:///x.db", "future": 1})})
    assert s.db_url == "sqlite:///x.db" and s.group_max_items == 256


def test_jwks_url_source_refetches_for_unknown_kids_at_a_bounded_rate() -> None:
    from ledger.crypto.jwks import JwksSource

    k1, k2 = ec.generate_private_key(ec.SECP256R1()), Ed25519PrivateKey.generate()
    served = {"keys": [_jwk(k1, "k1")]}
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        if served is None:
            raise OSError("issuer down")
        return json.dumps(served).encode()

    src = JwksSource(location="https://idp.example/jwks.json", fetch=fetch)
    assert src.keyset.knows("k1") and len(fetched) == 1
    assert not src.stale("k1")           # known kid, fresh: no fetch
    assert not src.stale("k2")           # unknown kid, but fetched < 30 s ago
    src._fetched_at -= 31
    assert src.stale("k2") and not src.stale("k1")
    served["keys"].append(_jwk(k2, "k2"))
    src.refresh()
    assert src.keyset.knows("k2") and len(fetched) == 2
    served = None  # an outage keeps the keys already known
    src.refresh()
    assert src.keyset.knows("k1") and src.keyset.knows("k2")
    src._fetched_at -= 301
    assert src.stale("k1")               # older than 5 min: refresh even for known kids


def test_external_issuer_jwks_over_http(db_url: str, tmp_path: Path) -> None:
    """--jwks http://127.0.0.1:<port>/jwks.json: fetched with the standard library."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    key = Ed25519PrivateKey.generate()
    body = json.dumps({"keys": [_jwk(key, "idp-1")]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    idp = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=idp.serve_forever, daemon=True)
    thread.start()
    kind = make_url(db_url).get_backend_name()
    prepare_ledger(db_url, tmp_path / "keys", f"test.example/url-{kind}")
    proc, url = start_server(db_url, tmp_path / "keys", tmp_path / "serve.log", "--jwks",
                             f"http://127.0.0.1:{idp.server_address[1]}/jwks.json",
                             "--issuer", ISSUER, "--audience", AUDIENCE)
    try:
        tok = _ext_token(key, "idp-1", "developer", "dev@idp")
        r = httpx.get(url + "/v1/entries", headers={"Authorization": f"Bearer {tok}"})
        assert r.status_code == 200 and r.json()["layer"] == "developer"
    finally:
        stop_process(proc)
        idp.shutdown()
        idp.server_close()


def test_only_keys_named_after_the_origin_are_trusted(tmp_path: Path) -> None:
    from ledger.crypto.keys import Keyring
    from ledger.crypto.tokens import ledger_signer

    ring = Keyring.load(tmp_path / "keys")
    ring.generate("a.example/ledger", 1)
    ring.generate("b.example/other", 2)
    signer = ledger_signer(ring, "a.example/ledger")
    assert [k["key_name"] for k in signer.jwks()["keys"]] == ["a.example/ledger"]


def _raw_jws(header: Any, claims: Any, key: Ed25519PrivateKey) -> str:
    """A JWS with arbitrary (even ill-typed) header and claims, correctly signed."""
    import base64

    def seg(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    signing_input = seg(header) + "." + seg(claims)
    sig = base64.urlsafe_b64encode(key.sign(signing_input.encode())).rstrip(b"=").decode()
    return signing_input + "." + sig


def test_ill_typed_headers_and_claims_are_401_never_500(api: Server) -> None:  # noqa: F811
    kid, key = _ledger_key(api)
    good = _claims(api)
    cases = [
        ({"alg": "EdDSA", "kid": kid, "typ": ["at+jwt"]}, good),
        ({"alg": "EdDSA", "kid": {"k": 1}, "typ": "at+jwt"}, good),
        ({"alg": ["EdDSA"], "kid": kid, "typ": "at+jwt"}, good),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, {**good, "exp": "9999999999"}),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, {**good, "exp": 10**400}),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, {**good, "sub": 7}),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, {**good, "role": ["auditor"]}),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, {**good, "aud": [api.origin, 1]}),
        ({"alg": "EdDSA", "kid": kid, "typ": "at+jwt"}, [1, 2]),
    ]
    for header, claims in cases:
        token = _raw_jws(header, claims, key)
        r = httpx.get(api.base_url + "/v1/entries", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code in (200, 401, 403), (header, claims, r.status_code, r.text)
        assert r.json().get("error", {}).get("code") != "internal_error"
