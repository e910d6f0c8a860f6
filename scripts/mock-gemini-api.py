#!/usr/bin/env python3
"""A scripted stand-in for the Gemini API (generativelanguage), on loopback, for running the
real Gemini CLI (`gemini --output-format stream-json`) with no account and no network: the
tests against the real CLI use it, and `tests/fixtures/gemini/` was captured against it, as
`mock-messages-api.py` serves Claude Code and `mock-responses-api.py` serves Codex.

Usage: mock-gemini-api.py PORT [COMMAND]

Every `:streamGenerateContent` / `:generateContent` request whose last user turn holds no
`functionResponse` yet answers with one tool call: `write_file` of `made_by_tool.txt` by
default, `run_shell_command` of COMMAND when one is given (`-` never calls a tool); once the
tool's answer has come back, it answers with text ending `STEP_DONE: made it`. A request that
offers no tools (the CLI's own side calls: routing, summaries, checks) gets a short JSON text.
Streamed answers come as server-sent events, as the real API's do.

The CLI finds it through its environment and settings:

    npm install @google/gemini-cli@0.61.0            # in a scratch directory
    python3 scripts/mock-gemini-api.py 8791 &
    mkdir -p $H/.gemini && echo '{"security":{"auth":{"selectedType":"gemini-api-key"},
      "folderTrust":{"enabled":false}}}' > $H/.gemini/settings.json
    HOME=$H GEMINI_API_KEY=dummy GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8791 \
      npx gemini --output-format stream-json --approval-mode auto_edit -m mock-model \
      <prompt.txt >out.jsonl 2>out.stderr

More situations, by environment variable (all optional):

* `MOCK_INPUT_TOKENS=N`, `MOCK_CACHED_TOKENS=N`, `MOCK_OUTPUT_TOKENS=N`: the usage each answer
  reports (default 100, 20, 7).
* `MOCK_FINAL=TEXT`: the final answer's text instead (e.g. a plan's JSON).
* `MOCK_FILE=NAME`: the file `write_file` makes (default `made_by_tool.txt`); its content
  names the request's turn.
* `MOCK_FAILED_TURNS=N`: the first N turns of every session end `STEP_FAILED: not yet` (a
  turn is counted by the user prompts in the request, tool answers aside), so a loop retries
  in the session.
* `MOCK_ERROR_STATUS=429` (with `MOCK_ERROR_MESSAGE`, `MOCK_ERROR_REASON`, default
  `RATE_LIMIT_EXCEEDED`, and `MOCK_ERROR_COUNT=N`: only the first N requests): answer with
  this error, as the real service words a quota error. `MOCK_QUOTA_ID=ID` (e.g.
  `GenerateRequestsPerDayPerProjectPerModel-FreeTier`) adds the `QuotaFailure` of that quota
  and `MOCK_RETRY_DELAY=19s` a `RetryInfo`, as a spent free tier's answer has them.
* `MOCK_LOG=FILE`: one JSON line per request (path, model, tools offered, turn, the prompts'
  first words, a digest of the session's first prompt, which tells one session from another
  and stays the same when it is resumed, the answer).
"""

import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8791
COMMAND = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else ""
FINAL = "I made the file.\nSTEP_DONE: made it"
ERRORS_GIVEN = [0]
LOCK = threading.Lock()


def env_int(name, default):
    return int(os.environ.get(name) or default)


def is_tool_answer(content):
    return any("functionResponse" in p for p in content.get("parts") or [])


def prompts(body):
    """The user turns of the conversation that are prompts, not tool answers."""
    return [c for c in body.get("contents") or []
            if c.get("role") == "user" and not is_tool_answer(c)]


def first_words(content):
    """The first words of a prompt's last text part (the first part of a session's first
    prompt is the CLI's own session context)."""
    texts = [p.get("text", "") for p in content.get("parts") or [] if p.get("text")]
    return " ".join((texts[-1] if texts else "").split()[:8])


