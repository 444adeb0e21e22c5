"""The result cache: a call of a ``pure`` tool (or an ``idempotent`` one whose policy opts
in, see :class:`~llm_compiler.tools.policy.ToolPolicy`) is not made twice.

A call's key is its owner, its tool (name, description and argument schema), the version
its policy declares and its arguments as canonical JSON. The owner is the workflow's
``cache_namespace`` if set, else that workflow object alone: two workflows share results
only when they set the same namespace. Within a run the same call runs once: a second
task with the same key waits for the first and takes its output. Across runs a result is
served from a :class:`CacheStore` for the ``cache_ttl`` seconds its policy declares (by
default one :class:`MemoryCache` per process, each workflow its own keys in it). An
``at_most_once`` call is never cached, and neither is an error: the next call with the
key runs the tool again. A served result is an ordinary ``TaskResult`` with ``cached``
set, ``attempts`` 0 and ``saved`` the seconds the call took when it ran.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from llama_index.core.tools import BaseTool

from llm_compiler.events import TaskReady, TaskResult
from llm_compiler.tools.policy import ToolPolicy

logger = logging.getLogger(__name__)

#: Runs whose calls one cache remembers at once (a cancelled run's go with the oldest).
RUNS_KEPT = 1024


@dataclass(frozen=True)
class Entry:
    """A successful call's output, how long the call took, and until when it may be served."""

    output: Any
    seconds: float
    expires_at: float


class CacheStore(Protocol):
    """Where results live between runs (one per process, or a table every worker shares).

    ``get`` returns the entry under `key` unless it expired by `now` (``time.time()``);
    ``put`` stores one (replacing any). Both may be called concurrently."""

    async def get(self, key: str, now: float) -> Entry | None: ...

    async def put(self, key: str, entry: Entry) -> None: ...


