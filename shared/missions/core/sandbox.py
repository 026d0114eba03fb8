"""The analysis-script sandbox: run a short Python script someone else wrote (a model, a user) on some
data, and get back its JSON and, if it drew one, a chart, without letting it touch anything else.

The script contract (what a script may rely on and must do):

- It is Python 3.11 source using the standard library only (statistics, math, json, datetime,
  collections, itertools, re, csv, zlib, struct...); there are no third-party packages.
- Its input is the request's `input`: already parsed as the global `INPUT`, and the same JSON on stdin
  (`json.load(sys.stdin)`).
- It answers by setting the global `RESULT` to a JSON-able value (normally a dict), or else by printing
  one JSON object as the last line of its stdout. NaN and infinities are not JSON: convert them.
- It may draw a chart by writing a PNG to `chart.png` in its working directory (the current directory
  when it starts); files it writes anywhere else are refused. The directory is removed after the run.
- It runs within its tier's limits: memory (address space) and wall-clock time (CPU time is capped a
  second later), and caps on what it prints, on its RESULT, on its chart and on the files it writes.
- It runs alone: no threads, no signal handlers, no tracing or profiling hooks.
- It may not open sockets or resolve names, start processes or signal them, read files outside its
  directory and the standard library, write outside its directory, load native code or raise its limits.
  The first attempt ends the run with `status="error"` and a one-line `error` naming the rule broken;
  it is not an exception the script can catch.

A run that breaks a rule or a limit is an *answer* (a SandboxResult with status "error"), not an
exception: the caller shows the reason to the model that wrote the script, which can fix it.
`run` raises DependencyUnavailable (missions.core.errors) only when no sandbox could run the script
at all (the sandbox function throttled, missing, unreachable).

The contract's data lives here, in the core (stages see results: `Ctx.analyze`); the port
(missions.ports.sandbox.Sandbox) is the one operation.
Backends: missions.adapters.sandbox_local (a child process of this Python with resource limits, a
scrubbed environment, namespaces where the kernel allows them and an audit hook) and
missions.adapters.sandbox_lambda (the same, inside a Lambda function per tier with no network path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

Tier = Literal["quick", "standard", "deep"]


@dataclass(frozen=True)
class TierLimits:
    """What one run may use: address space (MB) and wall-clock time (seconds; CPU time is the same)."""

    memory_mb: int
    timeout_seconds: float


TIERS: dict[Tier, TierLimits] = {
    "quick": TierLimits(memory_mb=256, timeout_seconds=15),
    "standard": TierLimits(memory_mb=512, timeout_seconds=30),
    "deep": TierLimits(memory_mb=1024, timeout_seconds=60),
}

# The sandbox function of a tier runs its own Python (about 40 MB) beside the script's child, and needs
# time to start it and to report: it has this much more memory and time than its tier, and gives the
# child the rest (infra/components/sandbox.py sizes it; missions.app.events.sandbox_room measures it).
FUNCTION_HEADROOM_MB = 64
FUNCTION_HEADROOM_SECONDS = 5

MAX_SCRIPT_BYTES = 64 * 1024
MAX_INPUT_BYTES = 2 * 1024 * 1024  # a synchronous Lambda request is at most 6 MB
MAX_OUTPUT_BYTES = 256 * 1024  # RESULT as JSON: it travels in the mission's envelope
MAX_CHART_BYTES = 1024 * 1024  # base64 in the Lambda response: 1.4 MB of its 6 MB
MAX_STREAM_BYTES = 1024 * 1024  # stdout or stderr: more ends the run (output too large)
TAIL_CHARS = 4096  # the end of stdout and stderr kept in a result

ErrorKind = Literal[
    "timeout",  # wall-clock limit
    "cpu",  # CPU-time limit
    "memory",  # address-space limit
    "output_too_large",  # stdout, stderr, RESULT, chart or the files it wrote passed their cap
    "network",  # a socket, a name lookup, a URL
    "file_write",  # a write, a delete, a link or a directory change outside its directory
    "file_read",  # a read outside its directory and the standard library
    "process",  # fork, exec, subprocess, os.system, signals to other processes
    "native_code",  # ctypes, extension modules, hand-made code objects, tracing, signal handlers, gc internals
    "limits",  # raising its own resource limits, changing its privileges, priority or session
    "exception",  # the script raised (the reason is the traceback's last line) or exited non-zero
    "no_result",  # no RESULT and no JSON object printed, a RESULT that is not JSON, a chart.png that is no PNG
    "crashed",  # the interpreter died of a signal nobody sent on purpose
]


class SandboxRequest(BaseModel):
    """One script, its input and the tier whose limits it runs within."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    script: str = Field(min_length=1)
    input: JsonValue = None
    tier: Tier = "quick"

    @field_validator("script")
    @classmethod
    def _script_size(cls, script: str) -> str:
        size = len(script.encode("utf-8", "surrogatepass"))
        if size > MAX_SCRIPT_BYTES:
            raise ValueError(f"the script is {size} bytes; at most {MAX_SCRIPT_BYTES} are accepted")
        if "\x00" in script:
            raise ValueError("the script contains a NUL character")
        return script

    @field_validator("input")
    @classmethod
    def _input_size(cls, value: JsonValue) -> JsonValue:
        try:
            size = len(json.dumps(value, allow_nan=False, separators=(",", ":")).encode())
        except ValueError:
            raise ValueError("the input holds NaN or an infinity, which JSON cannot carry") from None
        if size > MAX_INPUT_BYTES:
            raise ValueError(f"the input is {size} bytes of JSON; at most {MAX_INPUT_BYTES} are accepted")
        return value

    @property
    def limits(self) -> TierLimits:
        return TIERS[self.tier]


class SandboxResult(BaseModel):
    """What a run produced. `error` is one line naming the limit or rule broken (None when ok)."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    status: Literal["ok", "error"]
    output: JsonValue = None  # the script's RESULT (or the JSON object it printed)
    chart_png: bytes | None = Field(None, max_length=MAX_CHART_BYTES)  # chart.png, when the script drew one
    stdout_tail: str = Field("", max_length=TAIL_CHARS)
    stderr_tail: str = Field("", max_length=TAIL_CHARS)
    duration_ms: int = Field(0, ge=0)
    error: str | None = Field(None, max_length=500)
    error_kind: ErrorKind | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_event(self) -> dict[str, Any]:
        """As JSON-able data (the chart in base64): what the sandbox function returns."""
        return json.loads(self.model_dump_json())  # type: ignore[no-any-return]

    @classmethod
    def failed(cls, kind: ErrorKind, reason: str, **fields: Any) -> SandboxResult:
        return cls(status="error", error_kind=kind, error=_one_line(reason), **fields)


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    """The end of a stream, at most `limit` characters."""
    return text if len(text) <= limit else text[-limit:]


__all__ = [
    "FUNCTION_HEADROOM_MB",
    "FUNCTION_HEADROOM_SECONDS",
    "MAX_CHART_BYTES",
    "MAX_INPUT_BYTES",
    "MAX_OUTPUT_BYTES",
    "MAX_SCRIPT_BYTES",
    "MAX_STREAM_BYTES",
    "TAIL_CHARS",
    "TIERS",
    "ErrorKind",
    "SandboxRequest",
    "SandboxResult",
    "Tier",
    "TierLimits",
    "tail",
]
