"""Tools: adapting callables, the per-run tool set, rendering, binding and calling.

- :mod:`.threads`: the threads sync tools run in.
- :mod:`.adapt`: callables as llama-index tools; outputs as JSON-safe values.
- :mod:`.render`: a tool's signature and description as the planner sees them.
- :mod:`.binding`: plan arguments bound, validated and passed to the tool.
- :mod:`.spec`: tool parameters as JSON schemas (the one ``$ref`` walker).
- :mod:`.schema`: tools made from JSON schemas (OpenAI, MCP, BFCL).
- :mod:`.results`: tool outputs (MCP results, ToolOutputs, models) as values.
- :mod:`.mcp`: tools from MCP servers (needs the ``mcp`` extra when used).
- :mod:`.policy`: tool policies (side-effect class, approval, limits, keys, retries).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from llama_index.core.tools import BaseTool

from llm_compiler.tools.adapt import ToolLike, jsonable, to_tool, tool_map
from llm_compiler.tools.binding import bind, call_tool, validate_arguments
from llm_compiler.tools.mcp import (
    MCPConnection,
    MCPServerError,
    MCPTool,
    MCPTools,
    tools_from_mcp,
)
from llm_compiler.tools.render import action_line, description, signature
from llm_compiler.tools.results import REJECTED_CALL, NotFound, ToolError, tool_value
from llm_compiler.tools.spec import ARITHMETIC, Expression, parameters, required
from llm_compiler.tools.threads import TOOL_THREADS, ToolThreads


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


__all__ = [
    "ARITHMETIC",
    "Expression",
    "MCPConnection",
    "MCPServerError",
    "MCPTool",
    "MCPTools",
    "NotFound",
    "REJECTED_CALL",
    "TOOL_THREADS",
    "ToolLike",
    "ToolSet",
    "ToolError",
    "ToolThreads",
    "action_line",
    "bind",
    "call_tool",
    "description",
    "jsonable",
    "parameters",
    "required",
    "signature",
    "to_tool",
    "tool_map",
    "tool_value",
    "tools_from_mcp",
    "validate_arguments",
]
