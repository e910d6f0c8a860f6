#!/usr/bin/env python3
"""A scripted stand-in for the Anthropic Messages API, on loopback, for capturing what the real
Claude Code CLI prints in a given situation (fixtures under tests/fixtures/claude-code/).

Usage: mock-messages-api.py PORT [TOOL [COMMAND]]

Every POST /v1/messages whose last user turn holds no tool_result answers with one tool_use of
TOOL (default Bash) running COMMAND (default `touch made_by_tool.txt`); once a tool_result has
come back, it answers with text ending `STEP_DONE: made it`. Streaming (SSE) and plain JSON
requests are both answered. Not run by `cargo test`: the CLI comes from npm.

    npm install @anthropic-ai/claude-code          # in a scratch directory
    python3 scripts/mock-messages-api.py 8765 Bash 'touch made_by_tool.txt' &
    mkdir -p "$H/.claude" && echo '{"permissions":{"deny":["Bash"]}}' > "$H/.claude/settings.json"
    HOME=$H ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=dummy \
      CLAUDE_CODE_STARTUP_FAILURE_RESULTS=1 npx claude -p 'make the file made_by_tool.txt' \
      --output-format stream-json --verbose </dev/null >out.stdout.jsonl 2>out.stderr

With TOOL other than Bash the call's input is a Write-style `{file_path, content}`. Before a
capture becomes a fixture, rewrite its paths as tests/fixtures/claude-code/README.md says.
"""

import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
TOOL = sys.argv[2] if len(sys.argv) > 2 else "Bash"
COMMAND = sys.argv[3] if len(sys.argv) > 3 else "touch made_by_tool.txt"
FINAL = "I tried to make the file.\nSTEP_DONE: made it"


def answer(body):
    """The content blocks and stop reason for this request."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    returned = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
    tools = [t.get("name") for t in body.get("tools") or []]
    sys.stderr.write(f"mock: {len(body.get('messages') or [])} messages, tools {tools}\n")
    if returned or not body.get("tools"):
        return [{"type": "text", "text": FINAL}], "end_turn"
    tool_input = {"command": COMMAND, "description": "make a file"}
    if TOOL != "Bash":
        tool_input = {"file_path": "made_by_tool.txt", "content": "x\n"}
    block = {
        "type": "tool_use",
        "id": "toolu_" + uuid.uuid4().hex[:20],
        "name": TOOL,
        "input": tool_input,
    }
    return [block], "tool_use"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("mock: " + (fmt % args) + "\n")

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.do_HEAD()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
            data = json.dumps({"input_tokens": 10}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        blocks, stop = answer(body)
        model = body.get("model", "claude-mock")
        usage = {"input_tokens": 10, "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message = {"id": "msg_mock_" + uuid.uuid4().hex[:8], "type": "message",
                   "role": "assistant", "model": model, "content": blocks,
                   "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            data = json.dumps(message).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("request-id", "req_mock123")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        events = [("message_start", {"type": "message_start",
                                     "message": dict(message, content=[], stop_reason=None)})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                               "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                               "delta": {"type": "text_delta", "text": b["text"]}}))
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                               "content_block": dict(b, input={})}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                               "delta": {"type": "input_json_delta",
                                         "partial_json": json.dumps(b["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": 5}}))
        events.append(("message_stop", {"type": "message_stop"}))
        data = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", "req_mock123")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
