"""The demo job: a SQLite ledger with a realistic mix of results, narrated."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ledger.facade import Ledger
from ledger.ops.samples import realistic, rejected_examples


def run_demo(directory: Path) -> Iterator[str]:
    url = f"sqlite:///{directory / 'ledger.db'}"
    ledger = Ledger.init(url, origin="demo.ledger.local/results")
    try:
        yield f"ledger {ledger.meta.ledger_id} ({ledger.meta.origin}) at {url}"
        subs = realistic(60)
        for i, s in enumerate(subs[:6]):
            s["idempotency_key"] = f"demo-{i}"
        results = ledger.append_many(subs, producer="demo")
        by_status = Counter(s["result"]["status"] for s in subs)
        by_engine = Counter(s["engine"] for s in subs)
        yield (f"appended {sum(r.ok for r in results)} results in one batch: "
               + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
               + " | engines: " + ", ".join(f"{k} {v}" for k, v in sorted(by_engine.items())))
        replay = ledger.append(subs[0], producer="demo")
        yield (f"retry with idempotency key demo-0 returned the same entry: seq {replay.seq}"
               f" (replayed={replay.replayed})")
        conflict = ledger.append({**subs[1], "idempotency_key": "demo-0"}, producer="demo")
        yield f"same key, other content: rejected ({conflict.error['code']})"  # type: ignore[index]
        for why, bad in rejected_examples():
            res = ledger.append(bad, producer="demo")
            err = res.error or {}
            yield f"rejected ({why}): {err.get('code')} [{err.get('field')}] — quarantined"
        head = ledger.head()
        yield f"head: size {head['size']}, hash {head['head_hash']}"
        entry = ledger.get(1)
        yield (f"entry 1: {entry['engine']} {entry['status']} proof_ref {entry['proof_ref']} "
               f"preimage {entry['payloads']['preimage']['text'][:60]!r}")
        yield f"inspect it: ledger --db {url} show 1 --format json"
    finally:
        ledger.close()
