"""Tools from MCP servers: a stdio command or a streamable-HTTP URL, on the official SDK.

Example::

    async with tools_from_mcp("python -m my_server", include=["length", "subtract"]) as tools:
        workflow = LLMCompilerWorkflow(tools=tools, llm=llm)
        await workflow.run(user_msg="How much longer is the Golden Gate Bridge than the M25?")

- :mod:`.connection`: :class:`MCPConnection`, one server and its session's lifetime.
- :mod:`.tool`: :class:`MCPTool`, a server's tool as a llama-index tool.
- :mod:`.loader`: :func:`tools_from_mcp` and :class:`MCPTools`, which open connections
  and list their tools.

The ``mcp`` extra is imported only when a connection opens.
"""

from llm_compiler.tools.mcp.connection import MCPConnection, MCPServerError
from llm_compiler.tools.mcp.loader import MCPTools, tools_from_mcp
from llm_compiler.tools.mcp.tool import MCPTool

__all__ = ["MCPConnection", "MCPServerError", "MCPTool", "MCPTools", "tools_from_mcp"]
