"""A real webhook receiver for the alert tests, run as its own process:

    python -m tests.system.webhook_receiver OUT [--fail-first N] [--fail-status CODE]
                                                [--drip-s S] [--answer-bytes N]

Listens on 127.0.0.1 (a port the OS picks; printed as ``listening PORT``), appends every
POST as one JSON line ``{"n", "headers", "body"}`` to OUT, and answers 500 to the first N
requests (``--fail-status``, to exercise the sender's retries), 204 afterwards.
``--drip-s S``: a hostile slow receiver: the answer's bytes come one every 0.2 s for S
seconds (never a whole status line).  ``--answer-bytes N``: answer 200 with an N-byte
body as fast as the sender reads; the bytes it took are written to OUT.sent when the
sender hangs up.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-status", type=int, default=500)
    ap.add_argument("--drip-s", type=float, default=0.0)
    ap.add_argument("--answer-bytes", type=int, default=0)
    args = ap.parse_args()
    lock = threading.Lock()
    seen = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                seen["n"] += 1
                n = seen["n"]
                with open(args.out, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"n": n, "headers": dict(self.headers),
                                         "body": body.decode("utf-8")}) + "\n")
            if args.drip_s:
                self.drip(args.drip_s)
            elif args.answer_bytes:
                self.big(args.answer_bytes)
            else:
                self.send_response(args.fail_status if n <= args.fail_first else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def drip(self, seconds: float) -> None:
            end = time.monotonic() + seconds
            try:
                for byte in itertools.cycle(b"HTTP/1.1"):  # no line end: never a status line
                    if time.monotonic() >= end:
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                return

        def big(self, size: int) -> None:
            sent = 0
            chunk = b"x" * (1 << 20)
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                while sent < size:
                    self.wfile.write(chunk[:size - sent])
                    sent += min(len(chunk), size - sent)
            except OSError:
                pass
            with open(args.out + ".sent", "w", encoding="utf-8") as fh:
                fh.write(str(sent))

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
