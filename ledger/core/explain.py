"""What each audit code means for the person triaging it, written once.

One table, :data:`EXPLANATIONS`: for every finding code and abstention reason the audit,
the checkpoint checks and the anchoring policy produce, a severity, a plain explanation
and the next step.  It is served with the grouped findings of an audit run (the web
console), rendered in the HTML reports, and rendered into docs/audit.md ("Triage"), which
a test keeps equal to :func:`render_markdown`.

:func:`group_findings` folds the findings of one run into *incidents*: one per (code,
class, field), with the count, the seq ranges it covers and its explanation.  Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Severities, most urgent first (the order incidents are sorted in).
CRITICAL = "critical"  # recorded history was altered, removed or forked
HIGH = "high"  # a signature or a signed commitment does not hold
MEDIUM = "medium"  # a rule of the result contract or of a policy is broken
REVIEW = "review"  # an abstention: something could not be confirmed, a person decides
INFO = "info"  # recorded on purpose and lawful (an erasure): nothing to fix
SEVERITIES = (CRITICAL, HIGH, MEDIUM, REVIEW, INFO)
SEVERITY_TEXT = {
    CRITICAL: "recorded history was altered, removed or forked",
    HIGH: "a signature or a signed commitment does not hold",
    MEDIUM: "a rule of the result contract or of a policy is broken",
    REVIEW: "could not be confirmed: a person decides (an abstention)",
    INFO: "recorded on purpose and lawful: nothing to fix (an abstention)",
}
DOC = "docs/audit.md"


@dataclass(frozen=True)
class Explanation:
    """How to read one code: its severity, what it means, what to do next."""

    severity: str
    explanation: str
    next_step: str

    def to_dict(self, code: str) -> dict[str, str]:
        return {"code": code, "severity": self.severity, "explanation": self.explanation,
                "next_step": self.next_step, "doc": f"{DOC}#{anchor(code)}"}


def anchor(code: str) -> str:
    """The HTML anchor of ``code`` in docs/audit.md's triage table (``policy:x`` ->
    ``code-policy``)."""
    return "code-" + re.sub(r"[^a-z0-9_]+", "-", code.split(":")[0].lower()).strip("-")


_E = Explanation
_TAMPER = ("Compare with a backup or an exported bundle taken before the change; find who had "
           "write access to the database at that time; keep this report as evidence.")
_ATT = ("Ask the producer which key signed the token and re-check its issuer keys "
        "(`ledger keys trusted`); if the key is right, the token was altered or forged.")
_CONTRACT = ("The producer wrote a result that breaks the contract: report it to the producer "
             "(the `producer` of the entry); the entry stays in the ledger as recorded.")
_CUSTODY = ("Review the custody order with the custodian who made it (the entry's `role`); "
            "a wrong order stays recorded, correct it with a new one.")

EXPLANATIONS: dict[str, Explanation] = {
    # -- the chain
    "seq_gap": _E(CRITICAL, "Entries are missing: rows were deleted from the database.",
                  "Restore the missing seqs from a backup or an export and compare. " + _TAMPER),
    "envelope_hash_mismatch": _E(
        CRITICAL, "The stored envelope is not what was hashed: the entry's values were "
        "rewritten.", _TAMPER),
    "entry_out_of_place": _E(CRITICAL, "The entry was hashed at another position: rows were "
                             "moved.", _TAMPER),
    "entry_hash_mismatch": _E(CRITICAL, "The entry hash does not recompute: its seq, time, "
                              "previous hash or body hash was rewritten.", _TAMPER),
    "hash_not_committed": _E(
        CRITICAL, "The next entry links to another hash: this entry was rewritten with a "
        "recomputed hash, or history forked.",
        "Check the range against a signed checkpoint (`ledger audit --checkpoint`). " + _TAMPER),
    "broken_link": _E(CRITICAL, "The entry does not link to the entry before it: the chain is "
                      "broken here.", _TAMPER),
    "time_reversed": _E(CRITICAL, "The entry is recorded earlier than an entry before it: rows "
                        "were reordered or a time rewritten.", _TAMPER),
    "row_unreadable": _E(CRITICAL, "Stored values have types the checks cannot read: written "
                         "behind the ledger's back.", _TAMPER),
    "envelope_unreadable": _E(CRITICAL, "The stored envelope is not JSON: it was overwritten.",
                              _TAMPER),
    "foreign_envelope": _E(CRITICAL, "The envelope names another version, ledger or kind: an "
                           "entry from elsewhere was put here.", _TAMPER),
    "column_mismatch": _E(
        CRITICAL, "An indexed column was changed behind the ledger's back; the hashed envelope "
        "still holds the true value (readers are shown the envelope's).",
        "Find every row changed the same way (the incident's seq ranges). " + _TAMPER),
    "payload_missing": _E(CRITICAL, "A payload the entry commits to was deleted, and no "
                          "redaction erased it.", _TAMPER),
    "payload_digest_mismatch": _E(CRITICAL, "A payload's bytes do not hash to the commitment "
                                  "in the envelope: the payload was rewritten.", _TAMPER),
    "proof_mismatch": _E(CRITICAL, "The stored evidence preimage does not hash to the entry's "
                         "proof_ref: the evidence was rewritten.", _TAMPER),
    "result_unreadable": _E(CRITICAL, "The stored result document is not a JSON object.",
                            _TAMPER),
    "result_envelope_mismatch": _E(CRITICAL, "The result document says otherwise than the "
                                   "hashed envelope (status or proof_ref).", _TAMPER),
    "document_unreadable": _E(CRITICAL, "A key event's, audit run's, import's or "
                              "re-verification run's document is not a JSON object.", _TAMPER),
    "document_envelope_mismatch": _E(CRITICAL, "A key event's, audit run's, import's or "
                                     "re-verification run's document says otherwise than "
                                     "its hashed envelope.", _TAMPER),
    # -- the ledger as a whole
    "head_missing": _E(CRITICAL, "The head row (size and last hash) was deleted.",
                       "Compare the size with your latest signed checkpoint. " + _TAMPER),
    "entries_beyond_head": _E(CRITICAL, "Entries exist past the recorded head: they were "
                              "inserted behind the append path.", _TAMPER),
    "head_beyond_entries": _E(CRITICAL, "The head records more entries than exist: entries "
                              "at the end were deleted.", _TAMPER),
    "head_hash_mismatch": _E(CRITICAL, "The head hash is not the last entry's hash: the tail "
                             "or the head was rewritten.", _TAMPER),
    # -- tenants (docs/tenants.md)
    "tenant_seq_mismatch": _E(CRITICAL, "The entry's place in its tenant's chain (tseq) is not "
                              "the next one: an entry of the tenant was removed, duplicated "
                              "or moved between tenants.", _TAMPER),
    "tenant_invalid": _E(CRITICAL, "The entry's tenant id or tseq breaks its rule: written "
                         "behind the ledger's back.", _TAMPER),
    "tenant_head_mismatch": _E(CRITICAL, "A tenant's recorded head is not its last entry: the "
                               "head was rolled back or forged, or a tenant's entries were "
                               "added behind the append path; its next append would fork "
                               "its chain.", _TAMPER),
    "tenant_not_in_tree": _E(CRITICAL, "The tenant's entry is not the leaf the stored Merkle "
                             "tree holds at its seq: the entry or the tree changed after the "
                             "tree was built.", _TAMPER),
    "tenant_heads_mismatch": _E(CRITICAL, "The tenant heads a signed checkpoint committed to "
                                "are not those of the entries below its size: a tenant's "
                                "entries were removed, moved, added or rolled back.", _TAMPER),
    "rewritten_since_audit": _E(
        CRITICAL, "An entry an earlier passed audit verified has changed since.",
        "Audit the whole ledger against a signed checkpoint (`ledger audit --checkpoint`). "
        + _TAMPER),
    # -- checkpoints (ledger audit --checkpoint)
    "checkpoint_truncated": _E(CRITICAL, "The ledger holds fewer entries than a signed "
                               "checkpoint committed to: entries were removed.", _TAMPER),
    "checkpoint_inconsistent": _E(
        CRITICAL, "The first entries no longer hash to a signed checkpoint's root: history was "
        "rewritten (`range` holds the first difference).", _TAMPER),
    "stored_tree_inconsistent": _E(
        CRITICAL, "The stored Merkle tree that proofs are served from does not extend the "
        "checkpoint: proofs served now would not match it.",
        "Do not hand out proofs until the entries are restored from a backup. " + _TAMPER),
    "tree_larger_than_ledger": _E(CRITICAL, "The stored tree covers more entries than exist: "
                                  "entries were removed.", _TAMPER),
    "entries_gap": _E(CRITICAL, "A seq is missing among the entries a checkpoint covers.",
                      _TAMPER),
    "checkpoint_unverified": _E(
        HIGH, "The checkpoint file does not parse, or its signature does not verify with the "
        "given keys.",
        "Check that the file and the `--key` are the ones you kept; fetch the ledger's public "
        "key from a trusted copy, not from the server under audit."),
    "checkpoint_origin_mismatch": _E(HIGH, "The checkpoint is for another ledger.",
                                     "Use a checkpoint of this ledger (its origin line)."),
    # -- anchoring policy (docs/anchoring.md)
    "cosignature_invalid": _E(HIGH, "A configured witness's cosignature does not verify over "
                              "the checkpoint.", "Check the witness key given; ask the "
                              "witness operator; a forged cosignature is an attack."),
    "witness_quorum_not_met": _E(
        MEDIUM, "Fewer witnesses than required cosigned the checkpoint: nothing outside the "
        "ledger vouches for this tree.",
        "Sign a new checkpoint with the witnesses (`ledger checkpoint --witness NAME=URL`); "
        "until then the checkpoint is only the ledger's own word."),
    "timestamp_missing": _E(MEDIUM, "No time-stamp token came with the checkpoint.",
                            "Sign a new checkpoint with a TSA (`ledger checkpoint --tsa URL`)."),
    "timestamp_invalid": _E(HIGH, "A time-stamp token fails a check (`reason` says which).",
                            "Check the TSA certificates given; fetch a new token."),
    "timestamp_before_entry": _E(CRITICAL, "A time-stamp is earlier than an entry it covers: "
                                 "the entry's time was backdated.", _TAMPER),
    # -- the result contract
    "invalid_status": _E(MEDIUM, "The status is not VERIFIED, UNVERIFIABLE or BLOCKED.",
                         _CONTRACT),
    "proof_on_non_verified": _E(MEDIUM, "A result that is not VERIFIED carries a proof_ref.",
                                _CONTRACT),
    "verified_without_proof": _E(MEDIUM, "A VERIFIED result has no proof_ref.", _CONTRACT),
    "verified_without_evidence": _E(MEDIUM, "A VERIFIED result stores no evidence preimage: "
                                    "its proof cannot be recomputed.", _CONTRACT),
    "authoritative_inconsistent": _E(MEDIUM, "is_authoritative does not say whether there is "
                                     "a proof_ref.", _CONTRACT),
    "empty_agent_message": _E(MEDIUM, "The agent message is missing or empty.", _CONTRACT),
    "non_advisory_check": _E(MEDIUM, "An advisory check is not marked advisory_only.",
                             _CONTRACT),
    "attestation_on_non_verified": _E(MEDIUM, "A result that is not VERIFIED carries an "
                                      "attestation.", _CONTRACT),
    "policy:": _E(MEDIUM, "A rule of the engine policy matches the result (the code names the "
                  "rule), e.g. a VERIFIED result of an engine that never proves.",
                  "Review the engine's results with the producer; if the rule is wrong, change "
                  "the policy file (`--policy`)."),
    # -- custody
    "redaction_not_applied": _E(MEDIUM, "A payload a redaction erased is still stored.",
                                "Apply the erasure (`ledger redact` of the same order); the "
                                "data is still held though it should not be."),
    "redaction_invalid": _E(MEDIUM, "The redaction's request document is not a valid "
                            "ledger-redaction/1 order.", _CUSTODY),
    "redaction_role_invalid": _E(MEDIUM, "The redaction was not made by a custodian or an "
                                 "operator.", _CUSTODY),
    "redaction_target_invalid": _E(MEDIUM, "A redaction target does not exist, is not a "
                                   "result, is not earlier than the redaction, or belongs to "
                                   "another tenant than the redaction's.", _CUSTODY),
    "redaction_of_held_entry": _E(MEDIUM, "A redaction erased an entry under a legal hold in "
                                  "force.", "Tell the person responsible for the hold: data "
                                  "under hold was erased. " + _CUSTODY),
    "redaction_under_unreadable_hold": _E(
        MEDIUM, "A redaction erased an entry that a hold in force, whose order cannot be read, "
        "may have held.", "Find the hold's order with the custodian; until then treat the "
        "erasure as one of held data. " + _CUSTODY),
    "redaction_signature_invalid": _E(
        HIGH, "A redaction's signature does not verify with the ledger's keys: it was written "
        "without the ledger key.", "Treat the erasure as unauthorised: find who wrote it; the "
        "erased bytes can only come back from a backup. " + _TAMPER),
    "redaction_unsigned": _E(
        HIGH, "An unsigned redaction request: after a signed one it is a finding (written "
        "without the ledger key); before any, an abstention (an older ledger).",
        "Check the request against the custodian's records of erasures."),
    "hold_invalid": _E(MEDIUM, "The hold's order document is not a valid ledger-hold/1 order.",
                       _CUSTODY),
    "hold_role_invalid": _E(MEDIUM, "The hold was not placed by a custodian or an operator.",
                            _CUSTODY),
    "hold_target_invalid": _E(MEDIUM, "A held entry does not exist, is not a result, is not "
                              "earlier or belongs to another tenant than the hold's; or a "
                              "release names no hold in force.", _CUSTODY),
    # -- attestations
    **{code: _E(HIGH, text, _ATT) for code, text in {
        "attestation_malformed": "The stored attestation token does not decode.",
        "attestation_alg_not_allowed": "The token is not signed with ES256.",
        "attestation_typ": "The token's typ is not qwed-attestation+jwt.",
        "attestation_crit": "The token's header has crit.",
        "attestation_unknown_kid": "No key of the issuer active at this entry has the token's "
                                   "kid (unknown, retired or revoked).",
        "attestation_signature_invalid": "No active key under the kid verifies the signature.",
        "attestation_claims_missing": "A required claim is missing or has the wrong type.",
        "attestation_key_compromised": "The key that verifies the token was revoked as "
                                       "compromised since before this entry.",
        "attestation_not_yet_valid": "The token was issued more than 5 minutes after the "
                                     "entry was recorded.",
        "attestation_expired_at_record": "The token had expired when the entry was recorded.",
        "attestation_status_mismatch": "The signed status is not VERIFIED.",
        "attestation_proof_mismatch": "The signed proof hash is not the entry's proof_ref.",
        "attestation_query_mismatch": "The signed query hash does not hash the stored query.",
        "attestation_admission_mismatch": "The signed admission differs from the entry's.",
        "attestation_issuer_mismatch": "The signature verifies with another issuer's key: a "
                                       "forgery attempt.",
        "attestation_nbf_after_record": "The token's nbf is more than 5 minutes after the "
                                        "entry was recorded.",
        "attestation_version_unsupported": "The signed qwed.version is not 1.0.",
        "attestation_subject_mismatch": "The token's sub is not the signed query hash.",
        "attestation_engine_mismatch": "The signed engine is not the entry's engine.",
    }.items()},
    # -- abstention reasons
    "unknown_issuer_key": _E(REVIEW, "No key of the token's issuer was trusted at this entry: "
                             "its signature could not be judged.",
                             "If the issuer is legitimate, trust its keys (`ledger keys trust "
                             "--issuer ISS --jwks FILE`) and audit again."),
    "no_trust_store": _E(REVIEW, "The run was told not to check attestations "
                         "(--no-attestations).", "Audit again without --no-attestations."),
    "insufficient_evidence": _E(REVIEW, "An imported VERIFIED result whose source kept no "
                                "evidence preimage: its proof cannot be recomputed.",
                                "Accept it as the source's word, or ask the source for the "
                                "evidence."),
    "no_ledger_key": _E(REVIEW, "A checkpoint was given without --key: its signature was not "
                        "verified.", "Audit again with the ledger's public key (--key)."),
    "redacted": _E(INFO, "The payload was lawfully erased by a redaction entry (its seq is "
                   "given); every check that does not need its bytes still ran.",
                   "Nothing to fix: the erasure is recorded and audited as a redaction."),
}


def explain(code: str) -> dict[str, str]:
    """The explanation of ``code`` as served (``policy:<rule>`` shares one entry); an unknown
    code (a newer ledger's) gets a neutral one rather than an error."""
    e = EXPLANATIONS.get(code) or EXPLANATIONS.get(code.split(":")[0] + ":" if ":" in code
                                                  else code)
    if e is None:
        e = Explanation(MEDIUM, "A code this version does not know.",
                        "See the documentation of the ledger version that wrote it.")
    return e.to_dict(code)


# -- incidents ------------------------------------------------------------------------
_FIELD_RES = (re.compile(r"^column (\w+)"), re.compile(r"^payload (\w+)"),
              re.compile(r"^(result\.\w+)"))


def finding_field(finding: Mapping[str, Any]) -> str | None:
    """What a finding is about, when its code is about one field among several: the column
    of a ``column_mismatch``, the payload of a ``payload_*`` finding, the key of a
    ``result_envelope_mismatch`` (read from the finding's message, whose first words name
    it); None for the others."""
    message = finding.get("message")
    if not isinstance(message, str):
        return None
    for rx in _FIELD_RES:
        if m := rx.match(message):
            return m.group(1)
    return None


def seq_ranges(seqs: Iterable[int]) -> list[list[int]]:
    """Sorted distinct seqs as inclusive ``[first, last]`` runs of consecutive seqs."""
    out: list[list[int]] = []
    for s in sorted(set(seqs)):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def group_findings(findings: Iterable[Mapping[str, Any]], max_ranges: int = 50,
                   ) -> list[dict[str, Any]]:
    """The incidents of a run's findings: one per (code, class, field), most severe first,
    then by count (largest first) and code.  Each: ``code``, ``class``, ``field``,
    ``count``, ``first_seq``, ``last_seq`` (null when no finding of it has a seq),
    ``ranges`` (the first ``max_ranges`` runs of consecutive seqs, ``[first, last]``),
    ``range_count`` (all of them), ``message`` (of its first finding) and ``explain``."""
    groups: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for f in findings:
        code, cls = str(f.get("code")), str(f.get("class"))
        key = (code, cls, finding_field(f))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"code": code, "class": cls, "field": key[2], "count": 0,
                               "seqs": [], "message": f.get("message")}
        g["count"] += 1
        if isinstance(f.get("seq"), int):
            g["seqs"].append(f["seq"])
    out = []
    for g in groups.values():
        seqs = g.pop("seqs")
        ranges = seq_ranges(seqs)
        g.update(first_seq=min(seqs) if seqs else None, last_seq=max(seqs) if seqs else None,
                 ranges=ranges[:max_ranges], range_count=len(ranges),
                 explain=explain(g["code"]))
        out.append(g)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    out.sort(key=lambda g: (rank.get(g["explain"]["severity"], len(rank)), -g["count"],
                            g["code"], g["field"] or ""))
    return out


# -- the table in docs/audit.md ------------------------------------------------------
MARK_BEGIN = "<!-- triage table: generated from ledger/core/explain.py, do not edit -->"
MARK_END = "<!-- end of the triage table -->"


def render_markdown() -> str:
    """The triage table of docs/audit.md (between :data:`MARK_BEGIN` and :data:`MARK_END`),
    most severe first, then by code."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    lines = ["| code | severity | what it means | next step |", "|---|---|---|---|"]
    for code, e in sorted(EXPLANATIONS.items(), key=lambda kv: (rank[kv[1].severity], kv[0])):
        shown = "policy:<rule id>" if code == "policy:" else code
        lines.append(f'| <a id="{anchor(code)}"></a>`{shown}` | {e.severity} | '
                     f"{e.explanation} | {e.next_step} |")
    return "\n".join([MARK_BEGIN, *lines, MARK_END])
