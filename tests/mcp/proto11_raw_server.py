"""A hand-written MCP server over stdio (no SDK), for answers the SDK's server never sends.

``python proto11_raw_server.py MODE``: it lists one tool ``echo``; ``tools/call`` answers by
MODE: ``error`` a JSON-RPC error -32000 (the code many servers use for their own errors) with a
message of 100,000 characters; ``malformed`` a result whose text content has no ``text``;
anything else ``ok``. It prints the number of ``initialize`` requests it has seen to stderr.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
TOOLS = [
    {
        "name": "echo",
        "description": "Echo.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: object) -> dict[str, object]:
    if MODE == "error":
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32000, "message": "E" * 100_000},
        }
    if MODE == "malformed":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text"}]}}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": [{"type": "text", "text": "ok"}]},
    }


for line in sys.stdin:
    message = json.loads(line)
    request_id, method = message.get("id"), message.get("method")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        send(answer(request_id))
    elif request_id is not None and method:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
