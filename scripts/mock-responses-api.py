#!/usr/bin/env python3
"""A scripted stand-in for the OpenAI Responses API, on loopback, for running the real Codex
CLI (`codex exec --json`) with no account and no network: the Codex tests and `loop doctor`'s
contract check use it, as `mock-messages-api.py` serves Claude Code.

Usage: mock-responses-api.py PORT [COMMAND]

Every POST /v1/responses whose input holds no `function_call_output` yet answers with one
`exec_command` call running COMMAND (default `touch made_by_tool.txt`; `-` never calls a tool);
once the command's output has come back, it answers with text ending `STEP_DONE: made it`.
The answers stream as server-sent events, as the real API's do.

Codex reads its provider from `$CODEX_HOME/config.toml`:

    model = "mock-model"
    model_provider = "mock"
    [model_providers.mock]
    name = "mock"
    base_url = "http://127.0.0.1:PORT/v1"
    wire_api = "responses"
    supports_websockets = false

    npm install @openai/codex                        # in a scratch directory
    python3 scripts/mock-responses-api.py 8790 &
    CODEX_HOME=$H OPENAI_API_KEY=dummy npx codex exec --json -s workspace-write \
      'make the file made_by_tool.txt' </dev/null >out.jsonl 2>out.stderr

More situations, by environment variable (all optional):

* `MOCK_INPUT_TOKENS=N`, `MOCK_CACHED_TOKENS=N`, `MOCK_OUTPUT_TOKENS=N`: the usage each answer
  reports (default 100, 20, 7).
* `MOCK_FINAL=TEXT`: the final answer's text instead (e.g. a plan's JSON).
* `MOCK_FAILED_TURNS=N`: the first N turns of every thread end `STEP_FAILED: not yet` (a turn
  is counted by the assistant messages already in the input), so a loop retries in the thread.
* `MOCK_ERROR_STATUS=429` (with `MOCK_ERROR_TYPE`, default `usage_limit_reached`,
  `MOCK_ERROR_MESSAGE` and `MOCK_RESETS_IN=SECONDS`, default 7200): answer every request with
  this error. A `usage_limit_reached` body carries `resets_at` (seconds since the epoch), as the
  real service's does.
* `MOCK_LOG=FILE`: one JSON line per request (tools offered, model, turn, answer, the thread).
"""

import json
import os
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8790
COMMAND = sys.argv[2] if len(sys.argv) > 2 else "touch made_by_tool.txt"
FINAL = "I tried to make the file.\nSTEP_DONE: made it"


def env_int(name, default):
    return int(os.environ.get(name) or default)


def turn_of(body):
    """Which turn of its thread this request belongs to (1 for a fresh thread)."""
    return 1 + sum(
        1 for i in body.get("input") or []
        if i.get("type") == "message" and i.get("role") == "assistant"
    )


def answer(body):
    """The output items of this request's answer."""
    items = body.get("input") or []
    users = [n for n, i in enumerate(items) if i.get("type") == "message" and i.get("role") == "user"]
    since = items[users[-1] + 1:] if users else items
    returned = any(i.get("type") == "function_call_output" for i in since)
    if returned or COMMAND == "-" or not body.get("tools"):
        text = os.environ.get("MOCK_FINAL") or FINAL
        if turn_of(body) <= env_int("MOCK_FAILED_TURNS", 0):
            text = "Not yet.\nSTEP_FAILED: not yet"
        return [{"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:12],
                 "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    return [{"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:12], "name": "exec_command",
             "call_id": "call_" + uuid.uuid4().hex[:12], "status": "completed",
             "arguments": json.dumps({"cmd": COMMAND})}]


def usage():
    return {"input_tokens": env_int("MOCK_INPUT_TOKENS", 100),
            "input_tokens_details": {"cached_tokens": env_int("MOCK_CACHED_TOKENS", 20)},
            "output_tokens": env_int("MOCK_OUTPUT_TOKENS", 7),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": env_int("MOCK_INPUT_TOKENS", 100) + env_int("MOCK_OUTPUT_TOKENS", 7)}


def error_for():
    """The API error every request gets, as (status, JSON body), or None."""
    status = os.environ.get("MOCK_ERROR_STATUS")
    if not status:
        return None
    kind = os.environ.get("MOCK_ERROR_TYPE") or "usage_limit_reached"
    message = os.environ.get("MOCK_ERROR_MESSAGE") or "The usage limit has been reached"
    error = {"type": kind, "message": message}
    if kind == "usage_limit_reached":
        error["plan_type"] = "plus"
        error["resets_at"] = int(time.time()) + env_int("MOCK_RESETS_IN", 7200)
    return int(status), {"error": error}


def log_request(body, headers, answered):
    path = os.environ.get("MOCK_LOG")
    if not path:
        return
    try:
        thread = json.loads(headers.get("x-codex-turn-metadata") or "{}").get("thread_id")
    except ValueError:
        thread = None
    line = {"tools": [t.get("name") for t in body.get("tools") or []],
            "model": body.get("model"), "turn": turn_of(body), "thread": thread,
            "answered": answered}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("mock: " + (fmt % args) + "\n")

    def reply(self, status, data, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        # The model list and anything else Codex looks up: nothing to offer.
        self.reply(404, b'{"error":{"message":"not here"}}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not self.path.startswith("/v1/responses"):
            self.reply(404, b'{"error":{"message":"not here"}}')
            return
        err = error_for()
        if err:
            log_request(body, self.headers, f"error {err[0]}")
            self.reply(err[0], json.dumps(err[1]).encode())
            return
        items = answer(body)
        log_request(body, self.headers, items[0]["type"])
        rid = "resp_" + uuid.uuid4().hex[:12]
        events = [("response.created", {"response": {"id": rid}})]
        for n, item in enumerate(items):
            events.append(("response.output_item.added", {"output_index": n, "item": item}))
            events.append(("response.output_item.done", {"output_index": n, "item": item}))
        events.append(("response.completed", {"response": {"id": rid, "usage": usage()}}))
        data = "".join(
            f"event: {name}\ndata: {json.dumps(dict(ev, type=name))}\n\n" for name, ev in events
        ).encode()
        self.reply(200, data, content_type="text/event-stream")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
