//! Each run the loop starts, confined as its `AGENT.SANDBOX` says: the runner's part of the
//! sandbox (what a run of each kind may see), [`crate::sandbox`] the mechanism.

use std::path::{Path, PathBuf};

use super::settings::{SandboxSettings, Settings};
use super::step_io::StepIo;
use crate::bridge::FireRequest;
use crate::m1::{M1, SandboxMode};
use crate::sandbox::{self, Access, Policy};

/// What a confined run is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RunOf<'a> {
    /// An agent's run: `writes` (a step's attempt) or only reads (planning, a review), on the
    /// backend `backend`, whose program is `program`.
    Agent {
        writes: bool,
        backend: crate::m1::AgentKind,
        program: &'a str,
    },
    /// VERIFY, in `work_tree` (the project, a step's worktree, the merge queue's).
    Verify { work_tree: &'a Path },
}

impl StepIo {
    /// `req`, a task of `run` whose directory will be `task_dir`, as the loop's sandbox
    /// (`settings`) runs it; `Err`: why it cannot be confined here (bubblewrap missing or
    /// unable to start). A loop whose sandbox is `off` runs `req` as it is.
    pub(super) fn confine(
        &mut self,
        settings: &SandboxSettings,
        mut req: FireRequest,
        run: RunOf<'_>,
        task_dir: &Path,
    ) -> Result<FireRequest, String> {
        if settings.mode == SandboxMode::Off {
            return Ok(req);
        }
        let bwrap = self.bwrap()?;
        if matches!(run, RunOf::Agent { .. }) {
            // The loop's hooks in the run hand back what they saw in its task's `hooks/`.
            req.hand_back = true;
        }
        let policy = policy(
            settings,
            &self.state_dir,
            &self.workdir,
            run,
            Some(task_dir),
        );
        Ok(sandbox::confine(req, &bwrap, &policy))
    }

    /// Whether this loop's runs can start as its sandbox (`settings`) says: `off`, or
    /// bubblewrap able to start here; `Err`: why not.
    pub(super) fn sandbox_ready(&mut self, settings: &SandboxSettings) -> Result<(), String> {
        if settings.mode == SandboxMode::Off {
            return Ok(());
        }
        self.bwrap().map(drop)
    }

    /// VERIFY as `how` says, confined in `work_tree` as the loop's sandbox (`settings`) says,
    /// until a stop.
    pub(super) fn verify_confined(
        &mut self,
        settings: &SandboxSettings,
        how: &crate::verify::Run<'_>,
        work_tree: &Path,
    ) -> crate::error::Result<crate::verify::Outcome> {
        self.sandbox_ready(settings)
            .map_err(|why| anyhow::anyhow!("the loop's sandbox cannot start: {why}"))?;
        let state_dir = self.state_dir.clone();
        let mut command = Vec::new();
        let mut confine = |req: FireRequest, task_dir: &Path| {
            let run = RunOf::Verify { work_tree };
            // Ready: this cannot fail now.
            let req = self
                .confine(settings, req.clone(), run, task_dir)
                .unwrap_or(req);
            command.clone_from(&req.command);
            req
        };
        let outcome = crate::verify::run_confined(how, &mut confine, &mut || {
            super::stopfile::requested(&state_dir).is_some()
        })?;
        // A failure on a path the sandbox hid is said as such, with the flag that grants it.
        Ok(match outcome {
            crate::verify::Outcome::Failed { code, tail } => {
                match sandbox::refusal(&tail, &command, &home()) {
                    Some(r) => crate::verify::Outcome::Refused {
                        code,
                        tail,
                        said: format!("{}, then `loop retry`", r.said()),
                    },
                    None => crate::verify::Outcome::Failed { code, tail },
                }
            }
            other => other,
        })
    }

    /// bubblewrap, checked once per runner: whether it can confine a run here.
    fn bwrap(&mut self) -> Result<PathBuf, String> {
        self.sandbox_probe
            .get_or_insert_with(sandbox::probe)
            .clone()
    }
}

/// How the runs of the loop `m`, whose settings are `settings`, are confined, in a few words:
/// for the start line, the first message, `loop status`.
pub(crate) fn loop_sandbox_words(m: &M1, settings: &Settings) -> String {
    let sandbox = settings.sandbox(m);
    let mut words = sandbox_words(&sandbox);
    let backend =
        crate::agent::backend_for(settings.backend_of(m, crate::engine::RunKind::Attempt, 1));
    if sandbox.mode == SandboxMode::Bwrap
        && let Some(mode) = backend.mode(&|k| std::env::var(k).ok())
    {
        let _ = std::fmt::Write::write_fmt(
            &mut words,
            format_args!(
                "; {} on {}: its runs keep {} and read {} credential file(s)",
                backend.name(),
                mode.name,
                mode.env.join(", "),
                mode.files.len()
            ),
        );
    }
    words
}

/// What a run of kind `run` sees, for a loop whose sandbox is `settings`, whose state directory
/// is `state_dir` and whose agent works in `workdir`; `task_dir`: the run's task directory (an
/// agent's run writes its `hooks/`). `loop doctor` confines its VERIFY with the same.
pub(crate) fn policy(
    settings: &SandboxSettings,
    state_dir: &Path,
    workdir: &Path,
    run: RunOf<'_>,
    task_dir: Option<&Path>,
) -> Policy {
    let home = home();
    let mut paths: Vec<(PathBuf, Access)> = Vec::new();
    let mut env: Vec<String> = Vec::new();
    let mut named_files = Vec::new();
    let mut programs = vec![];
    if let Ok(exe) = std::env::current_exe() {
        programs.push(exe);
    }
    let layout = crate::layout::Layout::dir(state_dir);
    // What of the state directory the run writes: nothing but what its kind needs, never
    // the records the runner reads as its own (exit, judgement, output).
    let mut state_writes = Vec::new();
    let (work_tree, writes) = match run {
        RunOf::Agent {
            writes,
            backend,
            program,
        } => {
            if let Some(t) = task_dir {
                state_writes.push(absolute(t).join(crate::bridge::HAND_BACK_DIR));
            }
            let b = crate::agent::backend_for(backend);
            paths.extend(sandbox::own_state(b.own_state(&home)));
            env.extend(b.own_env().iter().map(|s| (*s).to_owned()));
            // A mode the person turned on (Claude Code on Bedrock): its variables and files.
            if let Some(mode) = b.mode(&|k| std::env::var(k).ok()) {
                env.extend(mode.env.iter().map(|s| (*s).to_owned()));
                named_files = mode.files;
            }
            if let Ok(p) = super::settings::find_program(program) {
                programs.push(p);
            }
            if writes {
                // A step's agent may leave a note for a fresh session of its step.
                let notes = layout.handoff_dir();
                if std::fs::create_dir_all(&notes).is_ok() {
                    state_writes.push(absolute(&notes));
                }
            }
            (workdir.to_path_buf(), writes)
        }
        RunOf::Verify { work_tree } => (work_tree.to_path_buf(), true),
    };
    let work_tree = absolute(&work_tree);
    paths.extend(git_pins(&work_tree, writes, &home));
    // The person's toolchains, as their shell finds them (rustup, pyenv, nvm, caches …), and a
    // script's interpreter, followed through `env` and shims.
    paths.extend(sandbox::toolchains::of_person(&home));
    let programs = sandbox::toolchains::with_interpreters(programs);
    paths.extend(settings.paths(&home));
    env.extend(settings.env.iter().cloned());
    Policy {
        work_tree,
        work_tree_writable: writes,
        state_dir: absolute(state_dir),
        state_writes,
        home,
        paths,
        programs,
        env: sandbox::kept_env(&env),
        named_files,
    }
}

