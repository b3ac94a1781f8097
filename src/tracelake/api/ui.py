"""The web UI: static files (`static/`: index.html, app.js, app.css) served by the API's own server.

No build step and no third-party script: the browser calls the JSON API under
`/api/tracelake/v1` like any other client, with the same bearer token when one is set. The
pages themselves hold no data, so they are served without a token. `mount_ui(app)` adds:

- `GET /` and `GET /ui` → a redirect to `/ui/` (relative, so a path prefix set by a proxy stays);
- `GET /ui/` → index.html, with a content security policy that allows only this origin's
  scripts, styles and requests (the UI renders URNs and labels that anyone who can post a
  batch controls, and builds its DOM with `textContent`, never markup);
- `/ui/<file>` → the other static files.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().with_name("static")
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)

router = APIRouter(include_in_schema=False)


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui")
def ui_without_slash() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui/")
def index() -> FileResponse:
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html",
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
        },
    )


def mount_ui(app: FastAPI) -> None:
    """Serve the web UI from `app`: the routes above, then the static files under /ui."""
    app.include_router(router)
    app.mount("/ui", StaticFiles(directory=STATIC), name="ui")
