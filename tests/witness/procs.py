"""Real ``ledger witness serve`` processes on loopback for the tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ledger.crypto.cosign import generate_cosigner


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WitnessProcess:
    """A witness named ``name`` for ``origin`` (log keys: ``key_files``) in ``folder``."""

    def __init__(self, folder: Path, name: str, origin: str, key_files: list[Path]) -> None:
        self.folder, self.name = folder, name
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "witness.pem").exists():
            generate_cosigner(folder, name)
        self.vkey_file = folder / "witness.vkey"
        self.vkey = self.vkey_file.read_text().strip()
        self.config = folder / "witness.json"
        self.config.write_text(json.dumps({
            "name": name, "key": "witness.pem", "state": "state.db",
            "logs": [{"origin": origin, "key_files": [str(p) for p in key_files]}]}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WitnessProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledger", "witness", "serve", "--config", str(self.config),
             "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"witness exited: {self.proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(self.url + "/vkey", timeout=1) as resp:
                    if resp.read().decode().strip() == self.vkey:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("witness did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None

    def post(self, body: bytes) -> tuple[int, str, str]:
        """(status, content type, text) of a raw add-checkpoint request."""
        req = urllib.request.Request(self.url + "/add-checkpoint", data=body, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()
