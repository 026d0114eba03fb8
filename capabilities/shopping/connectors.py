"""Price comparison: offers for a product across sellers.

`PriceComparison` is what a shopping mission needs from a price-comparison service (one
search, every seller's offer for the best-matching product). `SamplePriceComparison` answers
from a small bundled catalogue, deterministically, so the mission runs offline and inside the
Lambda layer (plain Python data, no files). A real service (a retailer API, a comparison
site) implements the same protocol.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Protocol

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


@dataclass(frozen=True)
class _Product:
    id: str
    title: str
    category: str
    aliases: tuple[str, ...]
    # seller -> (price, shipping cost, shipping days, in stock, condition)
    offers: dict[str, tuple[float, float, int, bool, str]]


PRODUCTS: tuple[_Product, ...] = (
    _Product(
        "sony-wh1000xm5",
        "Sony WH-1000XM5 Wireless Noise Cancelling Headphones",
        "electronics",
        ("wh1000xm5", "xm5", "sony headphones", "noise cancelling headphones"),
        {
            "amazon": (349.0, 0.0, 2, True, "new"),
            "bestbuy": (379.0, 0.0, 3, True, "new"),
            "bh": (339.0, 0.0, 4, True, "new"),
            "walmart": (359.0, 5.99, 5, True, "new"),
            "target": (369.0, 0.0, 4, False, "new"),
            "soundsaver": (289.0, 12.0, 9, True, "new"),
            "gadgetdeals": (249.0, 0.0, 6, True, "refurbished"),
        },
    ),
    _Product(
        "iphone-15-pro-128",
        "Apple iPhone 15 Pro 128GB",
        "electronics",
        ("iphone 15 pro", "iphone15 pro", "iphone"),
        {
            "apple": (999.0, 0.0, 2, True, "new"),
            "amazon": (979.0, 0.0, 2, True, "new"),
            "bestbuy": (999.0, 0.0, 1, True, "new"),
            "target": (989.0, 0.0, 3, False, "new"),
            "phonehub": (849.0, 15.0, 8, True, "refurbished"),
            "gadgetdeals": (899.0, 9.99, 7, True, "new"),
        },
    ),
    _Product(
        "kindle-paperwhite",
        "Amazon Kindle Paperwhite (16 GB)",
        "electronics",
        ("kindle", "paperwhite", "e-reader", "ereader"),
        {
            "amazon": (149.99, 0.0, 1, True, "new"),
            "bestbuy": (149.99, 0.0, 2, True, "new"),
            "target": (139.99, 5.0, 4, True, "new"),
            "walmart": (154.0, 0.0, 3, True, "new"),
            "gadgetdeals": (109.0, 7.5, 8, True, "refurbished"),
        },
    ),
    _Product(
        "nespresso-vertuo-next",
        "Nespresso Vertuo Next Coffee Machine",
        "home",
        ("nespresso", "vertuo", "coffee machine", "coffee maker", "espresso machine"),
        {
            "amazon": (159.0, 0.0, 2, True, "new"),
            "target": (149.0, 0.0, 3, True, "new"),
            "walmart": (144.0, 8.0, 5, True, "new"),
            "bestbuy": (169.0, 0.0, 2, True, "new"),
            "gadgetdeals": (119.0, 12.0, 10, True, "new"),
        },
    ),
    _Product(
        "logitech-mx-master-3s",
        "Logitech MX Master 3S Wireless Mouse",
        "electronics",
        ("mx master", "mx master 3s", "logitech mouse", "wireless mouse"),
        {
            "amazon": (99.99, 0.0, 1, True, "new"),
            "bestbuy": (99.99, 0.0, 2, True, "new"),
            "bh": (94.99, 0.0, 4, True, "new"),
            "walmart": (89.0, 4.99, 6, True, "new"),
            "soundsaver": (72.0, 6.0, 12, True, "new"),
        },
    ),
)

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
        score, product = max(((match_score(query, p), p) for p in PRODUCTS), key=lambda pair: pair[0])
        if score < self.MIN_SCORE:
            return []
        # the best-matching product only: a comparison is about one product
        offers = [_offer(product, seller, terms) for seller, terms in product.offers.items()]
        return sorted(offers, key=lambda o: (o.total, o.offer_id))[:limit]


def _offer(product: _Product, seller_id: str, terms: tuple[float, float, int, bool, str]) -> Offer:
    seller = SELLERS[seller_id]
    price, shipping_cost, shipping_days, in_stock, condition = terms
    return Offer(
        offer_id=f"{seller_id}:{product.id}",
        product_id=product.id,
        product=product.title,
        category=product.category,
        seller=seller.id,
        seller_name=seller.name,
        trusted=seller.trusted,
        price=price,
        shipping_cost=shipping_cost,
        shipping_days=shipping_days,
        in_stock=in_stock,
        rating=seller.rating,
        rating_count=seller.rating_count,
        condition=condition,
    )


def find_seller(text: str) -> Seller | None:
    """The seller a free-text mention names ("best buy", "BestBuy", "B&H"), if any."""
    folded = re.sub(r"[^a-z0-9]", "", text.lower())
    for seller in SELLERS.values():
        if folded and folded in (seller.id, re.sub(r"[^a-z0-9]", "", seller.name.lower())):
            return seller
    return None
