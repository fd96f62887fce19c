"""The QWED 8.0 re-executors: re-run QWED's deterministic engines on a ledger entry's
stored inputs (docs/reverify.md has the per-engine table and the reasons).

Registered as ``qwed`` in the ``ledger.reexecutors`` entry-point group; the ledger imports
this module only when a re-verification runs, and ``qwed_new`` only inside ``execute``
(which runs in a sandboxed worker process).  What was read in QWED 8.0.0's code:

* ``math`` -- the ``/verify/math`` route (``qwed_new/api/main.py``): an expression with
  ``=`` is an identity decided by ``simplify(left - right)`` with
  ``symbolic_difference_status`` and ``identity_domains_match``; otherwise the expression
  is simplified (and evaluated when numeric).  The input is the stored query (the
  expression the attestation's ``query_hash`` binds).  ``VerificationEngine.verify_math``
  results (evidence with ``expression`` and ``claimed_value``) are re-run with that call.
* ``logic`` -- ``LogicVerifier.verify_logic(variables, constraints)``: the inputs are the
  result's ``symbol_table`` and ``constraints``; the proof is ``str`` of Z3's assertions.
  The model is not compared (any satisfying model is a witness; Z3 versions may find
  another); an ``UNKNOWN`` verdict (the solver timed out) is not deterministic.
* ``sql`` -- ``SQLVerifier.verify_sql``: the query is the stored query; the configuration
  (DDL, dialect, complexity limits, blocked columns, ``allow_destructive``) is the stored
  evidence, which records all of it.
* ``schema`` -- ``SchemaVerifier.verify(instance, schema)``; ``strict`` is not stored: the
  default (True) first, then False.  QWED iterates ``set(schema["required"])``, so the
  order of ``missing_required`` issues -- hashed into the proof -- depends on the
  producer's string hash seed: a fresh run whose issues are the stored ones in another
  such order is re-hashed in the stored order (:func:`align_required`).
* ``code`` -- ``CodeVerifier.verify_code(code, language)``: the code is the stored query
  (else the evidence's ``code``), the language the evidence's.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.core.reexec import (
    INPUTS_NOT_STORED,
    INPUTS_UNREADABLE,
    NOT_DETERMINISTIC,
    REDACTED,
    Difference,
    Fresh,
    NotReexecutable,
    Plan,
    Stored,
    compare_results,
    proof_ref_of,
)

QWED_VERSION = "8.0.0"

# engine -> the result fields (besides status and proof_ref) that are its verdict
VERDICT: dict[str, tuple[str, ...]] = {
    "math": ("developer_fields.is_valid", "developer_fields.result",
             "developer_fields.simplified_difference", "developer_fields.simplified",
             "developer_fields.exact_value", "developer_fields.is_correct",
             "developer_fields.calculated_precise"),
    "logic": ("developer_fields.deterministic_verdict", "developer_fields.constraints"),
    "sql": ("developer_fields.constraint_id", "developer_fields.is_valid",
            "developer_fields.malicious_classification", "developer_fields.critical_count"),
    "schema": ("developer_fields.constraint_id", "developer_fields.is_valid",
               "developer_fields.summary.errors"),
    "code": ("developer_fields.constraint_id", "developer_fields.is_safe",
             "developer_fields.is_valid", "developer_fields.critical_count"),
}
# engines QWED has whose results are not re-executed, and why (docs/reverify.md)
NOT_REEXECUTED: dict[str, tuple[str, str]] = {
    "fact": (INPUTS_NOT_STORED, "the context the claim was checked against is not stored "
             "(and the verdict is heuristic: never VERIFIED)"),
    "image": (INPUTS_NOT_STORED, "the image bytes are not stored"),
    "stats": (NOT_DETERMINISTIC, "runs LLM-written code over a data frame that is not stored"),
    "consensus": (NOT_DETERMINISTIC, "asks several LLM providers"),
    "reasoning": (NOT_DETERMINISTIC, "asks an LLM"),
    "taint": (INPUTS_NOT_STORED, "QWED 8.0 has no DiagnosticResult for it: no stored "
              "evidence to re-run"),
}


def _json_obj(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _need(entry: Stored, name: str) -> NotReexecutable | None:
    if name in entry.redacted:
        return NotReexecutable(REDACTED, f"the {name} payload was erased")
    return None


class QwedReexecutor:
    """Re-executes QWED 8.0's math, logic, sql, schema and code engines (module doc)."""

    name = "qwed"
    engines = tuple(VERDICT) + tuple(NOT_REEXECUTED)

    def version(self, engine: str) -> str:
        try:
            from importlib.metadata import version

            return f"qwed {version('qwed')}"
        except Exception:  # noqa: BLE001 -- any metadata failure: say it is unknown
            return "qwed unknown"

    def prepare(self) -> None:
        """Import QWED's engines (in each worker, before its first plan)."""
        import qwed_new.core.code_verifier
        import qwed_new.core.diagnostics
        import qwed_new.core.logic_verifier
        import qwed_new.core.safe_parser
        import qwed_new.core.schema_verifier
        import qwed_new.core.sql_verifier
        import qwed_new.core.verifier  # noqa: F401

    # -- plans (in the job's process: cheap, no engine) -----------------------------
    def plan(self, entry: Stored) -> Plan | NotReexecutable:
        if entry.engine in NOT_REEXECUTED:
            reason, detail = NOT_REEXECUTED[entry.engine]
            return NotReexecutable(reason, detail)
        return getattr(self, f"_plan_{entry.engine}")(entry)  # type: ignore[no-any-return]

    def _plan_math(self, entry: Stored) -> Plan | NotReexecutable:
        ev = _json_obj(entry.preimage)
        if ev is not None and "expression" in ev and "claimed_value" in ev:
            expr = entry.query if entry.query is not None else ev["expression"]
            return Plan("math", "verify_math", {
                "expression": expr, "claimed_value": ev["claimed_value"],
                "use_decimal": ev.get("precision_mode") == "decimal",
                "extra": {k: v for k, v in ev.items() if k == "is_valid"}},
                {"expression": "query" if entry.query is not None else "evidence",
                 "claimed_value": "evidence"})
        if entry.query is None:
            return _need(entry, "query") or NotReexecutable(
                INPUTS_NOT_STORED, "the expression (the query) is not stored")
        dev = (entry.result or {}).get("developer_fields") or {}
        if isinstance(dev, dict) and dev.get("error") == "domain error":
            return NotReexecutable(INPUTS_NOT_STORED, "the request's context (domain) "
                                   "is not stored")
        return Plan("math", "route", {"expression": entry.query}, {"expression": "query"})

    def _plan_logic(self, entry: Stored) -> Plan | NotReexecutable:
        if entry.result is None:
            return _need(entry, "result") or NotReexecutable(
                INPUTS_NOT_STORED, "the result document is not stored")
        dev = entry.result.get("developer_fields")
        if not isinstance(dev, dict) or "symbol_table" not in dev or "constraints" not in dev:
            return NotReexecutable(INPUTS_UNREADABLE, "not a verify_logic result (no "
                                   "symbol_table and constraints)")
        if dev.get("deterministic_verdict") not in ("SAT", "UNSAT"):
            return NotReexecutable(NOT_DETERMINISTIC, "the solver's verdict was "
                                   f"{dev.get('deterministic_verdict')!r} (a timeout)")
        table, constraints = dev["symbol_table"], dev["constraints"]
        if not (isinstance(table, list) and all(
                isinstance(t, dict) and isinstance(t.get("name"), str)
                and isinstance(t.get("type"), str) for t in table)
                and isinstance(constraints, list)
                and all(isinstance(c, str) for c in constraints)):
            return NotReexecutable(INPUTS_UNREADABLE, "symbol_table or constraints are not "
                                   "what verify_logic takes")
        prove_unsat = dev.get("explanation") not in (None, "Constraints are unsatisfiable")
        return Plan("logic", "verify_logic", {
            "variables": {t["name"]: t["type"] for t in table}, "constraints": constraints,
            "prove_unsat": prove_unsat},
            {"variables": "result.developer_fields.symbol_table",
             "constraints": "result.developer_fields.constraints"})

    def _plan_sql(self, entry: Stored) -> Plan | NotReexecutable:
        ev = _json_obj(entry.preimage)
        if ev is None:
            return _need(entry, "preimage") or NotReexecutable(
                INPUTS_NOT_STORED, "the configuration (DDL, dialect, limits) is stored only "
                "with the evidence of a VERIFIED result")
        query = entry.query if entry.query is not None else ev.get("query")
        if not isinstance(query, str):
            return _need(entry, "query") or NotReexecutable(INPUTS_NOT_STORED,
                                                            "the query is not stored")
        return Plan("sql", "verify_sql", {
            "query": query, "schema_ddl": ev.get("schema_ddl"),
            "dialect": ev.get("dialect", "postgres"),
            "check_complexity": ev.get("check_complexity", True),
            "allow_destructive": bool(ev.get("allow_destructive", False)),
            "blocked_columns": ev.get("blocked_columns") or [],
            "limits": ev.get("limits") or {}},
            {"query": "query" if entry.query is not None else "evidence",
             "configuration": "evidence"})

    def _plan_schema(self, entry: Stored) -> Plan | NotReexecutable:
        ev = _json_obj(entry.preimage)
        if ev is None or "schema" not in ev or "instance" not in ev:
            return _need(entry, "preimage") or NotReexecutable(
                INPUTS_NOT_STORED, "the schema and instance are stored only with the "
                "evidence of a VERIFIED result")
        return Plan("schema", "verify", {"instance": ev["instance"], "schema": ev["schema"]},
                    {"instance": "evidence", "schema": "evidence"})

    def _plan_code(self, entry: Stored) -> Plan | NotReexecutable:
        ev = _json_obj(entry.preimage) or {}
        dev = (entry.result or {}).get("developer_fields") or {}
        code = entry.query if entry.query is not None else ev.get("code")
        if not isinstance(code, str):
            return _need(entry, "query") or NotReexecutable(INPUTS_NOT_STORED,
                                                            "the code is not stored")
        lang = ev.get("language") or (dev.get("language") if isinstance(dev, dict) else None)
        return Plan("code", "verify_code", {"code": code, "language": lang or "python"},
                    {"code": "query" if entry.query is not None else "evidence"})

    # -- execution (in a sandboxed worker) --------------------------------------------
    def execute(self, plan: Plan) -> Fresh:
        from ledger.integrations.qwed import EvidenceRecorder, result_dict

        recorder = EvidenceRecorder(max_items=16)
        with recorder:
            fresh = getattr(self, f"_run_{plan.engine}")(plan.call, plan.inputs)
        if isinstance(fresh, Fresh):
            return fresh
        res = result_dict(fresh)
        res.pop("attestation", None)
        return Fresh(res, recorder.preimage(res.get("proof_ref")))

    def _run_math(self, call: str, inp: dict[str, Any]) -> Any:
        if call == "verify_math":
            from qwed_new.core.verifier import VerificationEngine

            calc = VerificationEngine().verify_math(inp["expression"], inp["claimed_value"],
                                                    use_decimal=inp["use_decimal"])
            evidence = {"expression": inp["expression"], **calc}
            pre = json.dumps(evidence, sort_keys=True)
            status = "BLOCKED" if "error" in calc else "VERIFIED"
            return Fresh({"status": status, "developer_fields": dict(calc),
                          "proof_ref": proof_ref_of(pre) if status == "VERIFIED" else None},
                         pre if status == "VERIFIED" else None)
        return _math_route(inp["expression"])

    def _run_logic(self, call: str, inp: dict[str, Any]) -> Any:
        from qwed_new.core.logic_verifier import LogicVerifier

        return LogicVerifier().verify_logic(inp["variables"], inp["constraints"],
                                            prove_unsat=inp["prove_unsat"])

    def _run_sql(self, call: str, inp: dict[str, Any]) -> Any:
        from qwed_new.core.sql_verifier import SQLVerifier

        v = SQLVerifier(blocked_columns=set(inp["blocked_columns"]),
                        complexity_limits=inp["limits"],
                        allow_destructive=inp["allow_destructive"])
        return v.verify_sql(inp["query"], inp["schema_ddl"], dialect=inp["dialect"],
                            check_complexity=inp["check_complexity"])

    def _run_schema(self, call: str, inp: dict[str, Any]) -> Any:
        from qwed_new.core.schema_verifier import SchemaVerifier

        return SchemaVerifier().verify(inp["instance"], inp["schema"],
                                       strict=inp.get("strict", True))

    def _run_code(self, call: str, inp: dict[str, Any]) -> Any:
        from qwed_new.core.code_verifier import CodeVerifier

        return CodeVerifier().verify_code(inp["code"], inp["language"])

    # -- comparison (in the job's process) ------------------------------------------
    def compare(self, entry: Stored, fresh: Fresh) -> list[Difference]:
        if entry.engine == "schema":
            fresh = align_required(entry.preimage, fresh)
        if entry.engine == "math" and "claimed_value" in (_json_obj(entry.preimage) or {}):
            return compare_results(entry, fresh, ("developer_fields.is_correct",
                                                  "developer_fields.calculated_precise",
                                                  "developer_fields.status"))
        return compare_results(entry, fresh, VERDICT.get(entry.engine, ()))

    def retry(self, entry: Stored, plan: Plan, differences: list[Difference]) -> Plan | None:
        """A second plan when the first disagrees on something not stored (schema:
        ``strict``); None: the first outcome stands."""
        if plan.engine == "schema" and "strict" not in plan.inputs:
            return Plan(plan.engine, plan.call, {**plan.inputs, "strict": False},
                        {**plan.source, "strict": "retried: not stored"})
        return None


