//! Carrying out one scenario action as Gemini CLI (a call with Gemini's flags): the same
//! scenario as Claude Code's, in Gemini's events (see [`crate::gemini`]).

use std::time::Instant;

use serde_json::Value;

use super::{Call, Out, Run, kill_self, replay, sleep_ms};
use crate::gemini;
use crate::scenario::Action;

/// Performs `action` for `call`, whose prompt is `prompt`, as 0.61.0 would; the exit code.
pub(super) fn perform(call: &Call<'_>, action: &Action) -> i32 {
    if let Some(stem) = &action.fixture {
        sleep_ms(action.sleep_ms);
        return replay(&call.base_dir.join(stem), action.exit);
    }
    let args = call.args;
    let session_id = args
        .resume
        .clone()
        .or_else(|| args.session_id.clone())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    if let Some(why) = gemini::session_refused(args, call.state_dir.as_deref(), &session_id) {
        eprintln!("{why}");
        return 42;
    }
    let run = Run {
        call,
        action,
        session_id,
        model: action
            .model
            .as_deref()
            .or(args.model.as_deref())
            .unwrap_or("gemini-sim")
            .to_owned(),
        out: Out {
            stream: args.output_format.as_deref() == Some("stream-json"),
        },
        started: Instant::now(),
    };
    if let Some(text) = &action.stderr {
        eprintln!("{}", run.fill(text));
    }
    run.out.event(&gemini::init(&run.session_id, &run.model));
    run.out.event(&gemini::message(
        "user",
        call.prompt.as_deref().unwrap_or_default(),
    ));
    // What the CLI retries it says on stderr only: stdout stays quiet meanwhile.
    for (n, retry) in (1..).zip(&action.api_retries) {
        if n > 1
            && let Some(ms) = action.api_retry_every_ms
        {
            sleep_ms(ms);
        }
        let status = retry
            .get("error_status")
            .and_then(Value::as_u64)
            .unwrap_or(429);
        eprintln!("{}", gemini::retry_line(n, status));
    }
    if let Err(code) = run.work() {
        return code;
    }
    let text = run.answer_text();
    if action.is_error {
        let kind = action.subtype.as_deref().unwrap_or("unknown");
        run.out
            .event(&gemini::result_error(&run.model, kind, &text));
        // An API error ends the CLI with its status cut to a byte (429 exits 173).
        let status_exit = action.api_error_status.map(|s| i32::from(s) % 256);
        return action.exit.or(status_exit).unwrap_or(1);
    }
    // The answer comes in deltas: its first line, then the rest.
    let (head, tail) = text
        .split_once('\n')
        .map_or((text.as_str(), ""), |(h, t)| (h, t));
    run.out.event(&gemini::message("assistant", head));
    if !tail.is_empty() {
        run.out
            .event(&gemini::message("assistant", &format!("\n{tail}")));
    }
    if let Some(sig) = action.killed_by_signal {
        return kill_self(sig);
    }
    if !action.no_result {
        let ms = u64::try_from(run.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let calls = action.touch.len() + action.write.len();
        run.out
            .event(&gemini::result_success(&run.model, ms, calls));
    }
    action.exit.unwrap_or(0)
}

/// The action's files, each by a `write_file` call (a touch writes an empty file), refused
/// when the approval mode offers no tool that writes.
pub(super) fn files(run: &Run<'_>) -> Result<(), i32> {
    let action = run.action;
    let writes = action
        .touch
        .iter()
        .map(|p| (run.fill(p), String::new()))
        .chain(
            action
                .write
                .iter()
                .map(|w| (run.fill(&w.path), run.fill(&w.text))),
        );
    let may = gemini::may_write(run.call.args);
    let mut allowed = Action {
        touch: Vec::new(),
        write: Vec::new(),
        bash: action.bash.clone(),
        ..Action::default()
    };
    for (i, (path, content)) in writes.enumerate() {
        let id = format!("write_file__write_file_sim_{i}");
        let parameters = serde_json::json!({"file_path": path, "content": content});
        run.out
            .event(&gemini::tool_use(&id, "write_file", &parameters));
        run.out.event(&gemini::tool_result(&id, "write_file", may));
        if may {
            match action.touch.get(i) {
                Some(p) => allowed.touch.push(p.clone()),
                None => allowed
                    .write
                    .push(action.write[i - action.touch.len()].clone()),
            }
        }
    }
    super::do_files(&allowed, &|t| run.fill(t))
}

/// A heartbeat while working: a file read, as the agent looks around.
pub(super) fn heartbeat(run: &Run<'_>, k: u64) {
    let id = format!("read_file__read_file_sim_{k}");
    let parameters = serde_json::json!({"file_path": format!("step-{}-{k}.md", run.call.step)});
    run.out
        .event(&gemini::tool_use(&id, "read_file", &parameters));
    run.out.event(&gemini::tool_result(&id, "read_file", true));
}

/// The refusal of a call while the daily quota is spent.
pub(super) fn quota_refusal() -> Action {
    Action {
        api_error_status: Some(429),
        exit: Some(gemini::QUOTA_EXIT),
        stderr: Some(
            "TerminalQuotaError: You have exhausted your daily quota on this model.".into(),
        ),
        ..Action::error(gemini::DAILY_QUOTA)
    }
}
