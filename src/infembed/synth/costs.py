"""Turn token counts into money.

Prices are US dollars per million tokens (input, output) for the standard, non-batch API. They are the
published list prices as this file was written and change often: check the provider's price page and pass
``--price MODEL=INPUT,OUTPUT`` to override or add a model. The Batch API costs half (``batch=True``).
Reasoning models (o1/o3/o4, gpt-5) bill their hidden reasoning tokens as output tokens; the endpoint
reports them inside ``completion_tokens``, so counts taken from the endpoint already include them.
"""

from __future__ import annotations

from dataclasses import dataclass

from infembed.data.errors import SettingsError

#: model -> (input, output) US$ per 1M tokens, standard tier.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}

BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float:
        dollars = (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6
        return dollars * (BATCH_DISCOUNT if batch else 1.0)


def parse_price(text: str) -> tuple[str, Price]:
    """``"gpt-4o-mini=0.15,0.60"`` -> ``("gpt-4o-mini", Price(0.15, 0.6))``."""
    try:
        model, numbers = text.split("=", 1)
        inp, out = (float(x) for x in numbers.split(","))
    except ValueError:
        raise SettingsError(f"price '{text}' is not MODEL=INPUT,OUTPUT (US$ per 1M tokens)") from None
    return model.strip(), Price(inp, out)


def price_for(model: str, overrides: dict[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an override, an exact entry, or the entry of a dated snapshot's base name
    (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``). ``None`` when unknown (a local model costs nothing
    that this file could know)."""
    overrides = overrides or {}
    name = model.split("/")[-1]
    for table in (overrides, {k: Price(*v) for k, v in PRICES.items()}):
        if model in table:
            return table[model]
        if name in table:
            return table[name]
        for base in sorted(table, key=len, reverse=True):
            if name.startswith(base + "-"):
                return table[base]
    return None
