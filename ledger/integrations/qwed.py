"""QWED adapter: ledger submissions from QWED 8.0's own objects, and a recorder a QWED
gateway calls for every result.

The ledger never imports QWED; this module only does inside :class:`EvidenceRecorder`
(``pip install ledger[qwed]``).  A submission is built from

* the result: a ``DiagnosticResult`` (anything with ``to_dict()``), its ``to_dict()``,
  or the flattened API response (``merge_diagnostic_result``) — passed on as is, the
  ledger accepts both shapes and an attestation inside the result;
* the evidence: the exact string QWED hashed into ``proof_ref`` (``proof_preimage``), or
  the evidence object (``evidence``); for a VERIFIED result without either, the
  preimage :class:`EvidenceRecorder` saw QWED hash;
* the query, the engine name (``math``, ``logic``, ``sql``, ...), the admission.

Recipe (docs/producers.md)::

    recorder = EvidenceRecorder()            # wraps qwed_new's compute_proof_ref
    client = LedgerClient(url, token, spool_dir="/var/spool/qwed")
    gateway = QwedGateway(client, recorder)
    with recorder:
        dr = SQLVerifier().verify_sql(query, ddl)
        dr = attest_and_enforce(dr, engine="sql", query=query)
        gateway.record(dr, engine="sql", query=query)
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from typing import Any, Self

ENGINE_RE = re.compile(r"[a-z0-9_.-]{1,64}")
ADMISSIONS = ("ADMIT", "BLOCKED")


def result_dict(result: Any) -> dict[str, Any]:
    """The wire dict of a QWED result (``DiagnosticResult`` or an already-built dict)."""
    if isinstance(result, dict):
        return dict(result)
    to_dict = getattr(result, "to_dict", None)
    if callable(to_dict):
        out = to_dict()
        if isinstance(out, dict):
            return out
    raise TypeError("a QWED result is a DiagnosticResult, its to_dict() or the API response")


def preimage_of(evidence: Any) -> str:
    """The string QWED's ``compute_proof_ref`` hashes for ``evidence``: a string as is,
    anything else ``json.dumps(evidence, sort_keys=True)``."""
    return evidence if isinstance(evidence, str) else json.dumps(evidence, sort_keys=True)


def proof_ref_of(preimage: str) -> str:
    return "sha256:" + hashlib.sha256(preimage.encode("utf-8")).hexdigest()


def submission(result: Any, *, engine: str, query: str | None = None,
               evidence: Any = None, proof_preimage: str | None = None,
               admission: str | None = None, subject: str | None = None,
               idempotency_key: str | None = None, meta: dict[str, Any] | None = None,
               recorder: EvidenceRecorder | None = None) -> dict[str, Any]:
    """A ledger submission (docs/submissions.md) for one QWED result.

    Raises ValueError when the engine name is not a ledger engine name, or a VERIFIED
    result comes with no evidence and ``recorder`` did not see its proof_ref hashed.
    """
    engine = engine.lower()
    if not ENGINE_RE.fullmatch(engine):
        raise ValueError(f"engine {engine!r} does not match [a-z0-9_.-]{{1,64}}")
    res = result_dict(result)
    sub: dict[str, Any] = {"result": res, "engine": engine}
    if res.get("status") == "VERIFIED":
        if proof_preimage is not None:
            sub["proof_preimage"] = proof_preimage
        elif evidence is not None:
            sub["proof_preimage"] = preimage_of(evidence)
        else:
            pre = recorder.preimage(res.get("proof_ref")) if recorder is not None else None
            if pre is None:
                raise ValueError("a VERIFIED result needs the evidence QWED hashed into its "
                                 "proof_ref: pass evidence=, proof_preimage= or a recorder")
            sub["proof_preimage"] = pre
    if query is not None:
        sub["query"] = query
    if admission is not None and admission in ADMISSIONS:
        sub["admission"] = admission
    for name, value in (("subject", subject), ("idempotency_key", idempotency_key),
                        ("meta", meta)):
        if value is not None:
            sub[name] = value
    return sub


class EvidenceRecorder:
    """Remembers the exact preimage behind every proof_ref QWED computes while active.

    QWED's engines build VERIFIED results with ``DiagnosticResult.verified(...)``, which
    hashes its evidence with the module global ``qwed_new.core.diagnostics.
    compute_proof_ref``; inside ``with recorder:`` that function is wrapped to keep
    ``{proof_ref: preimage}`` (at most ``max_items``, oldest dropped).  Thread-safe;
    re-entrant across threads (the wrapper is installed once).
    """

    def __init__(self, max_items: int = 10_000) -> None:
        self.max_items = max_items
        self._seen: dict[str, str] = {}
        self._lock = threading.Lock()
        self._depth = 0
        self._original: Any = None

    def remember(self, evidence: Any, proof_ref: str) -> None:
        pre = preimage_of(evidence)
        if proof_ref_of(pre) != proof_ref:
            return  # not the recipe we know: never record a preimage that does not hash
        with self._lock:
            self._seen.pop(proof_ref, None)
            self._seen[proof_ref] = pre
            while len(self._seen) > self.max_items:
                self._seen.pop(next(iter(self._seen)))

    def preimage(self, proof_ref: Any) -> str | None:
        with self._lock:
            return self._seen.get(proof_ref) if isinstance(proof_ref, str) else None

    def __enter__(self) -> Self:
        from qwed_new.core import diagnostics  # the optional extra: ledger[qwed]

        with self._lock:
            if self._depth == 0:
                original = self._original = diagnostics.compute_proof_ref

                def recording(evidence: Any) -> str:
                    ref: str = original(evidence)
                    self.remember(evidence, ref)
                    return ref

                diagnostics.compute_proof_ref = recording
            self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        from qwed_new.core import diagnostics

        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                diagnostics.compute_proof_ref = self._original


class QwedGateway:
    """What a QWED gateway calls once per result: builds the submission and appends it
    through a :class:`ledger.client.LedgerClient` (spooled when the ledger is down)."""

    def __init__(self, client: Any, recorder: EvidenceRecorder | None = None, *,
                 meta: dict[str, Any] | None = None) -> None:
        self.client, self.recorder, self.meta = client, recorder, meta

    def record(self, result: Any, *, engine: str, query: str | None = None,
               **kw: Any) -> Any:
        """Append one result; returns the client's AppendOutcome."""
        kw.setdefault("meta", self.meta)
        return self.client.append(submission(result, engine=engine, query=query,
                                             recorder=self.recorder, **kw))