def answer(body):
    """The parts of this request's answer."""
    contents = body.get("contents") or []
    tools = [d.get("name") for t in body.get("tools") or []
             for d in t.get("functionDeclarations") or []]
    if not tools:
        # A side call of the CLI (model routing, a check, a summary): it wants JSON or text.
        return [{"text": json.dumps({"reasoning": "mock", "model_choice": "flash",
                                     "complexity_reasoning": "mock", "complexity_score": 1,
                                     "next_speaker": "user"})}]
    returned = bool(contents) and is_tool_answer(contents[-1])
    if returned or COMMAND == "-":
        text = os.environ.get("MOCK_FINAL") or FINAL
        if len(prompts(body)) <= env_int("MOCK_FAILED_TURNS", 0):
            text = "Not yet.\nSTEP_FAILED: not yet"
        return [{"text": text}]
    if COMMAND:
        return [{"functionCall": {"name": "run_shell_command",
                                  "args": {"command": COMMAND, "description": "the step"}}}]
    name = os.environ.get("MOCK_FILE") or "made_by_tool.txt"
    path = os.path.join(os.getcwd(), name) if os.environ.get("MOCK_RELATIVE") is None else name
    return [{"functionCall": {"name": "write_file",
                              "args": {"file_path": path,
                                       "content": f"made in turn {len(prompts(body))}\n"}}}]


def usage():
    prompt = env_int("MOCK_INPUT_TOKENS", 100)
    out = env_int("MOCK_OUTPUT_TOKENS", 7)
    return {"promptTokenCount": prompt, "candidatesTokenCount": out,
            "cachedContentTokenCount": env_int("MOCK_CACHED_TOKENS", 20),
            "totalTokenCount": prompt + out}


def error_for():
    """The API error this request gets, as (status, JSON body), or None."""
    status = os.environ.get("MOCK_ERROR_STATUS")
    if not status:
        return None
    with LOCK:
        count = os.environ.get("MOCK_ERROR_COUNT")
        if count is not None and ERRORS_GIVEN[0] >= int(count):
            return None
        ERRORS_GIVEN[0] += 1
    code = int(status)
    reason = os.environ.get("MOCK_ERROR_REASON") or "RATE_LIMIT_EXCEEDED"
    message = os.environ.get("MOCK_ERROR_MESSAGE") or (
        "Resource has been exhausted (e.g. check quota)." if code == 429 else "mock error")
    state = {429: "RESOURCE_EXHAUSTED", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
             400: "INVALID_ARGUMENT"}.get(code, "INTERNAL")
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason, "domain": "googleapis.com"}]
    if os.environ.get("MOCK_QUOTA_ID"):
        details = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                    "generate_content_free_tier_requests",
                                    "quotaId": os.environ["MOCK_QUOTA_ID"],
                                    "quotaValue": "50"}]}]
    if os.environ.get("MOCK_RETRY_DELAY"):
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": os.environ["MOCK_RETRY_DELAY"]})
    return code, [{"error": {"code": code, "message": message, "status": state,
                             "details": details}}]


def log_request(path, body, answered):
    log = os.environ.get("MOCK_LOG")
    if not log:
        return
    tools = [d.get("name") for t in body.get("tools") or []
             for d in t.get("functionDeclarations") or []]
    model = path.split("/models/")[-1].split(":")[0] if "/models/" in path else None
    asked = prompts(body)
    # The session's first prompt, as the agent was asked it (the CLI's own context, which a
    # resumed session carries apart, left out).
    texts = [p.get("text", "") for p in (asked[0].get("parts") or [] if asked else [])
             if p.get("text")]
    first = texts[-1] if texts else ""
    line = {"path": path.split("?")[0], "model": model, "tools": len(tools),
            "turn": len(asked), "contents": len(body.get("contents") or []),
            "session": hashlib.sha1(first.encode()).hexdigest()[:12],
            "prompts": [first_words(c) for c in asked], "answered": answered}
    with LOCK, open(log, "a") as f:
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
        # The model list and anything else the CLI looks up: nothing to offer.
        self.reply(404, b'{"error":{"code":404,"message":"not here","status":"NOT_FOUND"}}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if ":countTokens" in self.path:
            self.reply(200, json.dumps({"totalTokens": 10}).encode())
            return
        if ":streamGenerateContent" not in self.path and ":generateContent" not in self.path:
            self.reply(404, b'{"error":{"code":404,"message":"not here","status":"NOT_FOUND"}}')
            return
        err = error_for()
        if err:
            log_request(self.path, body, f"error {err[0]}")
            self.reply(err[0], json.dumps(err[1]).encode())
            return
        parts = answer(body)
        kind = "functionCall" if "functionCall" in parts[0] else "text"
        log_request(self.path, body, kind)
        response = {"candidates": [{"content": {"role": "model", "parts": parts},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": usage(), "modelVersion": "mock-model"}
        if ":streamGenerateContent" in self.path:
            data = f"data: {json.dumps(response)}\r\n\r\n".encode()
            self.reply(200, data, content_type="text/event-stream")
        else:
            self.reply(200, json.dumps(response).encode())


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
