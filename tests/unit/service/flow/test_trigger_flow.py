"""Triggers' flow control over in-memory stores: a trigger's missions run one at a time per key (enqueued,
skipped or replaced), a throttle caps starts per key and window, a cancelling event cancels a key's missions,
and every decision is a record on the trigger (missions.service.flow.triggers)."""

from __future__ import annotations

from typing import Any

from missions.adapters.memory.flow import InMemoryFlowRecords
from missions.core.capability import registry as registry
from missions.core.mission.status import MissionStatus
from missions.core.triggers.declared import CancelOn, Throttle, TriggerFlow, WebhookTrigger
from missions.service.flow.triggers import TriggerFlowControl
from missions.service.triggers.ingest import dispatch_event
from missions.service.triggers.rules import cancellations_for_event, requests_for_event
from tests.support.launching import LaunchWorld
from tests.support.triggers import capability, webhook_event

SHOP = "shop"


def orders(**flow: Any) -> registry.Registry:
    """A capability whose `order.created` deliveries start a mission per order, with this flow control."""
    trigger = WebhookTrigger(
        source=SHOP,
        event_types=["order.created"],
        goal_template="Prepare order {payload.order} {payload.note}",
        flow=TriggerFlow(key="{payload.order}", **flow),
    )
    return registry.Registry().including(capability("orders", webhooks=[trigger]))


class World(LaunchWorld):
    def __init__(self, **flow: Any) -> None:
        super().__init__(capabilities=orders(**flow))
        self.records = InMemoryFlowRecords()
        self.clock = [1_000_000.0]
        self.flow = TriggerFlowControl(self.launcher, self.records, now=lambda: self.clock[0])
        self.deliveries = 0

    def deliver(self, event_type: str = "order.created", **payload: Any) -> dict[str, Any]:
        self.deliveries += 1
        event = webhook_event(event_type, source=SHOP, delivery_id=f"d-{self.deliveries}", **payload)
        return self.dispatch(event)

    def dispatch(self, event: dict[str, Any]) -> dict[str, Any]:
        """As the trigger function's dispatch_event does it, on this world's clock."""
        capabilities = self.launcher.capabilities.load_all()
        cancelled = self.flow.cancel_all(cancellations_for_event(event, capabilities))
        results = self.flow.submit_all(requests_for_event(event, capabilities), origin="test")
        return {**results, "cancelled": cancelled} if cancelled else results

    def missions_of_trigger(self) -> list[str]:
        """The missions the trigger made (started, or held behind their order's running one)."""
        return [m.mission_id for m in self.missions.list_for_user("u1", limit=1000)]

    def decisions(self) -> list[tuple[str, str | None]]:
        """The trigger's decisions (those made in one millisecond are in no particular order)."""
        return [(d.decision, d.mission_id) for d in self.records.decisions("orders.shop-0")]


def test_a_keys_events_run_one_at_a_time_and_other_keys_do_not_wait():
    world = World()
    first = world.deliver(order="7")["started"]
    second = world.deliver(order="7")["queued"]
    other = world.deliver(order="8")["started"]
    assert len(first) == len(second) == len(other) == 1
    assert world.executions.started == [*first, *other]
    world.end(first[0])
    assert world.executions.started == [*first, *other, *second]
    assert sorted(world.decisions()) == sorted([("started", first[0]), ("enqueued", second[0]), ("started", other[0])])


def test_singleton_skip_drops_an_event_while_its_keys_mission_is_active_and_says_so():
    world = World(singleton="skip")
    [first] = world.deliver(order="7")["started"]
    assert world.deliver(order="7")["skipped"] == [first]
    assert ("skipped", None) in world.decisions() and len(world.missions.list_for_user("u1")) == 1


def test_singleton_replace_cancels_the_active_mission_for_the_newer_event():
    world = World(singleton="replace")
    [first] = world.deliver(order="7")["started"]
    [second] = world.deliver(order="7")["started"]
    assert world.status(first) == MissionStatus.CANCELLED and world.status(second) == MissionStatus.RUNNING
    assert ("replaced", second) in world.decisions()


def test_a_throttle_starts_at_most_its_limit_per_key_and_window_and_records_the_rest():
    world = World(throttle=Throttle(limit=2, period_seconds=60))
    results = [world.deliver(order="7") for _ in range(3)]
    assert [sorted(k for k, v in r.items() if v) for r in results] == [["started"], ["queued"], ["throttled"]]
    assert world.deliver(order="8")["started"]  # another key has its own window
    world.clock[0] += 60  # the next window
    assert world.deliver(order="7")["queued"]
    assert [d for d, _ in world.decisions()].count("throttled") == 1