class OrganisationGateways:
    """A gateway that serves several QWED organisations: each organisation's results go
    to its own :class:`QwedGateway`, whose client holds a producer token of that
    organisation's tenant (``ledger token issue --role producer --tenant T``), so each
    organisation's results are appended to its tenant's chain (docs/producers.md,
    "Tenants").

    ``gateways`` maps QWED's ``organization_id`` (an int, or its text) to a gateway.  A
    result of an organisation that is not mapped is refused with ValueError and nothing is
    sent: a result is never written into another organisation's tenant by default.
    """

    def __init__(self, gateways: dict[Any, QwedGateway]) -> None:
        if not gateways:
            raise ValueError("map at least one organisation to a gateway")
        self.gateways: dict[str, QwedGateway] = {}
        for org, g in gateways.items():
            key = self._key(org)
            if key in self.gateways:  # 1 and "1" are one organisation
                raise ValueError(f"organization_id {org!r} is mapped twice")
            self.gateways[key] = g

    @staticmethod
    def _key(organization_id: Any) -> str:
        if isinstance(organization_id, bool) or \
                not isinstance(organization_id, (int, str)) or str(organization_id) == "":
            raise ValueError("organization_id is QWED's organisation id: an int or its text")
        return str(organization_id)

    def gateway(self, organization_id: Any) -> QwedGateway:
        """The gateway of an organisation; ValueError for one that is not mapped."""
        got = self.gateways.get(self._key(organization_id))
        if got is None:
            raise ValueError(f"organization_id {organization_id!r} is not mapped to a tenant")
        return got

    def record(self, result: Any, *, organization_id: Any, engine: str,
               query: str | None = None, **kw: Any) -> Any:
        """Append one result of ``organization_id`` through its gateway (its tenant)."""
        return self.gateway(organization_id).record(result, engine=engine, query=query, **kw)
