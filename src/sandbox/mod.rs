//! The sandbox every agent run and every VERIFY runs in (`AGENT.SANDBOX`): bubblewrap
//! (`bwrap`) around the whole command, so the agent, its hooks, its MCP servers and every
//! command it starts see what the run needs and nothing else.
//!
//! What a run sees, in this order (a later mount wins over an earlier one):
//! - the system read-only (`/usr`, `/etc`, `/opt`, …), a fresh `/proc`, a minimal `/dev`, an
//!   empty `/tmp` and an empty `$HOME`;
//! - the directories of `PATH` (but one that holds `$HOME`), and the agent program's own,
//!   read-only;
//! - the work tree (the project, or a step's worktree with its repository's git directory),
//!   writable for a step and read-only for planning and reviews;
//! - what the run's backend declares as its own state (Claude Code's `~/.claude`, Codex's
//!   `CODEX_HOME`), writable where the CLI writes as it works, and read-only deeper in it what
//!   would run or steer a later session of the person's ([`own_state`]); the person's
//!   toolchains ([`toolchains`]: rustup, pyenv, nvm, their caches); and the paths a person adds
//!   (`AgentKey::SandboxRead`, `AgentKey::SandboxWrite`), even inside the work tree;
//! - the loop's state directory read-only (hooks read `M1.md`), whatever a person added, but
//!   an agent run's `hooks/` in its task directory (what hooks hand back goes there);
//! - last, the secret places inside anything bound, hidden ([`toolchains::SECRET`]).
//!
//! Not there: the rest of `$HOME` (`~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.netrc`,
//! `~/.config/gh`, `~/.docker`, `~/.kube`, …), other projects, the loop's own credentials
//! (the environment is an allowlist, which a person adds to with `AGENT.SANDBOX_ENV`). Its own
//! user namespace with no capability, even for root ([`NAMESPACES`]): nothing read-only can be
//! remounted. Its own PID namespace: nothing it starts outlives it. The network stays open (the
//! agent must reach its API). The supervisor and the runner stay outside: the supervisor starts
//! `bwrap`, which is in the task's process group like any command, so timeouts, stops and kills
//! work as they do unconfined.

mod env;
mod mounts;
mod refusal;
#[cfg(test)]
mod tests;
pub(crate) mod toolchains;

use std::path::{Path, PathBuf};

pub(crate) use env::kept_env;
#[cfg(test)]
use mounts::Mount;
pub(crate) use mounts::{kept_read_only, mounts, program_shows_home};
pub(crate) use refusal::refusal;

/// Whether a path is there for reading only, or for writing too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// What one run may see and do.
#[derive(Clone, Debug, Default)]
pub(crate) struct Policy {
    /// The directory the run works in.
    pub work_tree: PathBuf,
    /// Whether it may write there (a step: yes; planning and reviews: no).
    pub work_tree_writable: bool,
    /// The loop's state directory: read-only.
    pub state_dir: PathBuf,
    /// What of the state directory the run writes: its own task directory (what hooks hand
    /// back), and a step's the handoff notes (what its agent leaves a fresh session).
    pub state_writes: Vec<PathBuf>,
    /// `$HOME` as the run knows it (empty in the sandbox but for what is bound into it).
    pub home: PathBuf,
    /// The backend's own state, and the person's extra paths.
    pub paths: Vec<(PathBuf, Access)>,
    /// Programs the run needs (the agent, the loop binary its hooks run): their directories
    /// read-only.
    pub programs: Vec<PathBuf>,
    /// Names of variables the run keeps (a trailing `*`: every name with that start).
    pub env: Vec<String>,
    /// Files the run reads whatever place holds them, bound last: the credentials a CLI's mode
    /// needs (Claude Code on Bedrock), which its person turned on.
    pub named_files: Vec<PathBuf>,
}

