//! The mounts of a run's sandbox, in the order bubblewrap makes them (a later one over an
//! earlier one): the system, the empty places, programs, the work tree, the run's own paths and
//! the person's, the loop's state.

use std::path::{Path, PathBuf};

use super::{Access, Policy};

/// One mount of the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mount {
    /// Read-only, where the source exists.
    Read(PathBuf),
    /// Writable, where the source exists.
    Write(PathBuf),
    /// An empty, writable, in-memory directory.
    Empty(PathBuf),
    /// A symbolic link (`/bin` → `usr/bin` on a merged-`/usr` system).
    Link {
        target: PathBuf,
        at: PathBuf,
    },
    Proc,
    Dev,
    /// A secret place inside something bound: an empty directory over it, or an empty file
    /// (`/dev/null`, read-only) over a file.
    Hidden(PathBuf),
}

impl Mount {
    /// Its `bwrap` arguments.
    #[must_use]
    pub(crate) fn args(&self) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        match self {
            Mount::Read(path) => vec!["--ro-bind-try".into(), p(path), p(path)],
            Mount::Write(path) => vec!["--bind-try".into(), p(path), p(path)],
            Mount::Empty(path) => vec!["--tmpfs".into(), p(path)],
            Mount::Link { target, at } => vec!["--symlink".into(), p(target), p(at)],
            Mount::Proc => vec!["--proc".into(), "/proc".into()],
            Mount::Hidden(path) if path.is_dir() => vec!["--tmpfs".into(), p(path)],
            Mount::Hidden(path) => vec!["--ro-bind".into(), "/dev/null".into(), p(path)],
            Mount::Dev => vec!["--dev".into(), "/dev".into()],
        }
    }

    /// The mounts a `bwrap` command line makes, in its order (up to the `--` before the
    /// command); options that mount nothing are passed over.
    #[must_use]
    pub(crate) fn parse(args: &[String]) -> Vec<Mount> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let at = |k: usize| args.get(i + k).map(PathBuf::from);
            let (mount, used) = match a.as_str() {
                "--" => break,
                "--ro-bind" | "--ro-bind-try" => (at(2).map(Mount::Read), 3),
                "--bind" | "--bind-try" | "--dev-bind" | "--dev-bind-try" => {
                    (at(2).map(Mount::Write), 3)
                }
                "--tmpfs" => (at(1).map(Mount::Empty), 2),
                "--symlink" => (
                    at(1)
                        .zip(at(2))
                        .map(|(target, at)| Mount::Link { target, at }),
                    3,
                ),
                "--proc" => (Some(Mount::Proc), 2),
                "--dev" => (Some(Mount::Dev), 2),
                _ => (None, 1),
            };
            out.extend(mount);
            i += used;
        }
        out
    }

    /// Where it mounts, and whether a run may write there.
    fn place(&self) -> Option<(&Path, bool)> {
        match self {
            Mount::Read(p) => Some((p, false)),
            Mount::Write(p) | Mount::Empty(p) => Some((p, true)),
            Mount::Link { .. } | Mount::Proc | Mount::Dev | Mount::Hidden(_) => None,
        }
    }
}

/// The system's directories, read-only: programs, libraries, configuration. Not `/home`,
/// `/root`, `/srv`, `/var` or `/mnt`, where people keep their files.
const SYSTEM: &[&str] = &["/usr", "/etc", "/opt", "/nix", "/snap", "/sys"];

