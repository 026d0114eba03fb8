"""Triggers: what each one decided about the events that reached it (missions.service.flow.triggers)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from missions.app.api.edge import app, current_user, is_operator, responses, runtime
from missions.app.api.models.triggers import TriggerDecisionList
from missions.service.flow.triggers import trigger_named

TriggerName = Annotated[str, Path(min_length=3, max_length=160, examples=["code_analysis.git-0"])]


def _known(name: str) -> bool:
    capability, _, _ = name.partition(".")
    capabilities = runtime().capabilities
    return capability in capabilities.available() and trigger_named(capabilities.load(capability), name) is not None


@app.get(
    "/triggers/<trigger>/decisions",
    summary="What a trigger decided about each event: started, enqueued, skipped, throttled, cancelled",
    responses=responses((200, TriggerDecisionList, "newest first"), 404, 422),
)
def trigger_decisions(trigger: TriggerName, limit: Annotated[int, Query(ge=1, le=200)] = 50) -> dict[str, Any]:
    """`<capability>.<trigger id>` (GET /capabilities lists them; a webhook trigger's id is
    `<source>-<position>`): your own decisions, or everyone's for an operator."""
    user = current_user()
    if not _known(trigger):
        raise NotFoundError(f"no trigger {trigger}")
    records = runtime().flow_records.decisions(trigger, None if is_operator(user) else user, limit)
    return {"trigger": trigger, "decisions": [record.model_dump(mode="json") for record in records]}
