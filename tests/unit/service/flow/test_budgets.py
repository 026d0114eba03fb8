"""Users' daily budgets over in-memory stores: a user at their budget starts nothing new (held, or refused
when asked), a raise or a new day starts what was held, and a stage whose paid call reaches the budget
ends its mission through the final stage with `user_budget`.

The launcher runs on a fake Executions port (tests.support.fakes); spending is what the usage store is
told, as a stage's model calls tell it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from missions.adapters.memory.agents import InMemoryUsageStore
from missions.core.cost.budget import HELD_FOR_BUDGET, USER_BUDGET, BudgetStatus
from missions.core.cost.usage import UsageRecord
from missions.core.errors import BudgetReached
from missions.core.mission.events import EventType
from missions.core.mission.status import MissionStatus
from missions.core.pipeline.config import AgentConfig
from missions.service.flow.budgets import Budgets
from tests.support.launching import CAPABILITY, LaunchWorld

START = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


class Day:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class World(LaunchWorld):
    def __init__(self, default_usd: float | None = 1.0, limit: int = 3):
        self.clock = Day()
        self.usage = InMemoryUsageStore()
        self.budgets = Budgets(lambda: self.usage, default_usd, now=self.clock, cache_seconds=0)
        super().__init__(limit=limit, budgets=self.budgets)

    def submit(self, user: str = "ann", **fields: Any) -> str:
        return self.request(user=user, **fields).mission_id

    def spend(self, user: str, usd: float) -> float | None:
        """A model call of the user's, as a stage records it."""
        record = UsageRecord(
            mission_id="m", user_id=user, capability=CAPABILITY, stage="s", agent="s", provider="p", model="x",
            cost_usd=usd,
        )  # fmt: skip
        return self.usage.record(record, self.budgets.today())


def test_a_user_at_their_budget_has_new_missions_held_with_the_reason_and_an_event():
    # Given ann has spent her dollar today, and bob nothing
    world = World(default_usd=1.0)
    world.spend("ann", 1.0)
    # When each asks for a mission
    held, free = world.submit("ann"), world.submit("bob")
    # Then ann's is queued and held for her budget, not started; bob's started
    assert world.status(held) == MissionStatus.QUEUED and held not in world.executions.started
    assert free in world.executions.started
    assert [e.mission_id for e in world.launcher.dispatcher.held("ann")] == [held]
    place = world.launcher.queue_place(world.missions.get(held))
    assert place is not None and place["held"] == HELD_FOR_BUDGET and "daily budget is spent" in place["reason"]
    events, _ = world.events.read(held)
    assert [(e.type, e.payload["reason"], e.payload["daily_budget_usd"]) for e in events] == [
        (EventType.MISSION_QUEUED, HELD_FOR_BUDGET, 1.0)
    ]


def test_a_request_that_asks_to_be_refused_is_refused_with_when_to_retry_and_nothing_stored():
    world = World(default_usd=0.5)
    world.spend("ann", 0.75)
    with pytest.raises(BudgetReached, match="daily budget is spent") as refused:
        world.submit("ann", over_budget="refuse")
    # retry after: the next midnight, UTC (15 hours after 09:00)
    assert refused.value.retry_after_seconds == 15 * 3600 + 1
    assert world.missions.list_for_user("ann") == [] and world.launcher.dispatcher.held("ann") == []


def test_a_raise_starts_the_held_missions_in_order_within_the_users_running_slots():
    # Given three of ann's missions held, and a limit of two running missions
    world = World(default_usd=0.1, limit=2)
    world.spend("ann", 0.2)
    held = [world.submit("ann") for _ in range(3)]
    assert world.executions.started == []
    # When an operator raises her budget past what she spent
    world.budgets.set("ann", 1.0)
    started = world.launcher.release_held("ann")
    # Then the first two start, the third waits for a slot (no longer held), and starts when one frees
    assert started == held[:2] == world.executions.started
    assert world.launcher.dispatcher.held("ann") == []
    assert world.status(held[2]) == MissionStatus.QUEUED
    world.end(held[0])
    assert world.executions.started == held


