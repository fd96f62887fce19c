"""A real webhook receiver for the alert tests, run as its own process:

    python -m tests.system.webhook_receiver OUT [--fail-first N] [--fail-status CODE]

Listens on 127.0.0.1 (a port the OS picks; printed as ``listening PORT``), appends every
POST as one JSON line ``{"n", "headers", "body"}`` to OUT, and answers 500 to the first N
requests (``--fail-status``, to exercise the sender's retries), 204 afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-status", type=int, default=500)
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
            self.send_response(args.fail_status if n <= args.fail_first else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
