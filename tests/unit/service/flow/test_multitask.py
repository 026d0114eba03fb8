"""Double-texting over in-memory stores: a request of a conversation or concurrency key whose mission is still
active follows its strategy (reject, enqueue, interrupt, rollback), from the request or the capability; for
every arrival order, the missions that run are the ones the strategy names, one at a time per key.

The launcher runs on a fake Executions port (tests.support.fakes) with mission control cancelling what a
newer request replaces; executions end when the test says so, as the status function would hear of it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from missions.core.capability import registry as registry
from missions.core.memory.conversation import Turn, WorkingMemory
from missions.core.mission.events import EventType
from missions.core.mission.requests import MultitaskStrategy
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.service.flow.multitask import KeyBusy, decide
from missions.service.lifecycle import Lifecycle
from tests.support.launching import CAPABILITY, LaunchWorld

STRICT = dataclasses.replace(registry.load(CAPABILITY), name="t_strict", multitask_strategy=MultitaskStrategy.REJECT)


class World(LaunchWorld):
    def __init__(self, limit: int = 10) -> None:
        super().__init__(limit=limit, capabilities=registry.Registry().including(STRICT))

    def submit(self, goal: str = "a charger", user: str = "ann", **fields: Any) -> Any:
        return self.request(goal, user, **fields)


def test_with_no_active_mission_a_keyed_request_starts_and_unrelated_keys_and_users_do_not_wait():
    world = World()
    first = world.submit(concurrency_key="order-7")
    other_key = world.submit(concurrency_key="order-8")
    other_user = world.submit(user="bob", concurrency_key="order-7")
    unkeyed = world.submit()
    assert [r.status for r in (first, other_key, other_user, unkeyed)] == ["started"] * 4


def test_reject_refuses_the_request_naming_the_active_mission_and_stores_nothing():
    world = World()
    first = world.submit(concurrency_key="order-7")
    with pytest.raises(KeyBusy, match=f"busy with mission {first.mission_id}"):
        world.submit("again", concurrency_key="order-7", multitask_strategy="reject")
    assert [m.mission_id for m in world.missions.list_for_user("ann")] == [first.mission_id]
    # and once the active one ended, the key is free again
    world.end(first.mission_id)
    assert world.submit("again", concurrency_key="order-7", multitask_strategy="reject").status == "started"


def test_the_capabilitys_strategy_is_the_default_and_a_request_may_say_otherwise():
    world = World()
    world.submit(capability=STRICT.name, concurrency_key="k")
    with pytest.raises(KeyBusy):
        world.submit(capability=STRICT.name, concurrency_key="k")  # capability.toml: reject
    assert world.submit(capability=STRICT.name, concurrency_key="k", multitask_strategy="enqueue").held == "key"


def test_enqueue_holds_each_new_request_and_starts_them_in_turn_as_each_ends():
    # Given a running mission of a key, and two more requests of it
    world = World()
    first = world.submit("first", concurrency_key="k")
    second, third = world.submit("second", concurrency_key="k"), world.submit("third", concurrency_key="k")
    # Then both are queued and held, and say why
    assert (second.status, second.held, third.held) == ("queued", "key", "key")
    assert world.executions.started == [first.mission_id]
    place = world.launcher.queue_place(world.missions.get(second.mission_id))
    assert place is not None and f"starts when mission {first.mission_id} of concurrency key k ends" in place["reason"]
    events, _ = world.events.read(second.mission_id)
    assert [(e.type, e.payload["reason"]) for e in events] == [(EventType.MISSION_QUEUED, "key")]
    # When the first ends, the second starts; when the second ends, the third
    world.end(first.mission_id)
    assert world.executions.started == [first.mission_id, second.mission_id]
    world.end(second.mission_id)
    assert world.executions.started == [first.mission_id, second.mission_id, third.mission_id]


def test_interrupt_cancels_the_active_mission_and_the_new_one_starts_with_its_input():
    world = World()
    first = world.submit("find a charger", concurrency_key="k")
    second = world.submit("make it USB-C", concurrency_key="k", multitask_strategy="interrupt")
    assert second.status == "started"
    replaced = world.missions.get(first.mission_id)
    assert (replaced.status, replaced.terminal_reason) == (MissionStatus.CANCELLED, "interrupted")
    assert world.started_context(second.mission_id)["interrupted"] == {
        "mission_id": first.mission_id,
        "goal": "find a charger",
        "status": MissionStatus.RUNNING,
    }
    # and the replaced one's end hands nothing over: the new one holds the key
    third = world.submit("and cheap", concurrency_key="k")
    assert third.held == "key"


def test_rollback_cancels_the_active_mission_and_the_conversation_keeps_no_trace_of_it():
    # Given a conversation with one turn done, and a mission of it running (its message in the chat history)
    world = World()
    done = Turn(mission_id="m_old", capability=CAPABILITY, goal="a cable", answer="cable found")
    world.conversations.put(WorkingMemory(conversation_id="c1", user_id="ann", turns=[done]), 0)
    history = [{"role": "user", "content": "a cable"}, {"role": "user", "content": "a charger"}]
    first = world.submit("a charger", conversation_id="c1", context={"chat": {"history": history[:1]}})
    # When the user sends another message with rollback
    second = world.submit(
        "a USB-C charger", conversation_id="c1", multitask_strategy="rollback", context={"chat": {"history": history}}
    )
    # Then the first is cancelled as rolled back, and the new one starts as if it had never been asked
    assert world.missions.get(first.mission_id).terminal_reason == "rolled_back" and second.status == "started"
    context = world.started_context(second.mission_id)
    assert context["chat"]["history"] == [{"role": "user", "content": "a cable"}]
    assert [t["goal"] for t in context["conversation"]["turns"]] == ["a cable"]
    assert "interrupted" not in context


def test_a_held_mission_cancelled_is_skipped_and_a_cancelled_holder_hands_the_key_over():
    world = World()
    first = world.submit("first", concurrency_key="k")
    second, third = world.submit("second", concurrency_key="k"), world.submit("third", concurrency_key="k")
    world.control.cancel(world.missions.get(second.mission_id))
    world.control.cancel(world.missions.get(first.mission_id))
    assert world.executions.started == [first.mission_id, third.mission_id]
    assert world.status(second.mission_id) == MissionStatus.CANCELLED


def test_a_queued_holder_cancelled_before_it_started_hands_the_key_over():
    # Given a limit of one running mission: the key's holder waits for a slot, a second waits for the key
    world = World(limit=1)
    busy = world.submit("unkeyed")
    holder = world.submit("first", concurrency_key="k")
    behind = world.submit("second", concurrency_key="k")
    assert (holder.status, holder.held, behind.held) == ("queued", None, "key")
    # When the holder is cancelled while queued, the next of the key takes its place in the queue
    world.control.cancel(world.missions.get(holder.mission_id))
    world.end(busy.mission_id)
    assert world.executions.started == [busy.mission_id, behind.mission_id]


def test_a_holder_that_ended_without_handing_over_is_taken_over_and_the_reconciler_frees_who_waits():
    # Given a holder whose end was recorded but never reported (a crash), and a mission held behind it
    world = World()
    first = world.submit("first", concurrency_key="k")
    second = world.submit("second", concurrency_key="k")
    Lifecycle(world.missions).end(first.mission_id, MissionStatus.FAILED, terminal_reason="crashed")
    # When the reconciler runs, the one held behind it starts
    assert world.launcher.reconcile()["held_started"] == [second.mission_id]
    # and a new request of a key whose holder ended takes it over at once
    Lifecycle(world.missions).end(second.mission_id, MissionStatus.FAILED, terminal_reason="crashed")
    assert world.submit("third", concurrency_key="k").status == "started"


def test_a_retried_request_is_the_same_mission_whatever_the_key_says():
    world = World()
    first = world.submit(concurrency_key="k", idempotency_key="delivery-1")
    again = world.submit(concurrency_key="k", idempotency_key="delivery-1", multitask_strategy="reject")
    assert (again.mission_id, again.status) == (first.mission_id, "duplicate")


# --------------------------------------------------------------------------- property

operations = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.sampled_from(["k1", "k2"]), st.sampled_from(list(MultitaskStrategy))),
        st.tuples(st.just("end"), st.integers(0, 30)),
        st.tuples(st.just("cancel"), st.integers(0, 30)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_property_for_every_arrival_order_the_missions_that_run_are_the_ones_the_strategy_names(ops):
    # Given requests of two keys with any strategy, ends and cancels, in any order
    world = World()
    note(f"ops={ops}")
    submitted: list[str] = []
    key_of: dict[str, str] = {}
    holder: dict[str, str | None] = {"k1": None, "k2": None}  # the model: the key's running mission
    waiting: dict[str, list[str]] = {"k1": [], "k2": []}  # and those held behind it, in arrival order
    expected_started: list[str] = []

    def hand_over(key: str) -> None:
        holder[key] = waiting[key].pop(0) if waiting[key] else None
        if holder[key] is not None:
            expected_started.append(holder[key])

    for op in ops:
        if op[0] == "submit":
            _, key, strategy = op
            action = decide(strategy, holder[key])
            try:
                result = world.submit(f"goal {len(submitted)}", concurrency_key=key, multitask_strategy=strategy)
            except KeyBusy as busy:
                assert action == "reject" and busy.active == holder[key]
                continue
            assert action != "reject"
            submitted.append(result.mission_id)
            key_of[result.mission_id] = key
            if action == "hold":
                waiting[key].append(result.mission_id)
            else:  # start, or replace the running one
                holder[key] = result.mission_id
                expected_started.append(result.mission_id)
        elif submitted:
            mission = submitted[op[1] % len(submitted)]
            key = key_of[mission]
            if world.status(mission) in TERMINAL:
                continue
            if op[0] == "end" and mission == holder[key]:
                world.end(mission)
                hand_over(key)
            elif op[0] == "cancel":
                world.control.cancel(world.missions.get(mission))
                if mission == holder[key]:
                    hand_over(key)
                else:
                    waiting[key].remove(mission)
        # Then what started is exactly what the strategy names, in that order, and one runs per key at most
        assert world.executions.started == expected_started
        for key in ("k1", "k2"):
            running = [m for m in submitted if key_of[m] == key and world.status(m) == MissionStatus.RUNNING]
            assert running == ([holder[key]] if holder[key] else [])