def align_required(stored_preimage: str | None, fresh: Fresh) -> Fresh:
    """The fresh schema result re-hashed with its ``missing_required`` issues in the stored
    order, when the fresh issues are the stored ones with only those reordered (QWED
    iterates a set of property names: the order follows the process's string hashing).
    Anything else is returned unchanged."""
    a, b = _json_obj(stored_preimage), _json_obj(fresh.preimage)
    if a is None or b is None or a.get("issues") == b.get("issues"):
        return fresh
    sa, sb = a.get("issues"), b.get("issues")
    if not (isinstance(sa, list) and isinstance(sb, list) and len(sa) == len(sb)):
        return fresh

    def key(i: Any) -> str:
        return json.dumps(i, sort_keys=True)

    def req(i: Any) -> bool:
        return isinstance(i, dict) and i.get("type") == "missing_required"

    if [key(x) for x in sa if not req(x)] != [key(x) for x in sb if not req(x)] or \
            sorted(key(x) for x in sa if req(x)) != sorted(key(x) for x in sb if req(x)) or \
            [req(x) for x in sa] != [req(x) for x in sb]:
        return fresh
    evidence = {**b, "issues": sa}
    pre = _schema_proof_data(evidence)
    res = dict(fresh.result)
    dev = dict(res.get("developer_fields") or {})
    if isinstance(dev.get("issues"), list):
        dev["issues"] = sa  # QWED puts the same serialized issues in both
    res["developer_fields"] = dev
    res["proof_ref"] = proof_ref_of(pre)
    return Fresh(res, pre)


