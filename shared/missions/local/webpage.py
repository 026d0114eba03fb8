"""The web page's files as `missions dev` serves them: the dashboard people use, beside the API.

The page is plain ES modules and CSS in `missions/web/` (package data: an installed `missions dev`
serves it too; no build step). It talks to the public API only, so this serves files and nothing else:
- GET `/` is `index.html`; GET `/ui/<file>` is that file; GET `/config.json` tells the page where the
  API is and how to sign in (here: the same origin, dev tokens). In AWS another host serves the same
  files with a config naming the API, the stream URL and Cognito.
- No identity is needed and no handler runs: a static request never takes the api function's slot.
- Every reply carries a strict Content-Security-Policy (scripts and styles from this origin only, no
  inline script), so nothing the page shows (a goal, an answer) can run as code; and no-sniff, no
  framing, no referrer.
- A path that leaves the folder (`..`, encoded or not), names a folder, or is not there is a 404.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from urllib.parse import unquote

UI_PREFIX = "/ui/"
CONFIG_PATH = "/config.json"
DEV_CONFIG = {"auth": "dev", "api": "", "stream": ""}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cache-control", "no-cache"),  # edit a file, reload: the browser asks again (an ETag-less dev server)
]


def web_root() -> Path:
    """The page's folder inside the installed package."""
    return Path(str(resources.files("missions") / "web"))


def is_static(path: str) -> bool:
    return path in ("/", "/index.html", CONFIG_PATH) or path.startswith(UI_PREFIX)


def respond_static(method: str, path: str, root: Path | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) of a static request: `path` is the raw (still percent-encoded) path."""
    if method not in ("GET", "HEAD"):
        return _text(405, "use GET", [("allow", "GET, HEAD")])
    if path == CONFIG_PATH:
        return 200, [("content-type", TYPES[".json"]), *SECURITY_HEADERS], json.dumps(DEV_CONFIG).encode()
    folder = (root or web_root()).resolve()
    name = "index.html" if path in ("/", "/index.html") else unquote(path[len(UI_PREFIX) :])
    if not name or "\\" in name or "\x00" in name or name.startswith("/") or ".." in name.split("/"):
        return _text(404, "not found")
    file = (folder / name).resolve()
    if not file.is_relative_to(folder) or not file.is_file():
        return _text(404, "not found")
    content_type = TYPES.get(file.suffix, "application/octet-stream")
    body = file.read_bytes()
    return 200, [("content-type", content_type), *SECURITY_HEADERS], b"" if method == "HEAD" else body


def _text(
    status: int, message: str, extra: list[tuple[str, str]] | None = None
) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("content-type", TYPES[".txt"]), *SECURITY_HEADERS, *(extra or [])], message.encode()
