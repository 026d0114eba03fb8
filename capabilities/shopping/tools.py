"""The price-comparison tool. It makes a single attempt (max_retries 0): the stage retries
through `connectors.base.call_source`, which also records the attempts for the mission's report."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from capabilities.shopping.connectors import Offer, PriceComparison, SamplePriceComparison
from missions.core.capability.connectors import ConnectorError, ConnectorRejected
from missions.core.capability.tools import ToolCatalog, ToolCategory, ToolResult, TransientToolError

SERVICE: PriceComparison = SamplePriceComparison()  # swap in a real service here
SOURCE = SERVICE.name  # what {"simulate_failures": {...}} names
SEARCH = "shopping.search_offers"
CATALOG = ToolCatalog()


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=200)
    limit: int = Field(30, ge=1, le=100)


@CATALOG.register(
    SEARCH, "Every seller's offer for a product", SearchParams, category=ToolCategory.NETWORK, max_retries=0
)
def search_offers(params: SearchParams) -> ToolResult:
    try:
        offers = SERVICE.search(params.query, limit=params.limit)
    except ConnectorRejected as exc:
        return ToolResult(status="error", error=str(exc), data={"rejected": True})
    except ConnectorError as exc:
        raise TransientToolError(str(exc)) from exc
    return ToolResult.ok({"offers": [offer.to_dict() for offer in offers]})


def offers_of(result: ToolResult) -> list[Offer]:
    """A tool result as offers, or the connector error `call_source` retries (or not)."""
    if result.status == "success":
        return [Offer(**{k: v for k, v in item.items() if k != "total"}) for item in result.data["offers"]]
    if isinstance(result.data, dict) and result.data.get("rejected"):
        raise ConnectorRejected(result.error or "rejected")
    raise ConnectorError(result.error or result.status)
