//! Claude Code's command line: `claude -p --output-format stream-json --verbose …` with the
//! loop's settings as its flags, the loop's hooks (`--settings`) and its permission host
//! (`--mcp-config`), and the environment it needs (the manual's "How the agent is called", `docs/08-backends.md`).

use crate::agent::{AgentConfig, Invocation, Session};

/// The tools a Claude Code call with `args` is offered, when `--tools` says (every value of
/// every `--tools`, `--tools=A,B` too, split at commas and spaces); `None` without `--tools`:
/// then it is offered every tool.
#[must_use]
pub(crate) fn offered_tools(args: &[String]) -> Option<Vec<String>> {
    let mut tools: Option<Vec<String>> = None;
    let mut add = |value: &str| {
        let named = tools.get_or_insert_with(Vec::new);
        for t in value
            .split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            if !named.iter().any(|n| n == t) {
                named.push(t.to_owned());
            }
        }
    };
    let mut i = 0;
    while i < args.len() {
        if let Some(inline) = args[i].strip_prefix("--tools=") {
            add(inline);
        } else if args[i] == "--tools" {
            add("");
            while i + 1 < args.len() && !args[i + 1].starts_with('-') {
                i += 1;
                add(&args[i]);
            }
        }
        i += 1;
    }
    tools
}

/// `inv` with `--settings FILE`: settings for this run only (the loop's hooks),
/// which Claude Code merges with the user's and the project's. Placed right after
/// `--verbose`, before any flag that takes a variable number of values.
#[must_use]
pub(crate) fn with_settings(mut inv: Invocation, file: &str) -> Invocation {
    let at = inv
        .args
        .iter()
        .position(|a| a == "--verbose")
        .map_or(inv.args.len(), |i| i + 1);
    inv.args
        .splice(at..at, ["--settings".to_owned(), file.to_owned()]);
    inv
}

/// `inv` with the loop's permission host: `--mcp-config` naming `exe hook
/// permission-host` and `--permission-prompt-tool` naming its tool. Without a permission
/// host, `-p` offers no `AskUserQuestion` (captures `ask-user-question-not-offered*`); with
/// one it does, and the loop's hook defers it. The host denies every prompt, as `-p`
/// without it does. Placed right after `--verbose`: `--mcp-config` takes several values,
/// and a flag always follows it.
#[must_use]
pub(crate) fn with_permission_host(mut inv: Invocation, exe: &std::path::Path) -> Invocation {
    let config = serde_json::json!({"mcpServers": {PERMISSION_HOST: {
        "type": "stdio",
        "command": exe.display().to_string(),
        "args": ["hook", "permission-host"],
    }}});
    let at = inv
        .args
        .iter()
        .position(|a| a == "--verbose")
        .map_or(inv.args.len(), |i| i + 1);
    inv.args.splice(
        at..at,
        [
            "--mcp-config".to_owned(),
            config.to_string(),
            "--permission-prompt-tool".to_owned(),
            format!("mcp__{PERMISSION_HOST}__{PERMIT_TOOL}"),
        ],
    );
    inv
}

/// The name of the loop's permission host among the run's MCP servers, and its tool's.
pub(crate) const PERMISSION_HOST: &str = "loop";
pub(crate) const PERMIT_TOOL: &str = "permit";

/// Variables removed from the agent's environment: Claude Code refuses to start inside
/// another Claude Code session, and a runner started from one would otherwise pass them on.
pub(crate) const ENV_REMOVE: [&str; 2] = ["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"];

/// Set so that a startup failure (unknown session, root with bypass) still ends in a
/// `result` event on stdout instead of a bare line on stderr.
pub(crate) const ENV_STARTUP_FAILURE_RESULTS: (&str, &str) =
    ("CLAUDE_CODE_STARTUP_FAILURE_RESULTS", "1");

/// The call for `prompt` in `session`:
/// `PROGRAM -p --output-format stream-json --verbose [--allowedTools ...] [--tools A,B]
/// (--session-id ID | --resume ID) [--permission-mode X] [--max-turns N]
/// [--max-budget-usd X] [--model M] [EXTRA...]`, with `prompt` on standard input.
///
/// `--allowedTools` and `--tools` take a variable number of values, so they are placed where
/// the session flag always follows them: a value can never swallow a later argument.
#[must_use]
pub fn invocation(cfg: &AgentConfig, prompt: &str, session: &Session) -> Invocation {
    let mut args: Vec<String> = vec![
        "-p".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ];
    if !cfg.allowed_tools.is_empty() {
        args.push("--allowedTools".into());
        args.extend(cfg.allowed_tools.iter().cloned());
    }
    if let Some(tools) = &cfg.tools {
        args.extend(["--tools".into(), tools.join(",")]);
    }
    match session {
        Session::New(id) => args.extend(["--session-id".into(), id.clone()]),
        Session::Resume(id) => args.extend(["--resume".into(), id.clone()]),
    }
    if let Some(mode) = cfg.permission_mode {
        args.extend(["--permission-mode".into(), mode.as_str().into()]);
    }
    if let Some(n) = cfg.max_turns {
        args.extend(["--max-turns".into(), n.to_string()]);
    }
    if let Some(usd) = cfg.max_budget_usd {
        args.extend(["--max-budget-usd".into(), usd.to_string()]);
    }
    if let Some(model) = &cfg.model {
        args.extend(["--model".into(), model.clone()]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    Invocation {
        program: cfg.program.clone(),
        args,
        env_set: vec![(
            ENV_STARTUP_FAILURE_RESULTS.0.to_owned(),
            ENV_STARTUP_FAILURE_RESULTS.1.to_owned(),
        )],
        env_remove: ENV_REMOVE.iter().map(|s| (*s).to_owned()).collect(),
        input: prompt.to_owned(),
        files: Vec::new(),
    }
}

/// The per-run settings every agent call of a loop gets: the loop's hooks, run by `exe`.
///
/// `SessionStart` fires only after a compaction, the one time a session loses what its first
/// prompt said. A fresh session's first prompt (step, handoff, answer, plan) holds the goal,
/// the plan and its step, and a resumed one still has it: the hook would cost a shell and a
/// start of `loop` per run to say them again. (Fired on resume alone, without having fired at
/// startup, it also kept the real CLI, 2.1.197 and 2.1.330, from carrying on a question call
/// the loop had deferred: the resumed session asked anew.)
#[must_use]
pub(crate) fn hook_settings(exe: &std::path::Path) -> serde_json::Value {
    let command = |what: &str| {
        format!(
            "{} hook {what}",
            crate::text::shell_word(&exe.display().to_string())
        )
    };
    serde_json::json!({"hooks": {
        "SessionStart": [{"matcher": "compact",
                          "hooks": [{"type": "command", "command": command("session-start")}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": command("pre-compact")}]}],
        "PreToolUse": [{"matcher": "AskUserQuestion",
                        "hooks": [{"type": "command", "command": command("ask")}]}],
    }})
}