class MemoryCache:
    """A :class:`CacheStore` in this process's memory: at most `max_entries`, least
    recently used out first, expired entries dropped when read."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    async def get(self, key: str, now: float) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= now:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    async def put(self, key: str, entry: Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry (the next call of every tool runs it)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


#: The store every workflow of this process uses unless given its own.
PROCESS_CACHE = MemoryCache()

_FINGERPRINTS: weakref.WeakKeyDictionary[BaseTool, str] = weakref.WeakKeyDictionary()


def fingerprint(tool: BaseTool) -> str:
    """A digest of what the planner knows of `tool`: its name, description and argument
    schema (a tool that changes any of them gets new cache keys)."""
    try:
        return _FINGERPRINTS[tool]
    except (KeyError, TypeError):
        pass
    meta = tool.metadata
    try:
        schema = json.dumps(meta.get_parameters_dict(), sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001 - a schema that cannot be rendered: key on the rest
        schema = ""
    text = "\0".join((meta.get_name(), meta.description or "", schema))
    digest = hashlib.sha256(text.encode()).hexdigest()
    try:
        _FINGERPRINTS[tool] = digest
    except TypeError:
        pass  # not weakly referable: computed again next time
    return digest


def cache_key(
    tool: BaseTool, policy: ToolPolicy, args: Mapping[str, Any], owner: str = ""
) -> str | None:
    """The key of `owner`'s call of `tool` with `args`, or None if the arguments have no
    canonical JSON form (such a call is not cached)."""
    try:
        canonical = json.dumps(
            args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError):
        return None
    text = "\0".join((owner, fingerprint(tool), policy.version, canonical))
    return hashlib.sha256(text.encode()).hexdigest()


Call = Callable[[], Awaitable[TaskResult]]


def serves(policy: ToolPolicy, enabled: bool = True) -> bool:
    """Whether the result cache serves a repeated call under `policy` (`enabled`: the
    workflow's ``cache_results``). Where it does, a plan's repeated call is merged."""
    return enabled and policy.cacheable


class ResultCache:
    """Serves repeated calls: within a run always, across runs from `store` within their
    policy's ``cache_ttl``, to calls of the same `owner` only (see :func:`cache_key`).
    `clock` is ``time.time`` (tests give their own). A store that fails (a database away)
    is logged and taken as a miss: the tool is called."""

    def __init__(
        self,
        store: CacheStore | None = None,
        *,
        clock: Callable[[], float] = time.time,
        kept: int = RUNS_KEPT,
    ) -> None:
        self.store: CacheStore = PROCESS_CACHE if store is None else store
        self.clock, self.kept = clock, kept
        self._runs: OrderedDict[str, dict[str, asyncio.Future[Entry | None]]] = OrderedDict()

    async def run(
        self,
        run_id: str,
        ready: TaskReady,
        tool: BaseTool | None,
        policy: ToolPolicy,
        call: Call,
        enabled: bool = True,
        owner: str = "",
    ) -> TaskResult:
        """The result of `ready`'s call: served if an equal call of `owner` ran (in this
        run, or within its TTL), else made by `call` (and kept if it succeeded). Not
        `enabled`: made by `call`."""
        key = None
        if tool is not None and serves(policy, enabled):
            key = cache_key(tool, policy, ready.args, owner)
        if key is None:
            return await call()
        begun = self.clock()
        calls = self._calls(run_id)
        earlier = calls.get(key)
        if earlier is not None:
            entry = await asyncio.shield(earlier)
            if entry is not None:
                return served(ready, entry, begun, self.clock())
            return await call()  # the earlier call failed: an error is never served
        mine: asyncio.Future[Entry | None] = asyncio.get_running_loop().create_future()
        calls[key] = mine
        return await self._first(calls, key, mine, ready, policy, call, begun)

    async def _first(
        self,
        calls: dict[str, asyncio.Future[Entry | None]],
        key: str,
        mine: asyncio.Future[Entry | None],
        ready: TaskReady,
        policy: ToolPolicy,
        call: Call,
        begun: float,
    ) -> TaskResult:
        """The run's first call with `key`: from the store, or made and stored."""
        entry: Entry | None = None
        try:
            if policy.cache_ttl is not None:
                entry = await self._read(key, begun)
            if entry is not None:
                return served(ready, entry, begun, self.clock())
            result = await call()
            if not result.is_error:
                entry = await self._keep(key, result, policy)
            return result
        finally:
            mine.set_result(entry)
            if entry is None and calls.get(key) is mine:
                del calls[key]  # the next task with this key calls the tool itself

    async def _keep(self, key: str, result: TaskResult, policy: ToolPolicy) -> Entry:
        """Record a successful `result`; across runs only with a TTL."""
        ttl = policy.cache_ttl
        expires = float("-inf") if ttl is None else result.finished_at + ttl
        entry = Entry(result.output, result.duration, expires)
        if ttl is not None:
            try:
                await self.store.put(key, entry)
            except Exception as e:  # noqa: BLE001 - kept in the run only; logged
                logger.warning("The result cache store could not keep a result: %s", e)
        return entry

    async def _read(self, key: str, now: float) -> Entry | None:
        try:
            return await self.store.get(key, now)
        except Exception as e:  # noqa: BLE001 - a miss; logged
            logger.warning("The result cache store could not be read (calling the tool): %s", e)
            return None

    def _calls(self, run_id: str) -> dict[str, asyncio.Future[Entry | None]]:
        calls = self._runs.setdefault(run_id, {})
        self._runs.move_to_end(run_id)
        while len(self._runs) > self.kept:
            self._runs.popitem(last=False)
        return calls

    def forget(self, run_id: str) -> None:
        """Drop a finished run's own calls (results with a TTL stay in the store)."""
        self._runs.pop(run_id, None)


def served(ready: TaskReady, entry: Entry, begun: float, now: float) -> TaskResult:
    """The result of `ready`'s task made of a cached `entry` (served between `begun` and
    `now`)."""
    output = entry.output
    if isinstance(output, (dict, list)):
        output = copy.deepcopy(output)  # the task's own, whatever later code does to it
    return TaskResult(
        round=ready.round,
        task_id=ready.task_id,
        tool_name=ready.tool_name,
        output=output,
        started_at=begun,
        finished_at=now,
        attempts=0,
        waited=ready.waited,
        cached=True,
        saved=max(0.0, entry.seconds - (now - begun)),
    )