/// The top-level names that are a link into `/usr` on a merged-`/usr` system, else
/// directories of their own.
const USR_LINKS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// The mounts of `policy`'s sandbox, on the machine as it is.
#[must_use]
pub(crate) fn mounts(policy: &Policy) -> Vec<Mount> {
    let mut out: Vec<Mount> = SYSTEM.iter().map(|d| Mount::Read(d.into())).collect();
    for d in USR_LINKS {
        let path = Path::new(d);
        match std::fs::read_link(path) {
            Ok(target) => out.push(Mount::Link {
                target,
                at: path.to_path_buf(),
            }),
            Err(_) => out.push(Mount::Read(path.to_path_buf())),
        }
    }
    out.extend([
        Mount::Proc,
        Mount::Dev,
        Mount::Empty("/tmp".into()),
        Mount::Empty("/var/tmp".into()),
        // Sockets of the machine's services are not the agent's; the resolver's is (DNS).
        Mount::Empty("/run".into()),
        Mount::Read("/run/systemd/resolve".into()),
        Mount::Empty(policy.home.clone()),
    ]);
    out.extend(path_dirs(&policy.home).into_iter().map(Mount::Read));
    out.extend(
        policy
            .programs
            .iter()
            .filter_map(|p| program_mount(p, &policy.home)),
    );
    out.push(if policy.work_tree_writable {
        Mount::Write(policy.work_tree.clone())
    } else {
        Mount::Read(policy.work_tree.clone())
    });
    // After the work tree, so that a path inside it keeps what the person said of it; and a
    // path inside another after it (the simulated agent's counts, writable, inside a
    // directory the person made readable), for the same reason.
    let mut paths: Vec<&(PathBuf, Access)> = policy.paths.iter().collect();
    paths.sort_by_key(|(p, _)| p.components().count());
    for (path, access) in paths {
        out.push(match access {
            Access::Read => Mount::Read(path.clone()),
            Access::Write => Mount::Write(path.clone()),
        });
    }
    out.push(Mount::Read(policy.state_dir.clone()));
    out.extend(policy.state_writes.iter().cloned().map(Mount::Write));
    out.extend(hidden(&out, &policy.home));
    out.extend(policy.named_files.iter().cloned().map(Mount::Read));
    out
}

/// The secret places of `home` that something of `mounts` would show: each hidden, last.
fn hidden(mounts: &[Mount], home: &Path) -> Vec<Mount> {
    let shown = |secret: &Path| {
        mounts.iter().any(|m| match m {
            Mount::Read(p) | Mount::Write(p) => secret.starts_with(p),
            _ => false,
        })
    };
    super::toolchains::SECRET
        .iter()
        .map(|s| home.join(s))
        .filter(|s| shown(s) && std::fs::symlink_metadata(s).is_ok())
        .map(Mount::Hidden)
        .collect()
}

/// The directories of `PATH` (`~/.local/bin`, `~/.cargo/bin`, `/home/linuxbrew/.linuxbrew/bin`):
/// programs, read-only, so that the agent finds what the person's shell finds. Not one that
/// holds `home` (`/root`, `/home`): that would be the whole home again.
fn path_dirs(home: &Path) -> Vec<PathBuf> {
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute() && super::toolchains::allowed(d, home) && d.is_dir())
        .collect()
}

/// The directory a program needs whole: for one installed by npm, the `node_modules` it lies
/// in (its dependencies are beside it); else the directory of the file it resolves to.
#[must_use]
pub(crate) fn program_root(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    if let Some(modules) = real
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
    {
        return Some(modules.to_path_buf());
    }
    real.parent().map(Path::to_path_buf)
}

/// What a run is shown of `program`: its [`program_root`], unless that is `home` or holds it
/// (a program there is refused at start, [`program_shows_home`]; should one get here all the
/// same, the run is shown the program's file alone, never the home around it).
fn program_mount(program: &Path, home: &Path) -> Option<Mount> {
    let root = program_root(program)?;
    if holds_home(&root, home) {
        return std::fs::canonicalize(program).ok().map(Mount::Read);
    }
    Some(Mount::Read(root))
}

/// Whether `dir` is `home` or holds it (`/`, `/home`, `/root`), as written or as it resolves.
fn holds_home(dir: &Path, home: &Path) -> bool {
    home.starts_with(dir) || std::fs::canonicalize(home).is_ok_and(|h| h.starts_with(dir))
}