def test_a_cancelling_event_cancels_the_keys_missions_and_no_other():
    world = World(cancel_on=[CancelOn(event_types=["order.updated"], match={"payload.status": "cancelled"})])
    [active] = world.deliver(order="7")["started"]
    [held] = world.deliver(order="7")["queued"]
    [other] = world.deliver(order="8")["started"]
    # an update that is not a cancellation changes nothing
    assert "cancelled" not in world.deliver("order.updated", order="7", status="paid")
    # a cancellation cancels order 7's missions, the held one too (so nothing starts after the active one)
    assert sorted(world.deliver("order.updated", order="7", status="cancelled")["cancelled"]) == sorted([active, held])
    assert {world.status(m) for m in (active, held)} == {MissionStatus.CANCELLED}
    assert world.status(other) == MissionStatus.RUNNING and held not in world.executions.started
    assert sorted(m for d, m in world.decisions() if d == "cancelled_by_event") == sorted([active, held])


def test_a_replayed_delivery_is_one_mission_and_one_record():
    world = World()
    event = webhook_event("order.created", source=SHOP, delivery_id="same", order="7")
    first, again = (
        dispatch_event(event, world.launcher, world.records),
        dispatch_event(event, world.launcher, world.records),
    )
    assert first["started"] == again["duplicate"] and len(world.decisions()) == 1


def test_the_flow_control_pages_capability_toml_example_is_a_valid_trigger_that_behaves_as_it_says():
    import tomllib

    from missions.core.triggers.declared import Triggers
    from tests.support.docs import fenced

    block = fenced("docs/flow-control.md", "## Triggers: a key per event", "toml")[0]
    [trigger] = Triggers.model_validate(tomllib.loads(block)["triggers"]).webhooks
    assert trigger.flow is not None and trigger.flow.throttle is not None
    world = World(**trigger.flow.model_dump(exclude={"key"}))
    results = [world.deliver(order="7") for _ in range(4)]
    assert [next(k for k, v in r.items() if v) for r in results] == ["started", "queued", "queued", "throttled"]
    assert len(world.deliver("order.updated", order="7", status="cancelled")["cancelled"]) == 3


