//! The simulated agent speaking as the Codex CLI: called as `claude-sim exec …`, it takes
//! `codex exec`'s flags (refusing what 0.169.0 refuses, in its words: `--full-auto` is gone,
//! `exec resume` takes no `-s`), and answers the same scenario in Codex's `--json` events
//! (`thread.started`, `turn.started`, `item.*`, `turn.completed` with the thread's cumulative
//! usage, or `error` and `turn.failed`). As the real CLI, `exec resume` does not keep the
//! first run's sandbox: without `-s` before `resume`, the resumed run reads only.

use serde_json::{Value, json};

use crate::args::{Refusal, SimArgs};

/// Parses `codex exec`'s arguments (those after `exec`) into the simulation's call.
#[must_use]
pub(crate) fn parse(argv: &[String]) -> (SimArgs, Option<Refusal>) {
    let mut a = SimArgs {
        codex: true,
        print: true,
        ..SimArgs::default()
    };
    let mut positionals: Vec<String> = Vec::new();
    let mut resumed = false;
    let mut i = 0;
    while i < argv.len() {
        let arg = argv[i].as_str();
        i += 1;
        if arg == "resume" && !resumed && positionals.is_empty() {
            resumed = true;
            continue;
        }
        if !arg.starts_with('-') || arg == "-" {
            positionals.push(arg.to_owned());
            continue;
        }
        let value = |i: &mut usize| -> Result<String, Refusal> {
            let v = argv.get(*i).cloned().ok_or_else(|| Refusal {
                message: format!(
                    "error: a value is required for '{arg} <VALUE>' but none was supplied"
                ),
                code: 2,
            })?;
            *i += 1;
            Ok(v)
        };
        let slot = match arg {
            "--json" => {
                a.output_format = Some("codex-json".into());
                continue;
            }
            "--skip-git-repo-check" | "--ephemeral" => continue,
            "--dangerously-bypass-approvals-and-sandbox" => {
                a.skip_permissions = true;
                continue;
            }
            "-s" | "--sandbox" if !resumed => &mut a.permission_mode,
            "-m" | "--model" => &mut a.model,
            "-c" | "--config" => &mut a.settings,
            _ => return (a, Some(unexpected(arg))),
        };
        match value(&mut i) {
            Ok(v) => *slot = Some(v),
            Err(r) => return (a, Some(r)),
        }
    }
    if let Some(mode) = a.permission_mode.as_deref()
        && !SANDBOXES.contains(&mode)
    {
        let msg = format!(
            "error: invalid value '{mode}' for '--sandbox <SANDBOX_MODE>'\n  [possible values: \
             read-only, workspace-write, danger-full-access]"
        );
        return (
            a,
            Some(Refusal {
                message: msg,
                code: 2,
            }),
        );
    }
    if resumed {
        if positionals.is_empty() {
            return (a, Some(unexpected("resume")));
        }
        a.resume = Some(positionals.remove(0));
    }
    if positionals.len() > 1 {
        return (a, Some(unexpected(&positionals[1])));
    }
    a.prompt = positionals.pop().filter(|p| p != "-");
    (a, None)
}

const SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

fn unexpected(arg: &str) -> Refusal {
    Refusal {
        message: format!(
            "error: unexpected argument '{arg}' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\n\
             For more information, try '--help'."
        ),
        code: 2,
    }
}

/// Whether the call may change files: not in the read-only sandbox (the default, and what a
/// resume falls back to).
#[must_use]
pub(crate) fn may_write(a: &SimArgs) -> bool {
    a.skip_permissions
        || a.permission_mode
            .as_deref()
            .is_some_and(|m| m != "read-only")
}

/// The thread's first event.
#[must_use]
pub(crate) fn thread_started(id: &str) -> Value {
    json!({"type": "thread.started", "thread_id": id})
}

#[must_use]
pub(crate) fn turn_started() -> Value {
    json!({"type": "turn.started"})
}

