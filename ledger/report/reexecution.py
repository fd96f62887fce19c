"""The re-execution section of the HTML report (``ledger reverify``): its own class of
result, next to the findings."""

from __future__ import annotations

from typing import Any

from ledger.ops.report import REEXEC_OUTCOMES
from ledger.report.markup import dl, e, table

MAX_DIFFERENCES_SHOWN = 2000


def _recorded_note(rec: dict[str, Any] | None) -> str:
    """Where a section read from a recorded run (``ledger report --reverify-run``) stands:
    the entry checked (or it is refused before this), and whether the outcomes shown are
    the ones its digest proves."""
    if not rec:
        return ""
    where = (f"entry {rec['seq']} (reverify_run, recorded {rec['recorded_at']}, entry hash "
             f"{rec['entry_hash']})")
    if rec["outcomes_proven"]:
        return ('<p id="reexecution-recorded">From the run recorded in the ledger as '
                f"{e(where)}, checked against its hashes; the outcomes below are the ones "
                "whose digest it records.</p>")
    return ('<p class="outcome outcome-failed" id="reexecution-unproven">NOT PROVEN: the '
            "outcomes kept beside the ledger for the run recorded as "
            f"{e(where)} do not match the digest that entry records (changed, removed or "
            "added since). Every count and row below comes from them and is not proven; "
            "the run's own summary is in the entry (ledger show).</p>")


def reverify_section(rv: dict[str, Any] | None) -> str:
    """The re-execution section (``reverify_data``): disagreements are their own class,
    not integrity findings -- the entry is what its producer wrote, and the installed
    engine, re-run on the stored inputs, decided otherwise."""
    if rv is None:
        return ""
    head = ('<section id="reexecution"><h2>Re-execution of the claims (ledger reverify)</h2>'
            + _recorded_note(rv.get("recorded")))
    s = rv["summary"]
    if not s["entries"]:
        return (head + "<p>The re-verification report given has no entry in this report's "
                f"scope ({rv['outside_scope']} outside it).</p></section>")
    cls = {"agrees": "passed", "disagrees": "failed"}.get(rv["outcome"], "unverified")
    parts = [head,
             f'<p class="outcome outcome-{cls}" id="reexecution-outcome">Re-execution: '
             f'{e(rv["outcome"])}</p>',
             f"<p>{s['entries']} entries re-verified: {s['agrees']} agree, {s['disagrees']} "
             f"disagree, {s['not_reexecutable']} not re-executable, {s['engine_error']} "
             "engine error(s). A disagreement is not an integrity finding: the entry is what "
             "its producer wrote, and its engine, re-run on the stored inputs, decided "
             "otherwise (a wrong or forged result, or engine drift: compare the versions)."
             "</p>",
             dl([("range", e(f"[{rv['range']['start']}, {rv['range']['end']})")),
                  ("coverage", e("covers the whole scope" if rv["covers_scope"] else
                                 "does NOT cover the whole scope")),
                  ("re-executors", e(", ".join(rv["reexecutors"]) or "none")),
                  ("run", e(f"{rv['started_at'] or '—'} to {rv['finished_at'] or '—'}"))]),
             table("Re-execution outcomes by engine", ["engine", *REEXEC_OUTCOMES],
                    rv["by_engine"], "reexecution-engines")]
    diffs = rv["differences"]
    if diffs:
        shown = diffs[:MAX_DIFFERENCES_SHOWN]
        more = len(diffs) - len(shown)
        parts.append(table(f"{s['disagrees']} disagreement(s), {len(diffs)} differing "
                            "field(s)" + (f" (the first {len(shown)} shown)" if more else ""),
                            ["seq", "engine", "field", "stored", "fresh", "re-executor"],
                            shown, "reexecution-disagreements"))
    if rv["reasons"]:
        parts.append(table("Not re-verified, by reason", ["outcome", "reason", "entries"],
                            rv["reasons"], "reexecution-reasons"))
    if rv["outside_scope"]:
        parts.append(f"<p class=\"muted\">{rv['outside_scope']} outcome(s) of the "
                     "re-verification report are outside this report's scope.</p>")
    return "".join(parts) + "</section>"
