//! `loop validate` and `loop status`: read M1.md and report; neither ever writes it.

use std::path::Path;

use crate::error::Error;
use crate::exit::Status;

use super::status_view;
use crate::m1::{Errors, Store, StoreError};

/// `loop validate`: `path: ok`, or every error as `path:line:column: message` on stderr and
/// exit status 2.
///
/// # Errors
/// A missing or unreadable file.
pub(crate) fn validate(file: &Path) -> crate::error::Result<Status> {
    // A file that reads well but names an agent that cannot run here cannot run either.
    let checked = open(file)?
        .and_then(|doc| crate::runner::settings::check_program_in(&doc, file).map(|()| doc));
    match checked {
        Ok(_) => {
            crate::outln!("{}: ok", file.display());
            Ok(Status::Ok)
        }
        Err(errors) => {
            crate::errln!("{}", problems(&errors));
            Ok(Status::BadInput)
        }
    }
}

/// Who drives the loop: the runner's pid; with none, what carries it on. A step that runs on
/// with no runner brings one back when it ends (unless the runner was started with
/// `LOOP_REVIVE=off`): said, so nobody races it with `loop resume`.
fn runner_line(
    m: &crate::m1::M1,
    runner: Option<u32>,
    report: Option<&crate::bridge::TaskReport>,
    state_dir: &Path,
) -> Option<String> {
    if let Some(pid) = runner {
        return Some(format!("pid {pid}"));
    }
    if m.status != crate::m1::Status::Running {
        return None;
    }
    let revives = report.is_some_and(|r| r.state == crate::bridge::TaskState::Running)
        && crate::bridge::has_on_exit(state_dir, m.current.task_id.as_deref().unwrap_or(""));
    Some(if revives {
        "none: the step runs on under its supervisor; when the step ends, its supervisor starts \
         one, which carries the loop on (`loop resume` does it now)"
            .to_owned()
    } else {
        "none: `loop resume` carries the loop on from this file".to_owned()
    })
}

/// What is wrong with the file, as `validate` and `status` say it: problems at a line as
/// `file:line:column: …` (as compilers say them, for editors to jump to); a file that could not
/// be read at all (a directory, too large) as an error of `loop`, as every command says it.
fn problems(errors: &Errors) -> String {
    if errors.errors().iter().all(crate::m1::Error::is_whole_file) {
        format!("loop: {errors}")
    } else {
        errors.to_string()
    }
}

/// Everything a confined run of the loop gets besides its work tree and its own state: the
/// paths and variables named anywhere (M1.md, the environment, `loop.yaml`: they add up), and
/// the toolchains found here.
struct Granted {
    read: Vec<String>,
    write: Vec<String>,
    env: Vec<String>,
    toolchains: Vec<crate::sandbox::toolchains::Grant>,
}

impl Granted {
    fn line(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(", ")
            }
        };
        let mut tools: Vec<&str> = self.toolchains.iter().map(|g| g.tool).collect();
        tools.dedup();
        format!(
            "read {}; write {}; env {}; toolchains {}",
            list(&self.read),
            list(&self.write),
            list(&self.env),
            if tools.is_empty() {
                "-".to_owned()
            } else {
                tools.join(", ")
            }
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "read": self.read,
            "write": self.write,
            "env": self.env,
            "toolchains": self.toolchains.iter().map(|g| serde_json::json!({
                "tool": g.tool,
                "path": g.path.display().to_string(),
                "writable": g.access == crate::sandbox::Access::Write,
            })).collect::<Vec<_>>(),
        })
    }
}

/// What the loop of `m` grants its confined runs, as they would get it now; `None` when its
/// sandbox is off or its settings cannot be read.
fn granted(state_dir: &Path, m: &crate::m1::M1) -> Option<Granted> {
    let settings = crate::runner::settings::Settings::load(
        state_dir,
        crate::runner::settings::Overrides::default(),
    )
    .ok()?;
    let s = settings.sandbox(m);
    if s.mode == crate::m1::SandboxMode::Off {
        return None;
    }
    let home = crate::runner::confine::home();
    let var = |k: &str| std::env::var_os(k);
    Some(Granted {
        read: s.read,
        write: s.write,
        env: s.env,
        toolchains: crate::sandbox::toolchains::grants(&home, &var),
    })
}

/// What the agent of the task `r` did last, as the foreground runner's live line shows it, and
/// how long ago.
fn activity(
    m: &crate::m1::M1,
    r: &crate::bridge::TaskReport,
) -> Option<(String, Option<std::time::Duration>)> {
    let step = m.plan.current_step;
    let kind = crate::engine::RunKind::of(step, m.current.review);
    let backend = crate::engine::backend_of(m, m.agent.backend.unwrap_or_default(), kind, step);
    Some((
        crate::agent::last_activity(backend, &r.stdout_path)?,
        age(&r.stdout_path),
    ))
}

