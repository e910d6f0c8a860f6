//! Carrying out one scenario action: the events, the waiting, the files, the leftovers.

mod gemini;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::SETUP_ERROR;
use crate::args::SimArgs;
use crate::codex;
use crate::emit;
use crate::hooks;
use crate::scenario::Action;

const DEFAULT_PLAN: &str =
    r#"{"steps":["Investigate the problem","Implement the fix","Test the fix"]}"#;
const DEFAULT_STEP: &str = "Simulated work on step {step}.\nSTEP_DONE: simulated step {step} done";
/// What a reviewer answers unless its scenario says otherwise: an approval, so that a loop run
/// with `--review` and no scenario ends DONE as one without does.
const DEFAULT_REVIEW: &str =
    "Simulated review of step {step}.\nREVIEW_APPROVE: simulated review of step {step} approves";
const DEFAULT_ERROR: &str = "API Error: simulated failure";

/// The call being simulated.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub args: &'a SimArgs,
    pub step: u32,
    pub attempt: String,
    /// A reviewer's call (`LOOP_REVIEW`): its default answer is a review's verdict.
    pub review: bool,
    /// Where relative fixture stems are found.
    pub base_dir: PathBuf,
    /// Where the simulation keeps what outlives a call (each session's cost so far).
    pub state_dir: Option<PathBuf>,
    /// The prompt, as the CLI took it.
    pub prompt: Option<String>,
}

/// Writes events to stdout in the requested format, flushing every line so that a reader
/// (and an idle timeout) sees each one as it happens.
struct Out {
    stream: bool,
}

impl Out {
    fn event(&self, v: &Value) {
        if self.stream {
            raw_stdout(format!("{v}\n").as_bytes());
        }
    }
}

fn raw_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    // A reader that went away is not the simulation's problem; the real CLI ignores it too.
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

/// Takes SIGTERM away from every thread (and every later child: a grandchild left behind
/// ignores it too) and gives it to one that waits for it, then ends the process `ms` later.
fn end_slowly_on_sigterm(ms: u64) {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut term = SigSet::empty();
    term.add(Signal::SIGTERM);
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&term), None).is_err() {
        return;
    }
    std::thread::spawn(move || {
        if term.wait().is_ok() {
            sleep_ms(ms);
            std::process::exit(128 + Signal::SIGTERM as i32);
        }
    });
}

/// One call being performed: what it was asked, and what it does.
struct Run<'a> {
    call: &'a Call<'a>,
    action: &'a Action,
    session_id: String,
    model: String,
    out: Out,
    started: Instant,
}

