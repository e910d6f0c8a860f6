//! `loop start` and `loop resume`: a new loop written, a loop carried on.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{SecondsFormat, Utc};

use super::{RunOptions, Runner};
use super::{lock, pull_request, stopfile};
use crate::decision_log;
use crate::error::{Error, Result};
use crate::exit::Status as ExitStatus;
use crate::m1::keys::{AgentKey, LimitKey, Top};
use crate::m1::settings::{AgentKind, DEFAULTS};
use crate::m1::{Document, Edit, KeyPath, Status, StepState, Store, StoreError};
use crate::notifier::Event;
use crate::runner::settings::{Overrides, Settings};

const TEMPLATE: &str = include_str!("../../templates/M1.md");

/// What `loop start` was given.
#[derive(Debug, Clone, Default)]
pub(crate) struct StartRequest {
    pub goal: String,
    pub steps: Vec<String>,
    pub plan: Option<PathBuf>,
    pub constraints: Option<String>,
    pub overrides: Overrides,
    pub detach: bool,
    pub force: bool,
    /// Plan (or take the steps given), write M1.md, show the plan, and run no step: the loop
    /// waits IDLE for `loop resume`.
    pub plan_only: bool,
    /// The project directory the agent works in (default: the current directory).
    pub workdir: Option<PathBuf>,
    /// The issue the loop is started from, and its pull request.
    pub github: super::pull_request::GithubRequest,
}

pub(super) fn refuse_if_stopped(state_dir: &Path) -> Result<()> {
    if let Some(stop) = stopfile::present(state_dir) {
        return Err(Error::waiting(format!(
            "the stop file {} exists, so no loop may run; remove it (`rm {}`) and try again",
            stop.display(),
            stop.display()
        )));
    }
    Ok(())
}

/// Moves an old M1.md aside (`M1.<time>.md`, then `M1.<time>-2.md`, … when that name is
/// taken) rather than overwriting it. The move never replaces a file: two archives made in
/// the same second keep both.
fn archive(file: &Path) -> anyhow::Result<PathBuf> {
    let stem = file
        .file_stem()
        .map_or_else(|| "M1".into(), |s| s.to_string_lossy().into_owned());
    let stamp = Utc::now().format("%Y%m%dT%H%M%S");
    for n in 1..=1000 {
        let name = if n == 1 {
            format!("{stem}.{stamp}.md")
        } else {
            format!("{stem}.{stamp}-{n}.md")
        };
        let to = file.with_file_name(name);
        match rename_noreplace(file, &to) {
            Ok(()) => return Ok(to),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e).with_context(|| format!("while archiving {}", file.display()));
            }
        }
    }
    anyhow::bail!(
        "while archiving {}: a thousand archives of this second exist",
        file.display()
    )
}

