"""A loopback RFC 3161 time-stamping authority for the demo, tests and benchmarks.

The TSA itself is OpenSSL's (``openssl ts -reply``); this module has a throw-away CA
and TSA certificate made (:func:`ledger.crypto.local_ca.make_tsa_certs`), writes
OpenSSL's TSA configuration, and serves ``POST /`` on
127.0.0.1 by running ``openssl ts -reply`` once per request.  Not for production:
the keys live unencrypted in a temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

from ledger.crypto.local_ca import make_tsa_certs

POLICY = "1.3.6.1.4.1.55555.1.1"  # a made-up OID of the test policy

CONFIG = """\
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
dir = {dir}
serial = $dir/serial
crypto_device = builtin
signer_cert = $dir/tsa.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = {policy}
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


class LocalTsa:
    """``with LocalTsa() as tsa: tsa.url, tsa.ca_file``: an OpenSSL TSA on 127.0.0.1
    (``chain=True``: its certificate is issued by an intermediate CA, and tokens carry
    the intermediate and the root too; ``tsa.ca_file`` is the root alone)."""

    def __init__(self, folder: Path | None = None, policy: str = POLICY,
                 chain: bool = False) -> None:
        if shutil.which("openssl") is None:
            raise RuntimeError("the openssl command is not installed")
        self._tmp = None if folder else tempfile.TemporaryDirectory(prefix="ledger-tsa-")
        self.folder = Path(folder or self._tmp.name)  # type: ignore[union-attr]
        self.folder.mkdir(parents=True, exist_ok=True)
        make_tsa_certs(self.folder, intermediate=chain)
        # chain: a root, an intermediate and the TSA certificate; every answer carries the
        # intermediate and the root besides the TSA certificate (``openssl ts -chain``)
        self.extra = ["-chain", str(self.folder / "extra-certs.pem")] if chain else []
        self.policy = policy
        self.config = self.folder / "tsa.cnf"
        self.config.write_text(CONFIG.format(dir=self.folder, policy=policy))
        self.lock = threading.Lock()  # openssl ts increments one serial file
        self.requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.ca_file = self.folder / "ca.pem"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, query: bytes) -> bytes:
        """Run ``openssl ts -reply`` on one DER TimeStampReq; the DER TimeStampResp."""
        with self.lock, tempfile.TemporaryDirectory(dir=self.folder) as work:
            q, r = Path(work) / "q.tsq", Path(work) / "r.tsr"
            q.write_bytes(query)
            subprocess.run(["openssl", "ts", "-reply", "-config", str(self.config),
                            "-queryfile", str(q), "-out", str(r), *self.extra], check=True,
                           capture_output=True, timeout=30)
            self.requests += 1
            return r.read_bytes()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._tmp is not None:
            self._tmp.cleanup()


def _handler(tsa: LocalTsa) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            query = self.rfile.read(min(size, 1 << 16))
            try:
                body, status = tsa.reply(query), 200
            except subprocess.CalledProcessError:
                body, status = b"bad request", 400
            self.send_response(status)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler
