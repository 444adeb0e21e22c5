"""Tools from JSON schemas: OpenAI function definitions, BFCL function docs, MCP tools.

Each definition becomes a :class:`SchemaTool`, a llama-index tool whose ``fn_schema`` is a
pydantic model built from the JSON schema. Parameter names that are not Python
identifiers (``from``, ``_from``, ``max-results``) get a Python-safe field name with the
original as its alias: a text plan writes ``from_="NYC"``, a JSON plan may write
``"from"``, and the callable always receives the original names.

Example::

    tools = tools_from_schemas(openai_tools, handler=lambda name, args: api.call(name, args))
    workflow = LLMCompilerWorkflow(tools=tools, llm=llm)
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_origin

from llama_index.core.tools import BaseTool, ToolMetadata, ToolOutput
from llama_index.core.tools.types import AsyncBaseTool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from llm_compiler.errors import ConfigurationError
from llm_compiler.tools.policy import ToolPolicy, with_policy
from llm_compiler.tools.spec import inline_refs, is_identifier, schema_defs

Handler = Callable[[str, dict[str, Any]], Any]

# BFCL and other dialects use Python-ish type names; JSON Schema has its own.
_TYPE_ALIASES = {
    "dict": "object",
    "float": "number",
    "double": "number",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "set": "array",
}
_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCALARS = (str, int, float, bool, type(None))


def normalize_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema with dialect type names mapped to JSON Schema's (``dict`` -> ``object``).

    ``any`` (or no type) means any value and loses its ``type``; everything else is kept.
    """
    out = dict(schema)
    t = out.get("type")
    if isinstance(t, list):
        types = [_TYPE_ALIASES.get(x, x) for x in t if x != "any"]
        out["type"] = types if len(types) > 1 else (types[0] if types else None)
    elif isinstance(t, str):
        out["type"] = None if t == "any" else _TYPE_ALIASES.get(t, t)
    if out.get("type") is None:
        out.pop("type", None)
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: normalize_schema(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), Mapping):
            out[key] = normalize_schema(out[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [normalize_schema(s) if isinstance(s, Mapping) else s for s in out[key]]
    if "properties" in out and "type" not in out:
        out["type"] = "object"
    return out


def parse_definition(spec: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(name, description, parameters schema)`` of one tool definition in any dialect.

    Raises:
        ConfigurationError: The definition has no name or its parameters are not an object.
    """
    if spec.get("type") == "function" and isinstance(spec.get("function"), Mapping):
        spec = spec["function"]
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"A tool definition needs a non-empty 'name': {spec!r:.200}")
    params = spec.get("parameters", spec.get("inputSchema", spec.get("input_schema")))
    params = dict(params or {"type": "object", "properties": {}})
    defs = {**params.pop("definitions", {}), **params.pop("$defs", {})}
    params = normalize_schema(inline_refs(params, defs) if defs else params)
    if params.get("type", "object") != "object":
        raise ConfigurationError(f"The parameters of {name!r} must be an object schema.")
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return name, str(spec.get("description") or ""), params


# --------------------------------------------------------------------------- pydantic models


def python_names(names: Sequence[str]) -> dict[str, str]:
    """A unique Python-safe field name for each parameter name (identity when possible)."""
    out: dict[str, str] = {}
    taken = {n for n in names if _safe(n)}
    for name in names:
        if _safe(name):
            out[name] = name
            continue
        base = re.sub(r"\W", "_", name).lstrip("_") or "arg"
        if base[0].isdigit():
            base = "p_" + base
        candidate = base if _safe(base) else base + "_"
        n = 2
        while candidate in taken or not _safe(candidate):
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        out[name] = candidate
    return out


def _safe(name: str) -> bool:
    return is_identifier(name) and not name.startswith("_") and not hasattr(BaseModel, name)


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic model for an object schema; non-identifier names become aliases."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    fields: dict[str, Any] = {}
    for pname, field_name in python_names(list(props)).items():
        prop = props[pname]
        annotation = _annotation(f"{name}_{field_name}", prop)
        info: dict[str, Any] = {"description": prop.get("description")}
        if field_name != pname:
            info["alias"] = pname
        declared: dict[str, Any] = {}
        if prop.get("enum") and get_origin(annotation) is not Literal:
            # Allowed values a Literal cannot hold still belong in the rendered signature.
            declared["enum"] = prop["enum"]
        if isinstance(prop.get("format"), str):
            declared["format"] = prop["format"]  # what the author declared (``arithmetic``)
        if declared:
            info["json_schema_extra"] = declared
        if pname not in required:
            info["default"] = copy.deepcopy(prop.get("default"))
        fields[field_name] = (annotation, Field(**info))
    extra: Literal["forbid", "allow"] = (
        "forbid" if schema.get("additionalProperties") is False else "allow"
    )
    config = ConfigDict(
        extra=extra, validate_by_name=True, validate_by_alias=True, protected_namespaces=()
    )
    model_name = re.sub(r"\W", "_", name) or "Arguments"
    return create_model(model_name, __config__=config, **fields)


def _annotation(name: str, prop: Mapping[str, Any]) -> Any:  # noqa: C901 - one branch per kind
    if prop.get("enum") and all(isinstance(v, _SCALARS) for v in prop["enum"]):
        return Literal.__getitem__(tuple(prop["enum"]))
    if "const" in prop and isinstance(prop["const"], _SCALARS):
        return Literal.__getitem__(prop["const"])
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list) and prop[key]:
            return Union.__getitem__(
                tuple(_annotation(f"{name}_{i}", s) for i, s in enumerate(prop[key]))
            )
    t = prop.get("type")
    if isinstance(t, list):
        return Union.__getitem__(tuple(_annotation(name, {**prop, "type": x}) for x in t))
    if t == "array":
        items = prop.get("items")
        inner = _annotation(f"{name}_item", items) if isinstance(items, Mapping) else Any
        return list.__class_getitem__(inner)
    if t == "object":
        if prop.get("properties"):
            return model_from_schema(name, prop)
        values = prop.get("additionalProperties")
        value_type = _annotation(name, values) if isinstance(values, Mapping) else Any
        return dict.__class_getitem__((str, value_type))
    return _PY_TYPES.get(t, Any) if isinstance(t, str) else Any


# --------------------------------------------------------------------------- the tool


class SchemaTool(AsyncBaseTool):
    """A tool defined by a JSON schema and called with the original parameter names.

    Args:
        name: The tool name (any string, e.g. ``spotify.play``).
        description: What the tool does.
        parameters: The parameters' JSON schema (an object; dialect types are normalized).
        fn: Called as ``fn(**arguments)``; sync functions run in a worker thread.
        handler: Called as ``handler(name, arguments)`` instead of ``fn``.
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: Callable[..., Any] | None = None,
        *,
        handler: Handler | None = None,
    ) -> None:
        if (fn is None) == (handler is None):
            raise ConfigurationError(f"Give {name!r} exactly one of fn= or handler=.")
        self.name = name
        self.schema = normalize_schema(parameters)
        self.fn_schema = model_from_schema(name, self.schema)
        self._fn = fn
        self._handler = handler
        self._metadata = ToolMetadata(
            name=name,
            description=_describe(description, self.schema, self.fn_schema),
            fn_schema=self.fn_schema,
        )

    @classmethod
    def from_definition(
        cls,
        spec: Mapping[str, Any],
        fn: Callable[..., Any] | None = None,
        *,
        handler: Handler | None = None,
    ) -> SchemaTool:
        """A tool from an OpenAI, BFCL or MCP definition (see :func:`parse_definition`)."""
        name, description, params = parse_definition(spec)
        return cls(name, description, params, fn, handler=handler)

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def original_arguments(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Validate arguments given by field or original name; return them by original name.

        Only the arguments given are returned (no defaults filled in); nested objects
        come back as plain dicts.

        Raises:
            ValueError: The arguments do not fit the schema.
        """
        try:
            model = self.fn_schema.model_validate(dict(kwargs))
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in e.errors()
            )
            raise ValueError(f"Invalid arguments for {self.name}: {problems}") from None
        return model.model_dump(by_alias=True, exclude_unset=True)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        arguments = self._arguments(args, kwargs)
        if self._handler is not None:
            result = await _maybe_async(self._handler, self.name, arguments)
        else:
            assert self._fn is not None
            result = await _maybe_async(self._fn, **arguments)
        return self._output(arguments, result)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Synchronous call; an async callable is run to completion with ``asyncio.run``."""
        arguments = self._arguments(args, kwargs)
        if self._handler is not None:
            result = self._handler(self.name, arguments)
        else:
            assert self._fn is not None
            result = self._fn(**arguments)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return self._output(arguments, result)

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            raise TypeError(f"{self.name} takes keyword arguments only.")
        return self.original_arguments(kwargs)

    def _output(self, arguments: dict[str, Any], result: Any) -> ToolOutput:
        return ToolOutput(
            content=str(result),
            tool_name=self.name,
            raw_input={"kwargs": arguments},
            raw_output=result,
        )


async def _await(awaitable: Any) -> Any:
    return await awaitable


async def _maybe_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    ):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def tools_from_schemas(
    specs: Sequence[Mapping[str, Any]],
    handler: Handler | None = None,
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    policies: Mapping[str, ToolPolicy] | None = None,
) -> list[SchemaTool]:
    """Tools for several definitions: one ``handler(name, args)`` or a function per name,
    each with its policy from `policies` (by tool name) if given.

    Raises:
        ConfigurationError: A definition is invalid or a tool has no callable.
    """
    tools = []
    for spec in specs:
        name, description, params = parse_definition(spec)
        fn = (functions or {}).get(name)
        if fn is None and handler is None:
            raise ConfigurationError(f"No function given for tool {name!r}.")
        tool = SchemaTool(name, description, params, fn, handler=None if fn else handler)
        if policies is not None and name in policies:
            with_policy(tool, policies[name])
        tools.append(tool)
    return tools


def tool_json_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of a tool's parameters (an object schema, ``$ref``s inlined)."""
    if isinstance(tool, SchemaTool):
        return copy.deepcopy(tool.schema)
    schema = tool.metadata.fn_schema
    if schema is None:
        return {
            "type": "object",
            "properties": {"input": {"type": "string"}},
            "required": ["input"],
        }
    full = schema.model_json_schema()
    inlined: dict[str, Any] = inline_refs(full, schema_defs(full))
    return inlined


# --------------------------------------------------------------------------- description


def _describe(description: str, schema: Mapping[str, Any], model: type[BaseModel]) -> str:
    """The description followed by one short note per parameter (name as the plan writes it)."""
    notes = []
    props = schema.get("properties") or {}
    for field_name, field in model.model_fields.items():
        prop = props.get(field.alias or field_name, {})
        text = " ".join(str(prop.get("description") or "").split())
        if text:
            notes.append(f"{field_name}: {text.rstrip('.')}.")
    text = " ".join(description.split())
    return f"{text} Parameters: {' '.join(notes)}" if notes else text