/// `rename` that fails with `AlreadyExists` instead of replacing `to`.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::errno::Errno;
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(()),
            // A file system without the flag: fall back to link semantics below.
            Err(Errno::EINVAL | Errno::ENOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // A hard link never replaces its target; then the old name goes.
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// Refuses a `--file` that names something other than a regular file (a symlink to one is
/// one): a directory, a FIFO, a device. What is there is no loop to archive: `--force`
/// renamed a directory, everything in it, to `DIR.<time>.md/` and wrote the new M1.md in its
/// place. Nothing of it is moved or replaced, whatever the flags.
fn refuse_if_not_a_file(file: &Path) -> Result<()> {
    let Some(kind) = std::fs::metadata(file)
        .ok()
        .and_then(|m| crate::named_file::not_regular(&m))
    else {
        return Ok(());
    };
    let hint = if kind == "a directory" {
        format!(
            "name the file to write in it instead (`--file {}`)",
            file.join("M1.md").display()
        )
    } else {
        "name a regular file, or a path where none is yet".to_owned()
    };
    Err(Error::bad_input(format!(
        "{} is not a regular file but {kind}, so no M1.md can be written there, and it is left \
         as it is; {hint}",
        file.display()
    )))
}

/// How long a start waits for the runner of a loop that ended to let go of it.
const ENDED_RUNNER_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Checks what a new loop would replace; archives it when allowed.
fn make_room(file: &Path, force: bool) -> Result<Option<PathBuf>> {
    if !file.exists() {
        return Ok(None);
    }
    if let Some(pid) = lock::holder(file) {
        // A loop that ended has a runner still letting go of it a moment (the report, the
        // last messages queued): a start then, as a person's right after the DONE message,
        // waits for it rather than refusing a loop nobody drives any more.
        let ended = crate::m1::load(file)
            .is_ok_and(|doc| matches!(doc.view().status, Status::Done | Status::Failed));
        if let Some(pid) = if ended {
            lock::wait_released(file, ENDED_RUNNER_GRACE)
        } else {
            Some(pid)
        } {
            return Err(Error::bad_input(format!(
                "a runner (pid {pid}) is driving {}; stop it first ({})",
                file.display(),
                super::stopfile::command_for(file)
            )));
        }
    }
    match crate::m1::load(file) {
        Ok(doc) => {
            let m = doc.view();
            if matches!(m.status, Status::Running | Status::Waiting) && !force {
                return Err(Error::bad_input(format!(
                    "{} holds a loop that is {} (goal: {}); `loop resume` carries it on, \
                     `loop start --force` archives it and starts anew",
                    file.display(),
                    m.status.as_str(),
                    m.goal
                )));
            }
        }
        Err(StoreError::DiskInvalid(errs)) if !force => {
            return Err(Error::bad_input(format!(
                "{} is not a valid M1.md, and is left as it is; fix it, or use --force to archive it \
                 and start anew:\n{errs}",
                file.display(),
            )));
        }
        Err(StoreError::DiskInvalid(_)) => {}
        Err(e) => return Err(anyhow::Error::new(e).into()),
    }
    Ok(Some(archive(file)?))
}

/// Refuses an agent program that is missing or cannot be executed (an unknown permission mode
/// is refused as the flag or `loop.yaml` is read).
fn check_agent(settings: &Settings) -> Result<()> {
    let cfg = &settings.agent;
    crate::runner::settings::find_program(&cfg.program).map_err(|e| {
        Error::bad_input(format!(
            "{e}; {}; nothing was changed",
            crate::runner::settings::install_hint(cfg.backend)
        ))
    })?;
    let refuse = |backend: AgentKind, r: &crate::agent::Refused| {
        Error::bad_input(format!(
            "the agent ({backend}) cannot honour {r}; nothing was changed (the setting came from \
             a flag of `loop start` or loop.yaml)"
        ))
    };
    let used = settings.backends_for_new();
    let session = crate::agent::Session::New(String::new());
    // The call's own files go to the state directory, which a run gives it: the settings are
    // checked here, not the place.
    let checked = crate::agent::AgentConfig {
        files_dir: Some(std::path::PathBuf::from(".")),
        ..cfg.clone()
    };
    for backend in used {
        let agent = crate::agent::backend_for(backend);
        if backend == cfg.backend {
            agent
                .invocation(&checked, "", &session)
                .map_err(|r| refuse(backend, &r))?;
        } else {
            let program = crate::runner::settings::other_program(backend);
            crate::runner::settings::find_program(&program).map_err(|e| {
                Error::bad_input(format!(
                    "{e} (the {backend} agent, for reviews or as the fallback); {}, or set {}; \
                     nothing was changed",
                    crate::runner::settings::install_hint(backend),
                    backend.program_env()
                ))
            })?;
        }
        let capped = settings.caps_for_new().max_cost_usd.is_some();
        if let Some(r) = crate::agent::dollar_cap_refused(agent, capped) {
            return Err(refuse(backend, &r));
        }
    }
    Ok(())
}

/// Steps at once need a git repository with a commit to branch them from, and no more of
/// them than a plan may have (more could never run: a bigger number only looks like it does).
fn check_parallel(req: &StartRequest, settings: &Settings) -> Result<()> {
    let Some(n) = settings.parallel_for_new() else {
        return Ok(());
    };
    let max = settings.caps_for_new().max_steps;
    if n > max {
        let given = if settings.overrides.parallel.is_some() {
            format!("--parallel {n}")
        } else {
            format!("limits.parallel: {n} (loop.yaml)")
        };
        return Err(Error::bad_input(format!(
            "{given} is more steps at once than a plan may have (MAX_STEPS {max}): at most {max} \
             could ever run at once; give {max} or less (or raise --max-steps); nothing was \
             changed"
        )));
    }
    let dir = match &req.workdir {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("while reading the current directory")?,
    };
    if crate::runner::git::head(&dir).is_some() {
        return Ok(());
    }
    Err(Error::bad_input(format!(
        "--parallel {n} runs steps in git worktrees, but {} is not a git repository with a \
         commit (`git init && git commit --allow-empty -m start`); nothing was changed",
        dir.display()
    )))
}

/// A loop is never silently unconfined: with a sandbox asked for (the default), bubblewrap
/// must be able to confine a run here, or the start is refused saying what to install or how
/// to opt out; and no program a run is shown the directory of may show it the home.
fn check_sandbox(settings: &Settings) -> Result<()> {
    let sandbox = settings.sandbox_for_new();
    if sandbox.mode == crate::m1::SandboxMode::Off {
        return Ok(());
    }
    crate::sandbox::probe().map(drop).map_err(|why| {
        Error::bad_input(format!(
            "every agent run is confined by bubblewrap unless you say otherwise, and {why}; \
             nothing was started"
        ))
    })?;
    let others = settings.review_for_new().backend.into_iter();
    check_program_dirs(
        &sandbox,
        &programs_of(&settings.agent, others.chain(settings.fallbacks_for_new())),
        "nothing was started",
    )
}

/// Each program a confined run of the loop is shown the directory of, named for a message:
/// the agent's (`agent`), a reviewer's or a fallback's on another backend (`others`), and the
/// loop's own binary, which the agent's hooks run.
fn programs_of(
    agent: &crate::agent::AgentConfig,
    others: impl IntoIterator<Item = AgentKind>,
) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    if let Ok(p) = crate::runner::settings::find_program(&agent.program) {
        out.push(("the agent program".to_owned(), p));
    }
    for backend in others.into_iter().filter(|b| *b != agent.backend) {
        let program = crate::runner::settings::other_program(backend);
        if let Ok(p) = crate::runner::settings::find_program(&program) {
            out.push((format!("the {backend} agent's program"), p));
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        out.push(("the loop's own program".to_owned(), exe));
    }
    out
}

/// With a sandbox in force, refuses a program whose directory a confined run would be shown
/// and that is the person's home or holds it (`~/agent`, `/agent`): the run would see the
/// whole home. `then`: what the refusal left undone.
fn check_program_dirs(
    sandbox: &crate::runner::settings::SandboxSettings,
    programs: &[(String, std::path::PathBuf)],
    then: &str,
) -> Result<()> {
    if sandbox.mode == crate::m1::SandboxMode::Off {
        return Ok(());
    }
    let home = crate::runner::confine::home();
    for (what, program) in programs {
        if let Some(why) = crate::sandbox::program_shows_home(what, program, &home) {
            return Err(Error::bad_input(format!("{why}; {then}")));
        }
    }
    Ok(())
}

/// Before a resume runs anything: the agent the file names can be started (a loop that is
/// DONE or FAILED, or a file that does not parse, is left to the runner to report).
pub(super) fn check_agent_of(file: &Path, settings: &Settings) -> Result<()> {
    let Ok(doc) = crate::m1::load(file) else {
        return Ok(());
    };
    let m = doc.view();
    if matches!(m.status, Status::Done | Status::Failed) {
        return Ok(());
    }
    crate::runner::settings::check_program_in(&doc, file)
        .map_err(|errs| Error::bad_input(format!("{errs}; then `loop resume` again")))?;
    let agent = settings.agent_for(&m);
    check_program_dirs(
        &settings.sandbox(&m),
        &programs_of(
            &agent,
            (m.agent.review_backend.into_iter()).chain(m.agent.fallback.iter().copied()),
        ),
        "nothing was resumed",
    )?;
    if m.agent.program.is_some() {
        // The file's program outranks every other: it is the one that would run, just found.
        return Ok(());
    }
    crate::runner::settings::find_program(&agent.program).map_err(|e| {
        Error::bad_input(format!(
            "{e}; {}; then `loop resume` again",
            crate::runner::settings::install_hint(agent.backend)
        ))
    })?;
    Ok(())
}

/// Every setting that changes what runs, so that any later runner runs the same thing:
/// `LIMITS:` with exact durations, and `AGENT:`, as [`super::settings::as_written`] writes
/// them (a key the loop runs without is left out).
fn settings_edits(settings: &Settings) -> Vec<Edit> {
    let written = settings.written_for_new();
    let put = |path: KeyPath| match written.get(&path).cloned().flatten() {
        Some(v) => Edit::Set(path, v),
        None => Edit::Remove(path),
    };
    let mut edits = vec![
        put(LimitKey::MaxRetries.path()),
        put(LimitKey::MaxSteps.path()),
        put(LimitKey::StepTimeout.path()),
        put(AgentKey::Program.path()),
    ];
    let (backend_pinned, parallel_pinned) = settings.pinned_for_new();
    if settings.agent.backend != AgentKind::default() || backend_pinned {
        edits.push(put(AgentKey::Backend.path()));
    }
    if parallel_pinned && settings.parallel_for_new().is_none() {
        edits.push(LimitKey::Parallel.set(DEFAULTS.parallel.to_string()));
    }
    edits.push(put(AgentKey::AllowedTools.path()));
    edits.extend(
        [
            LimitKey::IdleTimeout.path(),
            LimitKey::MaxCostUsd.path(),
            AgentKey::PermissionMode.path(),
            AgentKey::Model.path(),
            AgentKey::MaxTurns.path(),
            AgentKey::MaxBudgetUsd.path(),
            AgentKey::Sandbox.path(),
        ]
        .into_iter()
        .chain(settings.sandbox_for_new().lists().map(|(k, _)| k.path()))
        .chain([AgentKey::ExtraArgs.path()])
        .map(put),
    );
    edits.push(Top::CommitSteps.set(if settings.commit_for_new() {
        "on"
    } else {
        "off"
    }));
    let used = started_with(settings);
    if !used.is_empty() {
        edits.push(Top::Env.set(used.join(", ")));
    }
    edits
}

/// The variables of this environment that the loop's runs use, by name: each backend's own
/// (its key, its settings) and its mode's, the person's `SANDBOX_ENV`, and `OTEL_*`. What a
/// later runner must have to carry the loop on as it was started (see `ENV`).
fn started_with(settings: &Settings) -> Vec<String> {
    let mut patterns: Vec<String> = vec!["OTEL_*".to_owned()];
    for b in settings.backends_for_new() {
        let b = crate::agent::backend_for(b);
        patterns.extend(b.own_env().iter().map(|s| (*s).to_owned()));
        if let Some(mode) = b.mode(&|k| std::env::var(k).ok()) {
            patterns.extend(mode.env.iter().map(|s| (*s).to_owned()));
        }
    }
    patterns.extend(settings.sandbox_for_new().env);
    let mut names: Vec<String> = std::env::vars_os()
        .filter(|(_, v)| !v.is_empty())
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| crate::bridge::env_kept(&patterns, k))
        // The loop's own credentials never reach a run, so no run needs them.
        .filter(|k| !crate::notifier::CREDENTIALS.contains(&k.as_str()))
        .collect();
    names.sort();
    names
}

