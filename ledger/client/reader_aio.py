"""``AsyncLedgerReader``: :class:`ledger.client.reader.LedgerReader` for asyncio (the same
checks, ``ledger.client.reader_core``; the state file is written in a worker thread).

    async with AsyncLedgerReader(url, token, "reader-state.json", keys=jwks) as reader:
        got = await reader.get(17)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator
from typing import Any, Self

import httpx

from ledger.client.reader import first_state, no_anchor
from ledger.client.reader_core import Fetch, Save, VerifiedEntry, get_flow, refresh_flow
from ledger.client.reader_http import JWKS_PATH, read_tile_file, tile_directory, unreachable
from ledger.client.reader_tiles import tiles_get_flow, tiles_refresh_flow
from ledger.client.trust_state import TrustedState, save_state


class AsyncLedgerReader:
    """See :class:`ledger.client.reader.LedgerReader`; create it, then ``await
    reader.open()`` (or ``async with``) before the first read."""

    def __init__(self, url: str, token: str | None, state_path: str | os.PathLike[str], *,
                 keys: dict[str, Any] | None = None, trust_on_first_use: bool = False,
                 witnesses: tuple[str, ...] = (), quorum: int = 0, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None, tiles: bool = False,
                 ) -> None:
        self.url, self.state_path, self.tiles = url.rstrip("/"), state_path, tiles
        self.directory = tile_directory(url) if tiles else None
        self._anchor = (keys, trust_on_first_use, tuple(witnesses), quorum)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=self.url + ("/" if tiles else ""),
                                      headers=headers, timeout=timeout, transport=transport)
        self.state: TrustedState | None = None

    async def open(self) -> Self:
        """Load the trusted state (or make the first one).  Raises TrustStateInvalid."""
        keys, tofu, witnesses, quorum = self._anchor
        state = await asyncio.to_thread(first_state, self.state_path, keys, witnesses, quorum)
        if state is None:
            if not tofu:
                raise no_anchor(self.state_path)
            jwks = (await self._fetch(Fetch(JWKS_PATH)))[1]
            state = TrustedState.anchor(jwks if isinstance(jwks, dict) else {},
                                        witnesses=witnesses, quorum=quorum)
        self.state = state
        return self

    async def __aenter__(self) -> Self:
        try:
            return await self.open()
        except BaseException:
            await self.http.aclose()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get(self, seq: int) -> VerifiedEntry:
        """As ``LedgerReader.get``."""
        flow = tiles_get_flow if self.tiles else get_flow
        verified, self.state = await self._run(flow(await self._state(), seq))
        return verified  # type: ignore[no-any-return]

    async def refresh(self) -> TrustedState:
        """As ``LedgerReader.refresh``."""
        flow = tiles_refresh_flow if self.tiles else refresh_flow
        self.state = await self._run(flow(await self._state()))
        return self.state

    async def _state(self) -> TrustedState:
        if self.state is None:
            await self.open()
        assert self.state is not None
        return self.state

    async def _run(self, flow: Generator[Any, Any, Any]) -> Any:
        reply: Any = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Save):
                await asyncio.to_thread(save_state, self.state_path, step.state)
                self.state, reply = step.state, None
            else:
                reply = await self._fetch(step)

    async def _fetch(self, step: Fetch) -> tuple[int, Any]:
        if self.directory is not None:
            return await asyncio.to_thread(read_tile_file, self.directory, step.path)
        try:
            r = await self.http.get(step.path, params=step.params)
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc
        if step.raw:
            return r.status_code, r.content
        if step.text:
            return r.status_code, r.text
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, None