/// An item of the turn (`agent_message`, `reasoning`, `command_execution`).
#[must_use]
pub(crate) fn item(n: u32, completed: bool, body: Value) -> Value {
    let mut item = json!({"id": format!("item_{n}")});
    if let (Some(item), Value::Object(body)) = (item.as_object_mut(), body) {
        item.extend(body);
    }
    json!({"type": if completed { "item.completed" } else { "item.started" }, "item": item})
}

/// The turn's end, with the thread's usage so far.
#[must_use]
pub(crate) fn turn_completed(input: u64, output: u64) -> Value {
    json!({"type": "turn.completed", "usage": {"input_tokens": input,
        "cached_input_tokens": input / 5, "cache_write_input_tokens": 0,
        "output_tokens": output, "reasoning_output_tokens": 0}})
}

/// A failed turn: the `error` event, then `turn.failed`, with the same words.
#[must_use]
pub(crate) fn failed(message: &str) -> [Value; 2] {
    [
        json!({"type": "error", "message": message}),
        json!({"type": "turn.failed", "error": {"message": message}}),
    ]
}

/// The refusal of a call while the usage limit is spent until `until` (Unix seconds), in
/// 0.169.0's words: the reset as a wall-clock minute of the machine's zone, cut down, without
/// a day (the real CLI names the day only for a reset a day or more away).
#[must_use]
pub(crate) fn usage_limit(until: i64) -> String {
    let at = chrono::DateTime::from_timestamp(until, 0)
        .unwrap_or_default()
        .with_timezone(&chrono::Local);
    format!(
        "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit \
         https://chatgpt.com/settings/usage to purchase more credits or try again at {}.",
        at.format("%-I:%M %p")
    )
}

/// The refusal of `exec resume` of a thread with no rollout (0.169.0's words).
#[must_use]
pub(crate) fn no_rollout(id: &str) -> String {
    format!(
        "Error: thread/resume: thread/resume failed: no rollout found for thread id {id} (code \
         -32600)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn codex_flags_before_resume_and_the_thread_after_it() {
        let (a, err) = parse(&argv(&[
            "--json",
            "-s",
            "workspace-write",
            "resume",
            "t-1",
            "-",
        ]));
        assert_eq!(err, None);
        assert_eq!(a.resume.as_deref(), Some("t-1"));
        assert!(may_write(&a));
        assert_eq!(a.prompt, None);
        // `exec resume` takes no sandbox, and `--full-auto` is gone.
        let (_, err) = parse(&argv(&["--json", "resume", "t-1", "-s", "read-only", "-"]));
        assert!(err.unwrap().message.contains("unexpected argument '-s'"));
        let (_, err) = parse(&argv(&["--full-auto", "-"]));
        assert_eq!(err.unwrap().code, 2);
        // Resumed without a sandbox: reading only.
        let (a, _) = parse(&argv(&["--json", "resume", "t-1", "-"]));
        assert!(!may_write(&a));
    }

    /// Both CLIs name the reset by its minute, cut down: 05:06:50 is 5:06.
    #[test]
    fn a_spent_limit_names_its_reset_by_the_minute_cut_down() {
        let words = usage_limit(1_795_324_010);
        let at = words.split("try again at ").nth(1).unwrap();
        let (clock, ampm) = at.trim_end_matches('.').split_once(' ').unwrap();
        // In the machine's zone: its minute is the moment's, whatever the zone's offset.
        let local = chrono::DateTime::from_timestamp(1_795_324_010, 0)
            .unwrap()
            .with_timezone(&chrono::Local);
        assert!(clock.ends_with(&local.format(":%M").to_string()), "{words}");
        assert!(["AM", "PM"].contains(&ampm), "{words}");
        assert_eq!(
            crate::emit::usage_limit(1_795_324_010),
            "You've hit your session limit · resets 5:06am (UTC)"
        );
    }
}
