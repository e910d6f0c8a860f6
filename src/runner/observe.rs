//! What only I/O can tell the engine: how a run's task ended and what its agent said (its
//! report, stream and stderr, the project's git HEAD, the work tree around a review), and the
//! material of the prompts that need more than M1.md (a handoff's note, a review's diff).

use anyhow::Context;
use chrono::Utc;

use super::settings::Settings;
use super::step_io::StepIo;
use super::voice::Voice;
use crate::agent::{self, ExitInfo};
use crate::bridge::TaskReport;
use crate::engine::prompt::{Gathered, Prompt};
use crate::engine::{self, Observed, RunKind, RunOnRecord, TaskEnd};
use crate::m1::M1;

/// The diff a reviewer reads at most, in bytes; longer ones are cut with a note.
const DIFF_CAP: usize = 60_000;

impl StepIo {
    /// What the ended task of `run` of the loop `m` left: how it ended, what its agent said,
    /// what it cost, and (for a review) what changed in the work tree meanwhile.
    pub(super) fn observe(
        &self,
        settings: &Settings,
        voice: &Voice,
        run: &RunOnRecord,
        report: &TaskReport,
        m: &M1,
    ) -> Observed {
        // A task still running has no end; it is judged only once it has one (LOST if none).
        let end = report.end.clone().unwrap_or(TaskEnd::Lost);
        let backend = agent::backend_for(settings.backend_of(m, run.kind, run.step));
        let stream = backend.read_output(&report.stdout_path).unwrap_or_default();
        let stderr =
            String::from_utf8_lossy(&std::fs::read(&report.stderr_path).unwrap_or_default())
                .into_owned();
        // A killed run's class tells whether the CLI was retrying a refused key at the time;
        // an idle one's, whether it was waiting out an API error it retries.
        let class = match end {
            TaskEnd::Exited { .. } | TaskEnd::Killed => {
                let exit = ExitInfo {
                    code: report.exit_code,
                    signal: report.signal,
                    killed_by_runner: end == TaskEnd::Killed,
                };
                Some(backend.classify(&exit, &stderr, &stream, Utc::now()))
            }
            TaskEnd::Idle if stream.result.is_none() => backend.retrying(&stderr).map(|what| {
                agent::Class::Transient(format!(
                    "ended by the idle limit while the CLI was retrying an API error: {what}"
                ))
            }),
            _ => None,
        };
        // An agent that could not start in the sandbox is a set-up to change, not a failed
        // attempt: what it printed names what the sandbox hid.
        let class = match class {
            Some(c) if stream.result.is_none() && c != agent::Class::Success => Some(
                crate::bridge::command_of(&self.state_dir, &run.task_id)
                    .and_then(|cmd| crate::sandbox::refusal(&stderr, &cmd, &super::confine::home()))
                    .map_or(c, |r| agent::Class::InvocationBug {
                        kind: agent::BugKind::Sandboxed,
                        message: r.said(),
                    }),
            ),
            other => other,
        };
        // The window a resume of the session will have decides how full its context is; a
        // review's session is never resumed.
        let resume_model = match run.kind {
            RunKind::Review => None,
            RunKind::Plan | RunKind::Attempt => settings.agent_for(m).model,
        };
        for why in &stream.compactions_failed {
            voice.say(&format!(
                "compaction: step {}'s session could not compact its context (not counted): {why}",
                run.step
            ));
        }
        let result = stream.result.as_ref();
        Observed {
            class,
            answer: result.and_then(|r| r.result.clone()).unwrap_or_default(),
            // As the narrowest rules that would allow them: what a DENIED gate offers.
            denials: result.map(|r| r.denied_rules.clone()).unwrap_or_default(),
            deferred: result.and_then(|r| r.deferred.clone()),
            background_stopped: stream.background_stopped.clone(),
            cost_usd: stream.cost_usd.unwrap_or(0.0),
            session_tokens: stream.session_tokens,
            run_tokens: stream.run_tokens,
            backend: settings.backend_of(m, run.kind, run.step),
            context_pct: stream.context_pct(resume_model.as_deref()),
            compactions: stream.compactions,
            session_id: stream.session_id.clone(),
            exit_code: report.exit_code,
            elapsed: report.elapsed,
            git_head: super::git::head(&self.workdir),
            tree_changes: if run.kind == RunKind::Review {
                self.tree_changes_in_review(&run.task_id)
            } else {
                Vec::new()
            },
            reach: if run.kind == RunKind::Review {
                self.reach(&run.task_id, backend, &stream)
            } else {
                // Only a review's changes are attributed.
                engine::review::Reach::MayWrite("is not a reviewer".into())
            },
            report: format!("tasks/{}/stdout", run.task_id),
            end,
            now: Utc::now(),
        }
    }

