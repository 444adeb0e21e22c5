"""The threads sync tools run in.

Sync callables run in a shared pool of threads (:class:`ToolThreads`). A thread whose
tool call timed out cannot be stopped: Python has no way to kill a thread. It is written
off, and once written-off threads fill half the pool, new calls go to a fresh pool, so a
tool that hangs never starves other calls or runs; the old threads end whenever their
calls return (a call that never returns keeps its thread until the process exits).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class ToolThreads:
    """The threads sync tools run in, replaced when hung calls would starve it.

    Args:
        max_workers: Threads per pool.
    """

    def __init__(self, max_workers: int = 64) -> None:
        self.max_workers = max_workers
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._stuck = 0
        self.replaced = 0
        """How many times a pool was given up because of hung calls."""

    @property
    def stuck(self) -> int:
        """Calls that timed out and still hold a thread of the current pool."""
        return self._stuck

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in a thread."""
        with self._lock:
            if self._pool is None or self._stuck * 2 >= self.max_workers:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)  # its threads end with their calls
                    self.replaced += 1
                self._pool = ThreadPoolExecutor(
                    self.max_workers, thread_name_prefix="llm-compiler-tool"
                )
                self._stuck = 0
            pool = self._pool
        future = pool.submit(fn)
        future.pool = pool  # type: ignore[attr-defined]
        return future

    def abandon(self, future: Future[Any]) -> None:
        """A caller stopped waiting for `future` (timeout, cancellation): write it off."""
        if future.cancel():
            return  # it had not started: no thread is held
        with self._lock:
            if getattr(future, "pool", None) is not self._pool:
                return
            self._stuck += 1
        future.add_done_callback(self._released)

    def _released(self, future: Future[Any]) -> None:
        with self._lock:
            if getattr(future, "pool", None) is self._pool and self._stuck > 0:
                self._stuck -= 1


#: The process-wide pool for sync tools.
TOOL_THREADS = ToolThreads()


def threaded(fn: Callable[..., Any], threads: ToolThreads) -> Callable[..., Any]:
    """`fn` as a coroutine function that runs it in `threads` (in a copy of the caller's
    context, so it sees the call's :func:`~llm_compiler.tools.calls.idempotency_key`)."""

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        context = contextvars.copy_context()
        future = threads.submit(functools.partial(context.run, fn, *args, **kwargs))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            threads.abandon(future)
            raise

    return run
