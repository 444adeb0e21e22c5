"""Tool outputs as values: what a ``$N`` reference passes on to a later task.

A tool may hand back its value wrapped: a llama-index ``ToolOutput`` (its ``raw_output``),
a pydantic model (its JSON-safe dump) or an MCP ``CallToolResult``. An MCP result's
value is its ``structuredContent``, unwrapped where the server wrapped a non-object
return as ``{"result": value}`` (the MCP SDKs' convention); without structured content
it is the text content (several text parts joined by newlines; images, audio and
resources described in one line each, never dumped). A result flagged ``isError`` raises
:class:`ToolError` with the server's message, which the executor reports as an error
observation.

MCP results are recognised by shape (``content`` plus ``isError``/``is_error``), so
results of the official SDK 1.x and 2.x, and of tools that pass them through (such as
``llama-index-tools-mcp``), all work without importing ``mcp``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.tools import ToolOutput
from pydantic import BaseModel

from llm_compiler.errors import NotFound as NotFound  # importable here too
from llm_compiler.errors import ToolError as ToolError

#: How many wrappers deep a value is unwrapped (a ToolOutput holding a ToolOutput ...).
_MAX_NESTING = 8


#: The observation of a call a human rejected (after ``Error: ``).
REJECTED_CALL = "a human rejected this call"


def tool_value(raw: Any) -> Any:
    """The value a tool's raw output stands for (see the module docstring).

    Raises:
        ToolError: The output reports a failure.
    """
    for _ in range(_MAX_NESTING):
        if isinstance(raw, ToolOutput):
            if raw.is_error:
                raise ToolError(str(raw.content))
            raw = raw.content if raw.raw_output is None else raw.raw_output
        elif is_call_result(raw):
            return call_result_value(raw)
        elif isinstance(raw, BaseModel):
            return raw.model_dump(mode="json")
        else:
            return raw
    return raw


def is_call_result(value: Any) -> bool:
    """Whether `value` is an MCP ``CallToolResult`` (SDK 1.x or 2.x model)."""
    return (
        isinstance(value, BaseModel)
        and type(value).__name__ == "CallToolResult"
        and isinstance(getattr(value, "content", None), list)
    )


def call_result_value(result: Any, output_schema: Mapping[str, Any] | None = None) -> Any:
    """The value of an MCP ``CallToolResult``.

    `output_schema` (the tool's declared ``outputSchema``, if any) confirms that a
    ``{"result": ...}`` object is the SDK's wrapper: a declared schema whose only property
    is something else keeps the object as it is.

    Raises:
        ToolError: The result has ``isError`` set; the message is the server's text.
    """
    is_error = _field(result, "is_error", "isError")
    content = _field(result, "content", "content") or []
    if is_error:
        raise ToolError(
            content_text(content) or "The MCP tool reported an error without a message."
        )
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None:
        return _unwrapped(structured, output_schema)
    return content_text(content)


def _field(obj: Any, snake: str, camel: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(camel, obj.get(snake))
    return getattr(obj, snake, getattr(obj, camel, None))


def _unwrapped(structured: Any, output_schema: Mapping[str, Any] | None) -> Any:
    if not isinstance(structured, Mapping) or set(structured) != {"result"}:
        return structured
    declared = (output_schema or {}).get("properties")
    if isinstance(declared, Mapping) and set(declared) != {"result"}:
        return structured  # a declared object that happens to have one key
    return structured["result"]


def content_text(parts: Sequence[Any]) -> str | None:
    """Content parts as one text: text parts joined by newlines, the others described."""
    texts = [_part_text(part) for part in parts]
    return "\n".join(texts) if texts else None


def _part_text(part: Any) -> str:
    kind = _field(part, "type", "type")
    if kind == "text":
        return str(_field(part, "text", "text") or "")
    if kind in ("image", "audio"):
        data = _field(part, "data", "data") or ""
        mime = _field(part, "mime_type", "mimeType") or "unknown type"
        return f"[{kind}: {mime}, {len(data) * 3 // 4} bytes]"
    if kind == "resource_link":
        name = _field(part, "name", "name") or ""
        return f"[resource link: {name} {_field(part, 'uri', 'uri')}]".replace("  ", " ")
    if kind == "resource":
        return _resource_text(_field(part, "resource", "resource"))
    return f"[{kind or 'unknown'} content]"


def _resource_text(resource: Any) -> str:
    uri = _field(resource, "uri", "uri")
    mime = _field(resource, "mime_type", "mimeType") or "unknown type"
    text = _field(resource, "text", "text")
    if text is not None:
        return f"[resource: {uri}, {mime}, {len(str(text))} characters]"
    blob = _field(resource, "blob", "blob") or ""
    return f"[resource: {uri}, {mime}, {len(blob) * 3 // 4} bytes]"
