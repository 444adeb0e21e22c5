"""The executor: runs one tool call and turns every failure into an error observation."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler.events import TaskReady, TaskResult
from llm_compiler.tools import NotFound, call_tool, jsonable
from llm_compiler.tools.calls import calling
from llm_compiler.tools.policy import DEFAULT_POLICY, ToolPolicy


class _ToolRaisedTimeout(Exception):
    """A TimeoutError raised by the tool itself, told apart from our own timeout."""


async def _own_timeouts_only(call: Any) -> Any:
    try:
        return await call
    except TimeoutError as e:
        raise _ToolRaisedTimeout() from e


def _run_cancelled() -> bool:
    """Whether the current task is being cancelled (as opposed to a tool raising it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


Sleep = Callable[[float], Awaitable[Any]]
OnAttempt = Callable[[int, int, "str | None"], Awaitable[None]]


async def run_task(
    ev: TaskReady,
    tool: BaseTool | None,
    *,
    timeout: float | None,
    context: Any,
    max_chars: int | None = None,
    policy: ToolPolicy = DEFAULT_POLICY,
    sleep: Sleep = asyncio.sleep,
    on_attempt: OnAttempt | None = None,
) -> TaskResult:
    """Call the tool with the call's validated arguments (``ev.args``, see
    :func:`~llm_compiler.engine.dispatch.checked`) under `timeout`; report the outcome.

    The tool sees the call's stable :func:`~llm_compiler.idempotency_key`
    (the same on every try). A tool that raises anything (``TimeoutError`` and
    ``CancelledError`` included) gives an error observation; only a cancellation of the
    run itself propagates. A failure `policy` retries is tried again after its backoff
    (waited with `sleep`; an ``at_most_once`` tool is tried once); `on_attempt(n, of,
    previous_error)` is awaited as each try starts, before the call. An output longer
    than `max_chars` (as JSON) is cut to that many characters of text.
    """
    started = time.time()
    attempts, attempt = policy.attempts, 1
    timeout = policy.timeout or timeout
    previous: str | None = None
    while True:
        if on_attempt is not None and tool is not None:
            await on_attempt(attempt, attempts, previous)
        output, is_error, error = await _try(ev, tool, timeout, context, max_chars)
        retry = error is not None and attempt < attempts and policy.retry.retries(error)
        if not retry:
            break
        previous = output if isinstance(output, str) else None
        await sleep(policy.retry.delay(attempt))
        attempt += 1
    return TaskResult(
        round=ev.round,
        task_id=ev.task_id,
        tool_name=ev.tool_name,
        output=output,
        is_error=is_error,
        started_at=started,
        finished_at=time.time(),
        attempts=attempt,
        waited=ev.waited,
    )


async def _try(
    ev: TaskReady, tool: BaseTool | None, timeout: float | None, context: Any, max_chars: int | None
) -> tuple[Any, bool, BaseException | None]:
    """One try: (output, is_error, the error a retry policy may retry, if any). The
    arguments were validated at dispatch."""
    if tool is None:  # no retry finds a tool the run does not have
        return _error(LookupError(f"This run has no tool {ev.tool_name!r}.")), True, None
    try:
        with calling(ev.call_key):
            call = call_tool(tool, ev.args, context)
            output = jsonable(await asyncio.wait_for(_own_timeouts_only(call), timeout))
        return bounded(output, max_chars), False, None
    except asyncio.CancelledError as e:
        if _run_cancelled():
            raise
        return _error(e), True, e
    except _ToolRaisedTimeout as e:
        cause = e.__cause__ or e
        return _error(cause), True, cause
    except TimeoutError as e:
        return f"Error: {ev.tool_name} timed out after {timeout:g} s.", True, e
    except BaseException as e:  # noqa: BLE001 - a tool's failure is data, whatever it is
        if isinstance(e, (KeyboardInterrupt, SystemExit)) and _run_cancelled():
            raise
        return _error(e), True, e


def bounded(output: Any, max_chars: int | None) -> Any:
    """`output`, or its first `max_chars` characters (as text) with a note of the cut."""
    if max_chars is None or output is None or isinstance(output, (bool, int, float)):
        return output  # a number JSON took has at most 4,300 digits
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) <= max_chars:
        return output
    return f"{text[:max_chars]} ...({len(text) - max_chars} characters cut)"


def _error(e: BaseException) -> str:
    """``Error: Class: message``; ``NotFound`` for every subclass of it (a declared fact)."""
    text = str(e)[:2000]
    name = NotFound.__name__ if isinstance(e, NotFound) else type(e).__name__
    return f"Error: {name}: {text}" if text else f"Error: {name}"
