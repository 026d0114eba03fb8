"""The stream function's process: its handler (handler.py, next to this file) served by uvicorn.

The Lambda Web Adapter (a layer; `AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`) runs `run.sh`, the
function's handler setting, which execs `python -m server` in the function's folder; locally,
`python -m functions.stream.server` does the same. It listens on 127.0.0.1:`AWS_LWA_PORT` (8080 by
default), where the adapter forwards each invocation and streams the response back through the
function URL. See missions.app.streaming for what happens to a request.
"""

from __future__ import annotations

import importlib
from typing import Any

from missions.app.streaming import serve


def handler() -> Any:
    """`lambda_handler` of the handler module next to this one: `handler` in the function's folder in
    Lambda (its files are the code root), `functions.stream.handler` in this repository. Imported when
    the server starts, so importing this module costs nothing."""
    package = __spec__.parent if __spec__ is not None else ""
    module = importlib.import_module(f"{package}.handler" if package else "handler")
    return module.lambda_handler


def main() -> None:
    serve(handler())


if __name__ == "__main__":
    main()
