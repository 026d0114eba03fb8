"""Model list prices in USD per million tokens (input, output), as published on 2026-11-01.

Unknown models cost 0 and are flagged in the result so accounting never silently lies.
"""

from __future__ import annotations

PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "scripted": (0.0, 0.0),
}


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float:
    price = PRICES_PER_MILLION.get(model)
    if price is None:
        # dated snapshots ("gpt-4o-mini-2024-07-18") are priced as their family
        family = max((m for m in PRICES_PER_MILLION if model.startswith(m)), key=len, default=None)
        price = PRICES_PER_MILLION.get(family or "", (0.0, 0.0))
    return round(tokens_in * price[0] / 1e6 + tokens_out * price[1] / 1e6, 8)
