"""The format documents keep up with the code: the key sets docs/format.md tabulates for
redaction and hold entries and their documents, the closed key lists of the proof bundles in
docs/format-checkpoint.md, and a verifier's checklist in every format document.  Each set is
parsed out of the markdown and compared with the constants the code reads and writes with,
and with documents the code builds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.core import redaction
from ledger.core.canonical import canonical_json
from ledger.core.entry import PAYLOAD_MAP_V2, V2_FIELDS
from ledger.verify import proof

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _table_rows(text: str, marker: str) -> dict[str, set[str]]:
    """First column -> the backticked names of the second, for the two tables after
    ``marker``."""
    rest = text[text.index(marker):]
    out: dict[str, set[str]] = {}
    for line in rest.splitlines()[1:60]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and not set(cells[1]) <= {"-"} and cells[1] != "keys":
            out[cells[0]] = set(re.findall(r"`(\w+)`", cells[1]))
    return out


def test_redaction_and_hold_key_sets_are_the_codes():
    rows = _table_rows(_doc("format.md"), "<!-- key sets:")
    common = {"v", "ledger", "kind", "payloads"}
    assert rows["`redaction`"] == common | set(V2_FIELDS["redaction"])
    assert rows["`hold`"] == common | set(V2_FIELDS["hold"])
    assert rows["`ledger-redaction/2` (written today)"] == set(redaction._REDACTION_KEYS_V2)
    assert rows["`ledger-redaction/1` (written before signatures; still read)"] == \
        set(redaction._REDACTION_KEYS)
    assert rows["`ledger-hold/1`, `action` `add`"] == set(redaction._HOLD_KEYS["add"])
    assert rows["`ledger-hold/1`, `action` `release`"] == set(redaction._HOLD_KEYS["release"])
    # and the documents the code builds have exactly those keys
    add = redaction.build_hold("add", "case 42", targets=[3, 1])
    rel = redaction.build_hold("release", "settled", hold_seq=9)
    req = redaction.build_request({1: ["query"]}, "GDPR Art. 17")
    assert set(add.to_doc()) == rows["`ledger-hold/1`, `action` `add`"]
    assert set(rel.to_doc()) == rows["`ledger-hold/1`, `action` `release`"]
    assert set(req.to_doc()) == rows["`ledger-redaction/1` (written before signatures; still read)"]
    assert set(PAYLOAD_MAP_V2["redaction"]) == {"request"}
    assert set(PAYLOAD_MAP_V2["hold"]) == {"order"}


def test_the_documented_hold_examples_parse():
    text = _doc("redaction.md")
    examples = re.findall(r'\{"format": "ledger-hold/1".*?\}', text, re.S)
    assert len(examples) == 2
    for ex in examples:
        order = redaction.parse_hold(canonical_json(json.loads(ex)))
        assert set(order.to_doc()) == set(json.loads(ex))


def test_the_proof_bundle_closed_key_lists_are_the_codes():
    text = _doc("format-checkpoint.md")
    strict = text[text.index("## Strict reading of proof bundles"):]
    spans = re.findall(r"\(`([a-z0-9_\s]+)`", strict)
    sets = [set(s.split()) for s in spans]
    assert proof.INCLUSION_KEYS - {"timestamps"} in sets
    assert proof.ENTRY_KEYS in sets
    assert proof.CONSISTENCY_KEYS - {"timestamps"} in sets
    assert {"digest", "data_b64"} in sets and "`salt_b64`" in strict
    assert proof.PAYLOAD_KEYS == {"digest", "data_b64", "salt_b64"}


@pytest.mark.parametrize("name", ["format.md", "format-checkpoint.md", "format-attestation.md",
                                  "format-receipt.md", "format-alert.md", "export.md"])
def test_every_format_document_has_a_verifiers_checklist(name):
    text = _doc(name)
    m = re.search(r"^#+ [\d.]*\s*Verifier's checklist\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert m, f"docs/{name} has no verifier's checklist"
    assert len(re.findall(r"^\d+\. ", m.group(1), re.M)) >= 5