/// `$HOME` of the user the loop runs as.
pub(crate) fn home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// What a run in `work_tree` gets of its repository's git directory, so that the agent's own
/// `git add`, `commit` and `stash` work and nothing it does there runs later as the person:
/// - the git directory writable where the run writes the work tree (a linked worktree's is in
///   its repository's, which is outside the work tree), read-only where it only reads;
/// - its `config` and `hooks/` read-only: they name the programs git runs (hooks, filters, diff
///   and merge drivers, `core.fsmonitor`, includes), for the loop's git and the person's own
///   later (`crate::git` says which each is). So `git config` and `git remote add` fail in a
///   run; nothing a step needs writes there;
/// - `.git` pinned where it is: a directory mounted over itself, or a linked worktree's `.git`
///   file and the `commondir` and `gitdir` files of its own directory read-only, so that no run
///   can put another git directory (one that names `$HOME`, say) in their place for the next
///   run or for the loop's git. A `.git` that is a link, or a common directory that holds
///   `home`, gets nothing.
fn git_pins(work_tree: &Path, writes: bool, home: &Path) -> Vec<(PathBuf, Access)> {
    let dot_git = work_tree.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return Vec::new();
    };
    let guarded = |dir: &Path, out: &mut Vec<(PathBuf, Access)>| {
        // A bind needs its source: `hooks/` made now, or a run could make it and fill it.
        let _ = std::fs::create_dir_all(dir.join("hooks"));
        out.push((dir.to_path_buf(), Access::Write));
        out.push((dir.join("config"), Access::Read));
        out.push((dir.join("hooks"), Access::Read));
    };
    let mut out = Vec::new();
    if meta.is_dir() {
        if writes {
            guarded(&dot_git, &mut out);
        }
        return out;
    }
    if !meta.is_file() {
        return out;
    }
    let Some((own, common)) = linked_git_dir(work_tree) else {
        return out;
    };
    if home.starts_with(&common) || !looks_like_git_dir(&common) {
        return out;
    }
    if writes {
        guarded(&common, &mut out);
        out.push((dot_git, Access::Read));
        for f in ["commondir", "gitdir", "config.worktree"] {
            out.push((own.join(f), Access::Read));
        }
    } else {
        out.push((common, Access::Read));
    }
    out
}

/// A linked worktree's own git directory (`.git` is a file naming
/// `<repository>/.git/worktrees/<name>`) and its repository's, which every git command there
/// needs. `None` for a repository's own checkout, whose `.git` is in it.
fn linked_git_dir(work_tree: &Path) -> Option<(PathBuf, PathBuf)> {
    let (text, _) = crate::named_file::read(&work_tree.join(".git"), 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let own = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let own = if own.is_absolute() {
        own
    } else {
        work_tree.join(own)
    };
    // `<common>/worktrees/<name>`, or what its `commondir` file names.
    let common = match crate::named_file::read(&own.join("commondir"), 4096) {
        Ok((common, _)) => {
            let common = PathBuf::from(String::from_utf8(common).ok()?.trim());
            if common.is_absolute() {
                common
            } else {
                own.join(common)
            }
        }
        Err(_) => own.parent()?.parent()?.to_path_buf(),
    };
    let common = std::fs::canonicalize(common).ok()?;
    Some((own, common))
}

/// Whether `dir` is a git directory: `HEAD`, `objects/` and `refs/` in it, none a link.
fn looks_like_git_dir(dir: &Path) -> bool {
    let is = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name))
            .is_ok_and(|m| if dir_wanted { m.is_dir() } else { m.is_file() })
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

/// How runs confined by `s` are, in a few words.
#[must_use]
pub(crate) fn sandbox_words(s: &SandboxSettings) -> String {
    match s.mode {
        SandboxMode::Off => {
            "none (AGENT.SANDBOX: off: the agent runs with your whole authority)".to_owned()
        }
        SandboxMode::Bwrap => {
            let mut w = "bubblewrap (the work tree and the agent's own state; not the rest of \
                         your home, nor other projects)"
                .to_owned();
            if !s.read.is_empty() || !s.write.is_empty() {
                w = format!(
                    "{w}, and read {} / write {}",
                    if s.read.is_empty() {
                        "-".to_owned()
                    } else {
                        s.read.join(", ")
                    },
                    if s.write.is_empty() {
                        "-".to_owned()
                    } else {
                        s.write.join(", ")
                    }
                );
            }
            w
        }
    }
}