/// Why `program` (`what` names it: `the agent program`, `the loop's own program`) cannot run
/// in the sandbox: the directory a run is shown of it ([`program_root`]) is `home` or holds
/// it, so the run would see the whole home. `None`: it can.
#[must_use]
pub(crate) fn program_shows_home(what: &str, program: &Path, home: &Path) -> Option<String> {
    let root = program_root(program)?;
    if !holds_home(&root, home) {
        return None;
    }
    let own_dir = std::fs::canonicalize(program)
        .ok()
        .is_some_and(|p| p.parent() == Some(root.as_path()));
    let lies = if !own_dir {
        // The npm rule: the `node_modules` it lies in is shown whole.
        format!(
            "in {}, a node_modules that is your home or holds it ({})",
            root.display(),
            home.display()
        )
    } else if std::fs::canonicalize(home).is_ok_and(|h| h == root) || root == home {
        format!("directly in your home ({})", root.display())
    } else {
        format!(
            "in {}, which holds your home ({})",
            root.display(),
            home.display()
        )
    };
    Some(format!(
        "{what} {} lies {lies}: a confined run is shown the whole directory of its program, so \
         it would see your whole home (~/.ssh, ~/.aws, …); move it to ~/.local/bin or a \
         directory of its own, or name it by its path under its tool's own directory",
        program.display()
    ))
}

/// Whether the run `command` (a task's, as recorded: `bwrap` and its arguments) was kept from
/// writing `tree`: the last mount over `tree` reads only, and nothing under it is writable but
/// in `except` (the loop's state directory, which no check of the tree looks at).
#[must_use]
pub(crate) fn kept_read_only(command: &[String], tree: &Path, except: &Path) -> bool {
    let Some((program, args)) = command.split_first() else {
        return false;
    };
    if Path::new(program).file_name().is_none_or(|n| n != "bwrap") {
        return false;
    }
    let mounts = Mount::parse(args);
    let places = || mounts.iter().filter_map(Mount::place);
    let over = places().rfind(|(p, _)| tree.starts_with(p));
    over.is_some_and(|(_, writes)| !writes)
        && places().all(|(p, writes)| {
            !writes || p == tree || !p.starts_with(tree) || p.starts_with(except)
        })
}

#[cfg(test)]
mod program_dir_tests {
    use super::*;

    #[test]
    fn a_program_whose_directory_is_or_holds_the_home_is_refused_and_never_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home").join("u");
        let bin = home.join(".local").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for p in [
            home.join("agent"),
            bin.join("agent"),
            tmp.path().join("home/agent"),
        ] {
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
        }
        let why = program_shows_home("the agent program", &home.join("agent"), &home).unwrap();
        assert!(
            why.contains("directly in your home") && why.contains("~/.local/bin"),
            "{why}"
        );
        let why = program_shows_home("it", &tmp.path().join("home/agent"), &home).unwrap();
        assert!(why.contains("which holds your home"), "{why}");
        assert_eq!(program_shows_home("it", &bin.join("agent"), &home), None);
        // A home that is a node_modules itself: the npm rule would show all of it.
        let npm_home = tmp.path().join("srv").join("node_modules");
        let cli = npm_home.join("tool").join("bin").join("cli");
        std::fs::create_dir_all(cli.parent().unwrap()).unwrap();
        std::fs::write(&cli, "#!/bin/sh\n").unwrap();
        let why = program_shows_home("it", &cli, &npm_home).unwrap();
        assert!(why.contains("a node_modules that is your home"), "{why}");
        let inside = home.join(".npm").join("lib").join("node_modules");
        let claude = inside.join("claude").join("cli.js");
        std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
        std::fs::write(&claude, "").unwrap();
        assert_eq!(program_shows_home("it", &claude, &home), None);
        let policy = Policy {
            work_tree: tmp.path().join("p"),
            home: home.clone(),
            programs: vec![home.join("agent"), bin.join("agent")],
            ..Policy::default()
        };
        let ms = mounts(&policy);
        let real = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert!(!ms.contains(&Mount::Read(real(&home))), "{ms:?}");
        assert!(
            ms.contains(&Mount::Read(real(&home.join("agent")))),
            "{ms:?}"
        );
        assert!(ms.contains(&Mount::Read(real(&bin))), "{ms:?}");
    }
}
