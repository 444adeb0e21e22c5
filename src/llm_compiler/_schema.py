"""Tool parameters as plain JSON schemas: references inlined, one shape for every tool."""

from __future__ import annotations

import keyword
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler import tools as _tools

# Recursive models (a tree of nodes) would inline forever; past this depth a value is "any".
MAX_DEPTH = 6
# What parser._CALL accepts as the tool of a `name(...)` line (ASCII only, to be safe).
_CALL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
ANY: dict[str, Any] = {}


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
            and all(p.name.isidentifier() and not keyword.iskeyword(p.name) for p in self.params)
        )


def tool_specs(tools: Sequence[Any]) -> list[ToolSpec]:
    """The specs of `tools` (BaseTools or callables), in the order given."""
    return [tool_spec(_tools.to_tool(t)) for t in tools]


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


def _build_spec(tool: BaseTool) -> ToolSpec:
    name = tool.metadata.get_name()
    try:
        schema = tool.metadata.get_parameters_dict()
    except Exception:  # unresolvable annotations: the names are still known
        required = set(_tools.required(tool))
        params = tuple(Param(p, ANY, p in required) for p in _tools.parameters(tool))
        return ToolSpec(name, params)
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    required = set(schema.get("required", ()))
    params = tuple(
        Param(pname, inline(prop, defs), pname in required)
        for pname, prop in schema.get("properties", {}).items()
    )
    return ToolSpec(name, params)


def inline(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """`schema` with ``$ref`` to its definitions replaced by their targets.

    ``allOf`` of one schema (pydantic's wrapper for a described reference) is unwrapped;
    several are merged. Past MAX_DEPTH, or for an unknown reference, the value is "any".
    """
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return dict(ANY)
    out = dict(schema)
    if "$ref" in out:
        target = defs.get(str(out.pop("$ref")).rsplit("/", 1)[-1])
        if target is None:
            return dict(ANY)
        out = {**inline(target, defs, depth + 1), **out}
    if "allOf" in out:
        parts = [inline(s, defs, depth + 1) for s in out.pop("allOf")]
        out = {**_merge(parts), **out}
    for key in ("anyOf", "oneOf"):
        if key in out:
            out[key] = [inline(s, defs, depth + 1) for s in out[key]]
    if isinstance(out.get("items"), Mapping):
        out["items"] = inline(out["items"], defs, depth + 1)
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: inline(v, defs, depth + 1) for k, v in out["properties"].items()}
    if isinstance(out.get("additionalProperties"), Mapping):
        out["additionalProperties"] = inline(out["additionalProperties"], defs, depth + 1)
    return out


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
