"""Nova's own web page: ``GET /`` (the page) and ``GET /web/{file}`` (its CSS and JavaScript
modules), served from the files inside the package (``novaberg/server/web/``): no CDN, nothing
fetched at run time, no build step. ``GET /web/config.json`` tells the page the server's
``language`` (the only thing it needs before the user signs in; no key, nothing else).

Every response carries a Content-Security-Policy that allows only this server's own scripts
and styles (no inline script or style, no other origin), and ``Cache-Control: no-cache`` with
an ``ETag``: a browser revalidates each time and gets a 304 while the files are unchanged, so a
newer Novaberg never runs against an old cached script.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from novaberg.server.auth import engine_of
from novaberg.server.errors import ApiProblem

router = APIRouter(include_in_schema=False)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; media-src blob:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
NAME = re.compile(r"[a-z][a-z0-9_-]{0,40}\.(?:css|js|svg)")


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _load() -> dict[str, Asset]:
    """The page's files, read once (they are part of the installed package)."""
    folder = resources.files("novaberg.server") / "web"
    assets: dict[str, Asset] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in TYPES:
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            assets[entry.name] = Asset(body, TYPES[suffix], etag)
    return assets


ASSETS = _load()


def page_weight() -> int:
    """HTML + CSS + JavaScript of the page, uncompressed, in bytes."""
    return sum(len(a.body) for name, a in ASSETS.items() if not name.endswith(".svg"))


def _serve(request: Request, asset: Asset) -> Response:
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache", "ETag": asset.etag}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


@router.get("/")
async def index(request: Request) -> Response:
    return _serve(request, ASSETS["index.html"])


@router.get("/web/config.json")
async def config(request: Request) -> JSONResponse:
    """What the page needs before signing in: the server's language."""
    body: dict[str, Any] = {"language": engine_of(request).settings.language}
    return JSONResponse(body, headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


@router.get("/web/{name}")
async def asset(name: str, request: Request) -> Response:
    found = ASSETS.get(name) if NAME.fullmatch(name) else None
    if found is None:
        raise ApiProblem(404, "There is no such file.")
    return _serve(request, found)
