//! `loop man --install` and `loop completions SHELL --install`: the manual pages and the
//! completions put where `man` and the shell find them, and said when they will not. `man
//! loop` showed the kernel's `loop(4)`: `~/.local/share/man` is on `man`'s path only where
//! `~/.local/bin` is on `PATH`; and the page named `loop-start(1)` and others that were not
//! there. Bash loads completions from `~/.local/share/bash-completion` only with the
//! `bash-completion` package.

use std::path::{Path, PathBuf};

use crate::exit::Status;

/// Writes `loop.1` and a page for each public subcommand (`loop-start.1`, …) into the
/// `share/man/man1` beside the `loop` binary (where `man` looks for the programs of `PATH`),
/// else `~/.local/share/man/man1`; then says whether `man loop` finds them.
///
/// # Errors
/// When no place can be written.
pub(crate) fn man(top: &clap::Command, public: &clap::Command) -> crate::error::Result<Status> {
    let dir = man_dir()?;
    // `help` is clap's own subcommand, which has no page of its own to name.
    let top = top.clone().disable_help_subcommand(true);
    let mut pages = vec![("loop.1".to_owned(), render(top)?)];
    for sub in public.get_subcommands() {
        let name = format!("loop-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("loop {}", sub.get_name()));
        pages.push((format!("{name}.1"), render(page)?));
    }
    for (name, text) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("while writing {}: {e}", path.display()))?;
    }
    crate::outln!(
        "wrote {} manual pages into {} (loop.1, and loop-start.1 … for each command)",
        pages.len(),
        dir.display()
    );
    let ours = dir.join("loop.1");
    match found_by_man() {
        Some(found) if same(&found, &ours) => crate::outln!("`man loop` shows it"),
        found => {
            let share = dir.parent().unwrap_or(&dir);
            crate::outln!(
                "`man loop` does not look there ({}): add `export MANPATH=\"{}:\"` to your \
                 shell's profile (the trailing `:` keeps the system's pages), then `man loop`",
                found.map_or_else(
                    || "it finds no page of that name".to_owned(),
                    |f| format!("it finds {}", f.display())
                ),
                share.display()
            );
        }
    }
    Ok(Status::Ok)
}

/// Writes the completions of `shell` where that shell loads them, and says what, if anything,
/// the shell still needs.
///
/// # Errors
/// When the place cannot be written.
pub(crate) fn completions(
    shell: clap_complete::Shell,
    public: &mut clap::Command,
) -> crate::error::Result<Status> {
    use clap_complete::Shell;
    let home = crate::runner::confine::home();
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".local/share"));
    let (path, then) = match shell {
        Shell::Bash => {
            let path = data.join("bash-completion/completions/loop");
            let loaded = [
                "/usr/share/bash-completion/bash_completion",
                "/etc/bash_completion",
            ]
            .iter()
            .any(|p| Path::new(p).exists());
            let then = if loaded {
                "bash-completion loads it in a new shell".to_owned()
            } else {
                format!(
                    "the bash-completion package is not installed here, which is what loads \
                     it: install it (Debian/Ubuntu: `apt install bash-completion`), or add \
                     `source {}` to ~/.bashrc",
                    path.display()
                )
            };
            (path, then)
        }
        Shell::Zsh => (
            home.join(".zfunc/_loop"),
            "zsh loads it where ~/.zfunc is on fpath: add `fpath+=~/.zfunc` before `compinit` \
             in ~/.zshrc"
                .to_owned(),
        ),
        Shell::Fish => (
            home.join(".config/fish/completions/loop.fish"),
            "fish loads it in a new shell".to_owned(),
        ),
        other => {
            return Err(crate::error::Error::bad_input(format!(
                "--install knows where bash, zsh and fish load completions, not {other}: \
                 `loop completions {other}` prints them"
            )));
        }
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, public, "loop", &mut out);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("while creating {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, out)
        .map_err(|e| anyhow::anyhow!("while writing {}: {e}", path.display()))?;
    crate::outln!("wrote {}: {then}", path.display());
    Ok(Status::Ok)
}

/// Where the manual pages go: `../share/man/man1` from the directory of the `loop` binary,
/// where it can be written (`~/.cargo/bin/loop`: `~/.cargo/share/man/man1`, which `man` reads
/// while `~/.cargo/bin` is on `PATH`), else `~/.local/share/man/man1`.
fn man_dir() -> crate::error::Result<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| std::fs::canonicalize(e).ok())
        .and_then(|e| e.parent()?.parent().map(|p| p.join("share/man/man1")));
    let home = crate::runner::confine::home().join(".local/share/man/man1");
    for dir in beside.into_iter().chain([home]) {
        if std::fs::create_dir_all(&dir).is_ok() && writable(&dir) {
            return Ok(dir);
        }
    }
    Err(crate::error::Error::bad_input(
        "no place for the manual pages can be written (beside the loop binary, or \
         ~/.local/share/man/man1): `loop man` prints the page, to put where you like"
            .to_owned(),
    ))
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".loop-man-{}", std::process::id()));
    let ok = std::fs::write(&probe, "").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

fn render(cmd: clap::Command) -> crate::error::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// The page `man loop` shows (`man -w loop`), if it shows one.
fn found_by_man() -> Option<PathBuf> {
    let out = std::process::Command::new("man")
        .args(["-w", "loop"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()?
        .trim()
        .to_owned();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

fn same(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}
