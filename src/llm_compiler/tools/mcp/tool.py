"""An MCP server's tool as a llama-index tool: :class:`MCPTool`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.tools import ToolOutput

from llm_compiler.errors import ToolError
from llm_compiler.tools.mcp.connection import MCPConnection
from llm_compiler.tools.policy import DEFAULT_POLICY, mcp_policy, with_policy
from llm_compiler.tools.results import call_result_value, content_text
from llm_compiler.tools.schema import SchemaTool


class MCPTool(SchemaTool):
    """A tool of an MCP server, with the name and input schema the server lists.

    Its output's ``raw_output`` is the result's value and an ``isError`` result is a
    failed ``ToolOutput`` with the server's message (see :mod:`.results`).
    """

    def __init__(self, connection: MCPConnection, tool: Any) -> None:
        description = tool.description or getattr(tool, "title", None) or ""
        name = connection.prefix + tool.name
        super().__init__(name, description, tool.input_schema or {}, handler=self._request)
        self.connection = connection
        self.server_name: str = tool.name
        """The tool's name on its server (``name`` without the connection's prefix)."""
        self.output_schema: Mapping[str, Any] | None = tool.output_schema
        chosen = connection.tool_policies.get(tool.name) or connection.policy
        chosen = chosen or mcp_policy(getattr(tool, "annotations", None)) or DEFAULT_POLICY
        if connection.max_concurrency is not None:
            pool = {f"mcp:{connection.name}": connection.max_concurrency}
            chosen = chosen.model_copy(update={"limits": {**chosen.limits, **pool}})
        with_policy(self, chosen)

    async def _request(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.connection.call_tool(self.server_name, arguments)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """MCP tools share one session on an event loop: call them with ``acall``."""
        raise TypeError(f"{self.name} is an MCP tool: await its acall() instead of call().")

    def _output(self, arguments: dict[str, Any], result: Any) -> ToolOutput:
        try:
            value = call_result_value(result, self.output_schema)
        except ToolError as e:
            return ToolOutput(
                content=str(e),
                tool_name=self.name,
                raw_input={"kwargs": arguments},
                raw_output=None,
                is_error=True,
            )
        text = content_text(result.content) if result.content else None
        return ToolOutput(
            content=text if text is not None else str(value),
            tool_name=self.name,
            raw_input={"kwargs": arguments},
            raw_output=value,
        )
