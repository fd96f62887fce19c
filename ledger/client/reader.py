"""``LedgerReader``: read entries from a ledger service and verify every one of them.

    with LedgerReader("http://ledger:8080", token, "reader-state.json",
                      keys=json.load(open("ledger-jwks.json"))) as reader:
        got = reader.get(17)        # VerifiedEntry, or a ReadUnverified error
        got.entry["status"], got.tree_size

The reader keeps a trusted state (the last checkpoint it verified, the ledger keys; a
local JSON file, ``ledger.client.trust_state``).  Every read asks for an inclusion proof
to that checkpoint's size; a newer checkpoint is accepted only with a consistency proof
from it, so a ledger that rolls back or forks its history is caught.  The checks
(``ledger.client.reader_core``) run on the bytes received, whatever the server's verdict
says.  Use an auditor token to have every value checked (the developer and agent layers
receive the inclusion path only).  Guide: docs/reader.md.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any, Self

import httpx

from ledger.client.reader_core import Fetch, Save, VerifiedEntry, get_flow, refresh_flow
from ledger.client.reader_http import JWKS_PATH, read_tile_file, tile_directory, unreachable
from ledger.client.reader_tiles import tiles_get_flow, tiles_refresh_flow
from ledger.client.trust_state import TrustedState, load_state, save_state
from ledger.errors import TrustStateInvalid


def first_state(path: str | os.PathLike[str], keys: dict[str, Any] | None,
                witnesses: tuple[str, ...], quorum: int) -> TrustedState | None:
    """The stored state, or the anchor made of ``keys`` when there is no state file yet
    (None: neither, trust on first use must fetch the keys).  A state file that exists
    wins over ``keys`` (the keys it holds are the ones that were trusted)."""
    state = load_state(path)
    if state is not None:
        return state
    if keys is not None:
        return TrustedState.anchor(keys, witnesses=witnesses, quorum=quorum)
    return None


def no_anchor(path: str | os.PathLike[str]) -> TrustStateInvalid:
    return TrustStateInvalid(
        f"no trusted state at {path} and no trust anchor: give the ledger's JWKS (keys=,"
        " ledger get --key) or choose trust on first use explicitly", field="key")


class LedgerReader:
    """A verifying reader of one ledger service (see the module docstring).

    ``state_path``: the trusted-state file (created on the first read).  ``keys``: the
    ledger's JWKS as a dict, the trust anchor when there is no state file yet;
    ``trust_on_first_use=True`` instead takes the keys the server publishes the first
    time (and only then).  ``witnesses`` (C2SP verifier keys) and ``quorum``: every new
    checkpoint needs that many valid witness cosignatures.

    ``tiles=True``: ``url`` is a C2SP tlog-tiles prefix -- a ``ledger serve`` (its
    ``/checkpoint`` and ``/tile/`` routes), the URL under which a ``ledger tiles write``
    directory is published, or that directory itself -- and every proof is computed from
    verified tiles (``ledger.client.reader_tiles``; docs/reader.md#reading-from-tiles).
    Raises TrustStateInvalid, ClientUsage (a tile directory that does not exist)."""

    def __init__(self, url: str, token: str | None, state_path: str | os.PathLike[str], *,
                 keys: dict[str, Any] | None = None, trust_on_first_use: bool = False,
                 witnesses: tuple[str, ...] = (), quorum: int = 0, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None, tiles: bool = False) -> None:
        self.url, self.state_path, self.tiles = url.rstrip("/"), state_path, tiles
        self.directory = tile_directory(url) if tiles else None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url + ("/" if tiles else ""), headers=headers,
                                 timeout=timeout, transport=transport)
        try:
            state = first_state(state_path, keys, witnesses, quorum)
            if state is None:
                if not trust_on_first_use:
                    raise no_anchor(state_path)
                jwks = self._fetch(Fetch(JWKS_PATH))[1]
                state = TrustedState.anchor(jwks if isinstance(jwks, dict) else {},
                                            witnesses=witnesses, quorum=quorum)
        except BaseException:
            self.http.close()
            raise
        self.state = state

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def get(self, seq: int) -> VerifiedEntry:
        """Entry ``seq``, verified (docs/reader.md#verification-steps).  Raises a
        ReadUnverified error (RolledBack, Forked, CheckpointRejected, ProofRejected,
        EntryUnverified; ``code`` says which check), NotFound (no such entry, or no
        checkpoint covers it yet: ``not_checkpointed``), AccessDenied, LedgerUnavailable."""
        flow = tiles_get_flow if self.tiles else get_flow
        verified, self.state = self._run(flow(self.state, seq))
        return verified  # type: ignore[no-any-return]

    def refresh(self) -> TrustedState:
        """Move the trusted state to the ledger's latest checkpoint (with its consistency
        proof); returns the state.  Raises as :meth:`get`."""
        flow = tiles_refresh_flow if self.tiles else refresh_flow
        self.state = self._run(flow(self.state))
        return self.state

    def _run(self, flow: Generator[Any, Any, Any]) -> Any:
        reply: Any = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Save):
                save_state(self.state_path, step.state)
                self.state, reply = step.state, None
            else:
                reply = self._fetch(step)

    def _fetch(self, step: Fetch) -> tuple[int, Any]:
        if self.directory is not None:
            return read_tile_file(self.directory, step.path)
        try:
            r = self.http.get(step.path, params=step.params)
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc
        if step.raw:
            return r.status_code, r.content
        return r.status_code, r.text if step.text else _json(r)


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return None
