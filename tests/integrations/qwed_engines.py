"""Real QWED 8.0.0 engines producing results, signed by QWED's own trust step.

Everything here is upstream code: the engines (math, logic, sql, schema, fact, code),
``DiagnosticResult``'s factories, ``admission_decision`` and ``attest_and_enforce`` with
an ``AttestationService`` holding the fixed test issuer key of tests/data (issuer
``did:qwed:node:test``, whose JWKS the ledger trusts in these tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data"
ISSUER = "did:qwed:node:test"


@dataclass
class Produced:
    result: Any  # a DiagnosticResult
    engine: str
    query: str
    admission: str | None


def install_issuer() -> None:
    """Make QWED's process-wide attestation service sign with the test issuer key."""
    from qwed_new.core import attestation as att

    att._default_service = att.AttestationService(
        issuer_did=ISSUER, key_continuity_policy="configured",
        private_key_pem=(DATA / "qwed_issuer_key.pem").read_bytes(), validity_seconds=86400)


def produce(i: int) -> list[Produced]:
    """One round of results from every engine (``i`` varies the inputs)."""
    from qwed_new.core.code_verifier import CodeVerifier
    from qwed_new.core.diagnostics import DiagnosticResult, admission_decision
    from qwed_new.core.fact_verifier import FactVerifier
    from qwed_new.core.logic_verifier import LogicVerifier
    from qwed_new.core.schema_verifier import SchemaVerifier
    from qwed_new.core.sql_verifier import SQLVerifier
    from qwed_new.core.trust import attest_and_enforce
    from qwed_new.core.verifier import VerificationEngine

    out: list[Produced] = []

    def add(dr: Any, engine: str, query: str) -> None:
        adm = admission_decision(dr).value
        if dr.status.value == "VERIFIED":
            dr = attest_and_enforce(dr, engine=engine, query=query,
                                    admission=admission_decision)
        out.append(Produced(dr, engine, query, adm))

    expr = f"{i} + {i}"
    calc = VerificationEngine().verify_math(expr, 2 * i)
    add(DiagnosticResult.verified("Expression verified", {"is_valid": True, **calc},
                                  evidence={"expression": expr, **calc}), "math", expr)
    lv = LogicVerifier()
    add(lv.verify_logic({"x": "Int", "y": "Int"}, [f"x > {i}", "y < 10", f"x + y == {i + 9}"]),
        "logic", f"x > {i}, y < 10, x + y == {i + 9}")
    add(lv.verify_logic({"x": "Int"}, ["x > 2", "x < 1"]), "logic", "x > 2, x < 1")
    sql = f"SELECT name FROM users WHERE id = {i}"
    add(SQLVerifier().verify_sql(sql, "CREATE TABLE users (id INT, name TEXT)"), "sql", sql)
    add(SQLVerifier().verify_sql("DROP TABLE users"), "sql", "DROP TABLE users")
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
              "required": ["n"]}
    add(SchemaVerifier().verify({"n": i}, schema), "schema", f"n = {i}")
    ctx = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."
    add(FactVerifier(use_llm_fallback=False).verify_fact("The Eiffel Tower is in Paris.", ctx),
        "fact", "The Eiffel Tower is in Paris.")
    code = f"def add_{i}(a, b):\n    return a + b\n"
    add(CodeVerifier().verify_code(code), "code", code)
    return out