def _schema_proof_data(evidence: dict[str, Any]) -> str:
    """QWED's schema proof string for ``evidence`` (``schema_verifier._evidence_proof_data``:
    ``json.dumps(sort_keys=True)`` with sets as sorted lists; a parsed evidence holds none)."""
    return json.dumps(evidence, sort_keys=True)


def _math_route(expression: str) -> Any:
    """QWED 8.0's ``/verify/math`` decision (``qwed_new/api/main.py``, ``verify_math``),
    without the HTTP request: the same upstream calls in the same order; the float-literal
    advisory is left out (advisory checks carry no verdict)."""
    import re

    import sympy
    from qwed_new.core.diagnostics import DiagnosticResult
    from qwed_new.core.safe_parser import safe_parse_expr
    from qwed_new.core.verifier import (
        DISPROVEN_STATUS,
        DOMAIN_RESTRICTED_IDENTITY,
        identity_domains_match,
        symbolic_difference_status,
    )
    from sympy import simplify

    if "=" in expression:
        left_str, right_str = expression.split("=", 1)
        left, right = safe_parse_expr(left_str), safe_parse_expr(right_str)
        difference = simplify(left - right)
        status = symbolic_difference_status(difference)
        fields = {"left_side": str(left), "right_side": str(right),
                  "simplified_difference": str(difference)}
        if status == "VERIFIED" and not identity_domains_match(left_str, right_str):
            return DiagnosticResult.unverifiable(
                "Identity holds only where both sides are defined",
                developer_fields={"is_valid": False, "result": None,
                                  "constraint_id": DOMAIN_RESTRICTED_IDENTITY, **fields})
        if status == "VERIFIED":
            return DiagnosticResult.verified("Identity is true", developer_fields={
                "is_valid": True, "result": True, **fields}, evidence=fields)
        if status == DISPROVEN_STATUS:
            return DiagnosticResult.disproven("Identity is false", developer_fields={
                "result": False, **fields}, evidence={**fields, "verdict": "disproven"})
        return DiagnosticResult.unverifiable("Identity could not be proven or disproven",
                                             developer_fields={"is_valid": False,
                                                               "result": None, **fields})
    normalized = re.sub(r"(\d)(\()", r"\1*\2", expression)
    ambiguous = "/" in expression and "(" in expression and bool(
        re.search(r"/\d+\(", expression.replace(" ", "")))
    parsed = safe_parse_expr(normalized)
    simplified = simplify(parsed)
    if simplified.has(sympy.zoo) or simplified.has(sympy.nan):
        return DiagnosticResult.blocked("Expression contains division by zero",
                                        developer_fields={"is_valid": False,
                                                          "error": "Division by zero"})
    if simplified.has(sympy.oo) or simplified.has(-sympy.oo):
        return DiagnosticResult.blocked("Expression is undefined", developer_fields={
            "is_valid": False, "error": "undefined"})
    if ambiguous:
        return DiagnosticResult.blocked(
            "Expression may be ambiguous due to implicit multiplication after division",
            developer_fields={"is_valid": False, "result": False, "status": "BLOCKED",
                              "warning": "ambiguous", "simplified": str(simplified),
                              "note": "Interpreted using standard order of operations",
                              "original": str(parsed)})
    if simplified.free_symbols != set():
        return DiagnosticResult.verified("Expression simplified", developer_fields={
            "is_valid": True, "simplified": str(simplified), "original": str(parsed),
            "is_symbolic": True}, evidence={"simplified": str(simplified)})
    try:
        exact = sympy.nsimplify(simplified)
        value = float(simplified)
    except (TypeError, ValueError, OverflowError):
        return DiagnosticResult.unverifiable("Expression is not numeric", developer_fields={
            "is_valid": False, "simplified": str(simplified), "original": str(parsed)})
    return DiagnosticResult.verified("Expression evaluated", developer_fields={
        "is_valid": True, "value": value, "exact_value": str(exact),
        "simplified": str(simplified), "original": str(parsed)},
        evidence={"exact_value": str(exact), "simplified": str(simplified)})


def reexecutor() -> QwedReexecutor:
    """The entry point (``ledger.reexecutors``: ``qwed``)."""
    return QwedReexecutor()
