"""Benchmark tools: deterministic values, configurable latency, every call logged.

Three kinds, each a plain callable with a typed signature (no ``from __future__ import
annotations`` here, so llama-index reads real types for the tool schemas):

* ``lookup(query: str) -> int``: a fact lookup (a hash of the query);
* ``step(value: int) -> int``: one step of a dependent chain;
* ``combine(values: list[int]) -> int``: math over several results (their sum).

Async tools ``await asyncio.sleep``; sync ones ``time.sleep`` (the systems run them in
threads).
"""

import asyncio
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


def lookup_value(query: str) -> int:
    """The value ``lookup(query)`` returns."""
    return zlib.crc32(query.encode()) % 1000


def step_value(value: int) -> int:
    """The value ``step(value)`` returns."""
    return (value * 7 + 3) % 1000


def combine_value(values: Sequence[int]) -> int:
    """The value ``combine(values)`` returns."""
    return sum(values)


KINDS: dict[str, Callable[..., int]] = {
    "lookup": lookup_value,
    "step": step_value,
    "combine": combine_value,
}
PARAMS: dict[str, str] = {"lookup": "query", "step": "value", "combine": "values"}
DOCS: dict[str, str] = {
    "lookup": "Look up a fact about the query; returns a number.",
    "step": "Transform a number (one step of a computation); returns a number.",
    "combine": "Add up a list of numbers; returns their sum.",
}


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a scenario."""

    name: str
    kind: str
    """``lookup``, ``step`` or ``combine``."""
    latency: float
    """Seconds each call takes."""
    sync: bool = False


@dataclass(frozen=True)
class ToolCall:
    """One logged call: the argument (lists become tuples) and ``time.time()`` stamps."""

    tool: str
    arg: Any
    started: float
    finished: float


@dataclass
class ToolLog:
    """Calls of every tool built with it (thread-safe)."""

    calls: list[ToolCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: ToolCall) -> None:
        """Log one call."""
        with self._lock:
            self.calls.append(call)

    def take(self) -> list[ToolCall]:
        """Return and clear the log."""
        with self._lock:
            out, self.calls = self.calls, []
        return out


def _hashable(arg: Any) -> Any:
    return tuple(arg) if isinstance(arg, list) else arg


def make_tool(spec: ToolSpec, log: ToolLog) -> Callable[..., Any]:
    """A callable named ``spec.name`` that sleeps ``spec.latency`` and logs its call."""
    value_of = KINDS[spec.kind]
    latency = spec.latency

    def record(arg: Any, started: float) -> int:
        log.add(ToolCall(spec.name, _hashable(arg), started, time.time()))
        return value_of(arg)

    fn: Callable[..., Any]
    if spec.sync:
        if spec.kind == "lookup":

            def fn(query: str) -> int:
                started = time.time()
                time.sleep(latency)
                return record(query, started)

        elif spec.kind == "step":

            def fn(value: int) -> int:
                started = time.time()
                time.sleep(latency)
                return record(value, started)

        else:

            def fn(values: list[int]) -> int:
                started = time.time()
                time.sleep(latency)
                return record(values, started)

    elif spec.kind == "lookup":

        async def fn(query: str) -> int:
            started = time.time()
            await asyncio.sleep(latency)
            return record(query, started)

    elif spec.kind == "step":

        async def fn(value: int) -> int:
            started = time.time()
            await asyncio.sleep(latency)
            return record(value, started)

    else:

        async def fn(values: list[int]) -> int:
            started = time.time()
            await asyncio.sleep(latency)
            return record(values, started)

    fn.__name__ = fn.__qualname__ = spec.name
    fn.__doc__ = DOCS[spec.kind]
    return fn


def make_tools(specs: Sequence[ToolSpec], log: ToolLog) -> list[Callable[..., Any]]:
    """One callable per spec, all logging to `log`."""
    return [make_tool(s, log) for s in specs]
