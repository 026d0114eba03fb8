"""The test capabilities the missions on the local emulation run: clarifications, a timeout, failing stages, bulky
tool output, a parallel group, a fan-out and an endless loop.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from pydantic import BaseModel

from missions.core.capability.registry import Capability, Ctx, StageDefinitionError, stage
from missions.core.capability.tools import ToolCatalog, ToolResult
from missions.core.mission.envelope import Bounds, InterruptKind
from missions.core.pipeline.config import AgentConfig, EdgeLimit, FanOut, RoutingRule, ToolAccess
from tests.integration.conftest import (
    chain,
    final_answer,
    make_capability,
)
from tests.support.stages import Note, Out


def _counted(fail: Any = None) -> tuple[Any, list[int]]:
    """A call a stage makes first, counting its calls in a closure; `fail(n)` returns an exception to
    raise on call n."""
    calls = [0]

    def count() -> None:
        calls[0] += 1
        error = fail(calls[0]) if fail else None
        if error is not None:
            raise error

    return count, calls


class Asked(BaseModel):
    """The output of a stage that asked: the answer it was resumed with (None if it was not)."""

    resumed_with: str | None = None


class Heard(Note):
    """What the model said, and the answer this stage was resumed with."""

    resumed_with: str | None = None


@stage
def ask(ctx: Ctx) -> Asked:
    """Asks a clarification unless it is resumed (then `ask` returns the answer)."""
    answer = ctx.ask(InterruptKind.CLARIFICATION, "which?")
    return Asked(resumed_with=answer.text)


@stage
def work(ctx: Ctx) -> Heard:
    said = ctx.think(Note)
    return Heard(**said.model_dump(), resumed_with=ctx.answer.text if ctx.answer else None)


def _clarifying(name: str, **pipeline: Any) -> Capability:
    """ask -> work -> final, where ask asks a clarification unless it is resumed; work has an LLM."""
    return make_capability(
        name,
        chain("ask", "work", "final", work={"has_llm": True}),
        ask,
        work,
        final_answer("painted"),
        **pipeline,
    )


CLARIFY_AT_WORK = _clarifying("t_clarify_work", resume={"clarification": "work"})

CLARIFY_AT_ASKER = _clarifying("t_clarify_asker")

TIMEOUT = make_capability(
    "t_timeout",
    chain("ask", "final"),
    ask,
    final_answer("nobody answered"),
    interrupt_timeout_seconds=2,
)

_count_flaky, FLAKY_CALLS = _counted(lambda n: RuntimeError("first call fails") if n == 1 else None)

_count_broken, BROKEN_CALLS = _counted(lambda n: RuntimeError(f"always broken (call {n})"))

_count_misdefined, MISDEFINED_CALLS = _counted(lambda n: StageDefinitionError("stage wired wrongly"))


@stage
def flaky() -> Out:
    _count_flaky()
    return Out(ok=True)


@stage
def broken() -> Out:
    _count_broken()
    return Out()


@stage
def misdefined() -> Out:
    _count_misdefined()
    return Out()


FLAKY = make_capability("t_flaky", chain("start", "flaky", "final", flaky={"max_retries": 1}), flaky, final_answer())

BROKEN = make_capability(
    "t_broken", chain("start", "broken", "final", broken={"max_retries": 1}), broken, final_answer("partial")
)

MISDEFINED = make_capability(
    "t_misdefined",
    chain("start", "misdefined", "final", misdefined={"max_retries": 1}),
    misdefined,
    final_answer("partial"),
)

# 2 MB that does not compress to nothing: half repetition, half random hex
BLOB = "x" * 1_000_000 + os.urandom(500_000).hex()

assert len(BLOB) == 2_000_000


class _NoParams(BaseModel):
    pass


_BULKY_TOOLS = ToolCatalog()


@_BULKY_TOOLS.register("data.fetch_bulk", "Return 2 MB of data", _NoParams)
def _fetch_bulk(params: _NoParams) -> ToolResult:
    return ToolResult.ok({"blob": BLOB})


class Fetched(BaseModel):
    status: str
    blob: str = ""


class Measured(BaseModel):
    answer: str
    blob_len: int


@stage
def fetch(ctx: Ctx) -> Fetched:
    assert ctx.tools is not None
    fetched = ctx.tools.execute("data.fetch_bulk", {})
    return Fetched(status=fetched.status, blob=fetched.data["blob"])


@stage
def report(fetch: Fetched) -> Measured:
    return Measured(answer="measured", blob_len=len(fetch.blob))


BULKY = make_capability(
    "t_bulky",
    chain(
        "fetch",
        "report",
        fetch={"has_tools": True, "tool_access": ToolAccess.READ, "allowed_tools": ["data.fetch_bulk"]},
    ),
    fetch,
    report,
    catalog=_BULKY_TOOLS,
)


def _parallel() -> Capability:
    """a -> {b, c} -> d: the branches read a, the join reads both branches."""

    @stage
    def a() -> Out:
        return Out(base=1)

    @stage
    def b(a: Out) -> Out:
        return Out(**{"from": "b", "value": a.base + 10})

    @stage
    def c(a: Out) -> Out:
        return Out(**{"from": "c", "value": a.base + 20})

    @stage
    def d(b: Out, c: Out) -> Out:
        return Out(answer="joined", seen={"b": b.model_dump(), "c": c.model_dump()})

    return make_capability(
        "t_parallel",
        [
            AgentConfig(name="a", default_next="bc"),
            AgentConfig(name="b", default_next="d"),
            AgentConfig(name="c", default_next="d"),
            AgentConfig(name="d"),
        ],
        a,
        b,
        c,
        d,
        parallel=[{"name": "bc", "stages": ["b", "c"]}],
    )


PARALLEL = _parallel()

_fan_lock = threading.Lock()

FAN_CONCURRENCY = {"now": 0, "peak": 0}


class Each(BaseModel):
    value: int


@stage
def plan(ctx: Ctx) -> Out:
    ctx.fan_out([1, 2, 3, 4])
    return Out(planned=4)


@stage
def each(item: int) -> Each:
    """One work item (mode "item"); the stage after the Map joins the items' outputs."""
    with _fan_lock:
        FAN_CONCURRENCY["now"] += 1
        FAN_CONCURRENCY["peak"] = max(FAN_CONCURRENCY["peak"], FAN_CONCURRENCY["now"])
    try:
        time.sleep(0.05)
        return Each(value=item * 10)
    finally:
        with _fan_lock:
            FAN_CONCURRENCY["now"] -= 1


@stage
def total(items: list[Each]) -> Out:
    values = [item.value for item in items]
    return Out(answer="summed", values=values, sum=sum(values))


FAN_OUT = make_capability(
    "t_fan_out",
    chain("plan", "each", "total", each={"fan_out": FanOut(max_concurrency=2)}),
    plan,
    each,
    total,
)

# a <-> b forever: the edge limit is far away and no stage counts iterations (a and b have no
# function: they output {}, and b's rule never matches)
LOOP = make_capability(
    "t_loop",
    [
        AgentConfig(name="a", default_next="b", counts_iteration=False),
        AgentConfig(
            name="b",
            default_next="a",
            counts_iteration=False,
            routing_rules=[RoutingRule(field="done", value=True, target="final")],
        ),  # never true
        AgentConfig(name="final"),
    ],
    final_answer("stopped"),
    edge_limits=[EdgeLimit(from_stage="a", to_stage="b", max_count=1000)],
    bounds=Bounds(max_agent_hops=6),
)

TEST_CAPABILITIES = [
    CLARIFY_AT_WORK,
    CLARIFY_AT_ASKER,
    TIMEOUT,
    FLAKY,
    BROKEN,
    MISDEFINED,
    BULKY,
    PARALLEL,
    FAN_OUT,
    LOOP,
]