impl Run<'_> {
    /// `text` with `{step}`, `{attempt}` and `{session_id}` filled in.
    fn fill(&self, text: &str) -> String {
        text.replace("{step}", &self.call.step.to_string())
            .replace("{attempt}", &self.call.attempt)
            .replace("{session_id}", &self.session_id)
    }

    fn heartbeat(&self, k: u64) {
        if self.call.args.gemini {
            gemini::heartbeat(self, k);
            return;
        }
        let text = format!("Working on step {} ({k})…", self.call.step);
        if self.call.args.codex {
            let reasoning = serde_json::json!({"type": "reasoning", "text": text});
            self.out
                .event(&codex::item(u32::try_from(k).unwrap_or(0), true, reasoning));
            return;
        }
        self.out
            .event(&emit::assistant(&self.session_id, &self.model, &text, None));
    }

    /// The session starts (or resumes): its `SessionStart` hooks run, then `system/init`, then
    /// the API retries the action asks for.
    fn open_session(&self) {
        let args = self.call.args;
        let sid = self.session_id.as_str();
        let source = if args.resume.is_some() {
            "resume"
        } else {
            "startup"
        };
        for event in hooks::session_start(args.settings.as_deref(), sid, source) {
            self.out.event(&event);
        }
        let cwd = std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        let mode = args.permission_mode.as_deref().unwrap_or("default");
        self.out.event(&emit::init(sid, &cwd, &self.model, mode));
        for (n, retry) in (1..).zip(&self.action.api_retries) {
            self.out.event(&emit::api_retry(sid, n, retry));
        }
    }

    /// The action's files: as Codex, written as they are (its sandbox decides before, see
    /// `codex_work`); as Claude Code, each by a tool call (`Bash` for a touch, `Write` for a
    /// write) that the stream shows, refused with the CLI's words when `--tools` does not
    /// offer the tool (unless the action plays a CLI that ignores `--tools`).
    fn files(&self) -> Result<(), i32> {
        let action = self.action;
        if self.call.args.codex {
            return do_files(action, &|t| self.fill(t));
        }
        if self.call.args.gemini {
            return gemini::files(self);
        }
        let offered = |tool: &str| {
            action.ignores_tools
                || self
                    .call
                    .args
                    .tools
                    .as_ref()
                    .is_none_or(|t| t.iter().any(|o| o == tool))
        };
        let (sid, model) = (self.session_id.as_str(), self.model.as_str());
        let calls = action
            .touch
            .iter()
            .map(|p| ("Bash", serde_json::json!({"command": format!("touch {}", self.fill(p))})))
            .chain(action.write.iter().map(|w| {
                ("Write", serde_json::json!({"file_path": self.fill(&w.path), "content": self.fill(&w.text)}))
            }));
        let mut allowed = Action {
            touch: Vec::new(),
            write: Vec::new(),
            bash: action.bash.clone(),
            ..Action::default()
        };
        for (i, (tool, input)) in calls.enumerate() {
            let id = format!(
                "toolu_sim_{}",
                &uuid::Uuid::new_v4().simple().to_string()[..20]
            );
            let mut call = emit::tool_use(sid, model, &id, tool);
            call["message"]["content"][0]["input"] = input;
            self.out.event(&call);
            if !offered(tool) {
                // The real text of 2.1.330 for a tool `--tools` left out.
                let refused = format!(
                    "<tool_use_error>Error: No such tool available: {tool}. {tool} is disabled \
                     for this session, in subagents as well as here.</tool_use_error>"
                );
                self.out.event(&emit::tool_result_error(sid, &id, &refused));
                continue;
            }
            match action.touch.get(i) {
                Some(p) => allowed.touch.push(p.clone()),
                None => allowed
                    .write
                    .push(action.write[i - action.touch.len()].clone()),
            }
            self.out.event(&emit::tool_result_ok(sid, &id));
        }
        do_files(&allowed, &|t| self.fill(t))
    }

    /// The work before the answer: a hang (for ever), or the sleep, with heartbeats.
    fn work(&self) -> Result<(), i32> {
        let action = self.action;
        if action.hang {
            self.files()?;
            let beat = action.heartbeat_ms.filter(|ms| *ms > 0);
            for k in 1.. {
                std::thread::sleep(Duration::from_millis(beat.unwrap_or(3_600_000)));
                if beat.is_some() {
                    self.heartbeat(k);
                }
            }
        }
        match action.heartbeat_ms.filter(|ms| *ms > 0) {
            None => sleep_ms(action.sleep_ms),
            Some(beat) => {
                let mut left = action.sleep_ms;
                for k in 1.. {
                    let now = left.min(beat);
                    sleep_ms(now);
                    left -= now;
                    if left == 0 {
                        break;
                    }
                    self.heartbeat(k);
                }
            }
        }
        self.files()
    }

    /// What happens between the work and the answer: a compaction, a rate-limit event, tools
    /// the call could not use.
    fn events_before_the_answer(&self) {
        let (action, sid, model) = (self.action, self.session_id.as_str(), self.model.as_str());
        if action.compact {
            let events = hooks::compact(
                self.call.args.settings.as_deref(),
                sid,
                action.compact_error.as_deref(),
            );
            for event in &events {
                self.out.event(event);
            }
        }
        if let Some(info) = &action.rate_limit {
            self.out.event(&emit::rate_limit(sid, info));
        }
        for tool in &action.unavailable_tools {
            let id = format!(
                "toolu_sim_{}",
                &uuid::Uuid::new_v4().simple().to_string()[..20]
            );
            self.out.event(&emit::tool_use(sid, model, &id, tool));
            self.out.event(&emit::tool_result_error(
                sid,
                &id,
                &emit::no_such_tool(tool),
            ));
        }
    }

    /// The answer's text: the scenario's, or what the CLI would say by default.
    fn answer_text(&self) -> String {
        let default = match (self.action.is_error, self.call.review, self.call.step) {
            (true, _, _) => DEFAULT_ERROR,
            (false, true, _) => DEFAULT_REVIEW,
            (false, false, 0) => DEFAULT_PLAN,
            (false, false, _) => DEFAULT_STEP,
        };
        self.fill(self.action.result.as_deref().unwrap_or(default))
    }

    /// The final `result` event, and what follows it in the format asked for.
    fn finish(&self, text: &str, format: &str) {
        let (action, sid) = (self.action, self.session_id.as_str());
        let cost_usd = action.cost_usd.unwrap_or(0.01);
        // A denied command that `--allowedTools` now covers runs: it is not denied again.
        let denials: Vec<String> = action
            .permission_denials
            .iter()
            .filter(|d| !emit::allowed(d, &self.call.args.allowed_tools))
            .cloned()
            .collect();
        let result = emit::result(&emit::ResultSpec {
            session_id: sid,
            subtype: action.subtype.as_deref().unwrap_or("success"),
            is_error: action.is_error,
            api_error_status: action.api_error_status,
            text,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            model: &self.model,
            context_window: action.context_window.unwrap_or(200_000),
            cost_usd,
            session_cost_usd: session_cost(self.call.state_dir.as_deref(), sid, cost_usd),
            permission_denials: &denials,
        });
        match format {
            "stream-json" => {
                self.out.event(&result);
                if let Some(what) = &action.background_task {
                    let ev = |kind, status| emit::task(sid, kind, what, Some(status));
                    self.out.event(&ev("task_updated", "killed"));
                    self.out.event(&ev("task_notification", "stopped"));
                }
            }
            "json" => raw_stdout(format!("{result}\n").as_bytes()),
            _ => raw_stdout(format!("{text}\n").as_bytes()),
        }
    }
}

