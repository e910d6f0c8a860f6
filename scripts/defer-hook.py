#!/usr/bin/env python3
"""A PreToolUse hook that defers a tool call until an answer exists, for capturing what the real
Claude Code CLI does with `permissionDecision: "defer"` (fixtures `tool-deferred-*`,
`ask-user-question-not-offered*` under tests/fixtures/claude-code/). Not run by `cargo test`.

    {"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",
      "command":"python3 scripts/defer-hook.py"}]}]}}      # given to the CLI with --settings

Each call is appended to `$HOOK_LOG`. While the file `$ANSWER_FILE` does not exist, the call
is deferred: the run ends with `stop_reason: "tool_deferred"`. Once it exists, `claude -p
--resume SESSION` (no prompt) runs the hook again, and the call is allowed; an
`AskUserQuestion` gets the file's text as the answer to each of its questions (`updatedInput`
with `answers`).
"""

import json
import os
import sys

call = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(call) + "\n")
answer_file = os.environ["ANSWER_FILE"]
if not os.path.exists(answer_file):
    decision = {"permissionDecision": "defer", "permissionDecisionReason": "asked the person"}
elif call["tool_name"] != "AskUserQuestion":
    decision = {"permissionDecision": "allow"}
else:
    answer = open(answer_file).read().strip()
    questions = call["tool_input"].get("questions", [])
    decision = {
        "permissionDecision": "allow",
        "updatedInput": {
            "questions": questions,
            "answers": {q["question"]: answer for q in questions},
        },
    }
print(json.dumps({"hookSpecificOutput": dict(hookEventName="PreToolUse", **decision)}))
