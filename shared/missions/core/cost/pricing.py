"""Model list prices in USD per million tokens (input, output), as published on 2026-11-01.

A dollar budget (`max_cost_usd`) binds only if every call is priced, so a model with no price here
and none in the settings' overrides (`MISSIONS_OPENAI_PRICES`, cdk.json `llm.prices`) is refused
when the settings are read (`unpriced`), before any mission runs. A dated snapshot
("gpt-4o-mini-2024-07-18") is priced as its family; a server that answers under a name nobody
priced (a local server's own name for the model) is charged at the price of the model asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Price = tuple[float, float]  # USD per million tokens: (input, output)

PRICES_PER_MILLION: dict[str, Price] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    # Anthropic's API (https://docs.anthropic.com/en/docs/about-claude/pricing)
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-3-5-haiku": (0.80, 4.00),
    # Amazon Bedrock, on-demand in us-east-1 (a model id prefixed by an inference profile's region group,
    # us.anthropic.claude-..., is priced as the model)
    "anthropic.claude-haiku-4-5": (1.00, 5.00),
    "anthropic.claude-sonnet-4-5": (3.00, 15.00),
    "anthropic.claude-3-5-haiku": (0.80, 4.00),
    "amazon.nova-micro-v1": (0.035, 0.14),
    "amazon.nova-lite-v1": (0.06, 0.24),
    "amazon.nova-pro-v1": (0.80, 3.20),
    "scripted": (0.0, 0.0),
}
_PROFILE_GROUPS = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")


def foundation_model_id(model: str) -> str:
    """The Bedrock foundation model an inference profile id names (us.anthropic.claude-... -> anthropic.claude-...);
    any other model id as it is."""
    group = next((prefix for prefix in _PROFILE_GROUPS if model.startswith(prefix)), None)
    return model[len(group) :] if group is not None else model


def price_of(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The model's price: an override, the list, or its family's (the longest listed prefix); None if unknown."""
    table = {**PRICES_PER_MILLION, **(overrides or {})}
    if model in table:
        return table[model]
    if foundation_model_id(model) != model:
        return price_of(foundation_model_id(model), overrides)
    family = max((name for name in table if model.startswith(name)), key=len, default=None)
    return table[family] if family is not None else None


def unpriced(models: Iterable[str | None], overrides: Mapping[str, Price] | None = None) -> list[str]:
    """The models, of those named, that have no price: each would make a dollar budget meaningless."""
    return sorted({model for model in models if model and price_of(model, overrides) is None})


def cost_usd(
    model: str, tokens_in: int, tokens_out: int, overrides: Mapping[str, Price] | None = None, *, asked: str = ""
) -> float:
    """What a call cost: priced as `model` (the one that answered), else as `asked` (the one requested).

    Raises LookupError when neither is priced: the settings refuse such models, so this is a bug."""
    price = price_of(model, overrides) or (price_of(asked, overrides) if asked else None)
    if price is None:
        raise LookupError(f"no price for model {model!r}: add it to the price overrides")
    return round(tokens_in * price[0] / 1e6 + tokens_out * price[1] / 1e6, 8)


__all__ = ["PRICES_PER_MILLION", "Price", "cost_usd", "foundation_model_id", "price_of", "unpriced"]