/// What became of a question call.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    /// Answered (or refused): the run goes on.
    GoesOn,
    /// A hook deferred it: the run ended there.
    Deferred,
}

/// Where a session's deferred call waits for `--resume`.
pub(crate) fn deferred_file(state_dir: Option<&Path>, session_id: &str) -> Option<PathBuf> {
    state_dir.map(|d| d.join(format!("session-{session_id}.deferred")))
}

impl Run<'_> {
    /// Calls `AskUserQuestion` with `question` and its `options`.
    fn ask(&self, question: &str, options: &[String]) -> Asked {
        let (sid, model) = (self.session_id.as_str(), self.model.as_str());
        let id = format!(
            "toolu_sim_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..20]
        );
        let input = serde_json::json!({"questions": [{
            "question": question, "header": "Question", "multiSelect": false,
            "options": options.iter().map(|o| serde_json::json!({"label": o, "description": o}))
                .collect::<Vec<_>>(),
        }]});
        let mut call = emit::tool_use(sid, model, &id, "AskUserQuestion");
        call["message"]["content"][0]["input"] = input.clone();
        self.out.event(&call);
        if self.call.args.permission_prompt_tool.is_none() {
            // The real text of 2.1.330: `-p` without a permission host offers no such tool.
            self.out.event(&emit::tool_result_error(
                sid,
                &id,
                "<tool_use_error>No such tool available: AskUserQuestion. AskUserQuestion is \
                 disabled for this session, in subagents as well as here.</tool_use_error>",
            ));
            return Asked::GoesOn;
        }
        self.decide(&id, &input)
    }

    /// The hook's decision on the question call `id`: deferred (the run ends with it, and
    /// the session remembers it), or allowed with answers (the tool's result).
    fn decide(&self, id: &str, input: &Value) -> Asked {
        let sid = self.session_id.as_str();
        let decision = hooks::pre_tool_use(
            self.call.args.settings.as_deref(),
            sid,
            "AskUserQuestion",
            id,
            input,
        );
        let verdict = decision
            .as_ref()
            .and_then(|d| d["permissionDecision"].as_str())
            .unwrap_or("ask");
        let pending = deferred_file(self.call.state_dir.as_deref(), sid);
        if verdict == "defer" {
            let call = serde_json::json!({"id": id, "name": "AskUserQuestion", "input": input});
            if let Some(path) = &pending {
                let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
                    .and_then(|()| std::fs::write(path, call.to_string()));
            }
            let mut result = emit::result(&emit::ResultSpec {
                session_id: sid,
                subtype: "success",
                is_error: false,
                api_error_status: None,
                text: "",
                duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(0),
                model: &self.model,
                context_window: 200_000,
                cost_usd: 0.01,
                session_cost_usd: session_cost(self.call.state_dir.as_deref(), sid, 0.01),
                permission_denials: &[],
            });
            result["stop_reason"] = "tool_deferred".into();
            result["terminal_reason"] = "tool_deferred".into();
            result["deferred_tool_use"] = call;
            self.out.event(&result);
            return Asked::Deferred;
        }
        if let Some(path) = &pending {
            let _ = std::fs::remove_file(path);
        }
        let answers = decision
            .as_ref()
            .and_then(|d| d.pointer("/updatedInput/answers"))
            .and_then(Value::as_object)
            .filter(|_| verdict == "allow");
        let text = match answers {
            // The real tool_result (captures `ask-user-question-answered-on-resume*`).
            Some(a) => format!(
                "Your questions have been answered: {}. You can now continue with these \
                 answers in mind.",
                a.iter()
                    .map(|(q, v)| format!("\"{q}\"=\"{}\"", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "The user did not answer.".to_owned(),
        };
        self.out.event(&serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [
                {"type": "tool_result", "content": text, "tool_use_id": id}
            ]},
            "parent_tool_use_id": null, "session_id": sid, "uuid": uuid::Uuid::new_v4().to_string(),
        }));
        Asked::GoesOn
    }

    /// A resumed session whose last call was deferred: the hook is asked again first, as the
    /// real CLI does, whatever the prompt.
    fn resolve_deferred(&self) -> Asked {
        if self.call.args.resume.is_none() {
            return Asked::GoesOn;
        }
        let Some(path) = deferred_file(self.call.state_dir.as_deref(), &self.session_id) else {
            return Asked::GoesOn;
        };
        let Some(call) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            return Asked::GoesOn;
        };
        self.decide(call["id"].as_str().unwrap_or_default(), &call["input"])
    }
}

