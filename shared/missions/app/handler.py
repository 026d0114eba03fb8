"""The decorator stack every Lambda handler wears, so a handler is this decorator and one call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from missions.app.observability import flush_metrics, logger, metrics, tracer
from missions.app.runtime import Runtime, default_runtime


class Entry(Protocol):
    """A handler's body: the event, the Lambda context, and the runtime to work with."""

    def __call__(self, event: dict[str, Any], context: Any, runtime: Runtime) -> Any: ...


class Handler(Protocol):
    """What Lambda (or the emulation, or a test passing its own runtime) calls."""

    def __call__(self, event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> Any: ...


def _flushed(inner: Entry) -> Entry:
    """Powertools' `log_metrics`, flushing under the observability lock (the emulation's threads share the set)."""

    @functools.wraps(inner)
    def run(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
        try:
            return inner(event, context, runtime=runtime)
        finally:
            flush_metrics()

    return run


def lambda_handler(correlation_id_path: str | None = None) -> Callable[[Entry], Handler]:
    """The stack: Lambda context and correlation id in every log line, metrics flushed at the end,
    the handler traced (without its response: PII and size) when tracing is on. The handler receives
    the process's runtime, or the one a test or the emulation passes."""

    def decorate(handler: Entry) -> Handler:
        # keyed by the logger and metrics too: a process that makes its observability anew (a test) gets a new stack
        stacks: dict[tuple[bool, int, int], Entry] = {}

        def stack(traced: bool) -> Entry:
            key = (traced, id(logger()), id(metrics()))
            if key not in stacks:
                inner: Entry = handler
                if traced:
                    inner = tracer().capture_lambda_handler(handler, capture_response=False)
                inner = _flushed(inner)
                stacks[key] = logger().inject_lambda_context(
                    inner, correlation_id_path=correlation_id_path, clear_state=True
                )
            return stacks[key]

        @functools.wraps(handler)
        def run(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> Any:
            active = runtime or default_runtime()
            return stack(active.settings.tracing)(event, context, runtime=active)

        return run

    return decorate


__all__ = ["Entry", "Handler", "lambda_handler"]
