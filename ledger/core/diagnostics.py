"""The upstream ``DiagnosticResult`` contract (QWED 8.0 wire shape), pure stdlib.

Three statuses, three disclosure layers (``agent_message``, ``developer_fields``,
``proof_ref``), and the invariants the producer enforces in ``__post_init__``:

* ``agent_message`` is non-empty after strip;
* VERIFIED requires a non-empty ``proof_ref``; UNVERIFIABLE/BLOCKED require None;
* ``attestation`` (QWED 8.0) is a non-empty string and only on VERIFIED.

The ledger is stricter than upstream in one place: ``proof_ref`` must be
``sha256:`` + 64 lowercase hex (upstream does not check the format).  That
check lives in :mod:`ledger.core.submission`, so results built here stay
constructible exactly as upstream builds them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

PROOF_REF_PREFIX = "sha256:"
# json.dumps(evidence, sort_keys=True) with every other argument at its default, built once
# (json.dumps builds an encoder per call when any argument is not the default)
_PREIMAGE_ENCODER = json.JSONEncoder(sort_keys=True)


class DiagnosticStatus(str, Enum):  # noqa: UP042 -- StrEnum would change str() and f-strings
    VERIFIED = "VERIFIED"
    UNVERIFIABLE = "UNVERIFIABLE"
    BLOCKED = "BLOCKED"


@dataclass(frozen=True)
class AdvisoryCheck:
    """A non-verdict-affecting check; ``advisory_only`` is always True."""

    name: str
    advisory_only: bool = True
    constraint_id: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.advisory_only is not True:
            raise ValueError(
                "AdvisoryCheck.advisory_only must be True — "
                "advisory checks must never influence the verification verdict."
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "advisory_only": self.advisory_only,
            "constraint_id": self.constraint_id,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdvisoryCheck:
        raw = data.get("advisory_only", True)
        if isinstance(raw, bool):
            advisory_only = raw
        elif isinstance(raw, int) and raw in (0, 1):
            advisory_only = bool(raw)
        else:
            raise ValueError("AdvisoryCheck.advisory_only must be a bool or integer 0/1")
        return cls(
            name=data.get("name", ""),
            advisory_only=advisory_only,
            constraint_id=data.get("constraint_id") or "",
            details=data.get("details", {}),
        )


def compute_proof_ref(evidence: Any) -> str:
    """``proof_ref`` exactly as the upstream producer computes it.

    A string is hashed raw (UTF-8, no JSON quoting).  Anything else is hashed as
    ``json.dumps(evidence, sort_keys=True)`` with Python's defaults otherwise:
    separators ``", "``/``": "``, ``ensure_ascii=True``, ``allow_nan=True``,
    floats by ``repr``.  Raises ValueError if the evidence is not serializable.
    """
    return PROOF_REF_PREFIX + hashlib.sha256(proof_preimage(evidence).encode("utf-8")).hexdigest()


def proof_preimage(evidence: Any) -> str:
    """The exact string whose SHA-256 is ``compute_proof_ref(evidence)``."""
    if isinstance(evidence, str):
        return evidence
    try:
        return _PREIMAGE_ENCODER.encode(evidence)
    except (TypeError, ValueError) as exc:
        raise ValueError("Proof evidence must be JSON-serializable for proof_ref hashing: "
                         f"{exc}") from exc


@dataclass(frozen=True)
class DiagnosticResult:
    status: DiagnosticStatus
    agent_message: str
    developer_fields: dict[str, Any] = field(default_factory=dict)
    proof_ref: str | None = None
    attestation: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, DiagnosticStatus):
            raise ValueError(f"status must be a DiagnosticStatus, not {self.status!r}")
        if not isinstance(self.agent_message, str) or not self.agent_message.strip():
            raise ValueError("agent_message must be non-empty — Layer 1 diagnostics are mandatory")
        if self.attestation is not None and (
            self.status is not DiagnosticStatus.VERIFIED
            or not isinstance(self.attestation, str)
            or not self.attestation
        ):
            raise ValueError("attestation is a non-empty token, and only a VERIFIED result "
                             "carries one")
        if self.status is DiagnosticStatus.VERIFIED and not self.proof_ref:
            raise ValueError("VERIFIED status requires proof_ref is not None and non-empty")
        if self.status is not DiagnosticStatus.VERIFIED and self.proof_ref is not None:
            raise ValueError(f"{self.status.value} status requires proof_ref is None")

    # -- properties -------------------------------------------------------
    @property
    def is_verified(self) -> bool:
        return self.status is DiagnosticStatus.VERIFIED

    @property
    def is_authoritative(self) -> bool:
        return self.proof_ref is not None

    @property
    def is_fail_closed(self) -> bool:
        return self.status in (DiagnosticStatus.UNVERIFIABLE, DiagnosticStatus.BLOCKED)

    @property
    def constraint_id(self) -> str | None:
        return self.developer_fields.get("constraint_id")

    @property
    def advisory_checks(self) -> list[AdvisoryCheck]:
        """Deserialized advisory checks; malformed items are skipped (never raises)."""
        raw = self.developer_fields.get("advisory_checks", [])
        if not isinstance(raw, list):
            return []
        out: list[AdvisoryCheck] = []
        for item in raw:
            if isinstance(item, AdvisoryCheck):
                out.append(item)
            elif isinstance(item, dict):
                try:
                    out.append(AdvisoryCheck.from_dict(item))
                except ValueError:
                    continue
        return out

    # -- wire shape -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        fields = dict(self.developer_fields)
        checks = fields.get("advisory_checks")
        if isinstance(checks, list):
            fields["advisory_checks"] = [
                c.to_dict() if isinstance(c, AdvisoryCheck) else c for c in checks
            ]
        out: dict[str, Any] = {
            "status": self.status.value,
            "agent_message": self.agent_message,
            "developer_fields": fields,
            "proof_ref": self.proof_ref,
            "is_authoritative": self.is_authoritative,
        }
        if self.attestation is not None:
            out["attestation"] = self.attestation
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, keep_attestation: bool = False) -> DiagnosticResult:
        """Deserialize the ``to_dict`` shape.

        Like upstream, ``attestation`` is not read unless ``keep_attestation``;
        a missing status defaults to UNVERIFIABLE.  Raises ValueError/TypeError.
        """
        status = data.get("status", "UNVERIFIABLE")
        if not isinstance(status, str):
            raise TypeError(f"from_dict: status must be a string, not {type(status).__name__}")
        try:
            status_enum = DiagnosticStatus(status)
        except ValueError:
            raise ValueError(
                f"from_dict: invalid status {status!r} — must be one of: "
                "VERIFIED, UNVERIFIABLE, BLOCKED"
            ) from None
        agent_message = data.get("agent_message")
        if not agent_message or not str(agent_message).strip():
            raise ValueError("from_dict: 'agent_message' is missing or empty")
        return cls(
            status=status_enum,
            agent_message=agent_message,
            developer_fields=data.get("developer_fields", {}),
            proof_ref=data.get("proof_ref"),
            attestation=data.get("attestation") if keep_attestation else None,
        )

    # -- factories --------------------------------------------------------
    @classmethod
    def verified(cls, agent_message: str, developer_fields: dict[str, Any], evidence: Any,
                 proof_data: str | None = None) -> DiagnosticResult:
        return cls(DiagnosticStatus.VERIFIED, agent_message, developer_fields,
                   compute_proof_ref(proof_data if proof_data is not None else evidence))

    @classmethod
    def disproven(cls, agent_message: str, developer_fields: dict[str, Any], evidence: Any,
                  proof_data: str | None = None) -> DiagnosticResult:
        """A claim proven false: VERIFIED with ``developer_fields.is_valid = False``."""
        return cls.verified(agent_message, {**developer_fields, "is_valid": False}, evidence,
                            proof_data)

    @classmethod
    def unverifiable(cls, agent_message: str,
                     developer_fields: dict[str, Any] | None = None) -> DiagnosticResult:
        return cls(DiagnosticStatus.UNVERIFIABLE, agent_message, developer_fields or {}, None)

    @classmethod
    def blocked(cls, agent_message: str,
                developer_fields: dict[str, Any] | None = None) -> DiagnosticResult:
        return cls(DiagnosticStatus.BLOCKED, agent_message, developer_fields or {}, None)

    @classmethod
    def from_legacy_dict(cls, data: dict[str, Any], engine: str = "unknown") -> DiagnosticResult:
        """Migrate a pre-contract engine dict (fail-closed states only).

        Raises ValueError for legacy VERIFIED and DISPROVEN (their proof
        artifacts were never kept) and for any unrecognized truthy pattern.
        """
        legacy_status = data.get("status", "")
        is_correct = data.get("is_correct", data.get("is_verified", data.get("verified", False)))
        error = data.get("error")
        message = data.get("message", data.get("reasoning", ""))

        if legacy_status == "VERIFIED":
            raise ValueError(
                "from_legacy_dict cannot migrate VERIFIED results — proof artifacts were not "
                "retained by legacy engines. Use DiagnosticResult.verified() with evidence."
            )
        if legacy_status == "DISPROVEN":
            raise ValueError(
                "from_legacy_dict cannot migrate DISPROVEN results — a counter-proof is VERIFIED "
                "with is_valid False and needs a proof_ref. Use DiagnosticResult.disproven()."
            )
        if legacy_status == "BLOCKED":
            return cls.blocked(message or "Verification blocked", {
                "constraint_id": f"{engine}.legacy_blocked",
                "legacy_error": error,
                "legacy_data": {k: v for k, v in data.items()
                                if k not in ("status", "is_correct", "error")},
            })
        if legacy_status in ("ERROR", "SYNTAX_ERROR", "PARSE_ERROR"):
            return cls.blocked("Verification blocked — processing error", {
                "constraint_id": f"{engine}.legacy_error",
                "legacy_error": error or message,
                "legacy_status": legacy_status,
            })
        if legacy_status in ("CORRECTION_NEEDED", "NOT_EQUIVALENT", "INCONCLUSIVE",
                             "INSUFFICIENT_EVIDENCE", "NO_PROOF"):
            return cls.unverifiable(message or "Verification inconclusive", {
                "constraint_id": f"{engine}.legacy_inconclusive",
                "legacy_status": legacy_status,
                "legacy_data": {k: v for k, v in data.items()
                                if k not in ("status", "is_correct", "error", "message")},
            })
        if not bool(is_correct):
            if error:
                return cls.blocked("Verification blocked", {
                    "constraint_id": f"{engine}.legacy_error",
                    "legacy_error": error,
                })
            return cls.unverifiable(message or "Verification inconclusive", {
                "constraint_id": f"{engine}.legacy_inconclusive",
            })
        raise ValueError(
            f"from_legacy_dict cannot interpret unrecognized legacy data from {engine!r}: "
            f"status={legacy_status!r}, is_correct={is_correct!r}."
        )
