"""Tools: a catalog of typed, risk-rated functions and an executor that enforces access.

Contract: every execution returns a `ToolResult` {status, data, error, citations}; a tool
never raises into the runner. Tools whose risk is write or destructive need a human's
confirmation (an interrupt) before they run, unless the capability's policy auto-approves.

Once per stage. A stage that fails mid-way (its Lambda crashed or timed out) is run again from
its input, and would call its tools again. A call to a journaled tool (by default one with side
effects: risk above read-only) is recorded in the stage's `ToolJournal` as soon as it returns, and
the retried stage gets the recorded result instead of a second call, with the same events. What
is left: a crash between the tool's effect and the journal write (one call's window); a tool
whose backend takes an idempotency key can close it with `ToolExecutor.call_key`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from missions.core.mission.envelope import Citation, Model
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.core.roots import AllowedRoots

if TYPE_CHECKING:
    from missions.core.capability.mcp import McpGateway


class RiskLevel(StrEnum):
    READ_ONLY = "read_only"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class ToolCategory(StrEnum):
    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    NETWORK = "network"
    COMPOSITE = "composite"


NEEDS_CONFIRMATION = {RiskLevel.WRITE, RiskLevel.DESTRUCTIVE}


class ToolResult(Model):
    status: Literal["success", "error", "not_found", "denied", "timeout"]
    data: Any = None
    error: str | None = None
    citations: list[Citation] = []

    @classmethod
    def ok(cls, data: Any, citations: list[Citation] | None = None) -> ToolResult:
        return cls(status="success", data=data, citations=citations or [])

    @classmethod
    def fail(cls, error: str, status: str = "error") -> ToolResult:
        return cls(status=status, error=error)  # type: ignore[arg-type]


class ToolError(Exception):
    """Raised by a tool for an expected failure; becomes status 'error' with this message."""


class TransientToolError(ToolError):
    """Raised by a tool for a failure worth retrying (rate limit, flaky backend)."""


class ConfirmationRequired(Exception):
    """A risky tool call needs a human's yes before it runs."""

    def __init__(
        self,
        call_id: str,
        tool_id: str,
        params: dict[str, Any],
        risk: RiskLevel,
        preview: dict[str, Any] | None = None,
    ):
        super().__init__(f"tool '{tool_id}' ({risk.value}) needs confirmation")
        self.call_id, self.tool_id, self.params, self.risk = call_id, tool_id, params, risk
        self.preview = preview  # what the call will change, as its tool shows it (e.g. a diff)


@dataclass(frozen=True)
class ToolEnv:
    """What a tool may know of the mission it serves besides its parameters: a tool function that
    declares a parameter `env` gets it (the mission's connection to a service, a secret by name)."""

    mission_id: str
    user_id: str
    secret: Callable[[str], str]  # a secret's value by its name, from the runtime's secret store
    mcp: McpGateway | None = None  # how an MCP server's tool is called (missions.core.capability.mcp)


class InvalidParameters(ValueError):
    """A call's parameters do not fit its tool; the message says which and why."""


def _no_secrets(name: str) -> str:
    raise LookupError(f"no secret store is wired: cannot read '{name}'")


@dataclass(frozen=True)
class ToolSpec:
    id: str
    description: str
    parameters: type[BaseModel]
    func: Callable[..., ToolResult]
    category: ToolCategory = ToolCategory.READ
    risk: RiskLevel = RiskLevel.READ_ONLY
    timeout_seconds: float = 10.0
    max_retries: int = 1
    root_param: str | None = None  # a parameter naming a directory: checked against the allowed roots
    journaled: bool | None = None  # replay its result when the stage is retried; None: when it has side effects
    # what a call would change, shown with its approval question (e.g. a diff); from the parameters alone
    preview: Callable[[Any], dict[str, Any]] | None = None
    wants_env: bool = False  # the function takes `env: ToolEnv`
    # a JSON schema checks the parameters instead of `parameters` (an MCP server's tool); the function gets
    # the parameters as a dict
    input_schema: dict[str, Any] | None = None
    source: str | None = None  # where the tool lives when not in the capability's code ("mcp:<server>")

    def validate(self, params: dict[str, Any]) -> Any:
        """The parameters as the function takes them, or InvalidParameters saying what is wrong."""
        if self.input_schema is not None:
            import jsonschema  # here: a stage whose tools are all in code does not pay for its import

            # the schema's own `$schema` when it names one; MCP's default, JSON Schema 2020-12, when not
            kind = jsonschema.validators.validator_for(self.input_schema, default=jsonschema.Draft202012Validator)
            validator = kind(self.input_schema)
            errors = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
            if errors:
                raise InvalidParameters(
                    "; ".join(f"{'.'.join(map(str, e.absolute_path)) or '(arguments)'}: {e.message}" for e in errors)
                )
            return dict(params)
        try:
            return self.parameters.model_validate(params)
        except ValidationError as exc:
            raise InvalidParameters(
                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            ) from None

    @property
    def once_per_stage(self) -> bool:
        """Whether a retried stage replays this tool's recorded result instead of calling it again."""
        return self.risk is not RiskLevel.READ_ONLY if self.journaled is None else self.journaled

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "category": self.category.value,
            "risk": self.risk.value,
            "parameters": self.input_schema if self.input_schema is not None else self.parameters.model_json_schema(),
            **({"source": self.source} if self.source else {}),
        }


