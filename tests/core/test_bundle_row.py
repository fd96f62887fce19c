"""BundleRow declares, for the type checker, exactly the entries columns it stores."""

from __future__ import annotations

import base64
import binascii

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.core import bundle
from ledger.core.bundle import BundleRow, canonical_b64, read_entry


def test_declared_attributes_are_the_slots() -> None:
    assert set(BundleRow.__annotations__) == set(BundleRow.__slots__)
    assert set(BundleRow.__slots__) == set(bundle._COLUMNS) | {"redacted_by", "envelope_doc",
                                                               "tenant", "tseq"}


def test_a_read_line_has_every_column() -> None:
    h = "sha256:" + "00" * 32
    row, blobs, problems = read_entry({
        "seq": 3, "kind": "result", "recorded_at_us": 7, "envelope": "{}", "body_hash": h,
        "prev_hash": h, "entry_hash": h, "payloads": {}})
    assert (row.seq, row.kind, row.recorded_at, row.envelope) == (3, "result", 7, b"{}")
    assert row.entry_hash == bytes(32) and row.status is None and row.subject is None
    assert row.redacted_by == {} and row.envelope_doc == {}
    assert (blobs, problems) == ({}, [])


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


@settings(max_examples=500, deadline=None)
@example("0000=", 0, 0)  # padding after a whole group: strict decoding takes it
@example("AAAA====", 0, 0)
@example("AAE=", 1, 1)  # pad bits set
@given(st.text(alphabet=_B64 + " \n-_", max_size=14) | st.binary(max_size=10).map(
    lambda b: base64.b64encode(b).decode()), st.integers(0, 63), st.integers(0, 20))
def test_canonical_b64_is_the_strict_decode_plus_the_full_reencoding(text, bits, at):
    """canonical_b64 re-encodes only the last group; the same answer as decoding strictly
    and comparing the whole re-encoding with the text (with pad bits set at random)."""
    if text and text.endswith("=") and at % 2:  # set pad bits of the last data character
        stripped = text.rstrip("=")
        if stripped:
            i = _B64.index(stripped[-1]) if stripped[-1] in _B64[:64] else 0
            text = stripped[:-1] + _B64[(i | bits) & 63] + text[len(stripped):]
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
        want = raw if binascii.b2a_base64(raw, newline=False).decode("ascii") == text else None
    except (binascii.Error, ValueError):
        want = None
    assert canonical_b64(text) == want


def test_canonical_b64_refuses_set_pad_bits_and_non_text() -> None:
    assert canonical_b64("QQ==") == b"A" and canonical_b64("QR==") is None
    assert canonical_b64("QUI=") == b"AB" and canonical_b64("QUJ=") is None
    assert canonical_b64("QUJD") == b"ABC" and canonical_b64("") == b""
    assert canonical_b64(None) is None and canonical_b64(b"QQ==") is None