/// Whether this environment has every variable the loop of `m` was started with (`ENV`);
/// `Err`: which it lacks, and what to do.
///
/// # Errors
/// That explanation.
pub(crate) fn check_env(m: &crate::m1::M1, file: &Path) -> Result<()> {
    let missing: Vec<&str> = m
        .env
        .iter()
        .map(String::as_str)
        .filter(|k| std::env::var_os(k).is_none_or(|v| v.is_empty()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::bad_input(format!(
        "{} was started with {} set, which its runs use, and this environment lacks {}: carry \
         it on from a shell that has {} (`loop resume`), or take {} out of ENV in M1.md to run \
         without {}; nothing was carried on",
        file.display(),
        m.env.join(", "),
        missing.join(", "),
        if missing.len() == 1 { "it" } else { "them" },
        if missing.len() == 1 { "it" } else { "them" },
        if missing.len() == 1 { "it" } else { "them" },
    )))
}

/// The text of a new M1.md.
fn new_document(
    req: &StartRequest,
    steps: &[(bool, String)],
    settings: &Settings,
    begun: Option<&pull_request::Begun>,
) -> anyhow::Result<String> {
    let workdir = match &req.workdir {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("while reading the current directory")?,
    };
    let mut edits = settings_edits(settings);
    edits.insert(0, Top::Goal.set(req.goal.clone()));
    if let Some(c) = req.constraints.as_ref().filter(|c| !c.trim().is_empty()) {
        edits.push(Top::Constraints.set(c.clone()));
    }
    if !steps.is_empty() {
        edits.push(Edit::SetSteps(
            steps
                .iter()
                .map(|(done, t)| {
                    (
                        if *done {
                            StepState::Done
                        } else {
                            StepState::Pending
                        },
                        t.clone(),
                    )
                })
                .collect(),
        ));
        let first = steps.iter().position(|(d, _)| !d).map_or(0, |i| i + 1);
        edits.push(Top::NextAction.set(format!("Start step {first}")));
    }
    if let Some(v) = settings.verify_for_new() {
        edits.push(Top::Verify.set(v));
    }
    let review = settings.review_for_new();
    if review.on {
        edits.push(Top::Review.set("on"));
    }
    if let Some(model) = review.model {
        edits.push(AgentKey::ReviewModel.set(model));
    }
    if let Some(backend) = review.backend {
        edits.push(AgentKey::ReviewBackend.set(backend.as_str()));
    }
    if let Some(n) = review.max_retakes {
        edits.push(LimitKey::MaxRetakes.set(n.to_string()));
    }
    if let Some(n) = settings.parallel_for_new() {
        edits.push(LimitKey::Parallel.set(n.to_string()));
    }
    if let Some((to, after)) = settings.fallback_for_new() {
        edits.push(AgentKey::Fallback.set(crate::m1::typed::format_backends(&to)));
        edits.push(LimitKey::FallbackAfter.set(crate::duration::exact(after)));
    }
    if settings.approve_plan_for_new() {
        edits.push(Top::ApprovePlan.set("on"));
    }
    edits.push(Top::Workdir.set(workdir.display().to_string()));
    edits.push(Top::LoopId.set(new_loop_id()));
    if let Some(p) = &req.plan {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
        edits.push(Top::PlanFile.set(abs.display().to_string()));
    }
    if req.plan_only {
        if steps.is_empty() {
            // The planning call runs, and the loop stops once it has planned.
            edits.push(Top::PlanOnly.set("on"));
        } else {
            edits.push(Edit::Status(Status::Idle));
            edits.push(
                Top::NextAction
                    .set("Read the plan (edit it if you like), then `loop resume` runs it"),
            );
        }
    }
    edits.push(Top::StartedAt.set(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)));
    edits.extend(pull_request::edits(&req.github, begun));
    new_text(&edits)
}