def test_a_raise_that_still_leaves_the_budget_spent_starts_nothing():
    world = World(default_usd=0.1)
    world.spend("ann", 0.5)
    held = world.submit("ann")
    world.budgets.set("ann", 0.4)
    assert world.launcher.release_held("ann") == [] and world.status(held) == MissionStatus.QUEUED


def test_a_new_day_gives_every_budget_afresh_and_the_reconciler_starts_what_was_held():
    # Given ann's and bob's budgets spent today, each with a held mission
    world = World(default_usd=0.3)
    world.spend("ann", 0.3)
    world.spend("bob", 0.9)
    ann, bob = world.submit("ann"), world.submit("bob")
    # When the reconciler runs the same day, nothing starts
    assert world.launcher.reconcile()["held_started"] == []
    # When it runs after midnight, UTC
    world.clock.now = START + timedelta(hours=15)
    report = world.launcher.reconcile()
    # Then both start, and their day's spend is nothing yet
    assert sorted(report["held_started"]) == sorted([ann, bob]) and sorted(world.executions.started) == sorted(
        [ann, bob]
    )
    assert world.budgets.status("ann").spent_usd == 0.0


def test_a_held_mission_can_be_cancelled_and_is_never_started():
    world = World(default_usd=0.1)
    world.spend("ann", 0.1)
    held = world.submit("ann")
    world.control.cancel(world.missions.get(held))
    world.budgets.set("ann", None)
    world.budgets.default_usd = None
    assert world.launcher.release_held() == []
    assert world.status(held) == MissionStatus.CANCELLED and world.executions.started == []


def test_without_a_budget_nothing_is_read_or_held():
    world = World(default_usd=None)
    world.spend("ann", 1000.0)
    assert world.submit("ann") in world.executions.started
    assert world.budgets.status("ann") == BudgetStatus.of("2026-11-28", 0.0, None)


def test_a_users_own_budget_wins_over_the_default_and_a_cached_one_is_read_afresh_before_it_stops():
    # Given a default of $1, ann's own $5, and a budget kept for a minute
    usage = InMemoryUsageStore()
    ticks = iter(range(0, 10_000, 1))
    budgets = Budgets(lambda: usage, 1.0, now=lambda: START, cache_seconds=60, monotonic=lambda: float(next(ticks)))
    usage.set_budget("ann", 5.0)
    assert budgets.limit_of("ann") == 5.0 and budgets.limit_of("bob") == 1.0
    # When an operator cuts ann's budget behind this function's back
    usage.set_budget("ann", 0.5)
    # Then the kept budget still says $5 for a while, but a stage that spent $0.6 reads it afresh and stops
    assert budgets.limit_of("ann") == 5.0
    assert budgets.stops("ann", 0.6) is False  # below the kept one: no read
    usage.set_budget("ann", 0.5)
    budgets._kept.clear()  # as after cache_seconds
    assert budgets.stops("ann", 0.6) is True
    # and a raise since the budget was kept is honoured before a mission is stopped
    usage.set_budget("ann", 10.0)
    assert budgets.stops("ann", 0.6) is False


# --------------------------------------------------------------------------- the running mission


