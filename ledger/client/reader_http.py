"""What the reader makes of an HTTP answer (shared by the sync and async readers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.errors import AccessDenied, ClientUsage, LedgerUnavailable, NotFound

CHECKPOINT_PATH = "/v1/checkpoint"
CONSISTENCY_PATH = "/v1/proofs/consistency"
JWKS_PATH = "/.well-known/jwks.json"


def entry_path(seq: int) -> str:
    return f"/v1/entries/{seq}"


def entry_params(tree_size: int) -> dict[str, str]:
    return {"proof": "true", "tree_size": str(tree_size)}


def consistency_params(old: int, new: int) -> dict[str, str]:
    return {"from": str(old), "to": str(new)}


def _error(body: Any) -> dict[str, Any]:
    err = body.get("error") if isinstance(body, dict) else None
    return err if isinstance(err, dict) else {}


def refusal(status: int, body: Any) -> Exception | None:
    """The error an answer of ``status`` (``body``: its parsed JSON or None) means; None
    for a 2xx.  4xx keep the ledger's code and field."""
    if status < 300:
        return None
    err = _error(body)
    code, field = str(err.get("code", f"http_{status}")), err.get("field")
    message = f"the ledger answered {status}: {err.get('message', 'no problem document')}"
    if status >= 500:
        return LedgerUnavailable(message, code=code)
    if status in (401, 403):
        return AccessDenied(message, code=code, field=field)
    if status == 404:
        return NotFound(message, code=code, field=field, detail=err.get("detail") or {})
    return ClientUsage(message, code=code, field=field)


def unreachable(url: str, exc: Exception) -> LedgerUnavailable:
    return LedgerUnavailable(f"cannot reach the ledger at {url}: {exc}",
                             code="ledger_unavailable")


def tile_directory(url: str) -> Path | None:
    """The local directory a tile prefix names (a path, or a ``file://`` URL), or None for
    an ``http(s)://`` prefix.  Raises ClientUsage (field ``url``) for a directory that does
    not exist."""
    if url.startswith(("http://", "https://")):
        return None
    path = Path(url[len("file://"):] if url.startswith("file://") else url)
    if not path.is_dir():
        raise ClientUsage(f"the tile prefix {url} is neither an http(s) URL nor a directory",
                          code="tiles_not_found", field="url")
    return path


def read_tile_file(directory: Path, path: str) -> tuple[int, bytes | None]:
    """``(200, bytes)`` of ``path`` (relative, as the tile flows name it) under
    ``directory``; ``(404, None)`` when there is no such file."""
    file = directory / path
    try:
        return 200, file.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return 404, None
    except OSError as exc:
        raise LedgerUnavailable(f"cannot read {file}: {exc}", code="ledger_unavailable") from exc
