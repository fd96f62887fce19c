"""The checkpoint-note signature check of an export bundle (docs/export.md); the manifest
JWT is :mod:`ledger.crypto.jws`.

With the verifier's trusted keys a valid signature is *verified*; with only the bundle's
own ``jwks.json`` it *abstains*, since anyone can put a key in a bundle.
"""

from __future__ import annotations

from ledger.core.finding import Disposition
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.crypto.jws import UNTRUSTED, SignatureCheck, verifies
from ledger.crypto.keys import PublicKeyRef, known_keys
from ledger.errors import NoteError

__all__ = ["SignatureCheck", "check_note"]


def check_note(data: bytes, keys: list[PublicKeyRef], trusted: bool,
               ) -> SignatureCheck[Checkpoint]:
    """The signed checkpoint note's check (``parsed``: the checkpoint, when it parses).
    Never raises for bad input."""
    try:
        note = parse_note(data)
        cp = parse_checkpoint_body(note.text)
    except NoteError as exc:
        return SignatureCheck(Disposition.FAILED, "checkpoint_malformed", exc.message)
    known = known_keys(keys, cp.origin)
    good = 0
    for sig in note.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if not verifies(key.public_bytes_raw(), sig.signature, note.text.encode("utf-8")):
            return SignatureCheck(Disposition.FAILED, "checkpoint_signature_invalid",
                                  f"signature by {sig.name} ({sig.key_id.hex()}) does not "
                                  "verify", cp)
        good += 1
    if not good:
        where = "a trusted key" if trusted else "a key of the bundle's jwks.json"
        return SignatureCheck(Disposition.FAILED, "checkpoint_signature_invalid",
                              f"no signature by {where}", cp)
    if not trusted:
        return SignatureCheck(Disposition.ABSTAINED, "untrusted_key", UNTRUSTED % "checkpoint",
                              cp)
    return SignatureCheck(Disposition.VERIFIED, "checkpoint_signature_valid",
                          "signed by a trusted key", cp)
