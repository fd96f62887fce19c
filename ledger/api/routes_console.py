"""GET /console/: the web console, packaged static files (ledger/console/).

The files hold no data: everything the console shows it fetches from the API with the
bearer token the user signs in with, at that token's layer.  They are served without a
token, with a strict Content-Security-Policy (scripts and styles from this origin only:
no inline script, no inline style, no eval; fetches to this origin only; no framing).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from ledger.errors import NotFound

router = APIRouter(tags=["console"], include_in_schema=False)

STATIC = Path(__file__).resolve().parent.parent / "console"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Cache-Control": "no-cache"}


def _files() -> dict[str, Path]:
    return {p.name: p for p in STATIC.iterdir() if p.is_file() and p.suffix in TYPES}


@router.get("/console")
def console_root() -> Response:
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/")
def console_index() -> Response:
    return console_file("index.html")


@router.get("/console/{name}")
def console_file(name: str) -> Response:
    """One file of the console by its exact name (no paths); 404 ``no_such_route``."""
    path = _files().get(name)
    if path is None:
        raise NotFound(f"no console file {name!r}", code="no_such_route")
    return Response(path.read_bytes(), media_type=TYPES[path.suffix], headers=HEADERS)
