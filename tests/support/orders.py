"""A test capability a shop's webhooks drive: `order.created` prepares the order (one mission at a time per
order), `order.updated` with status cancelled cancels that order's missions. Its one stage waits at a gate
for goals that say "slow" (tests.support.slow), so a mission can be kept active on purpose."""

from __future__ import annotations

import dataclasses

from missions.core.pipeline.config import AgentConfig
from missions.core.triggers.declared import CancelOn, MemoryTrigger, Throttle, TriggerFlow, Triggers, WebhookTrigger
from tests.integration.conftest import make_capability
from tests.support.slow import work

ORDERS = dataclasses.replace(
    make_capability("t_orders", [AgentConfig(name="work")], work),
    triggers=Triggers(
        webhooks=[
            WebhookTrigger(
                source="shop",
                event_types=["order.created"],
                goal_template="Prepare order {payload.order} {payload.note}",
                flow=TriggerFlow(
                    key="{payload.order}",
                    throttle=Throttle(limit=3, period_seconds=3600),
                    cancel_on=[CancelOn(event_types=["order.updated"], match={"payload.status": "cancelled"})],
                ),
            )
        ]
    ),
)


# a user's notes: a burst of edits to one note is summarized once, a minute after the last edit
NOTES = dataclasses.replace(
    make_capability("t_notes", [AgentConfig(name="work")], work),
    triggers=Triggers(
        memory=[
            MemoryTrigger(
                id="edited",
                namespace="notes",
                goal_template="Summarize note {key}: {new.text}",
                flow=TriggerFlow(key="{key}", debounce_seconds=60),
            )
        ]
    ),
)
