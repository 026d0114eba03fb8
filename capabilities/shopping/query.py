"""What to look for (the model reads the goal) and which offers to keep (code applies preferences).

Stored preferences the filter understands, all optional:
  - `trusted_retailers_only` (true) keeps verified retailers; `preferred_retailers` (a list of
    seller names) keeps those sellers only;
  - `dislikes` naming a seller drops it; `likes` naming a seller puts it first on equal price;
  - `budget` as a number is a price ceiling; `max_shipping_days` a delivery limit.
The goal's own constraints ("under $300", "from a trusted store") apply on top.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from capabilities.shopping.connectors import Offer, find_seller

MAX_OPTIONS = 3


class ProductQuery(BaseModel):
    """The model's structured reading of a shopping goal."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    product: str = Field(min_length=1, max_length=200, description="the product, e.g. 'Sony WH-1000XM5 headphones'")
    max_price: float | None = Field(None, gt=0, description="price ceiling in dollars, only if the goal gives one")
    max_shipping_days: int | None = Field(None, ge=1, le=60)
    trusted_only: bool = Field(False, description="the goal asks for trusted or official stores only")
    condition: Literal["new", "any"] = Field("new", description="'any' when the goal accepts refurbished or used")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    if isinstance(value, str) and (match := re.search(r"\d+(?:\.\d+)?", value)):
        return float(match[0])
    return None


def _sellers(value: Any) -> set[str]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    found = {find_seller(str(item)) for item in items}
    return {seller.id for seller in found if seller is not None}


def constraints(query: ProductQuery, preferences: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The filter the offers go through, and a line per stored preference that shaped it."""
    applied: list[str] = []
    trusted_only = query.trusted_only
    if preferences.get("trusted_retailers_only") is True and not trusted_only:
        trusted_only = True
        applied.append("trusted_retailers_only: verified retailers only")
    allowed = _sellers(preferences.get("preferred_retailers"))
    if allowed:
        applied.append(f"preferred_retailers: only {', '.join(sorted(allowed))}")
    excluded = _sellers(preferences.get("dislikes"))
    if excluded:
        applied.append(f"dislikes: never {', '.join(sorted(excluded))}")
    liked = _sellers(preferences.get("likes"))
    if liked:
        applied.append(f"likes: {', '.join(sorted(liked))} first on equal price")
    max_price = query.max_price
    if (budget := _number(preferences.get("budget"))) is not None and (max_price is None or budget < max_price):
        max_price = budget
        applied.append(f"budget: at most ${budget:.0f}")
    days = query.max_shipping_days
    if (limit := _number(preferences.get("max_shipping_days"))) is not None and (days is None or limit < days):
        days = int(limit)
        applied.append(f"max_shipping_days: delivered within {days} days")
    return {
        "trusted_only": trusted_only,
        "allowed_sellers": sorted(allowed),
        "excluded_sellers": sorted(excluded),
        "liked_sellers": sorted(liked),
        "max_price": max_price,
        "max_shipping_days": days,
        "condition": query.condition,
    }, applied


def why_excluded(offer: Offer, rules: dict[str, Any]) -> str | None:
    """The first rule an offer breaks, or None when it is kept."""
    if not offer.in_stock:
        return "out_of_stock"
    if rules["allowed_sellers"] and offer.seller not in rules["allowed_sellers"]:
        return "not_a_preferred_retailer"
    if offer.seller in rules["excluded_sellers"]:
        return "disliked_seller"
    if rules["trusted_only"] and not offer.trusted:
        return "not_trusted"
    if rules["condition"] == "new" and offer.condition != "new":
        return "not_new"
    if rules["max_price"] is not None and offer.total > rules["max_price"]:
        return "over_budget"
    if rules["max_shipping_days"] is not None and offer.shipping_days > rules["max_shipping_days"]:
        return "ships_too_slowly"
    return None


def choose_options(offers: list[Offer], rules: dict[str, Any]) -> tuple[list[Offer], dict[str, int]]:
    """The offers to present (cheapest total first; a liked seller first on equal price), and
    how many each rule removed."""
    kept: list[Offer] = []
    removed: dict[str, int] = {}
    for offer in offers:
        reason = why_excluded(offer, rules)
        if reason is None:
            kept.append(offer)
        else:
            removed[reason] = removed.get(reason, 0) + 1
    liked = set(rules["liked_sellers"])
    kept.sort(key=lambda o: (o.total, o.seller not in liked, -o.rating, o.seller))
    return kept, removed


# --------------------------------------------------------------------------- the offline reading

_LEAD = re.compile(
    r"^\s*(?:please\s+)?(?:(?:find|get|show|search|look)(?:\s+for)?(?:\s+me)?\s+)?"
    r"(?:(?:the\s+)?(?:best|lowest|cheapest)\s+(?:price|deal|offer)s?\s+(?:for|on)\s+|"
    r"(?:where\s+(?:can|should)\s+i\s+)?buy\s+|(?:the\s+)?cheapest\s+|(?:a\s+)?(?:good\s+)?deals?\s+on\s+)?"
    r"(?:an?\s+|the\s+|some\s+)?",
    re.I,
)
_PRICE = re.compile(r"\b(?:under|below|less than|at most|max(?:imum)?|no more than|up to)\s*\$\s*(\d+(?:\.\d+)?)", re.I)
_DAYS = re.compile(
    r"\b(?:(?:delivered|shipped|shipping|arriv\w*|within)\s+(?:in\s+|within\s+)?)(\d{1,2})\s+(?:business\s+)?days?\b",
    re.I,
)
_TRUSTED = re.compile(r"\b(?:trusted|official|reputable|verified)\s+(?:stores?|retailers?|sellers?|shops?)\b", re.I)
_ANY_CONDITION = re.compile(r"\b(?:refurbished|used|renewed|second[- ]hand)\b", re.I)
_TAIL = re.compile(r"(?:\b(?:from|at|on|with|that|which|for me)\b|,).*$|[?.!]+$", re.I)


def read_goal(text: str) -> ProductQuery:
    """What the scripted model understands of a shopping goal: a deterministic reading."""
    price = _PRICE.search(text)
    days = _DAYS.search(text)
    product = _LEAD.sub("", text, count=1)
    for pattern in (_PRICE, _DAYS, _TRUSTED):
        product = pattern.sub(" ", product)
    product = _TAIL.sub("", product)
    product = re.sub(r"\s+(?:and|or)\s*$", "", re.sub(r"\s+", " ", product)).strip(" ,.-") or text.strip()
    return ProductQuery(
        product=product[:200],
        max_price=float(price[1]) if price else None,
        max_shipping_days=int(days[1]) if days else None,
        trusted_only=bool(_TRUSTED.search(text)),
        condition="any" if _ANY_CONDITION.search(text) else "new",
    )