class Timers:
    """EventBridge Scheduler's group, as the flow sees it: schedules by name."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    def create(self, entry: Any) -> None:
        self.entries[entry.name] = entry

    def update(self, entry: Any) -> None:
        from missions.core.errors import NotFound

        if entry.name not in self.entries:
            raise NotFound(entry.name)
        self.entries[entry.name] = entry

    def delete(self, name: str) -> bool:
        return self.entries.pop(name, None) is not None


def test_a_burst_of_one_keys_events_starts_one_mission_with_the_last_once_the_key_is_quiet():
    # Given a trigger that debounces each order's events for a minute
    world = World(debounce_seconds=60)
    timers = Timers()
    world.flow = TriggerFlowControl(world.launcher, world.records, now=lambda: world.clock[0], timers=lambda: timers)
    # When five events of order 7 arrive ten seconds apart, and one of order 8
    for n in range(5):
        assert world.deliver(order="7", note=f"v{n}")["debounced"]
        world.clock[0] += 10
    world.deliver(order="8")
    # Then nothing started, and each order has one one-time timer, order 7's at the first event's end
    assert world.executions.started == [] and len(timers.entries) == 2
    [seven] = [e for e in timers.entries.values() if e.input["key"].endswith(":7")]
    assert seven.one_time and seven.expression.startswith("at(") and seven.input["kind"] == "flow_timer"
    # When order 7's timer goes off before its key was quiet for a minute, it is set again for the new end
    assert "rearmed" in world.flow.fire(seven.input)
    assert world.executions.started == []
    # When it goes off after the quiet minute, one mission starts, with the last event
    world.clock[0] += 60
    fired = world.flow.fire(seven.input)
    [mission] = fired["started"]
    assert world.missions.get(mission).goal == "Prepare order 7 v4" and world.executions.started == [mission]
    # and a second firing of the same timer starts nothing
    assert world.flow.fire(seven.input) == {"fired": None}
    assert [d for d, _ in world.decisions()].count("debounced") == 6


# --------------------------------------------------------------------------- properties over arrival orders

from hypothesis import HealthCheck, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from missions.core.triggers.cron import parse_at  # noqa: E402

arrivals = st.lists(
    st.one_of(
        st.tuples(st.just("deliver"), st.sampled_from(["7", "8"])),
        st.tuples(st.just("wait"), st.sampled_from([5, 20, 45, 3600])),
        st.tuples(st.just("end"), st.integers(0, 30)),
    ),
    max_size=40,
)


def fire_due(world: World, timers: Timers) -> None:
    """What the Scheduler does as time passes: each timer whose moment came fires once, then is deleted."""
    from datetime import UTC, datetime

    for name, entry in list(timers.entries.items()):
        if parse_at(entry.expression).moment <= datetime.fromtimestamp(world.clock[0], UTC):
            del timers.entries[name]
            world.flow.fire(entry.input)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=arrivals)
def test_property_debounce_starts_one_mission_per_quiet_burst_with_its_last_event(ops):
    # Given a 30-second debounce, and events, waits and ends in any order
    world = World(debounce_seconds=30)
    timers = Timers()
    world.flow = TriggerFlowControl(world.launcher, world.records, now=lambda: world.clock[0], timers=lambda: timers)
    note(f"ops={ops}")
    pending: dict[str, tuple[int, float]] = {}  # the model: key -> (its last event, when its quiet period ends)
    expected: list[str] = []
    for n, op in enumerate(ops):
        if op[0] == "deliver":
            world.deliver(order=op[1], note=f"e{n}")
            pending[op[1]] = (n, world.clock[0] + 30)
        elif op[0] == "wait":
            world.clock[0] += op[1]
            fire_due(world, timers)
            for key, (last, due) in sorted(pending.items(), key=lambda item: item[1][1]):
                if due <= world.clock[0]:
                    expected.append(f"Prepare order {key} e{last}")
                    del pending[key]
        else:
            started = world.executions.started
            if started:
                world.end(started[op[1] % len(started)])
    # Then the missions made are one per burst that went quiet, each with its burst's last event
    assert sorted(world.missions.get(m).goal for m in world.missions_of_trigger()) == sorted(expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=arrivals, limit=st.integers(1, 3))
def test_property_a_throttle_admits_exactly_its_limit_per_key_and_window(ops, limit):
    world = World(throttle=Throttle(limit=limit, period_seconds=60))
    note(f"ops={ops} limit={limit}")
    admitted: dict[tuple[str, int], int] = {}
    for op in ops:
        if op[0] == "deliver":
            result = world.deliver(order=op[1])
            window = int(world.clock[0] // 60)
            seen = admitted.get((op[1], window), 0)
            # Then a delivery is admitted (started or held behind its key) exactly while its window has room
            assert bool(result["throttled"]) == (seen >= limit), (result, seen)
            admitted[(op[1], window)] = seen + (0 if result["throttled"] else 1)
        elif op[0] == "wait":
            world.clock[0] += op[1]
        elif world.executions.started:
            world.end(world.executions.started[op[1] % len(world.executions.started)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=arrivals)
def test_property_singleton_skip_starts_a_keys_mission_only_when_none_of_it_is_active(ops):
    world = World(singleton="skip")
    note(f"ops={ops}")
    active: dict[str, str | None] = {"7": None, "8": None}
    for op in ops:
        if op[0] == "deliver":
            result = world.deliver(order=op[1])
            # Then it starts exactly when its key has no active mission; else it is skipped, naming that one
            if active[op[1]] is None:
                [active[op[1]]] = result["started"]
            else:
                assert result["skipped"] == [active[op[1]]] and not result["started"]
        elif op[0] == "end":
            running = [m for m in active.values() if m is not None]
            if running:
                ended = running[op[1] % len(running)]
                world.end(ended)
                active = {k: (None if m == ended else m) for k, m in active.items()}


def test_a_throttle_that_queues_starts_what_was_over_it_in_the_next_window_with_room():
    # Given one mission per order and minute, the rest queued
    world = World(throttle=Throttle(limit=1, period_seconds=60, overflow="queue"))
    timers = Timers()
    world.flow = TriggerFlowControl(world.launcher, world.records, now=lambda: world.clock[0], timers=lambda: timers)
    world.clock[0] = 6_000_000.0  # the start of a window
    # When three events of order 7 arrive in one minute
    [first] = world.deliver(order="7", note="a")["started"]
    assert world.deliver(order="7", note="b")["throttled"] and world.deliver(order="7", note="c")["throttled"]
    assert len(world.missions_of_trigger()) == 1 and len(timers.entries) == 2
    # Then the next window makes one of them (behind the running first), and the one after, the last
    world.clock[0] += 60
    fire_due(world, timers)
    assert len(world.missions_of_trigger()) == 2
    world.clock[0] += 60
    fire_due(world, timers)
    goals = sorted(world.missions.get(m).goal for m in world.missions_of_trigger())
    assert goals == ["Prepare order 7 a", "Prepare order 7 b", "Prepare order 7 c"] and first
    assert [d for d, _ in world.decisions()].count("throttled") >= 2


def test_the_flow_control_pages_memory_trigger_example_debounces_and_skips():
    import tomllib

    from missions.core.triggers.declared import Triggers
    from tests.support.docs import fenced

    blocks = fenced("docs/flow-control.md", "## Triggers: a key per event", "toml")
    [trigger] = Triggers.model_validate(tomllib.loads(blocks[1])["triggers"]).memory
    assert trigger.flow is not None and (trigger.flow.debounce_seconds, trigger.flow.singleton) == (60, "skip")