@dataclass
class ToolCatalog:
    tools: dict[str, ToolSpec] = field(default_factory=dict)

    def register(
        self,
        tool_id: str,
        description: str,
        parameters: type[BaseModel],
        *,
        category: ToolCategory = ToolCategory.READ,
        risk: RiskLevel = RiskLevel.READ_ONLY,
        timeout_seconds: float = 10.0,
        max_retries: int = 1,
        root_param: str | None = None,
        journaled: bool | None = None,
        preview: Callable[[Any], dict[str, Any]] | None = None,
    ) -> Callable[[Callable[..., ToolResult]], Callable[..., ToolResult]]:
        def decorate(func: Callable[..., ToolResult]) -> Callable[..., ToolResult]:
            if tool_id in self.tools:
                raise ValueError(f"tool '{tool_id}' is registered twice")
            if root_param is not None and root_param not in parameters.model_fields:
                raise ValueError(f"tool '{tool_id}': root_param '{root_param}' is not one of its parameters")
            self.tools[tool_id] = ToolSpec(
                tool_id,
                description,
                parameters,
                func,
                category,
                risk,
                timeout_seconds,
                max_retries,
                root_param,
                journaled,
                preview,
                "env" in inspect.signature(func).parameters,
            )
            return func

        return decorate

    def get(self, tool_id: str) -> ToolSpec | None:
        return self.tools.get(tool_id)

    def list(self) -> list[ToolSpec]:
        return list(self.tools.values())


def allowed(agent: AgentConfig, spec: ToolSpec) -> bool:
    """Per-agent access: the access level bounds the risk, and an allow-list narrows further."""
    if not agent.has_tools or agent.tool_access is ToolAccess.NONE:
        return False
    if agent.allowed_tools is not None and spec.id not in agent.allowed_tools:
        return False
    if agent.tool_access is ToolAccess.READ:
        return spec.risk is RiskLevel.READ_ONLY
    if agent.tool_access is ToolAccess.WRITE:
        return spec.risk in (RiskLevel.READ_ONLY, RiskLevel.WRITE)
    return True


