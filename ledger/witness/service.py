"""The witness: C2SP tlog-witness ``add-checkpoint`` over HTTP, answering cosignatures.

``POST /add-checkpoint`` (body: ``old <size>``, proof lines, blank line, signed note):

    400  malformed request, or old size larger than the checkpoint
    403  no signature by a key configured for the origin verifies
    404  the origin is not configured
    409  old size is not the size last cosigned (body ``<size>\\n``, text/x.tlog.size),
         or same size with another root hash
    422  the consistency proof from the last cosigned checkpoint does not verify
    200  one ``cosignature/v1`` line per witness key

The check and the state update are one transaction; refused requests with a valid log
signature are kept in the state file (they may be evidence of a misbehaving log).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from ledger.core.cosignature import (
    SIZE_CONTENT_TYPE,
    AddCheckpoint,
    parse_add_checkpoint,
)
from ledger.core.merkle import verify_consistency
from ledger.core.note import Checkpoint, parse_checkpoint_body, parse_note
from ledger.crypto.cosign import cosign
from ledger.crypto.note_sign import verify_note
from ledger.errors import NoteError, NoteSignatureError, ProofError
from ledger.store.witness_state import WitnessState
from ledger.witness.config import WitnessConfig

MAX_REQUEST_BYTES = 1 << 20


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: ``status``, ``content_type`` and ``text``."""

    status: int
    text: str
    content_type: str = "text/plain; charset=utf-8"


class Witness:
    """One configured witness over its state file."""

    def __init__(self, config: WitnessConfig) -> None:
        self.config = config
        self.state = WitnessState(config.state)

    def add_checkpoint(self, body: bytes, now_s: int | None = None) -> Answer:
        """Handle one request body; never raises for bad input (StoreUnavailable may)."""
        now_s = int(time.time()) if now_s is None else now_s
        if len(body) > MAX_REQUEST_BYTES:
            return Answer(400, "request too large\n")
        try:
            req = parse_add_checkpoint(body)
            cp = parse_checkpoint_body(parse_note(req.note).text)
        except NoteError as exc:
            return Answer(400, exc.message + "\n")
        keys = self.config.logs.get(cp.origin)
        if keys is None:
            return Answer(404, f"unknown log origin {cp.origin!r}\n")
        try:
            verify_note(req.note, keys)
        except (NoteError, NoteSignatureError) as exc:
            return Answer(403, exc.message + "\n")
        if req.old_size > cp.size:
            return self._refuse(cp, 400, f"old size {req.old_size} is larger than the"
                                f" checkpoint size {cp.size}", body, now_s)
        with self.state.transaction() as txn:
            held = txn.get(cp.origin)
            size, root = (held.size, held.root_hash) if held else (0, None)
            answer = self._check(req, cp, size, root)
            if answer is None:
                txn.put(cp.origin, cp.size, cp.root_hash, req.note, now_s)
        if answer is not None:
            return self._refuse(cp, answer.status, answer.text.strip(), body, now_s, answer)
        body_text = parse_note(req.note).text
        return Answer(200, cosign(body_text, self.config.name, self.config.key, now_s))

    @staticmethod
    def _check(req: AddCheckpoint, cp: Checkpoint, size: int, root: bytes | None
               ) -> Answer | None:
        """None if ``cp`` extends the held (size, root); else the refusal."""
        if req.old_size != size:
            return Answer(409, f"{size}\n", SIZE_CONTENT_TYPE)
        if cp.size == size and root is not None:
            if cp.root_hash != root or req.proof:
                return Answer(409, f"{size}\n", SIZE_CONTENT_TYPE)
            return None
        if size == 0 or root is None:
            return Answer(422, "the proof from size 0 must be empty\n") if req.proof else None
        try:
            verify_consistency(size, cp.size, list(req.proof), root, cp.root_hash)
        except ProofError as exc:
            return Answer(422, f"consistency proof from {size} does not verify:"
                          f" {exc.message}\n")
        return None

    def _refuse(self, cp: Checkpoint, status: int, reason: str, body: bytes, now_s: int,
                answer: Answer | None = None) -> Answer:
        self.state.record_refusal(cp.origin, status, reason, body, now_s)
        return answer or Answer(status, reason + "\n")


def create_witness_app(config: WitnessConfig) -> FastAPI:
    """The FastAPI application of one witness (``ledger witness serve``)."""
    witness = Witness(config)
    app = FastAPI(title="ledger witness", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.witness = witness

    @app.post("/add-checkpoint")
    async def add_checkpoint(request: Request) -> PlainTextResponse:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                break
        answer = await run_in_threadpool(witness.add_checkpoint, body)
        return PlainTextResponse(answer.text, status_code=answer.status,
                                 media_type=answer.content_type)

    @app.get("/vkey")
    def vkey() -> PlainTextResponse:
        return PlainTextResponse(config.vkey + "\n")

    return app
