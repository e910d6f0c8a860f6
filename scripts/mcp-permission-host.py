#!/usr/bin/env python3
"""A stdio MCP server with one tool, `approve`, to name as Claude Code's permission host:

    claude -p … --mcp-config '{"mcpServers":{"perm":{"command":"python3",
      "args":["scripts/mcp-permission-host.py"]}}}' --permission-prompt-tool mcp__perm__approve

Without a permission host a `-p` run does not offer `AskUserQuestion` at all; with one it
does, and a PreToolUse hook (`scripts/defer-hook.py`) can defer the question (fixtures
`ask-user-question-*` under tests/fixtures/claude-code/). The tool allows whatever it is
asked, unchanged, and appends each request to `$MCP_LOG` when that is set. Not run by
`cargo test`.
"""

import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


APPROVE = {
    "name": "approve",
    "description": "Answers a permission prompt",
    "inputSchema": {
        "type": "object",
        "properties": {"tool_name": {"type": "string"}, "input": {"type": "object"}},
        "required": ["tool_name", "input"],
    },
}

for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if method == "initialize":
        version = request["params"].get("protocolVersion", "2024-11-05")
        result = {"protocolVersion": version, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "perm", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [APPROVE]}
    elif method == "tools/call":
        args = request["params"].get("arguments", {})
        if os.environ.get("MCP_LOG"):
            with open(os.environ["MCP_LOG"], "a") as log:
                log.write(json.dumps(args) + "\n")
        verdict = {"behavior": "allow", "updatedInput": args.get("input", {})}
        result = {"content": [{"type": "text", "text": json.dumps(verdict)}]}
    elif rid is None:
        continue  # a notification
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": rid, "result": result})