/// `loop status [--json]`: what the file says. Never writes.
///
/// # Errors
/// A missing or unreadable file.
pub(crate) fn status(file: &Path, json: bool) -> crate::error::Result<Status> {
    let doc = match open(file)? {
        Ok(doc) => doc,
        Err(errors) => {
            crate::errln!("{}", problems(&errors));
            return Ok(Status::BadInput);
        }
    };
    let m = doc.view();
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    // What the exec bridge knows of the task on record: alive or not, elapsed, exit.
    let report = m
        .current
        .task_id
        .as_deref()
        .filter(|id| crate::bridge::exists(&state_dir, id))
        .and_then(|id| crate::bridge::check(&state_dir, id).ok());
    let runner = crate::runner::lock::holder(file);
    let line = report.as_ref().map(crate::bridge::TaskReport::line);
    let activity = report.as_ref().and_then(|r| activity(&m, r));
    let stop = crate::runner::stopfile::present(&state_dir);
    let transcript = transcript(&m);
    let granted = granted(&state_dir, &m);
    if json {
        let mut v = status_view::json(&m, line.as_deref());
        v["sandbox_granted"] = granted
            .as_ref()
            .map_or(serde_json::Value::Null, Granted::json);
        v["task"] = report
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok())
            .unwrap_or(serde_json::Value::Null);
        v["runner_pid"] = runner.map_or(serde_json::Value::Null, Into::into);
        let t = crate::engine::figures::totals(&m, &crate::runner::step_loops(&m));
        v["total_cost_usd"] = t.cost_usd.into();
        v["total_attempts"] = t.attempts.into();
        v["total_tokens"] = t.tokens.into();
        v["activity"] = activity
            .as_ref()
            .map_or(serde_json::Value::Null, |(a, _)| a.as_str().into());
        v["stop_file"] = stop
            .as_ref()
            .map_or(serde_json::Value::Null, |p| p.display().to_string().into());
        v["transcript"] = transcript
            .as_ref()
            .map_or(serde_json::Value::Null, |p| p.display().to_string().into());
        crate::outln!("{v}");
    } else {
        let chat = crate::notifier::chat_set_up();
        crate::out!("{}", status_view::human(&m, line.as_deref(), chat));
        if let Some(g) = &granted {
            crate::outln!("GRANTED      {}", g.line());
        }
        if let Some((a, ago)) = &activity {
            let ago = ago.map_or_else(String::new, |d| format!(" ({}s ago)", d.as_secs()));
            crate::outln!("ACTIVITY     {a}{ago}");
        }
        if let Some(t) = &transcript {
            crate::outln!("TRANSCRIPT   {}", t.display());
        }
        if let Some(line) = runner_line(&m, runner, report.as_ref(), &state_dir) {
            crate::outln!("RUNNER       {line}");
        }
        if let Some(p) = &stop {
            crate::outln!(
                "STOP         {} exists: a running loop halts within a second, and none starts \
                 or resumes until it is removed (`rm {}`)",
                p.display(),
                p.display()
            );
        }
        if let Some(hint) = crate::notifier::setup_hint()
            && first_time("telegram-hint-shown")
        {
            crate::outln!("{hint}");
        }
    }
    Ok(Status::Ok)
}

/// Where the agent keeps the transcript of the loop's latest session (the run on record's,
/// else the last step's that has one), when it keeps one for this user and project.
fn transcript(m: &crate::m1::M1) -> Option<std::path::PathBuf> {
    let session = m.current.session_id.as_deref().or_else(|| {
        m.results
            .values()
            .rev()
            .find_map(|r| r.session_id.as_deref())
    })?;
    let workdir = m.workdir.as_deref().map(Path::new)?;
    let home = std::env::var_os("HOME")?;
    crate::agent::backends().find_map(|b| b.transcript(session, workdir, Path::new(&home)))
}

/// How long ago a file last changed.
fn age(path: &Path) -> Option<std::time::Duration> {
    std::fs::metadata(path)
        .ok()?
        .modified()
        .ok()?
        .elapsed()
        .ok()
}

/// Whether this is the first time this user is told `what`: a marker in the per-user state
/// directory says it was. Where no marker can be written, every time is the first.
fn first_time(what: &str) -> bool {
    let Ok(dir) = crate::dirs::user_state_dir() else {
        return true;
    };
    let marker = dir.join(what);
    if marker.exists() {
        return false;
    }
    let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&marker, b""));
    true
}

/// Opens the file read-only: the document, or its validation errors (with the path).
/// A missing file is bad input that says how to start a loop.
fn open(file: &Path) -> crate::error::Result<Result<crate::m1::Document, Errors>> {
    if !file.exists() {
        let here = if file.is_relative() {
            " (here or in a parent directory)"
        } else {
            ""
        };
        return Err(Error::bad_input(format!(
            "{} does not exist{here}; start a loop with `loop start \"GOAL\"` (or pass --file PATH)",
            file.display()
        )));
    }
    match Store::open(file) {
        Ok((_, doc)) => Ok(Ok(doc)),
        Err(StoreError::DiskInvalid(errors)) => Ok(Err(errors)),
        Err(other) => Err(anyhow::Error::new(other).into()),
    }
}