def call_id(tool_id: str, params: dict[str, Any]) -> str:
    """Stable identity of one call, so an approval given once applies to exactly that call."""
    digest = hashlib.sha256(json.dumps([tool_id, params], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


@dataclass
class ToolCallRecord:
    tool_id: str
    params: dict[str, Any]
    result: ToolResult
    attempts: int
    duration_ms: float
    replayed: bool = False  # recorded by an earlier attempt of this stage, not called again

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_id": self.tool_id,
            "params": self.params,
            "result": self.result.model_dump(mode="json"),
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCallRecord:
        return cls(
            data["tool_id"],
            data["params"],
            ToolResult.model_validate(data["result"]),
            int(data["attempts"]),
            float(data["duration_ms"]),
        )


class ToolJournal(Protocol):
    """The calls this stage already made, by call key (see "Once per stage" above)."""

    def recorded(self, key: str) -> ToolCallRecord | None: ...

    def record(self, key: str, call: ToolCallRecord) -> None: ...


@dataclass
class ToolExecutor:
    """Runs tools for one agent with access checks, validation, timeout, retries and confirmation."""

    catalog: ToolCatalog
    agent: AgentConfig
    approvals: dict[str, bool] = field(default_factory=dict)
    auto_approve: frozenset[str] = frozenset()
    on_start: Callable[[str, dict[str, Any]], None] | None = None
    on_complete: Callable[[ToolCallRecord], None] | None = None
    budget: int | None = None  # tool calls this stage may still make (max_tool_calls)
    calls: list[ToolCallRecord] = field(default_factory=list)
    sleep: Callable[[float], None] = time.sleep
    roots: AllowedRoots | None = None  # None: no check (a tool called outside a mission, e.g. in a unit test)
    journal: ToolJournal | None = None  # None: nothing replayed (a tool called outside a mission)
    # every call of an earlier attempt of this stage that asked a human (call key -> record JSON):
    # replayed when the stage resumes, so nothing before the question runs again
    replay: dict[str, Any] = field(default_factory=dict)
    env: ToolEnv = field(default_factory=lambda: ToolEnv("", "", _no_secrets))  # for tools that take `env`
    kept: dict[str, Any] = field(default_factory=dict)  # this attempt's calls, by call key (kept if it asks)
    _occurrences: dict[str, int] = field(default_factory=dict)
    _carried: int = 0  # replayed calls the mission already counted (in the checkpoint where it asked)

    def call_key(self, tool_id: str, params: dict[str, Any]) -> str:
        """This call's key within the stage: the same call made twice in a stage is two calls."""
        cid = call_id(tool_id, params)
        return f"{cid}.{self._occurrences.get(cid, 0)}"

    def execute(self, tool_id: str, params: dict[str, Any] | None = None) -> ToolResult:
        params = dict(params or {})
        spec = self.catalog.get(tool_id)
        if spec is None:
            return self._finish(tool_id, params, ToolResult.fail(f"unknown tool '{tool_id}'", "not_found"), 0, 0.0)
        if not allowed(self.agent, spec):
            message = (
                f"stage '{self.agent.name}' (access {self.agent.tool_access.value}) "
                f"may not use tool '{tool_id}' (risk {spec.risk.value})"
            )
            return self._finish(tool_id, params, ToolResult.fail(message, "denied"), 0, 0.0)
        try:
            validated = spec.validate(params)
        except InvalidParameters as exc:
            return self._finish(tool_id, params, ToolResult.fail(f"invalid parameters: {exc}"), 0, 0.0)

        refused = self._outside_roots(spec, validated)
        if refused:
            return self._finish(tool_id, params, ToolResult.fail(refused, "denied"), 0, 0.0)

        if spec.risk in NEEDS_CONFIRMATION and tool_id not in self.auto_approve:
            cid = call_id(tool_id, params)
            decision = self.approvals.get(cid)
            if decision is None:
                shown = spec.preview(validated) if spec.preview is not None else None
                raise ConfirmationRequired(cid, tool_id, params, spec.risk, shown)
            if decision is False:
                return self._finish(tool_id, params, ToolResult.fail("declined by the user", "denied"), 0, 0.0)

        if self.budget is not None and self.executed >= self.budget:
            message = "tool budget exhausted (max_tool_calls)"
            return self._finish(tool_id, params, ToolResult.fail(message, "denied"), 0, 0.0)
        key = self.call_key(tool_id, params)
        self._occurrences[call_id(tool_id, params)] = int(key.rsplit(".", 1)[1]) + 1
        journaled = self.journal is not None and spec.once_per_stage
        done = ToolCallRecord.from_json(self.replay[key]) if key in self.replay else None
        if done is not None and done.attempts > 0:
            self._carried += 1
        if done is None and journaled and self.journal is not None:
            done = self.journal.recorded(key)
        if done is not None:  # it ran in an earlier attempt of this stage: replay it, events and all
            self.kept[key] = done.to_json()
            if self.on_start:
                self.on_start(tool_id, params)
            return self._finish(tool_id, params, done.result, done.attempts, done.duration_ms, replayed=True)
        if self.on_start:
            self.on_start(tool_id, params)
        started = time.perf_counter()
        result, attempts = self._run_with_retries(spec, validated)
        ms = (time.perf_counter() - started) * 1000
        call = ToolCallRecord(tool_id, params, result, attempts, ms)
        self.kept[key] = call.to_json()
        if journaled and self.journal is not None:
            self.journal.record(key, call)
        return self._finish(tool_id, params, result, attempts, ms)

    def _outside_roots(self, spec: ToolSpec, params: Any) -> str | None:
        """Defence in depth: a directory parameter must resolve inside an allowed root, at every call."""
        if spec.root_param is None or self.roots is None:
            return None
        value = params.get(spec.root_param) if isinstance(params, dict) else getattr(params, spec.root_param)
        try:
            self.roots.resolve(value, what=spec.root_param)
        except ValueError as exc:
            return f"refused: {exc}"
        return None

    @property
    def executed(self) -> int:
        """Calls that ran and that the mission has not counted yet (denied and invalid calls cost nothing;
        a call replayed after a crash is counted once, one replayed after a question was counted then)."""
        return sum(1 for call in self.calls if call.attempts > 0) - self._carried

    def _run_with_retries(self, spec: ToolSpec, params: Any) -> tuple[ToolResult, int]:
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._run_once(spec, params), attempts
            except TransientToolError as exc:
                if attempts > spec.max_retries:
                    return ToolResult.fail(f"{exc} (after {attempts} attempts)"), attempts
                self.sleep(min(0.2 * 2 ** (attempts - 1), 2.0))
            except concurrent.futures.TimeoutError:
                if attempts > spec.max_retries:
                    return ToolResult.fail(
                        f"timed out after {spec.timeout_seconds}s ({attempts} attempts)", "timeout"
                    ), attempts
            except ToolError as exc:
                return ToolResult.fail(str(exc)), attempts
            except Exception as exc:  # a tool bug must not kill the stage; it is reported
                return ToolResult.fail(f"{type(exc).__name__}: {exc}"), attempts

    def _run_once(self, spec: ToolSpec, params: Any) -> ToolResult:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        call = (
            functools.partial(spec.func, params, env=self.env)
            if spec.wants_env
            else functools.partial(spec.func, params)
        )
        try:
            result = pool.submit(call).result(timeout=spec.timeout_seconds)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if not isinstance(result, ToolResult):
            raise TypeError(f"tool '{spec.id}' returned {type(result).__name__}, not ToolResult")
        return result

    def _finish(
        self,
        tool_id: str,
        params: dict[str, Any],
        result: ToolResult,
        attempts: int,
        ms: float,
        replayed: bool = False,
    ) -> ToolResult:
        record = ToolCallRecord(tool_id, params, result, attempts, ms, replayed)
        self.calls.append(record)
        if self.on_complete:
            self.on_complete(record)
        return result
