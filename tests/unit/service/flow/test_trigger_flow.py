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

    (block,) = fenced("docs/flow-control.md", "## Triggers: a key per event", "toml")
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
