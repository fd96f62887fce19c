"""The selection of a re-verification run: the result entries of a page that the options
select, each checked against its hashes (``core.readcheck``: a re-executor only ever sees
payloads that match their commitments) and either planned by the installed re-executor of
its engine (``core.reexec``) or decided without running anything."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledger.core import reexec as rx
from ledger.core.readcheck import PAYLOAD_DIGEST_MISMATCH, check_entry
from ledger.ops.context import LedgerContext
from ledger.ops.reverify.options import ReverifyOptions
from ledger.store import entries as repo
from ledger.store.db import connect

PAGE = 500
PAYLOADS = ("result", "preimage", "query", "meta")


@dataclass
class Selected:
    entry: rx.Stored
    outcome: dict[str, Any] | None = None  # decided without running anything
    plan: rx.Plan | None = None
    plugin: Any = None


def _text(b: bytes | None) -> str | None:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def stored_entry(row: Any, blobs: Any, ledger_id: str, redactions: Any,
                 ) -> tuple[rx.Stored, list[str]]:
    """The :class:`Stored` view of one result row and the integrity codes it failed."""
    checked = check_entry(row, blobs, ledger_id, redactions=redactions)
    texts = checked.texts
    meta = _text(texts.get("meta"))
    try:
        meta_doc = json.loads(meta) if meta is not None else None
    except ValueError:
        meta_doc = None
    unchecked = frozenset(p.field for p in checked.integrity.problems
                          if p.code == PAYLOAD_DIGEST_MISMATCH)
    v = checked.values
    entry = rx.Stored(seq=checked.seq, engine=str(v.get("engine") or ""),
                      status=v.get("status"), proof_ref=v.get("proof_ref"),
                      result=checked.document, preimage=_text(texts.get("preimage")),
                      query=_text(texts.get("query")), meta=meta_doc,
                      redacted=frozenset(checked.integrity.redacted), unchecked=unchecked)
    return entry, checked.integrity.codes


def _selected(row: Any, opts: ReverifyOptions) -> bool:
    if row.kind != "result":
        return False
    if opts.tenant is not None and row.tenant != opts.tenant:
        return False
    if opts.seqs and row.seq not in opts.seqs:
        return False
    if opts.engines and row.engine not in opts.engines:
        return False
    if opts.since_us is not None and row.recorded_at < opts.since_us:
        return False
    return not (opts.until_us is not None and row.recorded_at >= opts.until_us)


def _decide(entry: rx.Stored, codes: list[str], plugin: Any) -> Selected:
    if codes:
        return Selected(entry, _not(entry, rx.INTEGRITY, "the entry does not check against "
                                    f"its hashes ({', '.join(codes)}): see ledger audit",
                                    plugin))
    if plugin is None:
        return Selected(entry, _not(entry, rx.NO_REEXECUTOR,
                                    f"no installed re-executor handles engine "
                                    f"{entry.engine!r}", None))
    try:
        plan = plugin.plan(entry)
    except Exception as exc:  # noqa: BLE001 -- a plugin's failure is the entry's outcome
        return Selected(entry, _error(entry, plugin, rx.RAISED, type(exc).__name__,
                                      f"plan: {exc}"))
    if isinstance(plan, rx.NotReexecutable):
        return Selected(entry, _not(entry, plan.reason, plan.detail, plugin))
    return Selected(entry, None, plan, plugin)


class _Memo:
    """A re-executor whose ``version(engine)`` is asked once per run and engine (reading
    package metadata costs about a millisecond: more than some engines' whole run)."""

    def __init__(self, plugin: Any) -> None:
        self._plugin = plugin
        self._versions: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plugin, name)

    def version(self, engine: str) -> str:
        if engine not in self._versions:
            try:
                self._versions[engine] = str(self._plugin.version(engine))
            except Exception:  # noqa: BLE001 -- a plugin that cannot say still gets an outcome
                self._versions[engine] = "unknown"
        return self._versions[engine]


def _who(entry: rx.Stored, plugin: Any) -> dict[str, Any]:
    if plugin is None:
        return {"name": None, "engine": entry.engine, "version": None}
    return {"name": plugin.name, "engine": entry.engine, "version": plugin.version(entry.engine)}


def _base(entry: rx.Stored, outcome: str, plugin: Any) -> dict[str, Any]:
    return {"seq": entry.seq, "engine": entry.engine, "outcome": outcome,
            "reexecutor": _who(entry, plugin)}


def _not(entry: rx.Stored, reason: str, detail: str, plugin: Any) -> dict[str, Any]:
    return {**_base(entry, rx.NOT_REEXECUTABLE, plugin), "reason": reason, "detail": detail}


def _error(entry: rx.Stored, plugin: Any, reason: str, error: str, message: str,
           ) -> dict[str, Any]:
    return {**_base(entry, rx.ENGINE_ERROR, plugin), "reason": reason, "error": error,
            "detail": message}


def _select_page(ctx: LedgerContext, opts: ReverifyOptions, pos: int, end: int,
                 by_engine: dict[str, Any], redactions: Any) -> tuple[list[Selected], int]:
    """The selected entries of the first page of ``[pos, end)``, each planned or decided,
    and the seq after the page."""
    with connect(ctx.engine) as conn:
        for page in repo.iter_entry_pages(conn, pos, end, PAGE):
            out = []
            for row, blobs in page:
                if _selected(row, opts):
                    entry, codes = stored_entry(row, blobs, ctx.meta.ledger_id, redactions)
                    out.append(_decide(entry, codes, by_engine.get(entry.engine)))
            return out, max(page.next_seq, pos + 1)
    return [], end

