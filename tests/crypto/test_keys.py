"""Ledger signing keys: keyring files, JWKS, RFC 7638 key ids, rotation, CLI."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger import Ledger
from ledger.cli.main import cli
from ledger.crypto.keys import (
    Keyring,
    KeyringError,
    PublicKeyRef,
    jwk_thumbprint,
    known_keys,
    load_public_keys,
    raw_public,
)
from ledger.crypto.note_sign import ed25519_key_id, verify_note

NAME = "ledger.example/log"
T0 = 1_790_000_000_000_000

# RFC 8037 Appendix A.1 (private key) and A.3 (JWK thumbprint).
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_KID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_thumbprint_matches_rfc8037_vector():
    key = Ed25519PrivateKey.from_private_bytes(_b64url(RFC8037_D))
    assert raw_public(key) == _b64url(RFC8037_X)
    assert jwk_thumbprint(_b64url(RFC8037_X)) == RFC8037_KID


def test_generate_writes_private_pem_0600_public_pem_and_jwks(tmp_path):
    ring = Keyring.load(tmp_path / "keys")
    seed = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    jwk = ring.generate(NAME, T0, seed)
    pub = raw_public(seed)
    assert jwk["note_key_id"] == ed25519_key_id(NAME, pub).hex() == "6240a278"
    assert jwk["kid"] == jwk_thumbprint(pub) == "WWpn_pfHui9YKR4CZtQsDGMu7_Gch2zYChfSvnxgtPk"
    assert jwk | {"kid": "", "created": ""} == {
        "kty": "OKP", "crv": "Ed25519", "x": base64.urlsafe_b64encode(pub).rstrip(b"=").decode(),
        "alg": "EdDSA", "use": "sig", "kid": "", "key_name": NAME, "note_key_id": "6240a278",
        "status": "active", "created": ""}
    pem = tmp_path / "keys" / "ledger.example_log-6240a278.pem"
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert (tmp_path / "keys" / "ledger.example_log-6240a278.pub.pem").exists()
    on_disk = json.loads((tmp_path / "keys" / "jwks.json").read_text())
    assert on_disk == {"keys": [jwk]}
    assert Keyring.load(tmp_path / "keys").signers(NAME)[0][1].private_bytes_raw() == \
        bytes(range(1, 33))


def test_rotation_keeps_old_public_keys_forever(tmp_path):
    ring = Keyring.load(tmp_path)
    old = ring.generate(NAME, T0)
    new = ring.generate(NAME, T0 + 1)
    assert [n for n, _ in ring.signers(NAME)] == [NAME, NAME]  # both sign during rotation
    ring.retire(old["note_key_id"], T0 + 2)
    again = Keyring.load(tmp_path)
    assert len(again.signers(NAME)) == 1
    assert [k["status"] for k in again.jwks] == ["retired", "active"]
    assert again.jwks[0]["retired"].startswith("2026-")
    assert {r.public_raw for r in again.public_keys()} == {
        _b64url(old["x"]), _b64url(new["x"])}
    with pytest.raises(KeyringError) as err:
        again.retire("nope", T0)
    assert err.value.code == "key_not_found"


def test_signers_refuse_missing_unsafe_or_mismatched_keys(tmp_path):
    ring = Keyring.load(tmp_path)
    with pytest.raises(KeyringError) as err:
        ring.signers(NAME)
    assert err.value.code == "no_signing_key"
    jwk = ring.generate(NAME, T0)
    pem = tmp_path / f"ledger.example_log-{jwk['note_key_id']}.pem"
    os.chmod(pem, 0o644)
    with pytest.raises(KeyringError) as err:
        ring.signers(NAME)
    assert err.value.code == "key_file_mode"
    os.chmod(pem, 0o600)
    other = Ed25519PrivateKey.generate()
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )
    pem.write_bytes(other.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    with pytest.raises(KeyringError) as err:
        ring.signers(NAME)
    assert err.value.code == "key_mismatch"
    with pytest.raises(KeyringError):
        ring.signers("other/origin")


def test_bad_jwks_is_a_usage_error(tmp_path):
    (tmp_path / "jwks.json").write_text('{"keys": 5}')
    with pytest.raises(KeyringError) as err:
        Keyring.load(tmp_path)
    assert err.value.code == "bad_jwks" and err.value.exit_code == 2


def test_load_public_keys_from_pem_jwks_and_single_jwk(tmp_path):
    ring = Keyring.load(tmp_path)
    jwk = ring.generate(NAME, T0)
    pub = _b64url(jwk["x"])
    stem = tmp_path / f"ledger.example_log-{jwk['note_key_id']}"
    assert load_public_keys(f"{stem}.pub.pem") == [PublicKeyRef(None, pub)]
    assert load_public_keys(f"{stem}.pem") == [PublicKeyRef(None, pub)]
    assert load_public_keys(tmp_path / "jwks.json") == [PublicKeyRef(NAME, pub)]
    (tmp_path / "one.jwk").write_text(json.dumps(jwk))
    assert load_public_keys(tmp_path / "one.jwk") == [PublicKeyRef(NAME, pub)]
    # unnamed keys take the default name; named keys keep theirs
    km = known_keys([PublicKeyRef(None, pub)], "x/y")
    assert list(km) == [("x/y", ed25519_key_id("x/y", pub))]
    for bad, code in [(b"hello", "bad_key_file"), (b"{nope", "bad_jwks")]:
        (tmp_path / "bad").write_bytes(bad)
        with pytest.raises(KeyringError) as err:
            load_public_keys(tmp_path / "bad")
        assert err.value.code == code
    with pytest.raises(KeyringError):
        load_public_keys(tmp_path / "absent.pem")


def test_cli_generate_list_and_retire(tmp_path, sqlite_url):
    Ledger.init(sqlite_url, origin=NAME).close()
    run = CliRunner().invoke
    keys = str(tmp_path / "ring")
    r1 = run(cli, ["--db", sqlite_url, "keys", "generate", "--out", keys, "--format", "json"])
    assert r1.exit_code == 0, r1.output
    first = json.loads(r1.stdout)
    assert first["key_name"] == NAME and first["status"] == "active"
    r2 = run(cli, ["--db", sqlite_url, "keys", "generate", "--keys", keys])
    assert r2.exit_code == 0 and "2 active keys" in r2.stderr
    listed = run(cli, ["keys", "list", "--keys", keys, "--format", "json"])
    rows = json.loads(listed.stdout)
    assert [r["status"] for r in rows] == ["active", "active"]
    assert all(r["private_key"] for r in rows)
    # "--": a base64url kid may start with "-", which would read as an option
    r3 = run(cli, ["keys", "retire-signing", "--keys", keys, "--", first["kid"]])
    assert r3.exit_code == 0 and "retired" in r3.stdout
    table = run(cli, ["keys", "list", "--keys", keys]).stdout
    assert table.splitlines()[0].split()[:4] == ["key_name", "note_key_id", "kid", "status"]
    assert "retired" in table and "active" in table
    env = run(cli, ["keys", "list", "--format", "json"], env={"LEDGER_KEYS_DIR": keys})
    assert len(json.loads(env.stdout)) == 2
    bad = run(cli, ["keys", "retire-signing", "zzzz", "--keys", keys])
    assert bad.exit_code == 2 and "key_not_found" in bad.stderr


def test_a_signature_by_a_retired_key_still_verifies(tmp_path):
    ring = Keyring.load(tmp_path)
    ring.generate(NAME, T0)
    from ledger.crypto.note_sign import sign_note

    body = f"{NAME}\n1\n{base64.b64encode(bytes(32)).decode()}\n"
    note = body + "\n" + "".join(sign_note(body, n, k) for n, k in ring.signers(NAME))
    ring.retire(ring.jwks[0]["kid"], T0 + 5)
    assert verify_note(note, known_keys(Keyring.load(tmp_path).public_keys(), NAME)) == [NAME]


def test_jwks_and_key_directory_are_protected_like_the_private_key(tmp_path):
    """jwks.json decides which keys verify tokens (a key added there as ``retired``
    verifies an auditor token): it was written group-writable under umask 002 and never
    checked.  Now it is written 0644 whatever the umask, and signing (the server's start)
    refuses it, or the key directory, when writable by others or owned by another user."""
    keys = tmp_path / "keys"
    old = os.umask(0o002)
    try:
        Keyring.load(keys).generate(NAME, T0)
    finally:
        os.umask(old)
    jwks = keys / "jwks.json"
    assert stat.S_IMODE(jwks.stat().st_mode) == 0o644
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert Keyring.load(keys).signers(NAME)
    for target, mode in ((jwks, 0o664), (jwks, 0o646), (keys, 0o770)):
        before = stat.S_IMODE(target.stat().st_mode)
        target.chmod(mode)
        with pytest.raises(KeyringError, match=f"{target.name} has mode {mode:o}") as err:
            Keyring.load(keys).signers(NAME)
        assert err.value.code == "key_file_mode" and err.value.exit_code == 2
        target.chmod(before)
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(jwks, 54321, -1)
        with pytest.raises(KeyringError, match="belongs to uid 54321") as err:
            Keyring.load(keys).signers(NAME)
        assert err.value.code == "key_file_owner"
        os.chown(jwks, 0, -1)
    assert Keyring.load(keys).signers(NAME)


def test_serve_refuses_a_group_writable_jwks_at_start(tmp_path, sqlite_url):
    Ledger.init(sqlite_url, origin=NAME).close()
    keys = tmp_path / "keys"
    Keyring.load(keys).generate(NAME, T0)
    (keys / "jwks.json").chmod(0o664)
    try:  # a real process: before the check it started serving, and kept on
        res = subprocess.run([sys.executable, "-m", "ledger", "--db", sqlite_url, "serve",
                              "--keys", str(keys), "--port", "0"], capture_output=True,
                             text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("ledger serve started with a group-writable jwks.json")
    assert res.returncode == 2 and "jwks.json has mode 664" in res.stderr
