"""``ledger export``: write a bundle a third party can verify offline (docs/export.md).

Streaming: entries are read in keyset pages and written line by line; each file's
SHA-256 is computed as it is written; a proof interval is closed (one O(log n)
inclusion proof) whenever the exported seqs stop being consecutive.  Memory is one
page plus the key events, whatever the export size.

Order of work: fix the range end at the current head, take the latest stored
checkpoint if it covers the range (else sign a new one), write key_events.jsonl
(every key event the checkpoint covers, so attestations can be judged offline),
entries.jsonl + entries.csv + proofs.jsonl, checkpoint.txt and jwks.json, then
manifest.json (their digests, counts, the checkpoint) and manifest.jwt (EdDSA by
the ledger key, binding the manifest's SHA-256).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ledger.clock import format_us
from ledger.core.bundle import (
    CHECKPOINT,
    CSV_HEADER,
    CSV_VIEW,
    ENTRIES,
    EXPORT_FORMAT,
    EXPORT_FORMAT_V2,
    JWKS,
    KEY_EVENTS,
    MANIFEST,
    MANIFEST_JWT,
    PROOFS,
    REDACTIONS,
    agent_message,
    csv_bytes,
    csv_row,
    dump_line,
)
from ledger.core.digest import digest_text, hasher_text
from ledger.core.entry import hash_hex
from ledger.core.erasure import RedactionMap
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.core.tenant import (
    parse_extension,
)
from ledger.crypto.bundle_sign import check_note
from ledger.crypto.jws import sign_manifest
from ledger.crypto.keys import (
    Ed25519PrivateKey,
    Keyring,
    load_private_pem,
    load_public_keys,
    public_jwk,
    raw_public,
)
from ledger.errors import UsageError
from ledger.ops.checkpoint import StoredTree, anchor_files, latest_checkpoint, make_checkpoint
from ledger.ops.context import LedgerContext
from ledger.ops.query import Filters, iter_pages, make_filters, with_window
from ledger.ops.redaction_map import load_redaction_map
from ledger.ops.tenant_export import tenant_filters, tenant_section
from ledger.ops.view import export_line
from ledger.store import entries as repo
from ledger.store.db import connect
from ledger.store.tree import read_store

PAGE = 1000
PROOF_MODES = ("interval", "every")


@dataclass(frozen=True)
class Signer:
    """The ledger key that signs the manifest (and a new checkpoint when one is needed).

    ``keyring``: sign checkpoints with every active key (as ``ledger checkpoint`` does);
    ``jwks``: the public keys published in the bundle's jwks.json (untrusted there)."""

    name: str
    private_key: Ed25519PrivateKey
    kid: str
    jwks: list[dict[str, Any]]
    keyring: Keyring | None = None

    def signers(self, name: str) -> list[tuple[str, Ed25519PrivateKey]]:
        """Duck-types :meth:`Keyring.signers` for :func:`make_checkpoint`."""
        if self.keyring is not None:
            return self.keyring.signers(name)
        return [(self.name, self.private_key)]


def signer_from_keyring(keyring: Keyring, origin: str) -> Signer:
    """The newest active key named ``origin``.  Raises KeyringError if there is none."""
    name, key = keyring.signers(origin)[-1]
    jwk = public_jwk(name, raw_public(key), "")
    return Signer(name, key, jwk["kid"], [_public(k) for k in keyring.jwks], keyring)


def signer_from_pem(path: str | os.PathLike[str], origin: str, now_us: int) -> Signer:
    """An Ed25519 private key in a PEM file, named after the ledger origin.  Raises
    UsageError."""
    key = load_private_pem(path)
    jwk = public_jwk(origin, raw_public(key), format_us(now_us))
    return Signer(origin, key, jwk["kid"], [jwk])


def _public(jwk: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in jwk.items() if k != "d"}