    /// What the failed step `step` of the loop `m` last said: its agent's answer without the
    /// verdict line, and the end of its stderr (the run's report is on record in RESULTS by
    /// now).
    pub(super) fn failure_detail(
        &self,
        settings: &Settings,
        m: &M1,
        step: u32,
    ) -> (Option<String>, Vec<String>) {
        let Some(report) = m.results.get(&step).and_then(|r| r.report.clone()) else {
            return (None, Vec::new());
        };
        let stdout = self.state_dir.join(&report);
        let backend = settings.backend_of(m, RunKind::Attempt, step);
        let answer = agent::read_output(backend, &stdout)
            .ok()
            .and_then(|s| s.result.and_then(|r| r.result))
            .map(|a| agent::without_verdict(&a));
        let stderr = stdout
            .parent()
            .map(|d| crate::decision_log::last_lines(&d.join(crate::bridge::STDERR_FILE), 10))
            .unwrap_or_default();
        (answer, stderr)
    }

    /// The prompt of `run` of the loop `m`, in a session it `resumed` or not: chosen by the
    /// engine from M1.md, with what only I/O can tell gathered for it.
    pub(super) fn prompt(
        &self,
        settings: &Settings,
        voice: &Voice,
        m: &M1,
        run: &RunOnRecord,
        resumed: bool,
    ) -> String {
        let (kind, step) = (run.kind, run.step);
        let p = Prompt::choose(kind, m, step, run.number, resumed);
        let layout = crate::layout::Layout::dir(&self.state_dir);
        let mut g = Gathered {
            handoff_path: layout.handoff(step).display().to_string(),
            ..Gathered::default()
        };
        if p.needs_handoff() {
            g.handoff_note = self.handoff_note(settings, voice, m, step);
        }
        if p.needs_review_material() {
            self.review_material(settings, m, step, &mut g);
        }
        let text = engine::prompt::render(&p, m, step, &settings.caps(m), &g);
        let hooked = agent::backend_for(settings.backend_of(m, kind, step))
            .hook_settings(std::path::Path::new("loop"))
            .is_some();
        if hooked || resumed || kind != RunKind::Attempt {
            return text;
        }
        // No `SessionStart` hook to tell a fresh session where the loop stands: its prompt
        // says it first.
        let file = std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone());
        let context =
            engine::prompt::session_context(m, step, &file.display().to_string(), &g.handoff_path);
        format!("{context}\n\n{text}")
    }

    /// What a fresh session of `step` is handed: the agent's own note (from `STEP_RESTART`),
    /// the last failure, the last answer, the files changed.
    fn handoff_note(&self, settings: &Settings, voice: &Voice, m: &M1, step: u32) -> String {
        let layout = crate::layout::Layout::dir(&self.state_dir);
        // The agent writes this note, so it is read as the agent's: never through a link.
        let name = format!("step-{step}.md");
        let own = match crate::named_file::read_beneath(
            &layout.handoff_dir(),
            std::path::Path::new(&name),
            HANDOFF_CAP,
        ) {
            Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Err(crate::named_file::ReadError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                None
            }
            Err(e) => {
                voice.say(&format!(
                    "handoff: step {step}'s note (handoff/{name}) was not taken: {e}"
                ));
                None
            }
        };
        let r = m.result(step);
        let last = r
            .report
            .as_ref()
            .and_then(|p| {
                let backend = settings.backend_of(m, RunKind::Attempt, step);
                agent::read_output(backend, &self.state_dir.join(p)).ok()
            })
            .and_then(|s| s.result.and_then(|r| r.result));
        let stat = super::git::diff_stat(&self.workdir);
        engine::prompt::handoff_note(
            own.as_deref(),
            r.error.as_deref(),
            last.as_deref(),
            stat.as_deref(),
        )
    }

    /// A review's material: the VERIFY command in force and the end of what it printed, and
    /// the step's diff from the commit it began at.
    fn review_material(&self, settings: &Settings, m: &M1, step: u32, g: &mut Gathered) {
        let r = m.result(step);
        g.verify_cmd = settings.verify(m);
        if g.verify_cmd.is_some() {
            g.verify_tail = r
                .report
                .as_deref()
                .and_then(|p| {
                    std::path::Path::new(p)
                        .parent()
                        .map(|d| d.join("verify.log"))
                })
                .map(|p| crate::verify::tail(&self.state_dir.join(p), 40))
                .unwrap_or_default();
        }
        g.diff = super::git::review_diff(
            &self.workdir,
            r.base_head.as_deref(),
            &self.state_dir,
            DIFF_CAP,
        );
    }

    /// The settings file every agent call of this loop with hooks gets (`settings`: the
    /// backend's, for its hooks), written when missing or out of date; its path.
    pub(super) fn agent_settings(
        &self,
        settings: &serde_json::Value,
    ) -> crate::error::Result<String> {
        let path = crate::layout::Layout::dir(&self.state_dir).agent_settings();
        let text =
            serde_json::to_string_pretty(settings).context("while encoding the agent settings")?;
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, &text)
                .with_context(|| format!("while writing {}", path.display()))?;
        }
        let abs = std::path::absolute(&path).unwrap_or(path);
        Ok(abs.display().to_string())
    }

    /// Notes the work tree as review task `task_id` will find it (nothing outside git).
    pub(super) fn note_tree_before_review(&self, task_id: &str) -> crate::error::Result<()> {
        let Some(tree) = super::tree::snapshot(&self.workdir, &self.state_dir) else {
            return Ok(());
        };
        let path = crate::layout::Layout::dir(&self.state_dir).review_tree(task_id);
        let text = serde_json::to_vec(&tree).context("while encoding the work tree")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("while writing {}", path.display()))?;
        Ok(())
    }

    /// What the run of task `task_id` (on `backend`) could write: nothing where the loop's
    /// sandbox kept its work tree read-only; else whatever its stream shows it wrote (a tool
    /// call that writes and ran), else what its CLI let it (see
    /// [`crate::agent::Backend::reads_only`]), judged from the command the task ran.
    fn reach(
        &self,
        task_id: &str,
        backend: &dyn crate::agent::Backend,
        stream: &crate::agent::StreamSummary,
    ) -> engine::review::Reach {
        use engine::review::Reach;
        let command = crate::bridge::command_of(&self.state_dir, task_id);
        // Confined with its work tree read-only, it could write nothing there, whatever it
        // called: the tree check decides nothing.
        let tree = std::path::absolute(&self.workdir).unwrap_or_else(|_| self.workdir.clone());
        let state = std::path::absolute(&self.state_dir).unwrap_or_else(|_| self.state_dir.clone());
        if command
            .as_deref()
            .is_some_and(|c| crate::sandbox::kept_read_only(c, &tree, &state))
        {
            return Reach::ReadOnly("ran in the loop's sandbox, its work tree read-only".into());
        }
        if !stream.writes.is_empty() {
            const SHOWN: usize = 3;
            let mut calls = stream.writes[..stream.writes.len().min(SHOWN)].join(", ");
            if stream.writes.len() > SHOWN {
                let _ = std::fmt::Write::write_fmt(
                    &mut calls,
                    format_args!(" and {} more", stream.writes.len() - SHOWN),
                );
            }
            return Reach::MayWrite(format!("called {calls}"));
        }
        let args = command.map(|c| c.into_iter().skip(1).collect::<Vec<_>>());
        match args.as_deref().map(|a| backend.reads_only(a)) {
            Some(Some(how)) => Reach::ReadOnly(how),
            Some(None) => Reach::MayWrite(format!(
                "could write (its {} run was not kept to reading)",
                backend.name()
            )),
            None => Reach::MayWrite(format!(
                "may have written (the command of task {task_id} cannot be read)"
            )),
        }
    }

    /// What changed in the work tree since review task `task_id` started; nothing when the
    /// tree was not noted (outside git).
    fn tree_changes_in_review(&self, task_id: &str) -> Vec<String> {
        let path = crate::layout::Layout::dir(&self.state_dir).review_tree(task_id);
        let before = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<super::tree::Snapshot>(&b).ok());
        let after = super::tree::snapshot(&self.workdir, &self.state_dir);
        match (before, after) {
            (Some(before), Some(after)) => super::tree::changes(&before, &after),
            _ => Vec::new(),
        }
    }
}

/// The most of an agent's handoff note a fresh session is handed.
const HANDOFF_CAP: u64 = 256 * 1024;
