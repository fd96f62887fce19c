"""The documents keep up with the code (model: simonw/sqlite-utils ``tests/test_docs.py``).

* every command and subcommand of the live Click group has help and is in docs/cli.md;
* every submission error code raised in the source is in docs/submissions.md;
* every audit finding code, finding class and abstention reason is in docs/audit.md, and so is
  every key of the audit's JSON report;
* every default error code of ``ledger/errors.py`` is somewhere in docs/;
* the README's two set-up commands are there verbatim, and its document list links every
  docs/*.md.

Codes are found by parsing the source with ``ast``, so a new ``_fail("code", ...)`` or
``Finding("code", ...)`` fails this test until it is documented.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.core import contract

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PKG = REPO / "ledger"


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _tree(relpath: str) -> ast.Module:
    return ast.parse((PKG / relpath).read_text(encoding="utf-8"), relpath)


def _calls(tree: ast.AST, name: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or \
                    (isinstance(f, ast.Attribute) and f.attr == name):
                yield node


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _first_arg(call: ast.Call, index: int = 0) -> str | None:
    return _str(call.args[index]) if len(call.args) > index else None


def _keyword(call: ast.Call, name: str) -> str | None:
    return next((_str(k.value) for k in call.keywords if k.arg == name), None)


def _default_codes() -> dict[str, str]:
    """class name -> default_code, from ledger/errors.py."""
    out = {}
    for node in _tree("errors.py").body:
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "default_code" for t in stmt.targets):
                    out[node.name] = _str(stmt.value)
    return {k: v for k, v in out.items() if v}


def _mentioned(code: str, text: str) -> bool:
    return f"`{code}`" in text


# ---------------------------------------------------------------------------
# docs/cli.md: every command of the live group
# ---------------------------------------------------------------------------

def _commands(group: click.Group, prefix: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


COMMANDS = list(_commands(cli))


def test_the_command_list_comes_from_the_live_group():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"init", "append", "show", "head", "audit", "demo", "db upgrade", "db current",
            "keys trust", "keys revoke"} <= names


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_help(path, command):
    assert (command.help or command.short_help or "").strip(), f"ledger {' '.join(path)}"
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output and (command.help or "").strip().split("\n")[0][:40] \
        in " ".join(result.output.split())


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_is_documented(path):
    pattern = r"\bledger " + re.escape(" ".join(path)) + r"(?![\w-])"
    assert re.search(pattern, _doc("cli.md")), f"`ledger {' '.join(path)}` is not in docs/cli.md"


def test_cli_doc_has_the_global_options_and_exit_codes():
    doc = _doc("cli.md")
    assert "--db URL" in doc and "LEDGER_DB_URL" in doc
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |"):
        assert code in doc


# ---------------------------------------------------------------------------
# docs/submissions.md: every rejection code
# ---------------------------------------------------------------------------

def attestation_codes() -> set[str]:
    """The failure codes of the attestation check: ``_fail`` calls in crypto/trust.py and the
    (code, message) pairs returned by the claim/time checks of crypto/trust.py and
    crypto/attestation.py."""
    codes: set[str] = set()
    for relpath in ("crypto/trust.py", "crypto/attestation.py"):
        tree = _tree(relpath)
        codes |= {c for call in _calls(tree, "_fail") if (c := _first_arg(call))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                    and node.value.elts and (code := _str(node.value.elts[0])):
                codes.add(code)
    return codes


def submission_codes() -> set[str]:
    codes: set[str] = set()
    for relpath in ("core/submission.py", "ops/append/judge.py", "ops/append/prepare.py",
                    "ops/append/writer.py", "crypto/attestation.py", "facade.py"):
        tree = _tree(relpath)
        codes |= {c for call in _calls(tree, "_fail") if (c := _first_arg(call))}
        for cls in ("SubmissionError", "SubmissionTooLarge", "IdempotencyConflict"):
            codes |= {c for call in _calls(tree, cls) if (c := _keyword(call, "code"))}
    # attestation checks used at append (the facade's judge raises SubmissionError(r.code))
    codes |= attestation_codes()
    defaults = _default_codes()
    codes |= {defaults[c] for c in ("SubmissionError", "SubmissionTooLarge",
                                    "IdempotencyConflict")}
    codes |= {r.rejection for r in contract.RULES}  # the result contract is data
    return codes


def test_submission_codes_are_found():
    codes = submission_codes()
    assert {"invalid_status", "preimage_mismatch", "too_large", "duplicate_key",
            "attestation_signature_invalid", "attestation_expired_at_record",
            "idempotency_conflict", "attestation_malformed"} <= codes


@pytest.mark.parametrize("code", sorted(submission_codes()))
def test_every_submission_code_is_documented(code):
    assert _mentioned(code, _doc("submissions.md")), f"`{code}` is not in docs/submissions.md"


# ---------------------------------------------------------------------------
# docs/audit.md: every finding code, class, abstention reason and report key
# ---------------------------------------------------------------------------

def finding_codes() -> set[str]:
    codes: set[str] = set()
    for relpath in ("core/audit.py", "core/erasure.py", "ops/audit/walk.py",
                    "ops/audit/runs.py", "ops/audit/tenant.py"):
        for call in _calls(_tree(relpath), "Finding"):
            arg = call.args[0] if call.args else None
            if code := _str(arg):
                codes.add(code)
            elif isinstance(arg, ast.JoinedStr) and (head := _str(arg.values[0])):
                codes.add(head)  # e.g. "policy:" of f"policy:{rule.id}"
    codes |= {r.code for r in contract.RULES if r.code is not None}  # the result contract
    # checkpoint findings (ledger audit --checkpoint)
    codes |= {c for call in _calls(_tree("ops/checkpoint/check.py"), "_finding")
              if (c := _first_arg(call))}
    # attestation failures become findings too
    return codes | attestation_codes()


def abstention_reasons() -> set[str]:
    reasons = {c for relpath in ("core/audit.py", "ops/audit/checkpoints.py")
               for call in _calls(_tree(relpath), "Abstention") if (c := _first_arg(call, 2))}
    for call in _calls(_tree("crypto/trust.py"), "AttestationCheck"):
        if _first_arg(call) == "abstained" and (c := _first_arg(call, 1)):
            reasons.add(c)
    for node in ast.walk(_tree("ops/audit/checkpoints.py")):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if _str(k) == "reason" and (c := _str(v)):
                    reasons.add(c)
    return reasons


def finding_classes() -> set[str]:
    [enum] = [node for node in _tree("core/finding.py").body
              if isinstance(node, ast.ClassDef) and node.name == "FindingClass"]
    return {v for node in enum.body if isinstance(node, ast.Assign) and (v := _str(node.value))}


def test_finding_codes_are_found():
    assert {"seq_gap", "entry_hash_mismatch", "hash_not_committed", "payload_missing",
            "proof_mismatch", "policy:", "head_hash_mismatch", "rewritten_since_audit",
            "checkpoint_truncated"} <= finding_codes()
    assert {"unknown_issuer_key", "no_trust_store"} <= abstention_reasons()
    assert {"payload_modified", "forked", "policy_violation"} <= finding_classes()


@pytest.mark.parametrize("code", sorted(finding_codes()))
def test_every_finding_code_is_documented(code):
    doc = _doc("audit.md")
    assert _mentioned(code, doc) or (code.endswith(":") and f"`{code}" in doc), \
        f"`{code}` is not in docs/audit.md"


@pytest.mark.parametrize("name", sorted(abstention_reasons() | finding_classes()))
def test_every_abstention_reason_and_finding_class_is_documented(name):
    assert _mentioned(name, _doc("audit.md")), f"`{name}` is not in docs/audit.md"


def test_every_audit_report_key_is_documented(sqlite_url):
    from ledger import Ledger
    from ledger.ops.audit import AuditOptions, run_audit

    with Ledger.init(sqlite_url) as ledger:
        ledger.append({"result": {"status": "BLOCKED", "agent_message": "blocked"},
                       "engine": "sql"})
        report = run_audit(ledger, AuditOptions(record=True)).to_json()
    doc = _doc("audit.md")
    assert report["format"] in doc
    for key in [*report, *report["summary"], *report["range"]]:
        assert _mentioned(key, doc), f"report key `{key}` is not in docs/audit.md"


# ---------------------------------------------------------------------------
# error codes, README
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("code", sorted(set(_default_codes().values())))
def test_every_default_error_code_is_documented(code):
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))
    assert _mentioned(code, text), f"error code `{code}` (ledger/errors.py) is in no docs/*.md"


@pytest.mark.parametrize("command", [
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/ledger demo",
    "bash scripts/test",
])
def test_readme_set_up_commands(command):
    assert command in (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_lists_every_document():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", readme[readme.index("## Documents"):]))
    present = {p.name for p in DOCS.glob("*.md")}
    assert present - listed == set(), "docs missing from the README's document list"
    assert listed - present == set(), "the README's document list links docs that do not exist"
