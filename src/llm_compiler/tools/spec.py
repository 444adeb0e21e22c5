"""Tool parameters as plain JSON schemas: references inlined, one shape for every tool."""

from __future__ import annotations

import keyword
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from llama_index.core.tools import BaseTool, FunctionTool
from pydantic import Field

from llm_compiler.tools import adapt

# Recursive models (a tree of nodes) would inline forever: past this many nested references
# a value is "any".
MAX_DEPTH = 6
# What parser._CALL accepts as the tool of a `name(...)` line (ASCII only, to be safe).
_CALL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
ANY: dict[str, Any] = {}

#: The JSON-schema ``format`` of a parameter that takes an arithmetic expression: a tool
#: that declares it on its one required parameter computes (see :data:`Expression`).
ARITHMETIC = "arithmetic"
Expression = Annotated[str, Field(json_schema_extra={"format": ARITHMETIC})]
"""A parameter type that declares an arithmetic expression (``"(8849 - 8611) / 2"``):
``def calculator(expression: Expression) -> float``. Under constrained decoding a plan
writes such an argument from ``$N`` references, observed numbers and operators."""


@dataclass(frozen=True)
class Param:
    """One tool parameter: its name, JSON schema (references inlined) and whether required."""

    name: str
    schema: Mapping[str, Any]
    required: bool


@dataclass(frozen=True)
class ToolSpec:
    """A tool's name and parameters in declared order."""

    name: str
    params: tuple[Param, ...]

    @property
    def call_form(self) -> bool:
        """Whether ``name(arg, key=value)`` can express every call of this tool.

        Not when the name is no identifier-like word (or reads as ``join``), or a
        parameter name is no Python identifier (``from``, ``max-results``): those
        tools are called with a JSON line, ``{"name": {"from": 1}}``.
        """
        return (
            _CALL_NAME.fullmatch(self.name) is not None
            and self.name.lower() != "join"
            and all(is_identifier(p.name) for p in self.params)
        )


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


def tool_specs(tools: Sequence[Any]) -> list[ToolSpec]:
    """The specs of `tools` (BaseTools or callables), in the order given."""
    return [tool_spec(adapt.to_tool(t)) for t in tools]


_SPECS: weakref.WeakKeyDictionary[BaseTool, ToolSpec] = weakref.WeakKeyDictionary()


def tool_spec(tool: BaseTool) -> ToolSpec:
    """A tool's parameters from its JSON schema; names only if the schema cannot be built.

    Cached while the tool lives (building a schema costs ~2 ms a tool, and a run asks once
    per planning round); the cache never keeps a tool alive.
    """
    try:
        return _SPECS[tool]
    except (KeyError, TypeError):  # TypeError: a tool that cannot be weakly referenced
        pass
    spec = _build_spec(tool)
    try:
        _SPECS[tool] = spec
    except TypeError:
        pass
    return spec


def _parameters(tool: BaseTool) -> dict[str, Any] | None:
    """The tool's JSON schema; a function tool made elsewhere (an ``AgentWorkflow``'s)
    from a function with postponed annotations gets them resolved first."""
    try:
        return tool.metadata.get_parameters_dict()
    except Exception:
        fn = getattr(tool, "real_fn", None)
        if not isinstance(tool, FunctionTool) or fn is None:
            return None
    adapt.resolve_annotations(tool, fn)
    try:
        return tool.metadata.get_parameters_dict()
    except Exception:  # still unresolvable
        return None


def _build_spec(tool: BaseTool) -> ToolSpec:
    name = tool.metadata.get_name()
    schema = _parameters(tool)
    if schema is None:  # unresolvable annotations: the names are still known
        needed = set(required(tool))
        params = tuple(Param(p, ANY, p in needed) for p in parameters(tool))
        return ToolSpec(name, params)
    defs = schema_defs(schema)
    needed = set(schema.get("required", ()))
    params = tuple(
        Param(pname, inline_refs(prop, defs), pname in needed)
        for pname, prop in schema.get("properties", {}).items()
    )
    return ToolSpec(name, params)


def is_identifier(name: str) -> bool:
    """Whether `name` can be written as a Python keyword argument (``from`` cannot)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def inline_refs(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """`schema` with local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) replaced.

    The one reference walker: tool specs, grammars, prompt signatures and JSON-schema tools
    all read schemas through it. ``allOf`` (pydantic's wrapper for a described reference)
    is merged. A reference nests `depth` one deeper; past MAX_DEPTH (a recursive model)
    the value is "any" (``{}``), and so is an unknown or remote reference (its siblings,
    such as a description, stay).
    """
    if not isinstance(schema, Mapping):
        return dict(ANY)
    out = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    if "$ref" in out:
        ref = str(out.pop("$ref"))
        key = ref.rpartition("/")[2]
        known = ref.startswith(("#/$defs/", "#/definitions/")) and key in defs
        if known and depth < MAX_DEPTH:
            out = {**inline_refs(defs[key], defs, depth + 1), **inline_refs(out, defs, depth)}
        return out if known or out else dict(ANY)
    if "allOf" in out:
        parts = [inline_refs(s, defs, depth) for s in out.pop("allOf")]
        out = {**_merge(parts), **out}
    for key in ("anyOf", "oneOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [inline_refs(s, defs, depth) for s in out[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), Mapping):
            out[key] = inline_refs(out[key], defs, depth)
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: inline_refs(v, defs, depth) for k, v in out["properties"].items()}
    return out


def schema_defs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The definitions a schema's local references point into."""
    return {**schema.get("definitions", {}), **schema.get("$defs", {})}


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        props = {**merged.get("properties", {}), **part.get("properties", {})}
        required = [*merged.get("required", []), *part.get("required", [])]
        merged.update(part)
        if props:
            merged["properties"] = props
        if required:
            merged["required"] = list(dict.fromkeys(required))
    return merged


def alternatives(schema: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The branches of an ``anyOf``/``oneOf`` or multi-type schema, else None."""
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return [dict(s) for s in schema[key]]
    types = schema.get("type")
    if isinstance(types, list):
        rest = {k: v for k, v in schema.items() if k != "type"}
        return [{**rest, "type": t} for t in types]
    return None
