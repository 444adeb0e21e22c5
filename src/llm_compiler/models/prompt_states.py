"""Saved prompt states for llama-cpp-python's server (imported only in its process).

llama-cpp-python keeps one sequence: a request reuses only the prefix it shares with the
request just before. The planner's and the joiner's prompts alternate, so each evicts the
other's. Here, before a request cuts what the context holds, that is saved (its KV cells,
a few MB); then the saved state that shares the longest prefix with the prompt is
restored when that is longer than what the context holds, and only the rest is evaluated.

Gemma 3's sliding-window layers keep only the last 512 positions unless the cache is
full-size: a prefix reused after a longer prompt would lack the window before it. The
model runs with ``swa_full`` (llama.cpp's default, set here so that it stays so).

The recent completions' phases are kept as :class:`Timings` (``GET /llm_compiler/timings``).
"""

from __future__ import annotations

import collections
import ctypes
import functools
import time
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: States kept (the planner's and the joiner's prompt of a few tool sets).
DEFAULT_STATES = 8
#: Bytes of saved states kept at most.
DEFAULT_STATE_BYTES = 512 * 2**20


@dataclass
class Timings:
    """What one completion cost, phase by phase (milliseconds)."""

    prompt_tokens: int = 0
    """Tokens in the prompt."""
    cache_n: int = 0
    """Prompt tokens found evaluated (in the context or a restored state)."""
    prompt_n: int = 0
    """Prompt tokens evaluated by this request."""
    restored_n: int = 0
    """Tokens of the saved state restored before it (0: none restored)."""
    restore_ms: float = 0.0
    saved_n: int = 0
    """Tokens of the context saved before it (0: none saved)."""
    save_ms: float = 0.0
    sampler_ms: float = 0.0
    """Building the sampler (the grammar is parsed here)."""
    prompt_ms: float = 0.0
    predicted_n: int = 0
    """Tokens decoded after the prompt."""
    predicted_ms: float = 0.0
    sample_ms: float = 0.0
    """Choosing tokens (under a grammar, over the whole vocabulary)."""

    def as_dict(self) -> dict[str, Any]:
        """The timings as JSON-ready values."""
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _State:
    tokens: list[int]
    data: Any
    """The sequence's state, a ctypes byte array."""
    size: int


@dataclass
class PromptStates:
    """Saved sequence states by the tokens they hold, most recently used last.

    A new state replaces those it shares at least half of their tokens with (the same
    prompt with another question): one state per prompt, several prompts kept.
    """

    capacity: int = DEFAULT_STATES
    max_bytes: int = DEFAULT_STATE_BYTES
    states: list[_State] = field(default_factory=list)

    def best(self, tokens: Sequence[int]) -> tuple[int, _State | None]:
        """The state sharing the longest prefix with `tokens`, and that length."""
        found, length = None, 0
        for state in self.states:
            n = common_prefix(state.tokens, tokens)
            if n > length:
                found, length = state, n
        if found is not None:  # used: keep it longest
            self.states.remove(found)
            self.states.append(found)
        return length, found

    def save(self, tokens: list[int], data: Any, size: int) -> None:
        """Keep `data` (`size` bytes) for `tokens`, dropping what it supersedes and the
        least used."""
        self.states = [
            s for s in self.states if 2 * common_prefix(s.tokens, tokens) < len(s.tokens)
        ]
        self.states.append(_State(tokens, data, size))
        while len(self.states) > self.capacity or (
            len(self.states) > 1 and sum(s.size for s in self.states) > self.max_bytes
        ):
            self.states.pop(0)


#: The recent completions' timings, the last one last (one model per server process).
RECENT: collections.deque[Timings] = collections.deque(maxlen=32)


@functools.cache
def stateful_llama() -> type[Any]:
    """``llama_cpp.Llama`` that restores and saves prompt states around each completion."""
    import llama_cpp

    class StatefulLlama(llama_cpp.Llama):
        states: PromptStates
        n_tokens: int

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("swa_full", True)
            super().__init__(*args, **kwargs)
            self.states = PromptStates()
            self._timings = Timings()
            self._in_prompt = False
            self._saved = True  # nothing evaluated yet

        def generate(
            self, tokens: Sequence[int], *args: Any, **kwargs: Any
        ) -> Generator[int, Any, None]:
            """``Llama.generate`` after saving what the context holds, if the prompt cuts
            it, and restoring the saved state that shares the longest prefix with it.

            Saved here, not when a completion ends: a client that stops reading leaves its
            generator suspended, closed whenever it is collected (maybe during another
            request)."""
            tokens = list(tokens)
            timings = self._timings = Timings(prompt_tokens=len(tokens))
            RECENT.append(timings)
            held = common_prefix(self.input_ids[: self.n_tokens].tolist(), tokens)
            if held < self.n_tokens and not self._saved:
                self._save(timings)
            self._restore(tokens, held, timings)
            self._in_prompt = True
            try:
                yield from super().generate(tokens, *args, **kwargs)
            finally:
                self._in_prompt = False

        def _restore(self, tokens: list[int], held: int, timings: Timings) -> None:
            length, state = self.states.best(tokens)
            if state is None or length <= held:
                return
            started = time.perf_counter()
            if not llama_cpp.llama_state_seq_set_data(self._ctx.ctx, state.data, state.size, 0):
                self.reset()  # type: ignore[no-untyped-call]  # a failed restore leaves the sequence empty
                return
            self.input_ids[: len(state.tokens)] = state.tokens
            self.n_tokens = len(state.tokens)
            self._requires_eval = True
            self._saved = True
            timings.restored_n = len(state.tokens)
            timings.restore_ms = (time.perf_counter() - started) * 1000

        def _save(self, timings: Timings) -> None:
            if self.n_tokens == 0:
                return
            started = time.perf_counter()
            size = llama_cpp.llama_state_seq_get_size(self._ctx.ctx, 0)
            buffer = (ctypes.c_uint8 * size)()
            written = llama_cpp.llama_state_seq_get_data(self._ctx.ctx, buffer, size, 0)
            self.states.save(self.input_ids[: self.n_tokens].tolist(), buffer, written)
            self._saved = True
            timings.saved_n = self.n_tokens
            timings.save_ms = (time.perf_counter() - started) * 1000

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return super()._init_sampler(*args, **kwargs)
            finally:
                self._timings.sampler_ms += (time.perf_counter() - started) * 1000

        def _forward(self, tokens: Sequence[int]) -> None:
            """``Llama.eval``: the model's forward pass over `tokens`, timed."""
            started = time.perf_counter()
            super().eval(tokens)
            elapsed = (time.perf_counter() - started) * 1000
            timings = self._timings
            self._saved = self._saved and not tokens
            if self._in_prompt:
                self._in_prompt = False
                timings.prompt_n, timings.prompt_ms = len(tokens), elapsed
                timings.cache_n = timings.prompt_tokens - len(tokens)
            else:
                timings.predicted_n += len(tokens)
                timings.predicted_ms += elapsed

        eval = _forward  # overrides llama_cpp's forward pass (a model call, not Python's)

        def sample(self, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return super().sample(*args, **kwargs)
            finally:
                self._timings.sample_ms += (time.perf_counter() - started) * 1000

    return StatefulLlama
