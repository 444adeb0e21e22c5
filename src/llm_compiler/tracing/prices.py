"""Model prices and what a call costs.

The built-in table holds OpenAI's list prices (USD per million tokens, standard tier) of
the default OpenAI model (``gpt-4o-mini``) and its neighbours, as published on
https://openai.com/api/pricing in the month of :data:`PRICES_AS_OF`; prices change, so
check them there (and supply your own to override). Any other model has no price until
one is supplied: a call to an unknown model costs ``None`` (unknown), never 0. Supply
prices with ``CompilerConfig(prices={...})``, ``llm-compiler serve --prices FILE`` or the
``LLM_COMPILER_PRICES`` environment variable (a JSON file of the same shape).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_compiler.errors import ConfigurationError

#: The month the built-in prices were read off OpenAI's pricing page.
PRICES_AS_OF = "2025-06"


class ModelPrice(BaseModel):
    """USD per million tokens: input, cached input (None: billed as input), output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)

    def cost(self, prompt: int, completion: int, cached: int = 0) -> float:
        """USD for one call; `cached` is the part of `prompt` read from the cache."""
        cached = min(max(cached, 0), prompt)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        total = (prompt - cached) * self.input + cached * cached_rate + completion * self.output
        return total / 1_000_000


#: OpenAI list prices of the default OpenAI model and its neighbours (see :data:`PRICES_AS_OF`).
OPENAI_PRICES: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(input=0.15, cached_input=0.075, output=0.60),
    "gpt-4o": ModelPrice(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4.1": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": ModelPrice(input=0.10, cached_input=0.025, output=0.40),
    "gpt-3.5-turbo": ModelPrice(input=0.50, output=1.50),
}

PRICES_ENV = "LLM_COMPILER_PRICES"


def price_for(model: str | None, table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: an exact entry, else a dated snapshot of a listed model
    (``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``), else None."""
    if not model:
        return None
    if model in table:
        return table[model]
    # The longest listed name the snapshot extends, so gpt-4o-mini-... is not gpt-4o.
    bases = [m for m in table if model.startswith(m + "-") and model[len(m) + 1 :][:1].isdigit()]
    return table[max(bases, key=len)] if bases else None


def parse_prices(data: Any, source: str) -> dict[str, ModelPrice]:
    """A price table from JSON-like data: ``{model: {"input": ..., "output": ...}}``."""
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"The price table in {source} must be an object of models.")
    try:
        return {str(k): ModelPrice.model_validate(v) for k, v in data.items()}
    except ValidationError as e:
        raise ConfigurationError(f"The price table in {source} is invalid: {e}") from None


def load_prices(path: str | os.PathLike[str]) -> dict[str, ModelPrice]:
    """A price table from a JSON file (see :func:`parse_prices`)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigurationError(f"Cannot read the price table {path}: {e}") from None
    return parse_prices(data, str(path))


def price_table(extra: Mapping[str, ModelPrice] | None = None) -> dict[str, ModelPrice]:
    """The built-in prices, then the ``LLM_COMPILER_PRICES`` file's, then `extra` (last wins)."""
    table = dict(OPENAI_PRICES)
    path = os.environ.get(PRICES_ENV)
    if path:
        table.update(load_prices(path))
    if extra:
        table.update(extra)
    return table