/// Performs `action` for `call` as the Codex CLI would (`claude-sim exec …`): the same
/// scenario, in Codex's `--json` events.
fn perform_codex(call: &Call<'_>, action: &Action) -> i32 {
    let args = call.args;
    let state = call.state_dir.as_deref();
    let known = |id: &str| state.map(|d| d.join(format!("thread-{id}")));
    if let Some(id) = &args.resume
        && known(id).is_some_and(|p| !p.is_file())
    {
        eprintln!("{}", codex::no_rollout(id));
        return 1;
    }
    let run = Run {
        call,
        action,
        session_id: args
            .resume
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        model: args.model.clone().unwrap_or_else(|| "codex-sim".into()),
        out: Out {
            stream: args.output_format.is_some(),
        },
        started: Instant::now(),
    };
    let sid = run.session_id.as_str();
    if let Some(path) = known(sid) {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .and_then(|()| std::fs::write(&path, ""));
    }
    if let Some(text) = &action.stderr {
        eprintln!("{}", run.fill(text));
    }
    run.out.event(&codex::thread_started(sid));
    run.out.event(&codex::turn_started());
    for (n, retry) in (1..).zip(&action.api_retries) {
        let why = retry
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("error");
        let message = format!("Reconnecting... {n}/5 ({why})");
        run.out
            .event(&serde_json::json!({"type": "error", "message": message}));
    }
    if let Some(code) = codex_work(&run) {
        return code;
    }
    let text = run.answer_text();
    if action.is_error {
        for event in codex::failed(&text) {
            run.out.event(&event);
        }
        return action.exit.unwrap_or(1);
    }
    let message = serde_json::json!({"type": "agent_message", "text": text});
    run.out.event(&codex::item(900, true, message));
    if let Some(sig) = action.killed_by_signal {
        return kill_self(sig);
    }
    if !action.no_result {
        let (input, output) = thread_tokens(state, sid);
        run.out.event(&codex::turn_completed(input, output));
    }
    action.exit.unwrap_or(0)
}