/// The text of a new loop's M1.md: the template with `edits` made (a new loop's, or a step's
/// own loop's).
pub(super) fn new_text(edits: &[Edit]) -> anyhow::Result<String> {
    let mut doc = Document::parse(TEMPLATE).map_err(|e| anyhow::anyhow!("templates/M1.md: {e}"))?;
    for e in edits {
        doc.apply(e);
    }
    Ok(doc.render())
}

/// The request as it starts a loop, the issue it names (`--issue`, read), whose title is
/// then the goal, and the project directory.
///
/// # Errors
/// As [`pull_request::read_issue`], or no current directory.
fn from_issue(req: &StartRequest) -> Result<(StartRequest, Option<super::github::Issue>, PathBuf)> {
    let workdir = match &req.workdir {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("while reading the current directory")?,
    };
    let issue = pull_request::read_issue(&req.github, &workdir)?;
    let mut req = req.clone();
    if let Some(i) = &issue {
        req.goal = pull_request::goal_of(i);
    }
    Ok((req, issue, workdir))
}

/// `loop start`.
///
/// # Errors
/// Bad input (exit 2), a stop file (exit 3), or I/O failures.
pub(crate) fn start(file: &Path, req: &StartRequest, opts: &RunOptions) -> Result<ExitStatus> {
    if !req.detach {
        stopfile::block_interrupt();
    }
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    refuse_if_stopped(&state_dir)?;
    refuse_if_not_a_file(file)?;
    let (req, issue, workdir) = &from_issue(req)?;
    if req.goal.trim().is_empty() {
        return Err(Error::bad_input(
            "the goal is empty; say what the loop should achieve",
        ));
    }
    let settings = Settings::load(&state_dir, req.overrides.clone())?;
    let steps: Vec<(bool, String)> = match &req.plan {
        Some(p) if !req.steps.is_empty() => {
            return Err(Error::bad_input(format!(
                "give the steps either with --step or with --plan {}, not both",
                p.display()
            )));
        }
        Some(p) => crate::runner::plan_import::read(p)?,
        None => req
            .steps
            .iter()
            .map(|s| (false, s.trim().to_string()))
            .collect(),
    };
    if let Some((i, _)) = steps.iter().enumerate().find(|(_, (_, t))| t.is_empty()) {
        return Err(Error::bad_input(format!("step {} is empty", i + 1)));
    }
    let max = settings.caps_for_new().max_steps;
    if steps.len() > usize::try_from(max).unwrap_or(usize::MAX) {
        return Err(Error::bad_input(format!(
            "the plan has {} steps, over MAX_STEPS {max}; nothing was started (split the goal, or \
             raise the cap with --max-steps)",
            steps.len()
        )));
    }
    // Everything is checked before anything changes: a refusal archives nothing and writes
    // no M1.md.
    check_agent(&settings)?;
    check_parallel(req, &settings)?;
    check_sandbox(&settings)?;
    let begun = pull_request::begin(&req.github, issue.clone(), workdir)?;
    let text = new_document(req, &steps, &settings, begun.as_ref())?;
    if let Err(errs) = Document::parse(&text) {
        return Err(Error::bad_input(format!(
            "the settings given (flags, environment, loop.yaml) do not make a valid M1.md; \
             nothing was changed:
{errs}"
        )));
    }
    crate::dirs::create_state_dir(&state_dir)
        .with_context(|| format!("while creating {}", state_dir.display()))?;
    if let Some(old) = make_room(file, req.force)? {
        crate::outln!("archived the previous loop as {}", old.display());
    }
    // Once nothing can refuse the start any more.
    pull_request::switch(begun.as_ref(), workdir)?;
    keep_out_of_git(&state_dir)?;
    Store::create(file, &text)?;
    // A detached runner's output is its loop's: the last loop's, appended to, read as this
    // one's. (Every runner's decisions stay in loop.log, which `loop logs` reads.)
    let _ = std::fs::remove_file(crate::layout::Layout::of(file).runner_out());
    let _ = decision_log::append(&state_dir, &format!("start: new loop, goal: {}", req.goal));
    say_if_nothing_is_committed(req, &settings, &state_dir);
    if req.plan_only && !steps.is_empty() {
        crate::outln!("{}", plan_lines(&steps));
        crate::outln!("nothing runs yet: `loop resume` runs the plan");
        return Ok(ExitStatus::Ok);
    }
    if req.detach {
        return super::detach::detach(file, None);
    }
    let mut runner = Runner::open(file, settings, opts)?;
    runner.watch.catch_interrupt();
    // With --approve-plan, the plan's gate shows the plan.
    if !steps.is_empty() && !runner.view().approve_plan {
        let m = runner.view();
        runner.voice.notify(&Event::Started {
            goal: m.goal.clone(),
            steps: m.plan.steps.iter().map(|s| s.text.clone()).collect(),
            sandbox: Some(super::confine::loop_sandbox_words(&m, &runner.settings)),
        });
    }
    runner.drive_in_view()
}

