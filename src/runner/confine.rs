//! Each run the loop starts, confined as its `AGENT.SANDBOX` says: the runner's part of the
//! sandbox (what a run of each kind may see), [`crate::sandbox`] the mechanism.

use std::path::{Path, PathBuf};

use super::Runner;
use crate::bridge::FireRequest;
use crate::m1::SandboxMode;
use crate::sandbox::{self, Access, Policy};

/// What a confined run is.
#[derive(Debug, Clone, Copy)]
pub(super) enum RunOf<'a> {
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

impl Runner {
    /// `req`, a task of `run` whose directory will be `task_dir`, as the loop's sandbox runs
    /// it; `Err`: why it cannot be confined here (bubblewrap missing or unable to start). A
    /// loop whose sandbox is `off` runs `req` as it is.
    pub(super) fn confine(
        &mut self,
        req: FireRequest,
        run: RunOf<'_>,
        task_dir: &Path,
    ) -> Result<FireRequest, String> {
        let m = self.view();
        let settings = self.settings.sandbox(&m);
        if settings.mode == SandboxMode::Off {
            return Ok(req);
        }
        let bwrap = self.bwrap()?;
        let home = home();
        let mut paths: Vec<(PathBuf, Access)> = Vec::new();
        let mut env: Vec<String> = Vec::new();
        let mut programs = vec![];
        if let Ok(exe) = std::env::current_exe() {
            programs.push(exe);
        }
        let layout = crate::layout::Layout::dir(&self.state_dir);
        let mut state_writes = vec![absolute(task_dir)];
        let (work_tree, writes) = match run {
            RunOf::Agent {
                writes,
                backend,
                program,
            } => {
                let b = crate::agent::backend_for(backend);
                paths.extend(sandbox::own_state(b.own_state(&home)));
                paths.extend(sandbox::simulated_agent());
                env.extend(b.own_env().iter().map(|s| (*s).to_owned()));
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
                (self.workdir.clone(), writes)
            }
            RunOf::Verify { work_tree } => (work_tree.to_path_buf(), true),
        };
        let work_tree = absolute(&work_tree);
        if let Some(git) = linked_git_dir(&work_tree) {
            paths.push((git, if writes { Access::Write } else { Access::Read }));
        }
        paths.extend(settings.paths(&home));
        let policy = Policy {
            work_tree,
            work_tree_writable: writes,
            state_dir: absolute(&self.state_dir),
            state_writes,
            home,
            paths,
            programs,
            env: sandbox::kept_env(&env),
        };
        Ok(sandbox::confine(req, &bwrap, &policy))
    }

    /// How this loop's runs are confined, in a few words: for the start line, the first
    /// message, `loop status`.
    pub(crate) fn sandbox_words(&self) -> String {
        sandbox_words(&self.settings.sandbox(&self.view()))
    }

    /// Whether this loop's runs can start as its sandbox says: `off`, or bubblewrap able to
    /// start here; `Err`: why not.
    pub(super) fn sandbox_ready(&mut self) -> Result<(), String> {
        let m = self.view();
        if self.settings.sandbox(&m).mode == SandboxMode::Off {
            return Ok(());
        }
        self.bwrap().map(drop)
    }

    /// VERIFY as `how` says, confined in `work_tree` as the loop's sandbox says, until a stop.
    pub(super) fn verify_confined(
        &mut self,
        how: &crate::verify::Run<'_>,
        work_tree: &Path,
    ) -> crate::error::Result<crate::verify::Outcome> {
        self.sandbox_ready()
            .map_err(|why| anyhow::anyhow!("the loop's sandbox cannot start: {why}"))?;
        let state_dir = self.state_dir.clone();
        let mut confine = |req: FireRequest, task_dir: &Path| {
            let run = RunOf::Verify { work_tree };
            // Ready: this cannot fail now.
            self.confine(req.clone(), run, task_dir).unwrap_or(req)
        };
        crate::verify::run_confined(how, &mut confine, &mut || {
            super::stopfile::requested(&state_dir).is_some()
        })
    }

    /// bubblewrap, checked once per runner: whether it can confine a run here.
    fn bwrap(&mut self) -> Result<PathBuf, String> {
        self.sandbox_probe
            .get_or_insert_with(sandbox::probe)
            .clone()
    }
}

/// `$HOME` of the user the loop runs as.
pub(crate) fn home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The repository's git directory of a linked worktree (`.git` is a file naming
/// `<repository>/.git/worktrees/<name>`): a step's worktree needs it for every git command.
/// `None` for a repository's own checkout, whose `.git` is in it.
fn linked_git_dir(work_tree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(work_tree.join(".git")).ok()?;
    let own = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let own = if own.is_absolute() {
        own
    } else {
        work_tree.join(own)
    };
    // `<common>/worktrees/<name>`, or what its `commondir` file names.
    match std::fs::read_to_string(own.join("commondir")) {
        Ok(common) => {
            let common = PathBuf::from(common.trim());
            Some(if common.is_absolute() {
                common
            } else {
                own.join(common)
            })
        }
        Err(_) => own.parent()?.parent().map(Path::to_path_buf),
    }
}

/// How runs confined by `s` are, in a few words.
#[must_use]
pub(crate) fn sandbox_words(s: &super::settings::SandboxSettings) -> String {
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
