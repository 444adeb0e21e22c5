"""A stdio server that speaks just enough MCP to list its tools, then answers garbage.

``noise`` gets a result that is no ``CallToolResult``; ``babble`` gets a line that is no
JSON at all (and no answer).
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": name, "description": f"Answers {name}.", "inputSchema": {"type": "object"}}
    for name in ("noise", "babble")
]


def reply(message_id: object, result: object = None, error: object = None) -> None:
    body = {"jsonrpc": "2.0", "id": message_id}
    body.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        continue  # a notification
    if method == "initialize":
        reply(
            message_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "0"},
            },
        )
    elif method == "tools/list":
        reply(message_id, {"tools": TOOLS})
    elif method == "tools/call" and message["params"]["name"] == "noise":
        reply(message_id, {"content": "not a list", "isError": "perhaps"})
    elif method == "tools/call":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    else:
        reply(message_id, error={"code": -32601, "message": f"Method not found: {method}"})
