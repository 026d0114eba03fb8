"""ToolExecutor: access, validation, timeouts, retries, confirmation and budget."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from missions.core.capability.tools import (
    ConfirmationRequired,
    RiskLevel,
    ToolCallRecord,
    ToolCatalog,
    ToolCategory,
    ToolError,
    ToolExecutor,
    ToolResult,
    TransientToolError,
    allowed,
    call_id,
)
from missions.core.pipeline.config import AgentConfig, ToolAccess


class Item(BaseModel):
    name: str = Field(min_length=1)
    count: int = Field(1, ge=1)


class Calls:
    """What the tools saw and what the executor slept."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.slept: list[float] = []
        self.flaky_failures = 0
        self.release = threading.Event()  # lets a 'slow' tool finish when the test ends


@pytest.fixture
def calls() -> Iterator[Calls]:
    state = Calls()
    yield state
    state.release.set()


@pytest.fixture
def catalog(calls: Calls) -> ToolCatalog:
    catalog = ToolCatalog()

    @catalog.register("t.read", "read something", Item)
    def read(p: Item) -> ToolResult:
        calls.ran.append("t.read")
        return ToolResult.ok({"name": p.name, "count": p.count})

    @catalog.register("t.write", "write something", Item, category=ToolCategory.WRITE, risk=RiskLevel.WRITE)
    def write(p: Item) -> ToolResult:
        calls.ran.append("t.write")
        return ToolResult.ok({"wrote": p.name})

    @catalog.register("t.destroy", "delete something", Item, category=ToolCategory.WRITE, risk=RiskLevel.DESTRUCTIVE)
    def destroy(p: Item) -> ToolResult:
        calls.ran.append("t.destroy")
        return ToolResult.ok({"deleted": p.name})

    @catalog.register("t.slow", "never answers in time", Item, timeout_seconds=0.2, max_retries=1)
    def slow(p: Item) -> ToolResult:
        calls.ran.append("t.slow")
        calls.release.wait(5)
        return ToolResult.ok("late")

    @catalog.register("t.flaky", "fails transiently twice", Item, max_retries=2)
    def flaky(p: Item) -> ToolResult:
        calls.ran.append("t.flaky")
        if calls.flaky_failures < 2:
            calls.flaky_failures += 1
            raise TransientToolError("rate limited")
        return ToolResult.ok("finally")

    @catalog.register("t.always_flaky", "always fails transiently", Item, max_retries=1)
    def always_flaky(p: Item) -> ToolResult:
        calls.ran.append("t.always_flaky")
        raise TransientToolError("backend down")

    @catalog.register("t.buggy", "has a bug", Item, max_retries=3)
    def buggy(p: Item) -> ToolResult:
        calls.ran.append("t.buggy")
        raise RuntimeError("boom")

    @catalog.register("t.refuses", "an expected failure", Item, max_retries=3)
    def refuses(p: Item) -> ToolResult:
        calls.ran.append("t.refuses")
        raise ToolError("no such item")

    @catalog.register("t.wrong_type", "returns a dict", Item)
    def wrong_type(p: Item) -> Any:
        return {"not": "a ToolResult"}

    return catalog


def agent(access: ToolAccess = ToolAccess.ALL, allowed_tools: list[str] | None = None) -> AgentConfig:
    return AgentConfig(
        name="worker", has_tools=access is not ToolAccess.NONE, tool_access=access, allowed_tools=allowed_tools
    )


def executor(catalog: ToolCatalog, calls: Calls, **kwargs: Any) -> ToolExecutor:
    kwargs.setdefault("agent", agent())
    return ToolExecutor(catalog=catalog, sleep=calls.slept.append, **kwargs)


# -- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("access", "risk", "expected"),
    [
        (ToolAccess.NONE, RiskLevel.READ_ONLY, False),
        (ToolAccess.READ, RiskLevel.READ_ONLY, True),
        (ToolAccess.READ, RiskLevel.WRITE, False),
        (ToolAccess.READ, RiskLevel.DESTRUCTIVE, False),
        (ToolAccess.WRITE, RiskLevel.READ_ONLY, True),
        (ToolAccess.WRITE, RiskLevel.WRITE, True),
        (ToolAccess.WRITE, RiskLevel.DESTRUCTIVE, False),
        (ToolAccess.ALL, RiskLevel.DESTRUCTIVE, True),
    ],
)
def test_access_level_bounds_the_risk(catalog, access, risk, expected):
    spec = next(s for s in catalog.list() if s.risk is risk)
    assert allowed(agent(access), spec) is expected


