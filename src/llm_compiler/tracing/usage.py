"""Token and cost accounting: one record per LLM call, and sums over rounds and runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import llama_index.core
from pydantic import BaseModel, Field

from llm_compiler.tracing.prices import ModelPrice, price_for

UsageSource = Literal["reported", "counted"]


class Usage(BaseModel):
    """Tokens and cost of one or more LLM calls.

    Attributes:
        prompt_tokens / completion_tokens: Input and output tokens.
        cached_tokens: The part of ``prompt_tokens`` the provider read from its prompt
            cache, where it reports it (else 0).
        cost: USD, from the price table; None when any call's model has no price.
        calls: How many LLM calls these are.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def total(cls, parts: Iterable[Usage]) -> Usage:
        """The sum of `parts`; the cost is unknown (None) if any part's is."""
        out = cls()
        for p in parts:
            out.prompt_tokens += p.prompt_tokens
            out.completion_tokens += p.completion_tokens
            out.cached_tokens += p.cached_tokens
            out.calls += p.calls
            out.cost = None if out.cost is None or p.cost is None else out.cost + p.cost
        return out


class LLMCallUsage(Usage):
    """One planner or joiner call.

    Attributes:
        phase: ``planner`` or ``joiner``.
        round: The round it belongs to.
        model: The model name the LLM reports (None if it reports none).
        source: ``reported`` (the server's usage report) or ``counted`` (no report:
            tokens counted with llama-index's tokenizer, tiktoken's ``cl100k_base`` by
            default, an estimate for models with another tokenizer).
        started_at / finished_at: ``time.time()`` stamps of the call.
    """

    phase: Literal["planner", "joiner"] = "planner"
    round: int = 0
    model: str | None = None
    source: UsageSource = "reported"
    started_at: float = 0.0
    finished_at: float = 0.0
    calls: int = Field(default=1)

    @property
    def duration(self) -> float:
        """Seconds the call took."""
        return max(0.0, self.finished_at - self.started_at)


def reported_counts(usage: Any) -> tuple[int, int, int] | None:
    """(prompt, completion, cached) from an OpenAI-style usage report (object or dict)."""

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    if usage is None:
        return None
    prompt, completion = get(usage, "prompt_tokens"), get(usage, "completion_tokens")
    if prompt is None and completion is None:  # Anthropic-style names
        prompt, completion = get(usage, "input_tokens"), get(usage, "output_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = get(usage, "prompt_tokens_details") or get(usage, "input_tokens_details")
    cached = get(details, "cached_tokens") if details is not None else None
    return prompt, completion, cached if isinstance(cached, int) else 0


def tokenizer_loaded() -> bool:
    """Whether llama-index's global tokenizer is loaded (its first load reads a file, so
    the first use belongs in a thread; later ones take microseconds)."""
    return llama_index.core.global_tokenizer is not None


def count_tokens(text: str, tokenizer: Callable[[str], list[Any]] | None = None) -> int:
    """Tokens in `text` by `tokenizer` (default: llama-index's global tokenizer)."""
    if not text:
        return 0
    if tokenizer is None:
        from llama_index.core import Settings

        tokenizer = Settings.tokenizer
    return len(tokenizer(text))


def call_cost(
    model: str | None,
    prompt: int,
    completion: int,
    cached: int,
    prices: Mapping[str, ModelPrice],
) -> float | None:
    """USD for one call, or None when `model` has no price."""
    price = price_for(model, prices)
    return None if price is None else price.cost(prompt, completion, cached)


async def measure_call(
    *,
    phase: Literal["planner", "joiner"],
    round: int,
    model: str | None,
    reported: tuple[int, int, int] | None,
    prompt_text: str,
    reply: str,
    prices: Mapping[str, ModelPrice],
    started_at: float,
    finished_at: float,
) -> LLMCallUsage:
    """The usage record of one call: the server's counts, else counted, priced from `prices`."""
    source: UsageSource = "reported"
    if reported is not None:
        prompt, completion, cached = reported
    else:
        source, cached = "counted", 0

        def count() -> tuple[int, int]:
            return count_tokens(prompt_text), count_tokens(reply)

        # Counting is quick once the tokenizer is loaded; the load reads a file: a thread.
        prompt, completion = count() if tokenizer_loaded() else await asyncio.to_thread(count)
    return LLMCallUsage(
        phase=phase,
        round=round,
        model=model,
        source=source,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cost=call_cost(model, prompt, completion, cached, prices),
        started_at=started_at,
        finished_at=finished_at,
    )
