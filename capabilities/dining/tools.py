"""One read-only tool per restaurant source, so each parallel stage may use only its own.

The tools make a single attempt (max_retries 0): the stages retry through
`connectors.base.call_source`, which also records the attempts for the mission's report.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from capabilities.dining.connectors import DiningQuery, RestaurantListing, RestaurantSource, sample_sources
from missions.core.capability.connectors import ConnectorError, ConnectorRejected
from missions.core.capability.tools import ToolCatalog, ToolCategory, ToolResult, TransientToolError

SOURCES: dict[str, RestaurantSource] = sample_sources()  # swap in real services here
CATALOG = ToolCatalog()


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cuisine: str | None = None
    day: str | None = None
    time: str = "19:30"
    party_size: int = Field(2, ge=1, le=20)
    radius_km: float = Field(5.0, gt=0, le=50)
    city: str | None = Field(None, min_length=1, max_length=64, description="the city to search; none: the sample city")


def tool_id(source: str) -> str:
    return f"dining.{source}"


def _register(source: str) -> None:
    @CATALOG.register(
        tool_id(source),
        f"Search restaurants on the {source} service",
        SearchParams,
        category=ToolCategory.NETWORK,
        max_retries=0,
    )
    def search(params: SearchParams) -> ToolResult:
        try:
            listings = SOURCES[source].search(DiningQuery(**params.model_dump()))
        except ConnectorRejected as exc:
            return ToolResult(status="error", error=str(exc), data={"rejected": True})
        except ConnectorError as exc:
            raise TransientToolError(str(exc)) from exc
        return ToolResult.ok({"listings": [listing.to_dict() for listing in listings]})


for _name in SOURCES:
    _register(_name)


def listings_of(result: ToolResult) -> list[RestaurantListing]:
    """A tool result as listings, or the connector error `call_source` retries (or not)."""
    if result.status == "success":
        return [RestaurantListing.from_dict(item) for item in result.data["listings"]]
    if isinstance(result.data, dict) and result.data.get("rejected"):
        raise ConnectorRejected(result.error or "rejected")
    raise ConnectorError(result.error or result.status)
