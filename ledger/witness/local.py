"""An in-process witness on 127.0.0.1 for the demo and benchmarks.

The same :class:`ledger.witness.service.Witness` as ``ledger witness serve`` (its own
SQLite state file, the same checks and answers), behind the standard library's threaded
HTTP server instead of uvicorn, so that it starts in milliseconds.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

from ledger.crypto.cosign import load_cosigner, load_vkeys
from ledger.crypto.keys import known_keys, load_public_keys
from ledger.crypto.note_sign import KnownKeys
from ledger.witness.config import WitnessConfig
from ledger.witness.service import MAX_REQUEST_BYTES, Answer, Witness


class LocalWitness:
    """``with LocalWitness(folder, name, {origin: jwks_path}) as w: w.url, w.vkey_file``."""

    def __init__(self, folder: Path, name: str, logs: dict[str, Path]) -> None:
        from ledger.crypto.cosign import generate_cosigner

        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "witness.pem").exists():
            generate_cosigner(folder, name)
        self.name, self.vkey_file = name, folder / "witness.vkey"
        keys: dict[str, KnownKeys] = {o: known_keys(load_public_keys(p), o)
                                      for o, p in logs.items()}
        self.witness = Witness(WitnessConfig(name, load_cosigner(folder / "witness.pem"),
                                             folder / "state.db", keys))
        self.key = load_vkeys(self.vkey_file)[0]
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.witness))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(witness: Witness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(size, MAX_REQUEST_BYTES + 1))
            self.close_connection = size > MAX_REQUEST_BYTES  # the rest is never read
            if self.path.rstrip("/") != "/add-checkpoint":
                answer_status, text, ctype = 404, "not found\n", "text/plain"
            else:
                a = witness.add_checkpoint(body)
                answer_status, text, ctype = a.status, a.text, a.content_type
            self._answer(answer_status, text, ctype)

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[1] == "checkpoint":
                a = witness.monitor_checkpoint(parts[0])
            else:
                a = Answer(404, "not found\n")
            self._answer(a.status, a.text, a.content_type)

        def _answer(self, status: int, text: str, ctype: str) -> None:
            data = text.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler
