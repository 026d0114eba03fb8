"""A mission's bounded generations: each stage's model call carries its agent's limit, else its role's in
the capability, capped by the provider's ceiling; every attempt the client abandons is a usage record at
its estimated cost and counts against max_cost_usd, when a retry answers and when none does (the
StageRunner, driven by the DirectDriver, over the shared provider and a scripted backend)."""

from __future__ import annotations

import json
from collections import defaultdict, deque

from missions.adapters.llm.resilient import Answer, ResilientProvider, RetryableCall
from missions.adapters.memory.agents import InMemoryUsageStore
from missions.core.llm.provider import LLMRequest
from missions.core.pipeline.config import AgentConfig
from tests.support.driver import DirectDriver
from tests.support.runner import final, make
from tests.support.stages import thinking

PRICE = (1000.0, 1000.0)  # USD per million tokens: a thousandth of a dollar a token, so limits cost dollars


class Backend:
    """Answers each stage's attempts as scripted: a RetryableCall to raise, else a valid Note. Keeps the
    limit each attempt carried, by stage."""

    name = "scripted-backend"

    def __init__(self, **failures: list[RetryableCall]):
        self.failures = {stage: deque(steps) for stage, steps in failures.items()}
        self.limits: dict[str, list[int | None]] = defaultdict(list)

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        self.limits[request.stage].append(request.max_tokens)
        steps = self.failures.get(request.stage)
        if steps:
            raise steps.popleft()
        return Answer(json.dumps({"text": "thought"}), model, 10, 5)

    def probe(self, model: str, timeout: float) -> None: ...


def timed_out() -> RetryableCall:
    return RetryableCall("APITimeoutError: Request timed out.", abandoned=True)


def mission(backend: Backend, usage: InMemoryUsageStore, max_cost_usd: float = 100.0):
    capability = make(
        "t_bounded",
        [
            AgentConfig(name="plan", has_llm=True, model_role="planner", default_next="write"),
            AgentConfig(name="write", has_llm=True, model_role="writer", default_next="review"),
            AgentConfig(name="review", has_llm=True, model_role="planner", max_tokens=120, default_next="done"),
            AgentConfig(name="done"),
        ],
        thinking("plan"),
        thinking("write"),
        thinking("review"),
        final(),
        max_tokens={"planner": 300, "writer": 50_000},
    )
    provider = ResilientProvider(
        backend, default_model="m", prices={"m": PRICE}, max_tokens=2000, max_retries=2, sleep=lambda s: None
    )
    driver = DirectDriver(capability, llm=provider, usage=usage)
    return driver.run("bounded", bounds={"max_cost_usd": max_cost_usd})


def test_a_stage_without_a_limit_gets_its_roles_default_capped_by_the_ceiling():
    # Given planner calls limited to 300 by the capability, writer calls to 50,000 (past the ceiling of
    # 2,000), and a review stage (a planner) with its own limit of 120
    backend, usage = Backend(), InMemoryUsageStore()
    # When the mission runs
    envelope = mission(backend, usage)
    # Then each call carried its limit, and the usage records say which
    assert envelope.terminal_reason == "completed"
    assert dict(backend.limits) == {"plan": [300], "write": [2000], "review": [120]}
    assert [(r.stage, r.max_tokens) for r in usage.for_mission(envelope.mission_id)] == [
        ("plan", 300),
        ("write", 2000),
        ("review", 120),
    ]


def test_abandoned_attempts_are_recorded_and_counted_so_max_cost_usd_stops_the_mission():
    # Given a planner that times out twice before it answers, and a budget of $0.50 (the two abandoned
    # attempts alone are charged at least their limit: 2 x 300 tokens x $0.001)
    backend, usage = Backend(plan=[timed_out(), timed_out()]), InMemoryUsageStore()
    # When the mission runs
    envelope = mission(backend, usage, max_cost_usd=0.5)
    # Then each abandoned attempt is a usage record at prompt + limit, the answer one at what it used
    records = usage.for_mission(envelope.mission_id)
    assert [(r.outcome, r.attempt, r.tokens_out) for r in records] == [
        ("abandoned", 1, 300),
        ("abandoned", 2, 300),
        ("ok", None, 5),
    ]
    abandoned = [r for r in records if r.outcome == "abandoned"]
    assert all(r.tokens_in > 0 and r.cost_usd == round((r.tokens_in + 300) * 0.001, 8) for r in abandoned)
    # and the mission counted them all: past its budget, it went no further than the stage that spent it
    assert envelope.counters.cost_usd == round(sum(r.cost_usd for r in records), 8) > 0.5
    assert envelope.terminal_reason == "max_cost_usd"
    assert "write" not in backend.limits


def test_when_every_attempt_is_abandoned_the_failed_mission_still_counts_them():
    # Given a planner that never answers in time (three attempts a call; the stage is tried once)
    backend, usage = Backend(plan=[timed_out() for _ in range(3)]), InMemoryUsageStore()
    # When the mission runs
    envelope = mission(backend, usage)
    # Then it failed at that stage, each attempt is a usage record, and its cost is theirs, though the
    # stage's own envelope was lost with its failure
    assert envelope.terminal_reason == "stage_failed:plan"
    records = usage.for_mission(envelope.mission_id)
    assert [r.outcome for r in records] == ["abandoned", "abandoned", "abandoned", "transient_error"]
    assert envelope.counters.cost_usd == round(sum(r.cost_usd for r in records), 8) > 0.9
