//! The I/O of the loop's runs, a part of the runner: what its decisions about a run (in
//! `run.rs` and `watching.rs`) need done in the world, and what only the world can tell them.
//! It calls the agent as the loop's settings say and starts a run's task, confined as its
//! sandbox says (`confine.rs`); ends a task its stream shows is stuck; runs VERIFY; reads what
//! an ended run left and gathers a prompt's material (`observe.rs`); notes the work tree around
//! a step's runs and makes a DONE step's commit (`step_commit.rs`); and emits the loop's spans
//! (`traces.rs`). It hands back facts and writes nothing to M1.md: what they mean for the loop,
//! and what is recorded, the runner decides.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;

use super::crash;
use super::ledger::Ledger;
use super::settings::Settings;
use super::unwritable::supervisor_waits;
use super::voice::Voice;
use crate::agent::{self, Invocation, Session};
use crate::bridge::{self, FireRequest, TaskReport, TaskState};
use crate::engine::{self, RunKind, RunOnRecord};
use crate::m1::M1;
use crate::verify;

/// Grace between SIGTERM and SIGKILL when the runner ends a step.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(3);

/// The I/O of one loop's runs: where the loop is, and what its runs keep between them.
pub(super) struct StepIo {
    /// The loop's M1.md.
    pub(super) file: PathBuf,
    pub(super) state_dir: PathBuf,
    /// Where the loop's agent works.
    pub(super) workdir: PathBuf,
    /// The loop's identity (`LOOP_ID`), which its tasks carry in their environment.
    pub(super) loop_id: String,
    /// Whether bubblewrap can confine runs here, looked at once (see `confine.rs`).
    pub(super) sandbox_probe: Option<Result<PathBuf, String>>,
    /// Where the loop's spans go, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see `traces.rs`).
    pub(super) tracer: Option<crate::telemetry::Tracer>,
}

