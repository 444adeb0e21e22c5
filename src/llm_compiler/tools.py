"""Tools: adapting callables, the per-run tool set, binding plan arguments, calling.

Sync callables run in a shared pool of threads (:class:`ToolThreads`). A thread whose
tool call timed out cannot be stopped: Python has no way to kill a thread. It is written
off, and once written-off threads fill half the pool, new calls go to a fresh pool, so a
tool that hangs never starves other calls or runs; the old threads end whenever their
calls return (a call that never returns keeps its thread until the process exits).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from llama_index.core.tools import BaseTool, FunctionTool
from llama_index.core.tools.types import AsyncBaseTool
from pydantic import BaseModel, ValidationError

from llm_compiler.errors import ConfigurationError
from llm_compiler.plan import JOIN_TOOL, PlanTask

ToolLike = BaseTool | Callable[..., Any]


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
        tool = FunctionTool.from_defaults(fn=obj, async_fn=_threaded(obj, threads or TOOL_THREADS))
    _resolve_annotations(tool, obj)
    return tool


def _resolve_annotations(tool: FunctionTool, fn: Callable[..., Any]) -> None:
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


def _threaded(fn: Callable[..., Any], threads: ToolThreads) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        future = threads.submit(functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            threads.abandon(future)
            raise

    return run


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


@dataclass(frozen=True)
class ToolSet:
    """The tools of one run, by name; built when the run starts and never shared.

    A ``tool_retriever``'s choice is part of it, so two runs with different tools of the
    same name each call their own.
    """

    by_name: Mapping[str, BaseTool] = field(default_factory=dict)

    @classmethod
    def build(cls, base: Mapping[str, BaseTool], retrieved: Sequence[BaseTool] = ()) -> ToolSet:
        """`base` plus `retrieved` tools (a retrieved tool never replaces a base tool)."""
        tools = dict(base)
        for tool in tool_map([t for t in retrieved if t.metadata.get_name() not in base]).values():
            tools.setdefault(tool.metadata.get_name(), tool)
        return cls(MappingProxyType(tools))

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def __iter__(self) -> Iterator[BaseTool]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    def get(self, name: str) -> BaseTool | None:
        """The tool called `name`, if this run has it."""
        return self.by_name.get(name)

    @property
    def names(self) -> list[str]:
        """Tool names, in order."""
        return list(self.by_name)


def action_line(tool: BaseTool) -> str:
    """``name(sig): description``, the line the planner sees."""
    return f"{signature(tool)}: {description(tool)}"


def parameters(tool: BaseTool) -> list[str]:
    """The tool's parameter names, in signature order."""
    schema = tool.metadata.fn_schema
    if schema is None:
        return ["input"]
    return list(schema.model_fields)


def required(tool: BaseTool) -> list[str]:
    """The tool's required parameter names."""
    schema = tool.metadata.fn_schema
    if schema is None:
        return ["input"]
    return [n for n, f in schema.model_fields.items() if f.is_required()]


def signature(tool: BaseTool) -> str:
    """``name(param: type, other: type = default)`` from the tool's schema.

    Parameters are shown by their Python names (what a text plan writes); allowed values
    show as ``"a" | "b"`` and nested objects as ``{"key": type, ...}``.
    """
    schema = tool.metadata.fn_schema
    name = tool.metadata.get_name()
    if schema is None:
        return f"{name}(input: str)"
    try:
        full = schema.model_json_schema()
    except Exception:  # a schema with unresolved annotations still has field names
        full = {}
    props, defs = full.get("properties", {}), full.get("$defs", {})
    parts = []
    for pname, info in schema.model_fields.items():
        typ = _type_name(props.get(info.alias or pname, {}), defs)
        part = f"{pname}: {typ}" if typ else pname
        if not info.is_required():
            part += f" = {info.get_default(call_default_factory=True)!r}"
        parts.append(part)
    return f"{name}({', '.join(parts)})"


_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _type_name(prop: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> str:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 4:
        return _type_name(defs.get(ref[8:], {}), defs, depth + 1)
    if prop.get("enum"):
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    t = prop.get("type")
    if t == "array" and isinstance(prop.get("items"), dict):
        inner = _type_name(prop["items"], defs, depth + 1)
        return f"list[{inner}]" if inner else "list"
    if t == "object" and prop.get("properties") and depth < 4:
        return _object_fields(prop, defs, depth + 1)
    if isinstance(t, str):
        return _JSON_TYPES.get(t, t)
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " | ".join(_type_name(p, defs, depth + 1) or "any" for p in prop[key])
    return ""


def _object_fields(prop: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> str:
    required = set(prop.get("required", []))
    parts = []
    for key, sub in prop["properties"].items():
        part = f"{json.dumps(key)}: {_type_name(sub, defs, depth) or 'any'}"
        if key not in required:
            part += f" = {sub['default']!r}" if "default" in sub else " (optional)"
        parts.append(part)
    return "{" + ", ".join(parts) + "}"


def description(tool: BaseTool) -> str:
    """The tool's description without a leading copy of its signature."""
    text = tool.metadata.description.strip()
    name = tool.metadata.get_name()
    if text.startswith(f"{name}("):
        first, _, rest = text.partition("\n")
        text = rest.strip() or first
    return " ".join(text.split())


def bind(task: PlanTask, tool: BaseTool) -> PlanTask:
    """Bind positional arguments to parameter names; set `error` when they do not fit."""
    names = parameters(tool)
    name = tool.metadata.get_name()
    kwargs: dict[str, Any] = {}
    if len(task.args) > len(names):
        # One text parameter given several pieces: the planner split a phrase.
        return task.model_copy(
            update={
                "error": f"{name} takes {len(names)} argument(s) ({', '.join(names)}) "
                f"but {len(task.args)} were given."
            }
        )
    kwargs.update(zip(names, task.args, strict=False))
    aliases = _aliases(tool)
    for key, value in task.kwargs.items():
        key = aliases.get(key, key)  # a JSON plan may use the original (alias) name
        if key not in names:
            return task.model_copy(
                update={
                    "error": f"{name} has no parameter {key!r} "
                    f"(parameters: {', '.join(names) or 'none'})."
                }
            )
        if key in kwargs:
            return task.model_copy(update={"error": f"{name} got {key!r} twice."})
        kwargs[key] = value
    missing = [n for n in required(tool) if n not in kwargs]
    if missing:
        return task.model_copy(
            update={"error": f"{name} is missing required argument(s): {', '.join(missing)}."}
        )
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
        ValueError: with a readable message when they do not fit.
    """
    schema: type[BaseModel] | None = tool.metadata.fn_schema
    if schema is None:
        return kwargs
    try:
        model = schema.model_validate(kwargs)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
            for err in e.errors()
        )
        raise ValueError(f"Invalid arguments for {tool.metadata.get_name()}: {problems}") from None
    return {k: getattr(model, k) for k in kwargs}


async def call_tool(tool: BaseTool, kwargs: dict[str, Any], ctx: Any = None) -> Any:
    """Call a tool and return its raw output (the value later tasks receive)."""
    if isinstance(tool, FunctionTool) and tool.requires_context and tool.ctx_param_name:
        kwargs = {**kwargs, tool.ctx_param_name: ctx}
    if isinstance(tool, AsyncBaseTool):
        output = await tool.acall(**kwargs)
    else:
        output = await asyncio.to_thread(tool.call, **kwargs)  # type: ignore[attr-defined]
    raw = output.raw_output
    if output.is_error:
        raise RuntimeError(str(output.content))
    if isinstance(tool, FunctionTool):
        return raw  # the function's own return value, None included
    return output.content if raw is None else raw


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