/// A backend's own state as a run sees it: what the CLI writes, writable (a directory it
/// would make itself is made first, or what it writes there would be lost with the run's
/// empty home), and over that what would run or steer a later session of the person's,
/// read-only (mounted after, being deeper).
///
/// A read-only path that is missing but lies in a directory the run writes is made first as
/// the backend says nothing is (an empty directory, `{}`): else the run could create it,
/// which is as bad as writing it. Where it cannot be made, the run cannot make it either (it
/// runs as the same user, with no capability). One missing elsewhere would lie in the run's
/// empty home, where what the run creates goes with the run. One that is a link is held
/// read-only where it leads, as a mount cannot be made over a link itself (the link, in a
/// directory the run writes, could still be replaced).
#[must_use]
pub(crate) fn own_state(state: crate::agent::OwnState) -> Vec<(PathBuf, Access)> {
    use crate::agent::Missing;
    let mut out = Vec::new();
    for (p, dir) in &state.writes {
        if *dir {
            let _ = std::fs::create_dir_all(p);
        }
        out.push((p.clone(), Access::Write));
    }
    let written = |p: &Path| state.writes.iter().any(|(w, dir)| *dir && p.starts_with(w));
    for (p, missing) in state.steers {
        match std::fs::symlink_metadata(&p) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // A link a run replaced could lead anywhere (`~/.ssh/id_rsa`): only one to a
                // file or directory of the same name is followed, as a dotfiles manager
                // makes them.
                if let Ok(target) = std::fs::canonicalize(&p)
                    && target.file_name() == p.file_name()
                {
                    out.push((target, Access::Read));
                }
                continue;
            }
            Ok(_) => {}
            Err(_) if !written(&p) => continue,
            Err(_) => {
                let _ = match missing {
                    Missing::Dir => std::fs::create_dir(&p),
                    Missing::File(text) => std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes())),
                };
            }
        }
        out.push((p, Access::Read));
    }
    out
}

/// What every confined run is in, besides its mounts, and what [`probe`] tries: a user
/// namespace with every capability dropped, whoever runs the loop. Root outside is root
/// inside by the namespace's map (what the run writes is the person's), yet holds no
/// capability there: it cannot remount what is read-only (`CAP_SYS_ADMIN`), open a file of
/// the host by its handle (`CAP_DAC_READ_SEARCH`) or pass over a file's permissions
/// (`CAP_DAC_OVERRIDE`); and bubblewrap drops the bounding set too, so no program it runs
/// gets one back. Its own PID and IPC namespaces, and it dies with its parent.
pub(crate) const NAMESPACES: &[&str] = &[
    "--unshare-user",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
];

/// The program that confines: `bwrap` on `PATH`.
#[must_use]
pub(crate) fn bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

/// Whether bubblewrap can confine a run here: it is installed, and it can start a command in
/// the namespaces every run gets ([`NAMESPACES`]). `Err`: why not, and what to do.
///
/// # Errors
/// That explanation.
pub(crate) fn probe() -> Result<PathBuf, String> {
    let Some(bwrap) = bwrap() else {
        return Err(
            "bubblewrap (`bwrap`) is not installed: install it (Debian/Ubuntu: `apt \
                    install bubblewrap`, Fedora: `dnf install bubblewrap`), or run unconfined \
                    with `--sandbox off` (AGENT.SANDBOX: off)"
                .into(),
        );
    };
    let out = std::process::Command::new(&bwrap)
        .args(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"])
        .args(NAMESPACES)
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(bwrap),
        Ok(o) => Err(format!(
            "bubblewrap ({}) cannot start a sandbox here: {} (user namespaces may be off: \
             `sysctl kernel.unprivileged_userns_clone=1`, or a container that forbids them); run \
             unconfined with `--sandbox off` (AGENT.SANDBOX: off)",
            bwrap.display(),
            crate::text::one_line(String::from_utf8_lossy(&o.stderr).trim(), 300)
        )),
        Err(e) => Err(format!(
            "bubblewrap ({}) cannot be run: {e}; run unconfined with `--sandbox off`",
            bwrap.display()
        )),
    }
}

/// `req` confined by `policy`, with `bwrap`: its command run by bubblewrap, and its
/// environment the allowlist of `policy` (names only: no value goes into the task's records).
#[must_use]
pub(crate) fn confine(
    mut req: crate::bridge::FireRequest,
    bwrap: &Path,
    policy: &Policy,
) -> crate::bridge::FireRequest {
    req.command = confined(bwrap, policy, &req.command);
    req.env_keep = Some(policy.env.clone());
    req.confined = true;
    req
}

/// The command `command` confined by `policy` with `bwrap` at `bwrap`: the arguments to run
/// instead.
#[must_use]
pub(crate) fn confined(bwrap: &Path, policy: &Policy, command: &[String]) -> Vec<String> {
    let mut args = vec![bwrap.display().to_string()];
    for m in mounts(policy) {
        args.extend(m.args());
    }
    args.extend(NAMESPACES.iter().map(|s| (*s).to_owned()));
    args.push("--chdir".into());
    args.push(policy.work_tree.display().to_string());
    args.push("--".into());
    args.extend(command.iter().cloned());
    args
}
