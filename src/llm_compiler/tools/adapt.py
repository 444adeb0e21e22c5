"""Callables as llama-index tools, and tool outputs as JSON-safe values."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.tools import BaseTool, FunctionTool
from pydantic import BaseModel

from llm_compiler.errors import ConfigurationError
from llm_compiler.plan import JOIN_TOOL
from llm_compiler.tools.policy import declared, with_policy
from llm_compiler.tools.threads import TOOL_THREADS, ToolThreads, threaded

ToolLike = BaseTool | Callable[..., Any]


def to_tool(obj: ToolLike, threads: ToolThreads | None = None) -> BaseTool:
    """Wrap a plain callable as a FunctionTool; sync callables run in `threads`.

    A BaseTool is returned as it is.
    """
    if isinstance(obj, BaseTool):
        return obj
    if not callable(obj):
        raise ConfigurationError(f"{obj!r} is neither a llama-index tool nor a callable.")
    if inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(
        getattr(obj, "__call__", None)  # noqa: B004 - async callable objects
    ):
        tool = FunctionTool.from_defaults(async_fn=obj)
    else:
        tool = FunctionTool.from_defaults(fn=obj, async_fn=threaded(obj, threads or TOOL_THREADS))
    resolve_annotations(tool, obj)
    found = declared(obj)
    if found is not None:
        with_policy(tool, found)
    return tool


def resolve_annotations(tool: FunctionTool, fn: Callable[..., Any]) -> None:
    """Resolve postponed annotations (``from __future__ import annotations``).

    FunctionTool cannot resolve names such as ``Literal`` or a model class in string
    annotations: its schema then fails to build, and so do signatures, grammars and
    argument validation. The function's module namespace resolves them.
    """
    schema = tool.metadata.fn_schema
    namespace = getattr(fn, "__globals__", None)
    if schema is not None and isinstance(namespace, dict):
        try:
            schema.model_rebuild(_types_namespace=dict(namespace))
        except Exception:  # still unresolvable: the tool keeps its parameter names
            return


def tool_map(tools: Sequence[ToolLike], threads: ToolThreads | None = None) -> dict[str, BaseTool]:
    """Index tools by name; names must be unique and not ``join``."""
    out: dict[str, BaseTool] = {}
    for obj in tools:
        tool = to_tool(obj, threads)
        name = tool.metadata.get_name()
        if name == JOIN_TOOL:
            raise ConfigurationError("A tool may not be called 'join': it ends every plan.")
        if name in out:
            raise ConfigurationError(f"Two tools are named {name!r}.")
        out[name] = tool
    return out


def jsonable(value: Any) -> Any:
    """The value if it survives JSON (so state and events serialize), else its text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
