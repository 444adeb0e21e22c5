"""The executor: runs one tool call and turns every failure into an error observation."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler.events import TaskReady, TaskResult
from llm_compiler.tools import call_tool, jsonable
from llm_compiler.tools.calls import calling


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


async def run_task(
    ev: TaskReady,
    tool: BaseTool | None,
    *,
    timeout: float | None,
    context: Any,
    max_chars: int | None = None,
) -> TaskResult:
    """Call the tool with the call's validated arguments (``ev.args``, see
    :func:`~llm_compiler.engine.dispatch.checked`) under `timeout`; report the outcome.

    The tool sees the call's stable :func:`~llm_compiler.idempotency_key`.
    A tool that raises anything (``TimeoutError`` and ``CancelledError`` included) gives
    an error observation; only a cancellation of the run itself propagates. An output
    longer than `max_chars` (as JSON) is cut to that many characters of text.
    """
    started = time.time()
    output: Any
    try:
        if tool is None:
            raise LookupError(f"This run has no tool {ev.tool_name!r}.")
        with calling(ev.call_key):
            call = call_tool(tool, ev.args, context)
            output = jsonable(await asyncio.wait_for(_own_timeouts_only(call), timeout))
        output = bounded(output, max_chars)
        is_error = False
    except asyncio.CancelledError as e:
        if _run_cancelled():
            raise
        output, is_error = _error(e), True
    except _ToolRaisedTimeout as e:
        output, is_error = _error(e.__cause__ or e), True
    except TimeoutError:
        output, is_error = f"Error: {ev.tool_name} timed out after {timeout:g} s.", True
    except BaseException as e:  # noqa: BLE001 - a tool's failure is data, whatever it is
        if isinstance(e, (KeyboardInterrupt, SystemExit)) and _run_cancelled():
            raise
        output, is_error = _error(e), True
    return TaskResult(
        round=ev.round,
        task_id=ev.task_id,
        tool_name=ev.tool_name,
        output=output,
        is_error=is_error,
        started_at=started,
        finished_at=time.time(),
    )


def bounded(output: Any, max_chars: int | None) -> Any:
    """`output`, or its first `max_chars` characters (as text) with a note of the cut."""
    if max_chars is None or output is None or isinstance(output, (bool, int, float)):
        return output  # a number JSON took has at most 4,300 digits
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) <= max_chars:
        return output
    return f"{text[:max_chars]} ...({len(text) - max_chars} characters cut)"


def _error(e: BaseException) -> str:
    text = str(e)[:2000]
    return f"Error: {type(e).__name__}: {text}" if text else f"Error: {type(e).__name__}"
