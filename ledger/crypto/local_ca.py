"""A throw-away CA and TSA certificate for the loopback TSA of the demo, tests and
benchmarks (:mod:`ledger.witness.local_tsa`).  Not for production: the keys are written
unencrypted.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _ca_cert(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             signer: ec.EllipticCurvePrivateKey, now: dt.datetime,
             path_length: int) -> x509.Certificate:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=path_length),
                           critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(signer, hashes.SHA256()))


def make_tsa_certs(folder: Path, cn: str = "ledger test TSA",
                   intermediate: bool = False) -> None:
    """Write ``ca.pem`` (the root), ``tsa.pem``, ``tsa.key`` and ``chain.pem`` (every
    certificate, root first) in folder.  ``intermediate``: the TSA certificate is issued
    by an intermediate CA (``intermediate.pem``) under the root, and ``extra-certs.pem``
    holds the intermediate and the root (what a TSA ships with ``-chain``)."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key, tsa_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    ca = _ca_cert(_name(cn + " CA"), _name(cn + " CA"), ca_key, ca_key, now,
                  1 if intermediate else 0)
    issuer, issuer_key, chain = ca, ca_key, [ca]
    if intermediate:
        mid_key = ec.generate_private_key(ec.SECP256R1())
        issuer = _ca_cert(_name(cn + " intermediate CA"), ca.subject, mid_key, ca_key, now, 0)
        issuer_key = mid_key
        chain.append(issuer)
        (folder / "intermediate.pem").write_bytes(_pem(issuer))
        (folder / "extra-certs.pem").write_bytes(_pem(issuer) + _pem(ca))
    tsa = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(issuer.subject)
           .public_key(tsa_key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
           .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
           .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False,
                                        False), critical=True)
           .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]),
                          critical=True)
           .sign(issuer_key, hashes.SHA256()))
    (folder / "ca.pem").write_bytes(_pem(ca))
    (folder / "tsa.pem").write_bytes(_pem(tsa))
    (folder / "chain.pem").write_bytes(b"".join(_pem(c) for c in [*chain, tsa]))
    (folder / "tsa.key").write_bytes(tsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (folder / "serial").write_text("01\n")