class _Out:
    """A file written in binary with its SHA-256 and size computed on the way."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name, self.fh = name, open(directory / name, "wb")  # noqa: SIM115 - closed by close()
        self.sha, self.size = hashlib.sha256(), 0

    def write(self, data: bytes) -> None:
        self.fh.write(data)
        self.sha.update(data)
        self.size += len(data)

    def close(self) -> dict[str, Any]:
        self.fh.close()
        return {"sha256": hasher_text(self.sha), "bytes": self.size}


def _prepare_dir(out_dir: str | os.PathLike[str]) -> Path:
    path = Path(out_dir)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError(f"{path} exists and is not an empty directory", code="out_exists",
                         field="out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _checkpoint(ctx: LedgerContext, signer: Signer, end: int, jwks_path: Path) -> str:
    """A signed checkpoint covering ``[0, end)`` that the bundle's jwks.json verifies: the
    latest stored one if it does, else a new one (stored when the ledger grew)."""
    latest = latest_checkpoint(ctx)
    if latest is not None and latest.size >= end:
        refs = load_public_keys(jwks_path)
        if check_note(latest.note.encode("utf-8"), refs, True)[0] == "verified":
            return latest.note
    return make_checkpoint(ctx, signer)  # type: ignore[arg-type]


def _prove(tree: StoredTree, proofs: _Out, file: str, first: int, last: int, size: int) -> None:
    path = tree.inclusion_proof(last, size)
    proofs.write(dump_line({"file": file, "first_seq": first, "seq": last, "tree_size": size,
                            "inclusion_path": [h.hex() for h in path]}))


@dataclass(frozen=True)
class _Lines:
    """How one file's lines are written: the proof mode, ``v2`` lines (with tenant and
    tseq; intervals then never span two tenants) and the rows kept (None: all)."""

    mode: str = "interval"
    v2: bool = False
    keep: Callable[[Any], bool] | None = None


def _write_entries(conn: Any, f: Filters, out: _Out, proofs: _Out, tree: StoredTree,
                   size: int, how: _Lines, redactions: RedactionMap, view: _Out | None = None,
                   counts: dict[str, Counter[str]] | None = None,
                   progress: Callable[[int], None] | None = None) -> int:
    """Stream the entries matching ``f`` into ``out`` (and the CSV ``view``); one proof
    per interval of consecutive seqs of one tenant (or per entry).  Returns the number
    written."""
    first = prev = None
    n, tenant = 0, None
    for page in iter_pages(conn, f, page=PAGE):
        buf = io.StringIO()
        rows = csv.writer(buf)
        for row, blobs in page:
            if how.keep is not None and not how.keep(row):
                continue
            seq = row.seq
            if prev is not None and (how.mode == "every" or seq != prev + 1
                                     or (how.v2 and row.tenant != tenant)):
                _prove(tree, proofs, out.name, first, prev, size)  # type: ignore[arg-type]
                first = None
            first = seq if first is None else first
            tenant = row.tenant
            out.write(export_line(row, blobs, redactions, how.v2))
            if view is not None and counts is not None:
                msg = agent_message(row.kind, blobs[0][1] if 0 in blobs else None)
                rows.writerow(csv_row(seq, row.kind, row.recorded_at, row, msg,
                                      hash_hex(bytes(row.entry_hash))))
                counts["by_status"][str(row.status)] += 1
                counts["by_kind"][row.kind] += 1
            prev, n = seq, n + 1
        if view is not None:
            view.write(buf.getvalue().encode("utf-8"))
        if progress:
            progress(len(page))
    if prev is not None:
        _prove(tree, proofs, out.name, first, prev, size)  # type: ignore[arg-type]
    return n


def _write_checkpoint(ctx: LedgerContext, out: Path, signer: Signer, size: int,
                      ) -> tuple[Checkpoint, dict[str, Any]]:
    """Write jwks.json and a signed checkpoint covering ``[0, size)`` (with its cosignature
    lines and timestamps.json); the checkpoint and the files written so far."""
    files: dict[str, Any] = {}
    jwks = _Out(out, JWKS)
    jwks.write(json.dumps({"keys": signer.jwks}, indent=2, sort_keys=True).encode() + b"\n")
    files[JWKS] = jwks.close()
    note = _checkpoint(ctx, signer, size, out / JWKS)
    cp = parse_checkpoint_body(parse_note(note).text)
    note = anchor_files(ctx, out, cp.size, note)  # cosignature lines, timestamps.json
    cp_out = _Out(out, CHECKPOINT)
    cp_out.write(note.encode("utf-8"))
    files[CHECKPOINT] = cp_out.close()
    return cp, files


def _write_manifest(ctx: LedgerContext, out: Path, signer: Signer,
                    manifest: dict[str, Any]) -> None:
    """Write the manifest and its signed JWT (the manifest's digest in its claims)."""
    body = dump_line(manifest)
    (out / MANIFEST).write_bytes(body)
    claims = {"iss": ctx.meta.origin, "sub": ctx.meta.ledger_id,
              "iat": ctx.clock.now_us() // 1_000_000, "format": manifest["format"],
              "manifest_sha256": digest_text(body)}
    token = sign_manifest(claims, signer.private_key, signer.kid)
    (out / MANIFEST_JWT).write_bytes(token.encode("ascii"))


def export_bundle(ctx: LedgerContext, out_dir: str | os.PathLike[str], signer: Signer,
                  filters: Filters | None = None, *, proofs: str = "interval",
                  progress: Callable[[int], None] | None = None,
                  tenant: str | None = None, absence_proof: bool = True) -> dict[str, Any]:
    """Write the bundle of the entries matching ``filters`` (default: all) to ``out_dir``
    (created; must be absent or empty) and return its manifest.

    ``proofs``: ``interval`` (one inclusion proof per run of consecutive seqs; the chain
    links prove the rest) or ``every`` (one per entry).  ``tenant``: the tenant's whole
    chain up to the checkpoint, with the proof that it is complete (docs/tenants.md; no
    other filter then).  Raises UsageError (bad arguments, non-empty directory),
    KeyringError, CheckpointError."""
    if proofs not in PROOF_MODES:
        raise UsageError(f"proofs must be one of {', '.join(PROOF_MODES)}", field="proofs")
    f = tenant_filters(tenant, filters or Filters())
    out = _prepare_dir(out_dir)
    with connect(ctx.engine) as conn:
        head = repo.read_head(conn)
        redactions = load_redaction_map(conn)
    end = head.size if f.end is None else min(f.end, head.size)  # type: ignore[union-attr]
    f = with_window(f, 0, end)
    # the redaction entries that erased payloads of the range, wherever they stand: the
    # checkpoint must cover them, and redactions.jsonl carries them
    erased_by = [by for (seq, _), by in redactions.items() if f.start <= seq < end]
    cp, files = _write_checkpoint(ctx, out, signer, max([end] + [by + 1 for by in erased_by]))
    v2 = tenant is not None or parse_extension(cp.extensions) is not None
    if tenant is not None:  # every entry of the tenant the checkpoint commits to
        f = with_window(replace(f, end=None), 0, cp.size)
        end = cp.size
    counts: dict[str, Counter[str]] = {"by_status": Counter(), "by_kind": Counter()}
    names = (KEY_EVENTS, ENTRIES, CSV_VIEW, PROOFS) + ((REDACTIONS,) if erased_by else ())
    outs = {name: _Out(out, name) for name in names}
    outs[CSV_VIEW].write(csv_bytes([CSV_HEADER]))
    with read_store(ctx.engine) as store, connect(ctx.engine) as conn:
        tree = StoredTree(store, cp.size)
        n_events = _write_entries(conn, make_filters(kind="key_event", end=cp.size),
                                  outs[KEY_EVENTS], outs[PROOFS], tree, cp.size,
                                  _Lines(v2=v2), redactions)
        if erased_by:
            wanted = set(erased_by) if tenant is not None else None
            _write_entries(conn, make_filters(kind="redaction", end=cp.size),
                           outs[REDACTIONS], outs[PROOFS], tree, cp.size,
                           _Lines(v2=v2, keep=None if wanted is None
                                  else (lambda r: r.seq in wanted)), redactions)
        n = _write_entries(conn, f, outs[ENTRIES], outs[PROOFS], tree, cp.size,
                           _Lines(proofs, v2), redactions, outs[CSV_VIEW], counts, progress)
        section = None if tenant is None else tenant_section(store, cp, tenant, n,
                                                             absence_proof)
    files.update({name: o.close() for name, o in outs.items()})
    manifest = {
        "format": EXPORT_FORMAT_V2 if v2 else EXPORT_FORMAT, "ledger_id": ctx.meta.ledger_id,
        "origin": ctx.meta.origin, "created_at": format_us(ctx.clock.now_us()),
        "filters": f.to_doc(), "range": {"start": f.start, "end": end},
        "contiguous": n == end - f.start, "proofs": proofs,
        "counts": {"entries": n, "key_events": n_events,
                   "by_status": dict(counts["by_status"]), "by_kind": dict(counts["by_kind"])},
        "checkpoint": {"size": cp.size, "root_hash": cp.root_hash.hex()},
        "files": {k: files[k] for k in sorted(files)}, "signing_kid": signer.kid,
        **({} if section is None else {"tenant": section})}
    _write_manifest(ctx, out, signer, manifest)
    return manifest


@dataclass(frozen=True)
class ExportOptions:
    """What :func:`export_filtered` exports and how the bundle is signed.

    ``filters``: the entries (default: all; ``make_filters``).  ``proofs``: ``interval`` or
    ``every`` (see ``export_bundle``).  The signer: ``signer`` (a ``Signer``), else the PEM
    private key ``key_file``, else the keyring directory ``keys`` (None: the default
    keyring)."""

    filters: Filters = field(default_factory=Filters)
    proofs: str = "interval"
    signer: Signer | None = None
    keys: str | os.PathLike[str] | None = None
    key_file: str | os.PathLike[str] | None = None
    tenant: str | None = None  # the tenant's complete chain (no filters then)
    absence_proof: bool = True  # an empty tenant's proof of absence (shows its neighbours)


def export_filtered(ctx: LedgerContext, out_dir: str | os.PathLike[str],
                    opts: ExportOptions | None = None, *,
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """``export_bundle`` with the options of ``opts`` (:class:`ExportOptions`)."""
    opts = opts or ExportOptions()
    signer = opts.signer
    if signer is None:
        signer = signer_from_pem(opts.key_file, ctx.meta.origin, ctx.clock.now_us()) \
            if opts.key_file else signer_from_keyring(Keyring.load(opts.keys), ctx.meta.origin)
    return export_bundle(ctx, out_dir, signer, opts.filters, proofs=opts.proofs,
                         progress=progress, tenant=opts.tenant,
                         absence_proof=opts.absence_proof)


def iter_records(ctx: LedgerContext, f: Filters, page: int = 1000) -> Iterator[bytes]:
    """The export record line (``entries.jsonl`` form) of every entry matching ``f``."""
    with connect(ctx.engine) as conn:
        redactions = load_redaction_map(conn)
        for rows in iter_pages(conn, f, page=page):
            for row, blobs in rows:
                yield export_line(row, blobs, redactions)


def export_zip(ctx: LedgerContext, keys: str | os.PathLike[str], f: Filters,
               work_dir: str | os.PathLike[str], tenant: str | None = None,
               absence_proof: bool = True) -> tuple[Path, dict[str, Any]]:
    """The bundle of the entries matching ``f`` (``export_bundle``, signed with the keyring
    ``keys``) written under ``work_dir`` and packed into ``work_dir/<name>.zip``: the zip's
    path and the manifest.  The zip holds the bundle's files under one folder named after
    the range; unpacked, ``ledger verify-export FOLDER`` verifies it.  Raises as
    ``export_bundle``."""
    import zipfile

    work = Path(work_dir)
    signer = signer_from_keyring(Keyring.load(keys), ctx.meta.origin)
    folder = work / "bundle"
    manifest = export_bundle(ctx, folder, signer, f, tenant=tenant, absence_proof=absence_proof)
    name = f"ledger-export-{manifest['range']['start']}-{manifest['range']['end']}"
    path = work / f"{name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.iterdir()):
            z.write(p, f"{name}/{p.name}")
    return path, manifest