/// The work of a Codex call: as Claude's, but its files are written by a command the sandbox
/// may refuse (a read-only run writes nothing).
fn codex_work(run: &Run<'_>) -> Option<i32> {
    let action = run.action;
    let writes = !action.touch.is_empty() || !action.write.is_empty();
    if writes && !codex::may_write(run.call.args) {
        let refused = serde_json::json!({"type": "command_execution",
            "command": "/bin/bash -lc 'write the files'",
            "aggregated_output": "Read-only file system (os error 30)", "exit_code": 1,
            "status": "failed"});
        run.out.event(&codex::item(1, true, refused));
        let quiet = Action {
            touch: Vec::new(),
            write: Vec::new(),
            ..action.clone()
        };
        let reader = Run {
            action: &quiet,
            session_id: run.session_id.clone(),
            model: run.model.clone(),
            out: Out {
                stream: run.out.stream,
            },
            ..*run
        };
        return reader.work().err();
    }
    run.work().err()
}

/// What a call answers instead of `action` while the usage limit is spent (its
/// `limited_until`), in the CLI's dialect; `None` without a limit, or once it has reset.
pub(crate) fn limit_refusal(args: &SimArgs, action: &Action) -> Option<Action> {
    let until = action.limited_until?;
    if chrono::Utc::now().timestamp_millis() >= until.saturating_mul(1000) {
        return None;
    }
    Some(if args.codex {
        Action::error(&codex::usage_limit(until))
    } else if args.gemini {
        // Gemini CLI names no reset: a spent daily quota.
        gemini::quota_refusal()
    } else {
        Action::api_error(429, &emit::usage_limit(until)).rate_limit("rejected", until)
    })
}

/// A call whose `--max-budget-usd` is below what `action` costs, as the real CLI ends it
/// (capture `error-max-budget-usd`): the work done and paid for, then an `error_max_budget_usd`
/// result, `Reached maximum budget ($BUDGET)`, exit 1. `None` within its budget, or with none.
pub(crate) fn over_budget(args: &SimArgs, action: &Action) -> Option<Action> {
    let given = args.max_budget_usd.as_deref()?;
    let budget: f64 = given.parse().ok()?;
    (action.cost_usd.unwrap_or(0.01) > budget && !action.is_error).then(|| Action {
        is_error: true,
        subtype: Some("error_max_budget_usd".into()),
        result: Some(format!("Reached maximum budget (${given})")),
        exit: Some(1),
        ..action.clone()
    })
}

/// The thread's usage so far, this call's included (Codex reports the thread's total).
fn thread_tokens(state_dir: Option<&Path>, id: &str) -> (u64, u64) {
    const CALL: (u64, u64) = (1000, 50);
    let Some(dir) = state_dir else { return CALL };
    let path = dir.join(format!("session-{id}.tokens"));
    let before: (u64, u64) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| {
            let (i, o) = t.trim().split_once(' ')?;
            Some((i.parse().ok()?, o.parse().ok()?))
        })
        .unwrap_or((0, 0));
    let total = (before.0 + CALL.0, before.1 + CALL.1);
    let _ = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, format!("{} {}\n", total.0, total.1)));
    total
}

