"""The witness: C2SP tlog-witness ``add-checkpoint`` over HTTP, answering cosignatures, and
the monitor retrieval endpoint.

``POST /add-checkpoint`` (body: ``old <size>``, proof lines, blank line, signed note), in
the order c2sp.org/tlog-witness checks them:

    413  the body is larger than ``MAX_REQUEST_BYTES`` (64 KiB; not read past that)
    400  malformed request, or old size larger than the checkpoint
    404  the origin is not configured
    403  no signature by a key configured for the origin verifies
    409  old size is not the size last cosigned (body ``<size>\\n``, text/x.tlog.size)
    422  a size-0 checkpoint whose root is not SHA-256 of the empty string; a proof from
         size 0 that is not empty; a consistency proof from the last cosigned checkpoint
         that does not verify; the same size as the last cosigned with another root hash
    200  one ``cosignature/v1`` line per witness key

``GET /<hex SHA-256 of the origin>/checkpoint``: the latest checkpoint cosigned for that
origin, with the log signatures that verified and the witness's cosignature returned for
it (404 if it never cosigned one).

The check and the state update are one transaction.  Refused requests with a valid log
signature are kept in the state file (they may be evidence of a misbehaving log), bounded:
what is kept is the request reduced to the old size, the proof, the checkpoint text and
the log signatures that verified (signature lines by unknown keys, which anyone can add,
are dropped), once per origin, status and checkpoint text, later ones only counted
(``ledger.store.witness_state``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from ledger.core.cosignature import (
    SIZE_CONTENT_TYPE,
    AddCheckpoint,
    cosigner_key_id,
    format_add_checkpoint,
    parse_add_checkpoint,
)
from ledger.core.merkle import EMPTY_ROOT, verify_consistency
from ledger.core.note import (
    Checkpoint,
    Note,
    format_signature_line,
    parse_checkpoint_body,
    parse_note,
)
from ledger.crypto.cosign import cosign, raw_public_key
from ledger.crypto.note_sign import KnownKeys, verify_note
from ledger.errors import NoteError, NoteSignatureError, ProofError
from ledger.store.witness_state import LogState, WitnessState
from ledger.witness.config import WitnessConfig

MAX_REQUEST_BYTES = 64 * 1024  # a checkpoint, 100 signature lines and 63 proof hashes fit


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: ``status``, ``content_type`` and ``text``."""

    status: int
    text: str
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Evidence:
    """What a refusal keeps: the reduced request ``body`` and the ``digest`` (SHA-256 of
    the checkpoint text) it is kept once for."""

    body: bytes
    digest: bytes


