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

With TOOL other than Bash the call's input is a Write-style `{file_path, content}`; TOOL `-`
never calls a tool (every request gets the text). Before a capture becomes a fixture, rewrite
its paths as tests/fixtures/claude-code/README.md says.

More situations, by environment variable (all optional):

* `MOCK_INPUT_TOKENS=N`, `MOCK_CACHE_READ_TOKENS=N`, `MOCK_OUTPUT_TOKENS=N`: the usage each
  answer reports (default 10, 0, 5), so the CLI computes a cost and a context size.
* `MOCK_ERROR_STATUS=401` (with `MOCK_ERROR_TYPE`, default `authentication_error`, and
  `MOCK_ERROR_MESSAGE`): answer requests with this API error instead.
  `MOCK_ERROR_MIN_MESSAGES=N` limits it to requests of at least N messages (a resumed
  conversation has more than a fresh one): e.g. status 400, type `invalid_request_error`,
  message `prompt is too long: 250000 tokens > 200000 maximum`.
* `MOCK_TOOL_INPUT=JSON`: the tool call's input instead (e.g. an `AskUserQuestion`'s
  `{"questions": [...]}`); `MOCK_TOOL_CALLS=N`: N such calls in one answer (default 1).
* `MOCK_LOG=FILE`: one JSON line per request (messages, tools offered, model, answer), to see
  what the CLI offered the model.
"""

import os

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
    if returned or not body.get("tools") or TOOL == "-":
        return [{"type": "text", "text": FINAL}], "end_turn"
    tool_input = {"command": COMMAND, "description": "make a file"}
    if TOOL != "Bash":
        tool_input = {"file_path": "made_by_tool.txt", "content": "x\n"}
    if os.environ.get("MOCK_TOOL_INPUT"):
        tool_input = json.loads(os.environ["MOCK_TOOL_INPUT"])
    blocks = [
        {
            "type": "tool_use",
            "id": "toolu_" + uuid.uuid4().hex[:20],
            "name": TOOL,
            "input": tool_input,
        }
        for _ in range(env_int("MOCK_TOOL_CALLS", 1))
    ]
    return blocks, "tool_use"


def env_int(name, default):
    return int(os.environ.get(name) or default)


def usage():
    """The usage each answer reports (see the module's doc)."""
    return {"input_tokens": env_int("MOCK_INPUT_TOKENS", 10),
            "output_tokens": env_int("MOCK_OUTPUT_TOKENS", 5),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": env_int("MOCK_CACHE_READ_TOKENS", 0)}


def error_for(body):
    """The API error this request gets, as (status, JSON body), or None."""
    status = os.environ.get("MOCK_ERROR_STATUS")
    if not status:
        return None
    if len(body.get("messages") or []) < env_int("MOCK_ERROR_MIN_MESSAGES", 0):
        return None
    kind = os.environ.get("MOCK_ERROR_TYPE") or "authentication_error"
    message = os.environ.get("MOCK_ERROR_MESSAGE") or "invalid x-api-key"
    return int(status), {"type": "error", "error": {"type": kind, "message": message},
                         "request_id": "req_mock123"}


def log_request(body, answered):
    path = os.environ.get("MOCK_LOG")
    if not path:
        return
    line = {"messages": len(body.get("messages") or []),
            "tools": [t.get("name") for t in body.get("tools") or []],
            "model": body.get("model"), "answered": answered}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("mock: " + (fmt % args) + "\n")

    def reply(self, status, data, content_type="application/json", no_cache=False,
              request_id=True):
        """Sends `data` whole, with the headers the real API sends for it."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if no_cache:
            self.send_header("Cache-Control", "no-cache")
        if request_id:
            self.send_header("request-id", "req_mock123")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
            self.reply(200, json.dumps({"input_tokens": 10}).encode(), request_id=False)
            return
        err = error_for(body)
        if err:
            log_request(body, f"error {err[0]}")
            self.reply(err[0], json.dumps(err[1]).encode())
            return
        blocks, stop = answer(body)
        log_request(body, stop)
        model = body.get("model", "claude-mock")
        message = {"id": "msg_mock_" + uuid.uuid4().hex[:8], "type": "message",
                   "role": "assistant", "model": model, "content": blocks,
                   "stop_reason": stop, "stop_sequence": None, "usage": usage()}
        if not body.get("stream"):
            self.reply(200, json.dumps(message).encode())
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
                       "usage": {"output_tokens": usage()["output_tokens"]}}))
        events.append(("message_stop", {"type": "message_stop"}))
        data = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events).encode()
        self.reply(200, data, content_type="text/event-stream", no_cache=True)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