/// Performs `action` for `call` and returns the exit code.
pub(crate) fn perform(call: &Call<'_>, action: &Action) -> i32 {
    if let Some(ms) = action.sigterm_exit_ms {
        end_slowly_on_sigterm(ms);
    }
    if call.args.codex {
        if let Some(stem) = &action.fixture {
            sleep_ms(action.sleep_ms);
            let code = replay(&call.base_dir.join(stem), action.exit);
            sleep_ms(action.linger_ms);
            return code;
        }
        return perform_codex(call, action);
    }
    if call.args.gemini {
        return gemini::perform(call, action);
    }
    let args = call.args;
    let format = args.output_format.as_deref().unwrap_or("text");
    let run = Run {
        call,
        action,
        session_id: args
            .session_id
            .clone()
            .or_else(|| args.resume.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        model: action
            .model
            .as_deref()
            .or(args.model.as_deref())
            .unwrap_or("claude-sim")
            .to_owned(),
        out: Out {
            stream: format == "stream-json",
        },
        started: Instant::now(),
    };
    if let Some(text) = &action.stderr {
        eprintln!("{}", run.fill(text));
    }
    if let Some(stem) = &action.fixture {
        sleep_ms(action.sleep_ms);
        let code = replay(&call.base_dir.join(stem), action.exit);
        sleep_ms(action.linger_ms);
        return code;
    }
    run.open_session();
    let sid = run.session_id.as_str();
    if let Some(secs) = action.grandchild_sleep_s {
        leave_grandchild(secs);
    }
    if let Err(code) = run.work() {
        return code;
    }
    if run.resolve_deferred() == Asked::Deferred {
        return 0;
    }
    if let Some((question, options)) = &action.ask
        && run.ask(question, options) == Asked::Deferred
    {
        return 0;
    }
    run.events_before_the_answer();
    let text = run.answer_text();
    let api_error = action.api_error_status.filter(|_| action.is_error);
    if let Some(what) = &action.background_task {
        run.out.event(&emit::task(sid, "task_started", what, None));
    }
    let mut answer = emit::assistant(sid, &run.model, &text, api_error);
    if let Some(tokens) = action.context_tokens {
        answer["message"]["usage"]["cache_read_input_tokens"] = serde_json::json!(tokens);
    }
    run.out.event(&answer);
    if let Some(sig) = action.killed_by_signal {
        return kill_self(sig);
    }
    let exit = action.exit.unwrap_or(i32::from(action.is_error));
    if !action.no_result {
        run.finish(&text, format);
    }
    exit
}

/// What session `id` has cost so far, this call's `cost` included: the CLI (2.1.330) reports
/// that total after `--resume`. Kept in the state directory, one file per session.
fn session_cost(state_dir: Option<&Path>, id: &str, cost: f64) -> f64 {
    let Some(dir) = state_dir else { return cost };
    let path = dir.join(format!("session-{id}.cost"));
    let before: f64 = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0.0);
    let total = before + cost;
    let _ = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, format!("{total}\n")));
    total
}

fn sleep_ms(ms: u64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Replays a real capture verbatim. Without an explicit exit code, exits as the real CLI
/// did: 0 only after a result without error.
fn replay(stem: &Path, exit: Option<i32>) -> i32 {
    let read = |suffix: &str| {
        let mut path = stem.as_os_str().to_owned();
        path.push(suffix);
        std::fs::read(&path).map_err(|e| format!("fixture {}: {e}", Path::new(&path).display()))
    };
    let (stdout, stderr) = match (read(".stdout.jsonl"), read(".stderr")) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("claude-sim: {e}");
            return SETUP_ERROR;
        }
    };
    raw_stdout(&stdout);
    let _ = std::io::stderr().write_all(&stderr);
    exit.unwrap_or_else(|| i32::from(!ended_well(&stdout)))
}