/// A commit per step is promised only where there is git to make it: where there is none, the
/// start says so, on the terminal and in the log.
fn say_if_nothing_is_committed(req: &StartRequest, settings: &Settings, state_dir: &Path) {
    let workdir = req
        .workdir
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    if settings.commit_for_new() && !crate::runner::git::in_repo(&workdir) {
        let said = format!(
            "commit: {} is not in a git repository, so no step's work will be committed \
             (`git init` first to have each DONE step a commit of its own)",
            workdir.display()
        );
        crate::outln!("loop: {said}");
        let _ = decision_log::append(state_dir, &said);
    }
}

/// Keeps the loop's state directory out of the agent's `git add -A`, whoever made it, and
/// says what it did, or why it could not.
fn keep_out_of_git(state_dir: &Path) -> Result<()> {
    use crate::dirs::GitGuard;
    match crate::dirs::keep_out_of_git(state_dir)
        .with_context(|| format!("while keeping {} out of git", state_dir.display()))?
    {
        GitGuard::Out => {}
        GitGuard::Wrote => crate::outln!(
            "{} was in git's sight: wrote a .gitignore holding `*` there, so the loop's state \
             stays out of the agent's commits",
            state_dir.display()
        ),
        GitGuard::Shared(why) => crate::errln!(
            "warning: the loop's files in {} would go into a commit of everything: {why}, so \
             no .gitignore holding `*` is written there; keep M1.md in a directory of its own \
             (the default state/), or have git ignore the loop's files",
            state_dir.display()
        ),
    }
    Ok(())
}