impl std::fmt::Debug for StepIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepIo")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl StepIo {
    /// The runs of the loop of `file`, whose state is in `state_dir`, whose agent works in
    /// `workdir`, and whose id is `loop_id`.
    pub(super) fn new(file: &Path, state_dir: &Path, workdir: &Path, loop_id: &str) -> Self {
        Self {
            file: file.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            workdir: workdir.to_path_buf(),
            loop_id: loop_id.to_owned(),
            sandbox_probe: None,
            tracer: None,
        }
    }

    /// How the agent is called for `run` of the loop `m`, as its kind says, in its session
    /// (`resumed` or a new one with that id); `Err` inside: the setting the agent cannot
    /// honour here, and why (a sandbox that cannot start is `AGENT.SANDBOX`'s).
    pub(super) fn invocation(
        &mut self,
        m: &M1,
        settings: &Settings,
        run: &RunOnRecord,
        resumed: bool,
        prompt: &str,
    ) -> crate::error::Result<Result<Invocation, agent::Refused>> {
        let session_id = run.session_id.clone().unwrap_or_default();
        let session = if resumed {
            Session::Resume(session_id)
        } else {
            Session::New(session_id)
        };
        let kind = settings.backend_of(m, run.kind, run.step);
        let mut cfg = run.kind.agent_config(settings.agent_on(m, kind), m);
        let sandbox = settings.sandbox(m);
        cfg.confined = sandbox.mode != crate::m1::SandboxMode::Off;
        cfg.files_dir =
            Some(std::path::absolute(&self.state_dir).unwrap_or(self.state_dir.clone()));
        let backend = agent::backend_for(kind);
        let caps = settings.caps(m);
        let capped = caps.max_cost_usd.is_some();
        // What is left of the loop's cap goes to the run, so the cap holds within it.
        if capped && agent::dollar_cap_refused(backend, true).is_none() {
            cfg.max_budget_usd = engine::run_budget(m, &caps, cfg.max_budget_usd);
        }
        let called = match agent::dollar_cap_refused(backend, capped) {
            Some(refused) => Err(refused),
            None => backend.invocation(&cfg, prompt, &session),
        };
        // A loop confined by a sandbox that cannot start here never runs unconfined.
        let called = called.and_then(|inv| {
            self.sandbox_ready(&sandbox)
                .map(|()| inv)
                .map_err(|why| agent::Refused {
                    setting: "AGENT.SANDBOX".into(),
                    why,
                })
        });
        match called {
            Ok(inv) if run.kind.gets_hooks() => {
                let exe = std::env::current_exe().context("while finding the loop binary")?;
                Ok(Ok(match backend.hook_settings(&exe) {
                    Some(settings) => {
                        backend.with_hooks(inv, &self.agent_settings(&settings)?, &exe)
                    }
                    None => inv,
                }))
            }
            called => Ok(called),
        }
    }

    /// Starts the task of `run` of the loop `m`, whose record is written, as `inv` calls its
    /// agent; noted in `ledger` before it exists.
    pub(super) fn fire(
        &mut self,
        m: &M1,
        settings: &Settings,
        voice: &Voice,
        ledger: &mut Ledger,
        run: &RunOnRecord,
        inv: Invocation,
    ) -> crate::error::Result<()> {
        // What the call reads besides its prompt (a backend's policy), there before it starts.
        inv.write_files()
            .context("while writing the files of the agent's call")?;
        let caps = settings.caps(m);
        let session_id = run.session_id.clone().unwrap_or_default();
        let task_id = run.task_id.as_str();
        let file = std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone());
        let mut env = inv.env_set;
        env.push(("LOOP_STEP".into(), run.step.to_string()));
        env.push(("LOOP_ATTEMPT".into(), run.number.to_string()));
        env.push(("LOOP_TASK_ID".into(), task_id.to_string()));
        env.push(("LOOP_FILE".into(), file.display().to_string()));
        env.push(("LOOP_ID".into(), self.loop_id.clone()));
        if run.kind == RunKind::Review {
            env.push(("LOOP_REVIEW".into(), "1".into()));
        }
        env.push(("LOOP_SESSION_ID".into(), session_id.clone()));
        env.extend(self.traceparent(task_id));
        env.extend(settings.agent_env.iter().cloned());
        let program = inv.program.clone();
        let mut command = vec![inv.program];
        command.extend(inv.args);
        let req = FireRequest {
            command,
            timeout: Some(caps.step_timeout),
            idle_timeout: caps.idle_timeout,
            idle_exempt_marker: Some(
                agent::backend_for(settings.backend_of(m, run.kind, run.step))
                    .answered_marker()
                    .into(),
            ),
            cwd: Some(self.workdir.clone()),
            stdin: None,
            input: Some(inv.input),
            env,
            env_remove: inv.env_remove,
            env_keep: None,
            confined: false,
            hand_back: false,
            // Should this runner die while the run goes on, its end brings the runner back.
            on_exit: Self::revive_command(&file, task_id),
            on_exit_unless_held: Some(super::lock::path_for(&file)),
        }
        // Every agent run (planning, attempt, review) starts here: the agent needs none of
        // the loop's own credentials.
        .without_loop_credentials();
        let confined = super::confine::RunOf::Agent {
            writes: run.kind == RunKind::Attempt,
            backend: settings.backend_of(m, run.kind, run.step),
            program: &program,
        };
        let req = self
            .confine(
                &settings.sandbox(m),
                req,
                confined,
                &bridge::task_dir(&self.state_dir, task_id),
            )
            .map_err(|why| anyhow::anyhow!("the loop's sandbox cannot start: {why}"))?;
        if run.kind == RunKind::Review {
            self.note_tree_before_review(task_id)?;
        }
        // Noted in the ledger before it exists: no runner's death leaves a task it lacks. A
        // task started again (its start never happened) is noted once.
        if ledger.entry(task_id).is_none() {
            ledger.started(
                task_id,
                (run.step, run.number),
                &session_id,
                run.kind == RunKind::Review,
            )?;
        }
        self.publish(voice, task_id, &req)
    }

    /// Publishes task `task_id` as `req` says, and hands it to its supervisor.
    fn publish(&self, voice: &Voice, task_id: &str, req: &FireRequest) -> crate::error::Result<()> {
        crash::point("before-fire");
        let log = bridge::task_dir(&self.state_dir, task_id).join(bridge::SUPERVISOR_LOG);
        let mut told = std::time::Duration::ZERO;
        bridge::fire_published(
            &self.state_dir,
            task_id,
            req,
            &mut || crash::point("after-publish"),
            &mut |waited| {
                // A supervisor that waits for room for its command's output (a full disk):
                // said at once, then every half minute.
                if told.is_zero() || waited >= told + std::time::Duration::from_secs(30) {
                    told = waited;
                    supervisor_waits(voice, task_id, waited, &log);
                }
            },
        )
        .map_err(|e| e.context(format!("while starting task {task_id}")))?;
        crash::point("after-fire");
        Ok(())
    }

    /// What the supervisor of task `task_id` runs when it ends with nobody driving the loop.
    fn revive_command(file: &std::path::Path, task_id: &str) -> Vec<String> {
        std::env::current_exe()
            .ok()
            .filter(|_| super::revive::by_steps())
            .map(|exe| {
                vec![
                    exe.display().to_string(),
                    "--file".into(),
                    file.display().to_string(),
                    "__revive".into(),
                    "--by".into(),
                    format!("the supervisor of task {task_id}"),
                ]
            })
            .unwrap_or_default()
    }

    /// Runs the VERIFY command `cmd` of a step whose attempt `run` reported done, confined as
    /// `sandbox` says.
    pub(super) fn verify(
        &mut self,
        sandbox: &super::settings::SandboxSettings,
        voice: &Voice,
        run: &RunOnRecord,
        cmd: &str,
        timeout: std::time::Duration,
    ) -> crate::error::Result<verify::Outcome> {
        crash::point("before-verify");
        voice.say(&format!("verify: step {}: running `{cmd}`", run.step));
        let state_dir = self.state_dir.clone();
        let env = [
            ("LOOP_STEP".to_string(), run.step.to_string()),
            ("LOOP_ATTEMPT".to_string(), run.number.to_string()),
        ];
        let workdir = self.workdir.clone();
        let how = verify::Run {
            command: cmd,
            cwd: &workdir,
            env: &env,
            state_dir: &state_dir,
            step_task: &run.task_id,
            timeout,
        };
        let started = Utc::now();
        let outcome = self.verify_confined(sandbox, &how, &workdir);
        self.trace_verify(run, started, &outcome);
        outcome
    }

    /// What the loop's hooks in task `task_id` handed back (into its hand-back directory, the
    /// one place of the loop's a confined run may write), into the loop's log. Whatever runs in
    /// the run can write that file too, so it is read as the run's word: without following a
    /// link, and only lines the loop's hooks write are taken, each remade by the runner from
    /// what it checked (a run's line can never read as the loop's own).
    pub(super) fn take_hooks_log(&self, voice: &Voice, task_id: &str, step: u32) {
        let layout = crate::layout::Layout::dir(&self.state_dir);
        let task = layout.task(task_id);
        let rel = std::path::Path::new(crate::bridge::HAND_BACK_DIR).join("hooks.log");
        let text = match crate::named_file::read_beneath(&task, &rel, 1 << 20) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(crate::named_file::ReadError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                return;
            }
            Err(e) => {
                voice.say(&format!(
                    "hooks: task {task_id}'s hooks.log was not read ({e}): a run wrote it, and \
                     the loop takes no link or special file from a run"
                ));
                return;
            }
        };
        let mut refused = 0;
        for line in text.lines() {
            match compaction_trigger(line) {
                Some(trigger) => voice.say(&format!(
                    "compaction: step {step}'s session (task {task_id}) starts compacting its \
                     context ({trigger})"
                )),
                None => refused += 1,
            }
        }
        if refused > 0 {
            voice.say(&format!(
                "hooks: task {task_id} handed back {refused} line(s) that the loop's hooks do not \
                 write; not taken"
            ));
        }
        let _ = std::fs::remove_file(task.join(rel));
    }

    /// Ends what is left of a task before it is judged: a LOST task's processes (its
    /// supervisor and guardian died), and processes that left its group, which are named.
    pub(super) fn clean_up_after(
        &self,
        voice: &Voice,
        task_id: &str,
        report: &TaskReport,
    ) -> crate::error::Result<()> {
        if report.state == TaskState::Lost {
            // Ended, and confirmed dead, before any retry can start beside them.
            let after = bridge::kill(&self.state_dir, task_id, KILL_GRACE).map_err(|e| {
                e.context(format!("while ending what is left of lost task {task_id}"))
            })?;
            voice.say(&format!(
                "lost: task {task_id} lost its supervisor; its processes were ended ({})",
                after.line()
            ));
        }
        if !report.killed_outside_group.is_empty() {
            voice.say(&format!(
                "cleanup: task {task_id} left processes outside its process group; ended: {}",
                bridge::describe(&report.killed_outside_group)
            ));
        }
        Ok(())
    }

    /// Ends a run whose CLI is retrying an authentication error (401, 403): it would retry for
    /// about 3 minutes though only a human can fix the key. Ended as a stop ends it, the run is
    /// then judged from its stream like any other (an auth failure: WAITING), also by a runner
    /// that finds it ended after a crash.
    pub(super) fn end_auth_failing(
        &self,
        voice: &Voice,
        task_id: &str,
        stream: &agent::StreamSummary,
    ) -> crate::error::Result<TaskReport> {
        let what = stream.api_error.as_deref().unwrap_or("401");
        voice.say(&format!(
            "auth: task {task_id}: the CLI is retrying an authentication error ({what}); \
             ending it now rather than after its own retries"
        ));
        bridge::kill(&self.state_dir, task_id, KILL_GRACE).map_err(|e| {
            e.context(format!(
                "while ending task {task_id} on an authentication error"
            ))
        })
    }

    /// Ends a run whose CLI is in a storm of rate-limit retries (see
    /// [`agent::StreamSummary::rate_limit_storm`]): it would retry for minutes, silent on
    /// stdout, while M1.md said RUNNING. Ended as a stop ends it, the run is then judged from
    /// its stderr like any other (a rate limit: the loop's own backoff, on record, and no
    /// failed attempt), also by a runner that finds it ended after a crash.
    pub(super) fn end_rate_limit_storm(
        &self,
        voice: &Voice,
        task_id: &str,
        stream: &agent::StreamSummary,
    ) -> crate::error::Result<TaskReport> {
        let what = stream.api_error.as_deref().unwrap_or("429");
        voice.say(&format!(
            "rate limit: task {task_id}: the CLI keeps retrying a rate limit, {what}; ending it \
             now and waiting it out as the loop's own backoff rather than through its minutes of \
             silent retries"
        ));
        bridge::kill(&self.state_dir, task_id, KILL_GRACE).map_err(|e| {
            e.context(format!(
                "while ending task {task_id} in a storm of rate-limit retries"
            ))
        })
    }
}

/// The trigger of a line the loop's `PreCompact` hook hands back (`<time> compacting
/// TRIGGER`, a few lower-case letters); `None` for any other line.
fn compaction_trigger(line: &str) -> Option<&str> {
    let (_, said) = line.split_once(' ')?;
    let trigger = said
        .strip_prefix(crate::layout::HOOK_COMPACTING)?
        .strip_prefix(' ')?;
    (!trigger.is_empty() && trigger.len() <= 16 && trigger.bytes().all(|b| b.is_ascii_lowercase()))
        .then_some(trigger)
}