def origin_hash(origin: str) -> str:
    """The monitoring path component of ``origin``: lowercase hex SHA-256."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


def known_signatures(note: Note, keys: KnownKeys) -> str:
    """The signature lines of ``note`` by keys in ``keys`` (verified by the caller)."""
    return "".join(format_signature_line(s) for s in note.signatures
                   if (s.name, s.key_id) in keys)


class Witness:
    """One configured witness over its state file."""

    def __init__(self, config: WitnessConfig) -> None:
        self.config = config
        self.state = WitnessState(config.state)
        self._by_hash = {origin_hash(o): o for o in config.logs}
        self._own_id = (config.name, cosigner_key_id(config.name, raw_public_key(config.key)))

    def add_checkpoint(self, body: bytes, now_s: int | None = None) -> Answer:
        """Handle one request body; never raises for bad input (StoreUnavailable may)."""
        now_s = int(time.time()) if now_s is None else now_s
        if len(body) > MAX_REQUEST_BYTES:
            return Answer(413, f"request body exceeds {MAX_REQUEST_BYTES} bytes\n")
        try:
            req = parse_add_checkpoint(body)
            note = parse_note(req.note)
            cp = parse_checkpoint_body(note.text)
        except NoteError as exc:
            return Answer(400, exc.message + "\n")
        keys = self.config.logs.get(cp.origin)
        if keys is None:
            return Answer(404, f"unknown log origin {cp.origin!r}\n")
        try:
            verify_note(req.note, keys)
        except (NoteError, NoteSignatureError) as exc:
            return Answer(403, exc.message + "\n")
        # from here on the log signed it: what is stored is the text and those signatures
        signed = note.text + "\n" + known_signatures(note, keys)
        evidence = Evidence(format_add_checkpoint(req.old_size, req.proof, signed).encode(),
                            hashlib.sha256(note.text.encode("utf-8")).digest())
        if req.old_size > cp.size:
            return self._refuse(cp, Answer(400, f"old size {req.old_size} is larger than the"
                                           f" checkpoint size {cp.size}\n"), evidence, now_s)
        with self.state.transaction() as txn:
            held = txn.get(cp.origin)
            answer = self._check(req, cp, held)
            if answer is None:
                line = cosign(note.text, self.config.name, self.config.key, now_s)
                txn.put(cp.origin, cp.size, cp.root_hash, signed + line, now_s)
        if answer is not None:
            return self._refuse(cp, answer, evidence, now_s)
        return Answer(200, line)

    @staticmethod
    def _check(req: AddCheckpoint, cp: Checkpoint, held: LogState | None) -> Answer | None:
        """None if ``cp`` extends the held checkpoint; else the refusal."""
        # a held size 0 is the empty tree whatever root was stored for it
        size, root = (held.size, held.root_hash) if held and held.size else (0, EMPTY_ROOT)
        if req.old_size != size:
            return Answer(409, f"{size}\n", SIZE_CONTENT_TYPE)
        if cp.size == 0 and cp.root_hash != EMPTY_ROOT:
            return Answer(422, "a checkpoint of size 0 must have the root hash of the empty"
                          " tree (SHA-256 of the empty string)\n")
        if size == 0:
            return Answer(422, "the proof from size 0 must be empty\n") if req.proof else None
        if cp.size == size:
            if cp.root_hash != root:
                return Answer(422, f"the checkpoint has size {size}, the size cosigned last,"
                              " with another root hash\n")
            return Answer(422, "the proof between equal sizes must be empty\n") if (
                req.proof) else None
        try:
            verify_consistency(size, cp.size, list(req.proof), root, cp.root_hash)
        except ProofError as exc:
            return Answer(422, f"consistency proof from {size} does not verify:"
                          f" {exc.message}\n")
        return None

    def _refuse(self, cp: Checkpoint, answer: Answer, evidence: Evidence,
                now_s: int) -> Answer:
        reason = answer.text.strip()
        if answer.status == 409:
            reason = f"old size is not the size held ({reason})"
        self.state.record_refusal(cp.origin, answer.status, reason, evidence.body, now_s,
                                  evidence.digest)
        return answer

    def monitor_checkpoint(self, hashed_origin: str) -> Answer:
        """``GET /<origin hash>/checkpoint``: the latest cosigned checkpoint, or 404."""
        origin = self._by_hash.get(hashed_origin)
        held = self.state.get(origin) if origin is not None else None
        if origin is None or held is None:
            return Answer(404, "no checkpoint cosigned for this origin\n")
        note = parse_note(held.note)
        keys = self.config.logs[origin]
        lines = known_signatures(note, keys)
        own = [s for s in note.signatures if (s.name, s.key_id) == self._own_id]
        if own:
            lines += "".join(format_signature_line(s) for s in own)
        else:  # a state row from before the cosignature was stored: the same line again
            lines += cosign(note.text, self.config.name, self.config.key, held.updated_at)
        return Answer(200, note.text + "\n" + lines)


def create_witness_app(config: WitnessConfig) -> FastAPI:
    """The FastAPI application of one witness (``ledger witness serve``)."""
    witness = Witness(config)
    app = FastAPI(title="ledger witness", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.witness = witness

    @app.post("/add-checkpoint")
    async def add_checkpoint(request: Request) -> PlainTextResponse:
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_REQUEST_BYTES:
            body = b"\0" * (MAX_REQUEST_BYTES + 1)  # refused without reading it
        else:
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_REQUEST_BYTES:
                    break
        answer = await run_in_threadpool(witness.add_checkpoint, body)
        return _response(answer)

    @app.get("/{hashed_origin}/checkpoint")
    def monitor(hashed_origin: str) -> PlainTextResponse:
        return _response(witness.monitor_checkpoint(hashed_origin))

    @app.get("/vkey")
    def vkey() -> PlainTextResponse:
        return PlainTextResponse(config.vkey + "\n")

    return app


def _response(answer: Answer) -> PlainTextResponse:
    headers = {"Connection": "close"} if answer.status == 413 else None
    return PlainTextResponse(answer.text, status_code=answer.status,
                             media_type=answer.content_type, headers=headers)