def test_a_stage_whose_paid_call_reaches_the_budget_ends_its_mission_with_user_budget():
    # Given a three-stage mission whose every call costs $0.01 and ann's budget of $0.015
    from missions.adapters.llm.resilient import Answer, ResilientProvider
    from tests.support.driver import DirectDriver
    from tests.support.runner import final, make
    from tests.support.stages import thinking

    class Backend:
        name = "priced"
        stages: list[str] = []

        def call(self, model: str, request: Any, timeout: float) -> Answer:
            self.stages.append(request.stage)
            return Answer('{"text": "thought"}', model, 10, 0)

        def probe(self, model: str, timeout: float) -> None: ...

    capability = make(
        "t_budgeted",
        [
            AgentConfig(name="plan", has_llm=True, default_next="write"),
            AgentConfig(name="write", has_llm=True, default_next="review"),
            AgentConfig(name="review", has_llm=True, default_next="done"),
            AgentConfig(name="done"),
        ],
        thinking("plan"),
        thinking("write"),
        thinking("review"),
        final(),
    )
    backend, usage = Backend(), InMemoryUsageStore()
    provider = ResilientProvider(backend, default_model="m", prices={"m": (1000.0, 0.0)}, sleep=lambda s: None)
    driver = DirectDriver(capability, llm=provider, usage=usage)
    budgets = Budgets(lambda: usage, 0.015, now=lambda: START)
    driver.services.budgets = lambda: budgets
    # When it runs
    envelope = driver.run("budgeted")
    # Then the second stage's call reached the budget: the mission ended through its final stage with the reason
    assert backend.stages == ["plan", "write"]
    assert envelope.terminal_reason == USER_BUDGET
    assert usage.spent(envelope.user_id, "2026-11-28") == pytest.approx(0.02)
    reached = [e for e in driver.stores.events.read(envelope.mission_id)[0] if e.type is EventType.BOUND_REACHED]
    assert [e.payload["reason"] for e in reached] == [USER_BUDGET]


# --------------------------------------------------------------------------- property

operations = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.sampled_from(["ann", "bob"])),
        st.tuples(st.just("spend"), st.sampled_from(["ann", "bob"]), st.sampled_from([0.1, 0.25, 0.5])),
        st.tuples(st.just("raise"), st.sampled_from(["ann", "bob"]), st.sampled_from([0.2, 1.0, 5.0])),
        st.tuples(st.just("midnight")),
        st.tuples(st.just("end"), st.integers(0, 20)),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_property_the_missions_that_run_are_the_ones_the_budget_admits(ops):
    # Given users who submit, spend, are raised and cancel, across midnights, in any order
    world = World(default_usd=0.5, limit=2)
    note(f"ops={ops}")
    submitted: list[str] = []
    owner: dict[str, str] = {}
    for op in ops:
        if op[0] == "submit":
            under = not world.budgets.status(op[1]).reached
            mission = world.submit(op[1])
            submitted.append(mission)
            owner[mission] = op[1]
            # Then a mission of a user at their budget is held, never started
            held_ids = {e.mission_id for e in world.launcher.dispatcher.held(op[1])}
            assert (mission in held_ids) == (not under)
        elif op[0] == "spend":
            world.spend(op[1], op[2])
        elif op[0] == "raise":
            world.budgets.set(op[1], op[2])
            world.launcher.release_held(op[1])
        elif op[0] == "midnight":
            world.clock.now += timedelta(days=1)
            world.launcher.reconcile()
        elif submitted:
            mission = submitted[op[1] % len(submitted)]
            if op[0] == "end" and world.status(mission) == MissionStatus.RUNNING:
                world.end(mission)
            elif op[0] == "cancel" and world.status(mission) not in ("completed", "cancelled"):
                world.control.cancel(world.missions.get(mission))
        # Then nothing held is running, and every started mission was admitted or released by a raise or a day
        for user in ("ann", "bob"):
            held_ids = {e.mission_id for e in world.launcher.dispatcher.held(user)}
            assert not held_ids & set(world.executions.started)
            assert all(world.status(m) == MissionStatus.QUEUED for m in held_ids)
    # When every budget is lifted and the queues drain
    world.budgets.default_usd = None
    for user in ("ann", "bob"):
        world.budgets.set(user, None)
    world.launcher.release_held()
    for _ in range(len(submitted) + 1):
        for mission in submitted:
            if world.status(mission) == MissionStatus.RUNNING:
                world.end(mission)
    # Then every mission that was not cancelled started exactly once, and none is held
    cancelled = {m for m in submitted if world.status(m) == MissionStatus.CANCELLED}
    assert sorted(world.executions.started) == sorted(set(world.executions.started))
    assert set(world.executions.started) | cancelled == set(submitted)
    assert world.launcher.dispatcher.held("ann") == world.launcher.dispatcher.held("bob") == []
