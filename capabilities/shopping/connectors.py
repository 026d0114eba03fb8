"""Price comparison: offers for a product across sellers.

`PriceComparison` is what a shopping mission needs from a price-comparison service (one
search, every seller's offer for the best-matching product). `SamplePriceComparison` answers
from a small bundled catalogue, deterministically, so the mission runs offline and inside the
Lambda layer (a JSON file beside this module, no service). A real service (a retailer API, a comparison
site) implements the same protocol.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from missions.core.capability.connectors import ConnectorRejected


@dataclass(frozen=True)
class Seller:
    id: str
    name: str
    trusted: bool  # a verified retailer, as the comparison service rates it
    rating: float  # 0..5, buyers' rating of the seller
    rating_count: int


@dataclass(frozen=True)
class Offer:
    """One seller's offer for one product; `total` is what the buyer pays."""

    offer_id: str  # "<seller>:<product>": stable, so a choice can name it
    product_id: str
    product: str
    category: str
    seller: str
    seller_name: str
    trusted: bool
    price: float
    shipping_cost: float
    shipping_days: int
    in_stock: bool
    rating: float
    rating_count: int
    condition: str  # "new" | "refurbished"

    @property
    def total(self) -> float:
        return round(self.price + self.shipping_cost, 2)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}


class PriceComparison(Protocol):
    """Search every seller's offers for the product a query names, best-matching product first."""

    name: str

    def search(self, query: str, *, limit: int = 30) -> list[Offer]: ...


SELLERS: dict[str, Seller] = {
    s.id: s
    for s in (
        Seller("amazon", "Amazon", True, 4.6, 182_000),
        Seller("bestbuy", "Best Buy", True, 4.5, 64_000),
        Seller("walmart", "Walmart", True, 4.2, 51_000),
        Seller("target", "Target", True, 4.4, 23_000),
        Seller("apple", "Apple Store", True, 4.8, 40_000),
        Seller("bh", "B&H Photo", True, 4.7, 15_000),
        Seller("soundsaver", "SoundSaver Outlet", False, 3.6, 410),
        Seller("gadgetdeals", "GadgetDeals Marketplace", False, 3.9, 2_300),
        Seller("phonehub", "PhoneHub Resale", False, 3.4, 870),
    )
}


class _Terms(BaseModel):
    """One seller's terms for one product in the catalogue."""

    price: float
    shipping_cost: float
    shipping_days: int
    in_stock: bool
    condition: Literal["new", "refurbished"]


class _Product(BaseModel):
    id: str
    title: str
    category: str
    aliases: tuple[str, ...]
    offers: dict[str, _Terms]  # by seller id (SELLERS)


class _Catalogue(BaseModel):
    products: tuple[_Product, ...]


@functools.cache
def products() -> tuple[_Product, ...]:
    """The bundled catalogue (catalog.json beside this module), read on first search."""
    return _Catalogue.model_validate_json((Path(__file__).parent / "catalog.json").read_bytes()).products


_WORD = re.compile(r"[a-z0-9]+")
_NOISE = frozenset(
    "a an the for of on in to me my i best price prices cheapest cheap deal deals buy find get new lowest good "
    "under below less than with from and or please online store stores retailer retailers trusted only".split()
)


def _tokens(text: str) -> set[str]:
    return {t for t in _WORD.findall(text.lower().replace("-", "")) if t not in _NOISE} | {
        t for t in _WORD.findall(text.lower()) if t not in _NOISE
    }


def match_score(query: str, product: _Product) -> float:
    """Share of the query's meaningful words the product's title or aliases contain (0..1)."""
    wanted = _tokens(query)
    if not wanted:
        return 0.0
    names = [product.title, *product.aliases]
    have = set().union(*(_tokens(n) for n in names))
    score = len(wanted & have) / len(wanted)
    lowered = query.lower()
    if any(alias in lowered for alias in product.aliases):
        score = max(score, 0.9)  # an alias named outright ("kindle") is a strong match
    return score


class SamplePriceComparison:
    """The bundled price-comparison service: the catalogue above, searched by word overlap."""

    name = "price_comparison"
    MIN_SCORE = 0.5

    def search(self, query: str, *, limit: int = 30) -> list[Offer]:
        if not query or not query.strip():
            raise ConnectorRejected("the product query is empty")
        score, product = max(((match_score(query, p), p) for p in products()), key=lambda pair: pair[0])
        if score < self.MIN_SCORE:
            return []
        # the best-matching product only: a comparison is about one product
        offers = [_offer(product, seller, terms) for seller, terms in product.offers.items()]
        return sorted(offers, key=lambda o: (o.total, o.offer_id))[:limit]


def _offer(product: _Product, seller_id: str, terms: _Terms) -> Offer:
    seller = SELLERS[seller_id]
    return Offer(
        offer_id=f"{seller_id}:{product.id}",
        product_id=product.id,
        product=product.title,
        category=product.category,
        seller=seller.id,
        seller_name=seller.name,
        trusted=seller.trusted,
        rating=seller.rating,
        rating_count=seller.rating_count,
        **terms.model_dump(),
    )


def find_seller(text: str) -> Seller | None:
    """The seller a free-text mention names ("best buy", "BestBuy", "B&H"), if any."""
    folded = re.sub(r"[^a-z0-9]", "", text.lower())
    for seller in SELLERS.values():
        if folded and folded in (seller.id, re.sub(r"[^a-z0-9]", "", seller.name.lower())):
            return seller
    return None