/// A loop must be at `file` for a command about it.
pub(super) fn must_exist(file: &Path) -> Result<()> {
    if file.exists() {
        return Ok(());
    }
    Err(Error::bad_input(format!(
        "no loop at {}: start one with `loop start \"GOAL\"`",
        file.display()
    )))
}

/// What every command that carries an existing loop on does first: a foreground runner takes
/// Ctrl-C as a stop; the loop must exist and no stop file may hold it. Its state directory.
pub(super) fn prepare_to_carry_on(file: &Path, detach_it: bool) -> Result<PathBuf> {
    if !detach_it {
        stopfile::block_interrupt();
    }
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    must_exist(file)?;
    refuse_if_stopped(&state_dir)?;
    Ok(state_dir)
}

/// `loop resume`, by a person (`revived_by` none) or as a revival of a loop whose runner died.
///
/// # Errors
/// As [`resume`].
pub(crate) fn resume_as(
    file: &Path,
    detach_it: bool,
    overrides: Overrides,
    opts: &RunOptions,
    revived_by: Option<&str>,
) -> Result<ExitStatus> {
    let state_dir = prepare_to_carry_on(file, detach_it)?;
    if std::env::var_os("LOOP_DETACHED").is_some() {
        // Own session: the shell or chat that started us can go away.
        let _ = nix::unistd::setsid();
    }
    let settings = Settings::load(&state_dir, overrides)?;
    check_agent_of(file, &settings)?;
    if detach_it {
        if let Some(pid) = lock::holder(file) {
            return Err(Error::bad_input(format!(
                "a runner (pid {pid}) already drives {}; stop it first ({})",
                file.display(),
                super::stopfile::command_for(file)
            )));
        }
        return super::detach::detach(file, revived_by);
    }
    let mut runner = Runner::open(file, settings, opts)?;
    runner.watch.catch_interrupt();
    let m = runner.view();
    match m.status {
        Status::Done => {
            runner.finish_end();
            // A pull request that could not be opened at DONE is tried again.
            runner.open_pull_request();
            crate::outln!(
                "{}: the loop is DONE ({}); nothing to resume",
                file.display(),
                m.goal
            );
            return Ok(ExitStatus::Ok);
        }
        Status::Failed => {
            // A comment on the issue that a runner killed right after FAILED did not make.
            runner.comment_on_issue();
            crate::outln!(
                "{}: the loop is FAILED: {}\nnext: {}",
                file.display(),
                m.last_action.clone().unwrap_or_default(),
                m.next_action.clone().unwrap_or_default()
            );
            return Ok(ExitStatus::Failed);
        }
        Status::Waiting | Status::Idle => {
            runner.commit(&[
                Edit::Status(Status::Running),
                Top::LastAction.set(format!("Resumed by hand from {}", m.status.as_str())),
            ])?;
            runner.voice.say(&format!(
                "resume: {} → RUNNING by `loop resume`",
                m.status.as_str()
            ));
        }
        Status::Running => match revived_by {
            Some(by) => runner.revived(by),
            None => runner
                .voice
                .say("resume: STATUS RUNNING; carrying on from M1.md"),
        },
    }
    if revived_by.is_none() {
        super::revive::forget(file);
    }
    runner.drive_in_view()
}

/// A plan as a person reads it: a line saying how many steps (and how many of them are DONE
/// already, which never run), then one line each. `steps`: whether each is DONE, and its text.
#[must_use]
pub(crate) fn plan_lines(steps: &[(bool, String)]) -> String {
    use std::fmt::Write as _;
    let mut out = format!("plan: {} step(s)", steps.len());
    let done = steps.iter().filter(|(done, _)| *done).count();
    if done > 0 {
        let _ = write!(out, ", {done} already DONE");
    }
    for (i, (done, s)) in steps.iter().enumerate() {
        let _ = write!(out, "\n  {}. {s}", i + 1);
        if *done {
            out.push_str("  (already DONE: it does not run)");
        }
    }
    out
}

/// A new loop id: 12 hex digits, enough to tell loops of one state directory apart.
#[must_use]
pub(crate) fn new_loop_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}