def test_has_tools_false_denies_everything(catalog):
    no_tools = AgentConfig(name="worker", has_tools=False, tool_access=ToolAccess.ALL)
    assert not allowed(no_tools, catalog.get("t.read"))


def test_denied_call_names_stage_access_and_risk(catalog, calls):
    # Given a read-only stage
    tools = executor(catalog, calls, agent=agent(ToolAccess.READ))
    # When it tries a write tool
    result = tools.execute("t.write", {"name": "x"})
    # Then it is denied without running, and nothing asks for confirmation
    assert result.status == "denied"
    assert result.error == "stage 'worker' (access read) may not use tool 't.write' (risk write)"
    assert calls.ran == []


def test_allow_list_narrows_access(catalog, calls):
    tools = executor(catalog, calls, agent=agent(ToolAccess.ALL, allowed_tools=["t.read"]))
    assert tools.execute("t.read", {"name": "x"}).status == "success"
    assert tools.execute("t.flaky", {"name": "x"}).status == "denied"
    assert calls.ran == ["t.read"]


def test_unknown_tool_is_not_found(catalog, calls):
    result = executor(catalog, calls).execute("t.nope", {})
    assert (result.status, result.error) == ("not_found", "unknown tool 't.nope'")


@pytest.mark.parametrize(
    ("params", "field"), [({}, "name"), ({"name": "x", "count": 0}, "count"), ({"name": "x", "count": "many"}, "count")]
)
def test_invalid_parameters_are_an_error_naming_the_field(catalog, calls, params, field):
    result = executor(catalog, calls).execute("t.read", params)
    assert result.status == "error"
    assert result.error.startswith("invalid parameters: ")
    assert f"{field}: " in result.error
    assert calls.ran == []


# -- failures, timeouts, retries ---------------------------------------------------------------


def test_a_tool_slower_than_its_timeout_times_out_after_all_attempts(catalog, calls):
    # Given a tool that never answers within its 0.2 s timeout, with one retry
    tools = executor(catalog, calls)
    started = time.perf_counter()
    # When
    result = tools.execute("t.slow", {"name": "x"})
    # Then both attempts timed out, and the executor did not wait for the tool to finish
    assert result.status == "timeout"
    assert "timed out after 0.2s (2 attempts)" in result.error
    assert tools.calls[-1].attempts == 2
    assert time.perf_counter() - started < 2.0


def test_transient_error_is_retried_with_backoff_then_succeeds(catalog, calls):
    tools = executor(catalog, calls)
    result = tools.execute("t.flaky", {"name": "x"})
    assert (result.status, result.data) == ("success", "finally")
    assert tools.calls[-1].attempts == 3
    assert calls.slept == [0.2, 0.4]


def test_transient_error_that_persists_is_an_error_after_max_retries_plus_one(catalog, calls):
    tools = executor(catalog, calls)
    result = tools.execute("t.always_flaky", {"name": "x"})
    assert result.status == "error"
    assert result.error == "backend down (after 2 attempts)"
    assert calls.ran == ["t.always_flaky"] * 2


def test_a_tool_bug_is_an_error_result_and_is_not_retried(catalog, calls):
    # When a tool raises a plain exception, the executor never raises
    result = executor(catalog, calls).execute("t.buggy", {"name": "x"})
    assert (result.status, result.error) == ("error", "RuntimeError: boom")
    assert calls.ran == ["t.buggy"]


def test_tool_error_is_reported_verbatim_and_not_retried(catalog, calls):
    result = executor(catalog, calls).execute("t.refuses", {"name": "x"})
    assert (result.status, result.error) == ("error", "no such item")
    assert calls.ran == ["t.refuses"]


