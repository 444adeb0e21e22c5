"""How the planner sees a tool: its signature and description."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from llama_index.core.tools import BaseTool
from pydantic import BaseModel

from llm_compiler.tools.spec import inline_refs, schema_defs


def action_line(tool: BaseTool) -> str:
    """``name(sig): description``, the line the planner sees."""
    return f"{signature(tool)}: {description(tool)}"


def signature(tool: BaseTool) -> str:
    """``name(param: type, other: type = default)`` from the tool's schema.

    Parameters are shown by their Python names (what a text plan writes); allowed values
    show as ``"a" | "b"`` and nested objects as ``{"key": type, ...}``. Made once per
    complete schema and name (every planner prompt shows it; building a JSON schema takes
    a tenth of a millisecond or more).
    """
    schema = tool.metadata.fn_schema
    name = tool.metadata.get_name()
    if schema is None:
        return f"{name}(input: str)"
    if getattr(schema, "__pydantic_complete__", False):
        return _kept_signature(schema, name)
    return _signature(schema, name)  # annotations still unresolved: not kept


@lru_cache(maxsize=4096)
def _kept_signature(schema: type[BaseModel], name: str) -> str:
    return _signature(schema, name)


def _signature(schema: type[BaseModel], name: str) -> str:
    try:
        full = schema.model_json_schema()
    except Exception:  # a schema with unresolved annotations still has field names
        full = {}
    props = inline_refs(full, schema_defs(full)).get("properties", {})
    parts = []
    for pname, info in schema.model_fields.items():
        typ = _type_name(props.get(info.alias or pname, {}))
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


#: Nested objects deeper than this show as ``dict`` in a signature (a line stays readable).
_SHOWN_DEPTH = 4


def _type_name(prop: Mapping[str, Any], depth: int = 0) -> str:
    if prop.get("enum"):
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    t = prop.get("type")
    if t == "array" and isinstance(prop.get("items"), dict):
        inner = _type_name(prop["items"], depth + 1)
        return f"list[{inner}]" if inner else "list"
    if t == "object" and prop.get("properties") and depth < _SHOWN_DEPTH:
        return _object_fields(prop, depth + 1)
    if isinstance(t, str):
        return _JSON_TYPES.get(t, t)
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " | ".join(_type_name(p, depth + 1) or "any" for p in prop[key])
    return ""


def _object_fields(prop: Mapping[str, Any], depth: int) -> str:
    required = set(prop.get("required", []))
    parts = []
    for key, sub in prop["properties"].items():
        part = f"{json.dumps(key)}: {_type_name(sub, depth) or 'any'}"
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
