"""A git server on loopback (dulwich's smart-HTTP WSGI app), so imports fetch over a real network protocol."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_git(repository: Path) -> Iterator[str]:
    """Serve `repository` at http://127.0.0.1:<port>/ until the block ends; yields the URL."""
    app = make_wsgi_chain(DictBackend({"/": Repo(str(repository))}))
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
