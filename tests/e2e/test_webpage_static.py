"""The web page's files as `missions dev` serves them: without a token and without the api handler,
with a strict Content-Security-Policy, and nothing outside the page's folder, however the path is spelt."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from missions.local.webpage import web_root

pytestmark = pytest.mark.e2e


def _refuse(*args: object, **kwargs: object) -> object:
    raise AssertionError("a static request reached the api handler")


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    cloud = LocalCloud(["code_analysis"])
    with cloud, DevServer(cloud, port=0, handlers={"api": _refuse}) as dev:
        yield dev


def get(server: DevServer, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """A request with its path sent exactly as written (no client-side normalising of `..`)."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_the_page_its_files_and_its_config_are_served_without_a_token(server: DevServer):
    status, headers, body = get(server, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'<script type="module" src="/ui/app.js">' in body
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    for name, kind in [("app.js", "text/javascript"), ("style.css", "text/css"), ("icon.svg", "image/svg+xml")]:
        status, headers, body = get(server, f"/ui/{name}")
        assert status == 200 and headers["content-type"].startswith(kind), name
        assert body == (web_root() / name).read_bytes()
    status, headers, body = get(server, "/config.json")
    assert status == 200 and json.loads(body) == {"auth": "dev", "api": "", "stream": ""}


def test_every_file_the_page_names_is_there_and_no_script_is_inline(server: DevServer):
    html = (web_root() / "index.html").read_text()
    assert "<script>" not in html and not re.search(r"\son[a-z]+=", html)  # no inline script, no handler attributes
    for file in web_root().iterdir():
        assert get(server, f"/ui/{file.name}")[0] == 200, file.name


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../local/devserver.py",
        "/ui/%2e%2e/local/devserver.py",
        "/ui/..%2flocal%2fdevserver.py",
        "/ui/%2E%2E%2F%2E%2E%2Fpyproject.toml",
        "/ui/..\\local\\devserver.py",
        "/ui//etc/passwd",
        "/ui/%2fetc%2fpasswd",
        "/ui/app.js%00.css",
        "/ui/",
        "/ui/nope.js",
    ],
)
def test_nothing_outside_the_page_folder_and_nothing_missing(server: DevServer, path: str):
    status, headers, body = get(server, path)
    assert status == 404, (path, body[:200])
    assert "content-security-policy" in headers


def test_only_reads(server: DevServer):
    assert get(server, "/", "POST")[0] == 405
    status, headers, body = get(server, "/ui/app.js", "HEAD")
    assert status == 200 and body == b""
