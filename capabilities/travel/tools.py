"""The one tool travel workers use: search one source of one kind (a read-only network call).

Going through the tool executor gives every worker call its events (the CLI and the events API
show which source failed) and counts it against max_tool_calls. The connector's own
`call_source` retries a failing source and reports it; a failed source is an error result the
coordinator reports, never a failed stage.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from capabilities.travel import connectors as travel
from missions.core.capability.connectors import call_source, with_simulated_failures
from missions.core.capability.tools import ToolCatalog, ToolCategory, ToolResult

CATALOG = ToolCatalog()


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["flights", "hotels", "activities", "events"]
    source: str = Field(min_length=1, max_length=40)
    query: str = Field("", max_length=80)  # the category, for activities
    destination: str = Field(min_length=1, max_length=80)
    origin: str = Field("NYC", max_length=80)
    month: str = Field("May", max_length=20)
    days: int = Field(5, ge=1, le=30)
    travelers: int = Field(2, ge=1, le=20)
    simulate_failures: int = Field(0, ge=0, le=20)  # demos and tests of an outage (context simulate_failures)


@CATALOG.register(
    "travel.search",
    "Search one travel source (flights, hotels, activities or events) for a trip",
    SearchParams,
    category=ToolCategory.NETWORK,
    timeout_seconds=20,
    max_retries=0,  # call_source retries the source itself
)
def search(params: SearchParams) -> ToolResult:
    trip = travel.TripQuery(params.destination, params.origin, params.month, params.days, params.travelers)
    source = f"{params.kind}:{params.source}"
    call = with_simulated_failures(
        {"simulate_failures": {params.source: params.simulate_failures}},
        params.source,
        lambda: travel.search(params.kind, params.source, trip, params.query),
    )
    result = call_source(source, call)
    data = {"report": result.report(), "items": result.items}
    if not result.ok:
        return ToolResult(status="error", error=f"{source}: {result.error}", data=data)
    return ToolResult.ok(data)