/// Whether a stream-json capture's last `result` event says no error. Lines that are not JSON
/// objects (a capture cut by a kill) are skipped, as the loop's reader skips them.
fn ended_well(stdout: &[u8]) -> bool {
    stdout
        .split(|&b| b == b'\n')
        .rev()
        .filter_map(|line| serde_json::from_slice::<Value>(line.trim_ascii()).ok())
        .find(|event| event.get("type").and_then(Value::as_str) == Some("result"))
        .is_some_and(|result| result.get("is_error").and_then(Value::as_bool) != Some(true))
}

/// Ends this process with `sig`, as a kill from outside would; returns only when the signal
/// does not end it (then with the shell's code for it, 128 + the signal).
fn kill_self(sig: i32) -> i32 {
    let Ok(signal) = nix::sys::signal::Signal::try_from(sig) else {
        eprintln!("claude-sim: killed_by_signal {sig} is not a signal");
        return SETUP_ERROR;
    };
    let _ = nix::sys::signal::raise(signal);
    // A caught or ignored signal: make sure it still ends here.
    std::thread::sleep(Duration::from_millis(200));
    128 + sig
}

/// Starts `sleep SECS` in this process's group and does not wait for it: the leftover a
/// careless tool call leaves behind, which the supervisor must clean up with the group.
fn leave_grandchild(secs: f64) {
    match Command::new("sleep")
        .arg(secs.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => eprintln!(
            "claude-sim: left grandchild pid {} (sleep {secs}) in process group {}",
            child.id(),
            nix::unistd::getpgrp()
        ),
        Err(e) => eprintln!("claude-sim: could not start the grandchild: {e}"),
    }
}

/// The files an action writes, then its commands. A write the system refuses (a read-only
/// file system, no permission: a sandbox) fails as the real CLI's edit tool does: said, and
/// the call goes on to its answer. Any other failure is the scenario's error.
fn do_files(action: &Action, fill: &dyn Fn(&str) -> String) -> Result<(), i32> {
    let fail = |path: &str, e: std::io::Error| {
        if refused_by_the_system(&e) {
            eprintln!("claude-sim: the tool call could not write {path}: {e}");
            note_refused(path, &e);
            return Ok(());
        }
        eprintln!("claude-sim: cannot write {path}: {e}");
        Err(SETUP_ERROR)
    };
    for path in &action.touch {
        let path = fill(path);
        if let Err(e) = touch(Path::new(&path)) {
            fail(&path, e)?;
        }
    }
    for w in &action.write {
        let path = fill(&w.path);
        if let Err(e) = write_file(Path::new(&path), &fill(&w.text), w.append) {
            fail(&path, e)?;
        }
    }
    for command in &action.bash {
        let _ = std::process::Command::new("sh")
            .arg("-c")
            .arg(fill(command))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status();
    }
    Ok(())
}

/// Notes a write the system refused in `<CLAUDE_SIM_LOG>.refused.jsonl` (the call, the path,
/// the error), so a soak can tell a step its agent called done without its files from one whose
/// files the loop lost.
fn note_refused(path: &str, e: &std::io::Error) {
    let Some(log) = std::env::var_os("CLAUDE_SIM_LOG") else {
        return;
    };
    let mut file = PathBuf::from(log).into_os_string();
    file.push(".refused.jsonl");
    let line = serde_json::json!({
        "task_id": std::env::var("LOOP_TASK_ID").ok(),
        "step": std::env::var("LOOP_STEP").ok(),
        "path": path,
        "error": e.to_string(),
    });
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
}

/// Whether a write failed because the system forbids it here (what a sandbox answers).
fn refused_by_the_system(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
    ) || e.raw_os_error() == Some(nix::libc::EPERM)
}

fn touch(path: &Path) -> std::io::Result<()> {
    make_parent(path)?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.set_modified(std::time::SystemTime::now())
}

fn write_file(path: &Path, text: &str, append: bool) -> std::io::Result<()> {
    make_parent(path)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    f.write_all(text.as_bytes())
}

fn make_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::fs::create_dir_all(p),
        _ => Ok(()),
    }
}
