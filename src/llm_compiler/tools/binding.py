"""Plan arguments bound to a tool's parameters, validated, and the call itself."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.tools import BaseTool, FunctionTool
from llama_index.core.tools.types import AsyncBaseTool
from pydantic import BaseModel, ValidationError

from llm_compiler.errors import ToolError
from llm_compiler.plan import PlanError, PlanTask
from llm_compiler.tools.results import tool_value
from llm_compiler.tools.schema import SchemaTool
from llm_compiler.tools.spec import parameters, required


def bind(task: PlanTask, tool: BaseTool) -> PlanTask:
    """Bind positional arguments to parameter names; set `error` when they do not fit."""
    names = parameters(tool)
    name = tool.metadata.get_name()
    kwargs: dict[str, Any] = {}
    if len(task.args) > len(names):
        # One text parameter given several pieces: the planner split a phrase.
        message = (
            f"{name} takes {len(names)} argument(s) ({', '.join(names)}) "
            f"but {len(task.args)} were given."
        )
        return task.failed(PlanError(message, "bad_arguments"))
    kwargs.update(zip(names, task.args, strict=False))
    aliases = _aliases(tool)
    for key, value in task.kwargs.items():
        key = aliases.get(key, key)  # a JSON plan may use the original (alias) name
        if key not in names:
            message = f"{name} has no parameter {key!r} (parameters: {', '.join(names) or 'none'})."
            return task.failed(PlanError(message, "bad_arguments"))
        if key in kwargs:
            return task.failed(PlanError(f"{name} got {key!r} twice.", "bad_arguments"))
        kwargs[key] = value
    missing = [n for n in required(tool) if n not in kwargs]
    if missing:
        message = f"{name} is missing required argument(s): {', '.join(missing)}."
        return task.failed(PlanError(message, "bad_arguments"))
    return task.model_copy(update={"args": [], "kwargs": kwargs})


def _aliases(tool: BaseTool) -> dict[str, str]:
    """Original parameter name -> Python field name, for fields whose names differ."""
    schema = tool.metadata.fn_schema
    if schema is None:
        return {}
    return {f.alias: n for n, f in schema.model_fields.items() if f.alias and f.alias != n}


def validate_arguments(tool: BaseTool, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Check resolved arguments against the tool's schema (lax coercion: "3" -> 3).

    Raises:
        ValueError: with a readable message when they do not fit, whatever the schema's
            validators raised (pydantic lets a validator's TypeError or AttributeError
            through as it is).
    """
    schema: type[BaseModel] | None = tool.metadata.fn_schema
    if schema is None:
        return kwargs
    name = tool.metadata.get_name()
    try:
        model = schema.model_validate(kwargs)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in e.errors()
        )
        raise ValueError(f"Invalid arguments for {name}: {problems}") from None
    except Exception as e:  # noqa: BLE001 - a validator's own failure is a bad call too
        raise ValueError(f"Invalid arguments for {name}: {type(e).__name__}: {e}") from e
    return {k: getattr(model, k) for k in kwargs}


async def call_tool(tool: BaseTool, kwargs: dict[str, Any], ctx: Any = None) -> Any:
    """Call a tool and return its output's value (what later tasks receive).

    Raises:
        ToolError: The tool's output reports a failure.
    """
    if isinstance(tool, FunctionTool) and tool.requires_context and tool.ctx_param_name:
        kwargs = {**kwargs, tool.ctx_param_name: ctx}
    if isinstance(tool, AsyncBaseTool):
        output = await tool.acall(**kwargs)
    else:
        output = await asyncio.to_thread(tool.call, **kwargs)  # type: ignore[attr-defined]
    if output.is_error:
        raise ToolError(str(output.content))
    raw = output.raw_output
    if raw is None and not isinstance(tool, (FunctionTool, SchemaTool)):
        return output.content  # a tool that only filled in its text
    # A function's own return value (None included), with wrappers taken off: an MCP
    # result, a ToolOutput or a pydantic model passes on the value it holds.
    return tool_value(raw)
