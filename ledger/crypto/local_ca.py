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


def make_tsa_certs(folder: Path, cn: str = "ledger test TSA") -> None:
    """Write ``ca.pem``, ``tsa.pem``, ``tsa.key`` and ``chain.pem`` (CA + TSA) in folder."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key, tsa_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(cn + " CA")).issuer_name(_name(cn + " CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    tsa = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject)
           .public_key(tsa_key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
           .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
           .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False,
                                        False), critical=True)
           .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]),
                          critical=True)
           .sign(ca_key, hashes.SHA256()))
    (folder / "ca.pem").write_bytes(_pem(ca))
    (folder / "tsa.pem").write_bytes(_pem(tsa))
    (folder / "chain.pem").write_bytes(_pem(ca) + _pem(tsa))
    (folder / "tsa.key").write_bytes(tsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (folder / "serial").write_text("01\n")
