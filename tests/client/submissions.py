"""Valid submissions built with the standard library only (the producer side)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def verified(i: int, tag: str = "t") -> dict[str, Any]:
    """A VERIFIED math result whose proof_ref is SHA-256 of its evidence."""
    evidence = {"claimed": i, "calculated": i, "tag": tag}
    ref = "sha256:" + hashlib.sha256(json.dumps(evidence, sort_keys=True).encode()).hexdigest()
    return {"result": {"status": "VERIFIED", "agent_message": f"claim {i} verified",
                       "developer_fields": {"i": i}, "proof_ref": ref, "is_authoritative": True},
            "engine": "math", "evidence": evidence, "subject": f"{tag}-{i}"}


def blocked(i: int, tag: str = "t") -> dict[str, Any]:
    return {"result": {"status": "BLOCKED", "agent_message": "Verification blocked",
                       "developer_fields": {"constraint_id": "sql.unsafe"}, "proof_ref": None},
            "engine": "sql", "subject": f"{tag}-{i}"}


def mixed(i: int, tag: str = "t") -> dict[str, Any]:
    return verified(i, tag) if i % 2 == 0 else blocked(i, tag)
