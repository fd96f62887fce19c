"""Anchoring a checkpoint: witness cosignatures (c2sp.org/tlog-witness) and an RFC 3161
timestamp, asked for after the checkpoint is signed and stored — never inside the append
transaction, so a slow or unreachable witness or TSA never blocks appends.

For each witness the log sends the checkpoint with the consistency proof from the
largest size that witness cosigned before (kept in ``checkpoint_anchors``; 0 the first
time).  A ``409`` answer names the size the witness holds: if it is not larger than the
checkpoint the request is retried once from that size; a larger one is reported (the
witness saw a bigger tree of this origin: a fork or a rollback).  A ``422`` (the proof does
not verify, or the witness holds another root at this size: a fork) is reported with the
witness's reason.  Every failure is reported, bounded by the timeout, and retried at the next
checkpoint.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ledger.core.cosignature import (
    SIZE_CONTENT_TYPE,
    VerifierKey,
    format_add_checkpoint,
    parse_size_text,
    parse_vkey,
)
from ledger.core.note import parse_checkpoint_body, parse_note
from ledger.crypto.cosign import accept_cosignatures, load_vkeys
from ledger.crypto.keys import Keyring
from ledger.crypto.timestamp import (
    REQUEST_TYPE,
    TokenInfo,
    TsaTrust,
    load_tsa_trust,
    make_request,
    read_token,
    verify_token,
)
from ledger.errors import LedgerError, NoteError, UsageError
from ledger.ops.checkpoint.make import consistency_proof, latest_checkpoint, make_checkpoint
from ledger.ops.context import LedgerContext
from ledger.store.anchors import (
    COSIGNATURE,
    TIMESTAMP,
    AnchorRow,
    add_anchor,
    anchors_of,
    last_cosigned_size,
)

DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class WitnessEndpoint:
    """A witness: its ``key`` (the vkey names it) and its submission prefix ``url``."""

    key: VerifierKey
    url: str

    @property
    def name(self) -> str:
        return self.key.name


@dataclass(frozen=True)
class AnchorConfig:
    """Whom to ask: ``witnesses``, a TSA ``tsa_url`` (``tsa_trust`` checks its tokens when
    given), and the per-request ``timeout_s``."""

    witnesses: tuple[WitnessEndpoint, ...] = ()
    tsa_url: str | None = None
    tsa_trust: TsaTrust | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def empty(self) -> bool:
        return not self.witnesses and self.tsa_url is None


@dataclass
class AnchorReport:
    """What anchoring the checkpoint of ``size`` got: the ``note`` with every stored
    cosignature line, the witnesses that ``cosigned``, ``failed`` ``{name: why}``, the
    ``timestamp`` (or ``tsa_error``)."""

    size: int
    note: str
    cosigned: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    timestamp: TokenInfo | None = None
    tsa_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        ts = self.timestamp
        return {"size": self.size, "cosigned": self.cosigned, "failed": self.failed,
                "timestamp": None if ts is None else ts.gen_time.isoformat(),
                "tsa_error": self.tsa_error}


def witness_endpoints(pairs: list[str], key_files: list[str]) -> tuple[WitnessEndpoint, ...]:
    """``NAME=URL`` pairs matched by name with the vkeys of ``key_files``.  Raises
    UsageError (bad pair, no key for a name)."""
    keys = {k.name: k for path in key_files for k in load_vkeys(path)}
    out = []
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise UsageError(f"--witness {pair!r} is not NAME=http(s)://...",
                             code="bad_witness", field="witness")
        if name not in keys:
            raise UsageError(f"no --witness-key names witness {name!r}", code="bad_witness",
                             field="witness_key")
        out.append(WitnessEndpoint(keys[name], url))
    return tuple(out)


def anchor_config_from(anchors_file: str | None, pairs: list[str], key_files: list[str],
                       tsa_url: str | None, tsa_certs: str | None,
                       timeout_s: float) -> AnchorConfig:
    """The config of ``ledger checkpoint``'s options: ``anchors_file`` first, then the
    ``NAME=URL`` witnesses of ``key_files``, the TSA and its certificates.  Raises
    UsageError."""
    config = load_anchor_config(anchors_file) if anchors_file else AnchorConfig()
    return replace(config, witnesses=config.witnesses + witness_endpoints(pairs, key_files),
                   tsa_url=tsa_url or config.tsa_url,
                   tsa_trust=load_tsa_trust(tsa_certs) if tsa_certs else config.tsa_trust,
                   timeout_s=timeout_s)


def write_timestamp_sidecar(ctx: LedgerContext, out: str, size: int) -> None:
    """``<out>.tsr``: the first stored token of the checkpoint of ``size`` (DER), if any."""
    tokens = timestamps_of(ctx, size)
    if tokens:
        Path(out + ".tsr").write_bytes(base64.b64decode(tokens[0]["token_b64"] or ""))


def load_anchor_config(path: str | Path) -> AnchorConfig:
    """The ``witnesses`` and ``tsa`` sections of a JSON file (docs/anchoring.md)::

        {"witnesses": [{"url": "http://127.0.0.1:7001", "vkey": "<name>+<id>+<key>"}],
         "tsa": {"url": "http://...", "certs": "tsa-chain.pem", "policy": "1.2.3"},
         "timeout_s": 5}

    Raises UsageError."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        witnesses = tuple(WitnessEndpoint(parse_vkey(w["vkey"]), str(w["url"]))
                          for w in doc.get("witnesses", []))
        tsa = doc.get("tsa") or {}
        trust = (load_tsa_trust(path.parent / tsa["certs"], tsa.get("policy"))
                 if tsa.get("certs") else None)
        return AnchorConfig(witnesses, tsa.get("url"), trust,
                            float(doc.get("timeout_s", DEFAULT_TIMEOUT_S)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, NoteError) as exc:
        raise UsageError(f"cannot use anchors config {path}: {exc}", code="bad_anchor_config",
                         field="anchors") from None


def _post(url: str, body: bytes, content_type: str, timeout: float) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read(1 << 20)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read(1 << 16)


def _ask_witness(ctx: LedgerContext, w: WitnessEndpoint, note: str, body: str, size: int,
                 timeout: float) -> str:
    """One cosignature line from ``w`` for the checkpoint ``note``.  Raises LedgerError or
    OSError (unreachable, timeout) with the reason."""
    old = last_cosigned_size(ctx.engine, w.name) or 0
    url = w.url.rstrip("/") + "/add-checkpoint"
    for _ in range(2):
        old = min(old, size)
        proof = consistency_proof(ctx, old, size) if 0 < old < size else []
        status, ctype, answer = _post(url, format_add_checkpoint(old, proof, note).encode(),
                                      "text/plain; charset=utf-8", timeout)
        if status == 200:
            return accept_cosignatures(body, answer.decode("utf-8", "replace"), w.key)[0]
        text = answer.decode("utf-8", "replace").strip()
        if status != 409 or not ctype.startswith(SIZE_CONTENT_TYPE):
            raise LedgerError(f"witness answered {status}: {text[:200]}",
                              code="witness_refused")
        held = parse_size_text(text, "witness size")
        if held > size:
            raise LedgerError(f"witness holds a larger tree ({held} > {size}) of this origin",
                              code="witness_conflict")
        if held == old:
            raise LedgerError(f"witness holds another root at size {held}",
                              code="witness_conflict")
        old = held
    raise LedgerError("witness kept answering 409", code="witness_conflict")


def _timestamp(ctx: LedgerContext, config: AnchorConfig, body: str, size: int) -> TokenInfo:
    message = body.encode("utf-8")
    query, nonce = make_request(message)
    status, _, token = _post(config.tsa_url or "", query, REQUEST_TYPE, config.timeout_s)
    if status != 200:
        raise LedgerError(f"TSA answered {status}", code="tsa_refused")
    info = (verify_token(token, message, config.tsa_trust, nonce) if config.tsa_trust
            else read_token(token, message, nonce))
    add_anchor(ctx.engine, AnchorRow(size, TIMESTAMP, config.tsa_url or "",
                                        base64.b64encode(token).decode("ascii"), str(nonce),
                                        ctx.clock.now_us()))
    return info


def anchor_checkpoint(ctx: LedgerContext, note: str, config: AnchorConfig) -> AnchorReport:
    """Ask every witness (in parallel) and the TSA for the stored checkpoint ``note``; store
    what verifies.  Never raises for a witness or TSA failure (it is in the report)."""
    body = parse_note(note).text
    size = parse_checkpoint_body(body).size
    report = AnchorReport(size, note)
    jobs = len(config.witnesses) + (1 if config.tsa_url else 0)
    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        futures = {w.name: pool.submit(_ask_witness, ctx, w, note, body, size,
                                       config.timeout_s) for w in config.witnesses}
        stamp = pool.submit(_timestamp, ctx, config, body, size) if config.tsa_url else None
        for name, fut in futures.items():
            try:
                line = fut.result()
            except (LedgerError, OSError, ValueError) as exc:
                report.failed[name] = str(getattr(exc, "message", None) or exc)
                continue
            add_anchor(ctx.engine, AnchorRow(size, COSIGNATURE, name, line, None,
                                                ctx.clock.now_us()))
            report.cosigned.append(name)
        if stamp is not None:
            try:
                report.timestamp = stamp.result()
            except (LedgerError, OSError, ValueError) as exc:
                report.tsa_error = str(getattr(exc, "message", None) or exc)
    report.note = cosigned_note(ctx, size, note)
    return report


def make_anchored_checkpoint(ctx: LedgerContext, keyring: Keyring, config: AnchorConfig
                             ) -> AnchorReport:
    """Sign and store a checkpoint (``make_checkpoint``), then anchor it."""
    note = make_checkpoint(ctx, keyring)
    if config.empty:
        size = parse_checkpoint_body(parse_note(note).text).size
        return AnchorReport(size, cosigned_note(ctx, size, note))
    return anchor_checkpoint(ctx, note, config)


def cosigned_note(ctx: LedgerContext, size: int, note: str) -> str:
    """``note`` with the stored cosignature lines of its size appended (each once)."""
    lines = [a.data for a in anchors_of(ctx.engine, size) if a.kind == COSIGNATURE]
    return note + "".join(line for line in lines if line not in note)


def latest_cosigned_note(ctx: LedgerContext) -> str | None:
    """The latest stored checkpoint with its cosignatures, or None before the first one."""
    row = latest_checkpoint(ctx)
    return None if row is None else cosigned_note(ctx, row.size, row.note)


def timestamps_of(ctx: LedgerContext, size: int) -> list[dict[str, str | None]]:
    """The stored tokens of the checkpoint of ``size``: ``{tsa, token_b64, nonce}`` each."""
    return [{"tsa": a.name, "token_b64": a.data, "nonce": a.nonce}
            for a in anchors_of(ctx.engine, size) if a.kind == TIMESTAMP]


def with_anchors(ctx: LedgerContext, bundle: dict[str, Any], key: str, size: int) -> dict[str, Any]:
    """A proof ``bundle`` whose note ``bundle[key]`` gets the stored cosignature lines of
    ``size`` and, if any, a ``timestamps`` list; unchanged when nothing is stored."""
    bundle[key] = cosigned_note(ctx, size, bundle[key])
    tokens = timestamps_of(ctx, size)
    if tokens:
        bundle["timestamps"] = tokens
    return bundle


def anchor_files(ctx: LedgerContext, out: Path, size: int, note: str) -> str:
    """For an export bundle in ``out``: the note with its stored cosignature lines, and
    ``timestamps.json`` (``{"timestamps": [...]}``) when tokens are stored for ``size``."""
    tokens = timestamps_of(ctx, size)
    if tokens:
        (out / "timestamps.json").write_text(json.dumps({"timestamps": tokens}, indent=2)
                                             + "\n", encoding="utf-8")
    return cosigned_note(ctx, size, note)