def test_a_tool_returning_the_wrong_type_is_an_error(catalog, calls):
    result = executor(catalog, calls).execute("t.wrong_type", {"name": "x"})
    assert result.status == "error"
    assert "returned dict, not ToolResult" in result.error


# -- confirmation ----------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["t.write", "t.destroy"])
def test_risky_tool_asks_for_confirmation_before_running(catalog, calls, tool):
    # When a write or destructive tool is called without an approval
    with pytest.raises(ConfirmationRequired) as asked:
        executor(catalog, calls).execute(tool, {"name": "x"})
    # Then the request names exactly this call, and nothing ran
    assert asked.value.call_id == call_id(tool, {"name": "x"})
    assert (asked.value.tool_id, asked.value.params) == (tool, {"name": "x"})
    assert asked.value.risk in (RiskLevel.WRITE, RiskLevel.DESTRUCTIVE)
    assert calls.ran == []


def test_approved_call_runs(catalog, calls):
    approvals = {call_id("t.write", {"name": "x"}): True}
    result = executor(catalog, calls, approvals=approvals).execute("t.write", {"name": "x"})
    assert result.status == "success"
    assert calls.ran == ["t.write"]


def test_an_approval_covers_only_the_call_it_was_given_for(catalog, calls):
    tools = executor(catalog, calls, approvals={call_id("t.write", {"name": "x"}): True})
    with pytest.raises(ConfirmationRequired):
        tools.execute("t.write", {"name": "y"})


def test_declined_call_is_denied_and_does_not_run(catalog, calls):
    approvals = {call_id("t.write", {"name": "x"}): False}
    result = executor(catalog, calls, approvals=approvals).execute("t.write", {"name": "x"})
    assert (result.status, result.error) == ("denied", "declined by the user")
    assert calls.ran == []


def test_auto_approved_tool_runs_without_asking(catalog, calls):
    result = executor(catalog, calls, auto_approve=frozenset({"t.write"})).execute("t.write", {"name": "x"})
    assert result.status == "success"


def test_call_id_is_stable_across_key_order():
    assert call_id("t", {"a": 1, "b": 2}) == call_id("t", {"b": 2, "a": 1})
    assert call_id("t", {"a": 1}) != call_id("t", {"a": 2})
    assert call_id("t", {"a": 1}) != call_id("u", {"a": 1})


# -- budget and bookkeeping --------------------------------------------------------------------


def test_budget_exhaustion_denies_further_calls(catalog, calls):
    tools = executor(catalog, calls, budget=1)
    assert tools.execute("t.read", {"name": "x"}).status == "success"
    result = tools.execute("t.read", {"name": "y"})
    assert (result.status, result.error) == ("denied", "tool budget exhausted (max_tool_calls)")
    assert calls.ran == ["t.read"]


def test_denied_and_invalid_calls_do_not_spend_the_budget(catalog, calls):
    tools = executor(catalog, calls, agent=agent(ToolAccess.READ), budget=1)
    tools.execute("t.write", {"name": "x"})  # denied by access
    tools.execute("t.read", {})  # invalid
    tools.execute("t.nope", {})  # unknown
    assert tools.executed == 0
    assert tools.execute("t.read", {"name": "x"}).status == "success"
    assert tools.executed == 1


def test_zero_budget_denies_the_first_call(catalog, calls):
    assert executor(catalog, calls, budget=0).execute("t.read", {"name": "x"}).status == "denied"


def test_hooks_see_every_started_and_completed_call(catalog, calls):
    started: list[tuple[str, dict[str, Any]]] = []
    completed: list[ToolCallRecord] = []
    tools = executor(catalog, calls, on_start=lambda t, p: started.append((t, p)), on_complete=completed.append)
    tools.execute("t.read", {"name": "x"})
    tools.execute("t.nope", {})
    assert started == [("t.read", {"name": "x"})]  # only calls that really run start
    assert [(r.tool_id, r.result.status, r.attempts) for r in completed] == [
        ("t.read", "success", 1),
        ("t.nope", "not_found", 0),
    ]
    assert tools.calls == completed


def test_registering_a_tool_twice_is_refused(catalog):
    with pytest.raises(ValueError, match="registered twice"):
        catalog.register("t.read", "again", Item)(lambda p: ToolResult.ok(None))
