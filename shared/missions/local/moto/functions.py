"""The functions moto's Lambda calls in-process (the Lambda patch): each one's handler by name, the
context a handler gets, and a hook that sees every invocation.

Every in-process invocation is observable (`observe`, `invoking`) so a meter can count Lambda requests
and durations, and tell a function's AWS calls from the harness's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

Handler = Callable[[dict[str, Any], Any], Any]
Observer = Callable[[str, float, int], None]  # (function_name, duration_ms, memory_mb)
Resolver = Callable[[str, dict[str, str]], Handler | None]  # (function name, environment) -> its handler

_FUNCTIONS: dict[str, Handler] = {}
_RESOLVERS: list[Resolver] = []
_OBSERVERS: list[Observer] = []
_INVOKING: ContextVar[str | None] = ContextVar("missions_local_invoking", default=None)
_LOCK = threading.Lock()

DEFAULT_TIMEOUT_SECONDS = 300  # a context built by hand (tests, the dev server's fallback): the emulation's Timeout


@dataclass
class LocalContext:
    """The parts of the Lambda context object handlers and Powertools read.

    As in Lambda, the remaining time counts down from the function's configured Timeout, from the
    moment the invocation started (the context's creation), and stops at 0."""

    function_name: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"
    aws_request_id: str = ""
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    started_at: float = field(default_factory=time.monotonic)  # time.monotonic() when the invocation began

    def get_remaining_time_in_millis(self) -> int:
        left = self.started_at + self.timeout_seconds - time.monotonic()
        return max(0, int(left * 1000))


class FunctionError(TypedDict):
    """A function error's payload, as Lambda returns it."""

    errorType: str
    errorMessage: str
    stackTrace: NotRequired[list[str]]


class Deferred:
    """A handler built at its function's first invocation (its module imported then), outside the time
    that invocation is observed, as Lambda's init phase is not a handler's duration: a process that never
    invokes the function (a `missions run` never calls the API's) never pays for the import."""

    def __init__(self, build: Callable[[], Handler]) -> None:
        self._build = build
        self._handler: Handler | None = None
        self._lock = threading.Lock()

    def built(self) -> Handler:
        with self._lock:
            if self._handler is None:
                self._handler = self._build()
            return self._handler

    def __call__(self, payload: dict[str, Any], context: Any) -> Any:
        return self.built()(payload, context)


def register(function_name: str, handler: Handler) -> None:
    with _LOCK:
        _FUNCTIONS[function_name] = handler


def unregister(function_name: str) -> None:
    with _LOCK:
        _FUNCTIONS.pop(function_name, None)


def registered(function_name: str) -> bool:
    return function_name in _FUNCTIONS


def handler(function_name: str) -> Handler | None:
    """The handler registered under `function_name`, or None."""
    return _FUNCTIONS.get(function_name)


def resolve_with(resolver: Resolver | None) -> None:
    """Build the handler of a function invoked before anyone registered it (CloudFormation invokes a
    custom resource's function while it creates the stack, before the harness could register it);
    None: stop."""
    with _LOCK:
        _RESOLVERS.clear()
        if resolver is not None:
            _RESOLVERS.append(resolver)


def resolve(function_name: str, environment: dict[str, str]) -> Handler | None:
    """The registered handler, else the one the resolver builds (registered from then on), else None."""
    found = _FUNCTIONS.get(function_name)
    if found is None and _RESOLVERS:
        found = _RESOLVERS[0](function_name, environment)
        if found is not None:
            register(function_name, found)
    return found


def observe(observer: Observer) -> Callable[[], None]:
    """Call `observer` after every in-process invocation, failed ones too (Lambda bills both).
    Returns the function that stops observing."""
    with _LOCK:
        _OBSERVERS.append(observer)

    def stop() -> None:
        with _LOCK:
            if observer in _OBSERVERS:
                _OBSERVERS.remove(observer)

    return stop


def invoking() -> str | None:
    """The function whose handler runs in this thread right now, or None (the harness)."""
    return _INVOKING.get()


def call(function: Handler, payload: Any, context: LocalContext) -> Any:
    """Run a handler as its function, observed."""
    if isinstance(function, Deferred):
        function = function.built()
    token = _INVOKING.set(context.function_name)
    started = time.perf_counter()
    try:
        return function(payload, context)
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
        _INVOKING.reset(token)
        for observer in list(_OBSERVERS):
            observer(context.function_name, duration_ms, context.memory_limit_in_mb)
