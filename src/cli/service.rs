//! `loop service install|status|uninstall`: a per-user service that runs `loop daemon`, so
//! loops come back after a reboot. With systemd: a user unit, enabled and started. Without:
//! the tmux and cron lines that do the same.
//!
//! The loops the daemon keeps are listed in `$XDG_STATE_HOME/m1loop/daemon.loops`, one
//! absolute path a line, so installing another loop does not touch the unit.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::ServiceAction;
use crate::error::Error;
use crate::exit::Status;
use crate::runner::revive::{self, Revival};
use crate::text::shell_word;

/// The unit's name.
pub(crate) const UNIT: &str = "m1loop.service";

/// The loops `loop service install` named.
#[must_use]
pub(crate) fn installed_loops() -> Vec<PathBuf> {
    let Ok(list) = loops_file() else {
        return Vec::new();
    };
    std::fs::read_to_string(list)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

fn loops_file() -> crate::error::Result<PathBuf> {
    Ok(crate::dirs::user_state_dir()?.join("daemon.loops"))
}

/// `$XDG_CONFIG_HOME` (default `~/.config`).
fn config_home() -> crate::error::Result<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .map(|h| h.join(".config"))
        })
        .ok_or_else(|| Error::bad_input("neither XDG_CONFIG_HOME nor HOME is set"))
}

/// How the daemon's service stands, for `loop doctor`: installed or not, and what systemd
/// says of it.
#[must_use]
pub(crate) fn daemon_state() -> (bool, String) {
    let Ok(unit) = unit_path() else {
        return (false, "neither XDG_CONFIG_HOME nor HOME is set".into());
    };
    match (unit.exists(), systemctl()) {
        (false, _) => (false, "not installed".into()),
        (true, None) => (
            true,
            "installed, but there is no systemctl here to ask".into(),
        ),
        (true, Some(ctl)) => (
            true,
            unit_state(&ctl).unwrap_or_else(|e| format!("cannot tell: {e}")),
        ),
    }
}

/// Where the unit goes.
fn unit_path() -> crate::error::Result<PathBuf> {
    Ok(config_home()?.join("systemd").join("user").join(UNIT))
}

/// The file the unit reads secrets from (`TELEGRAM_BOT_TOKEN=…`), which `install` never
/// writes: a token does not belong in a unit file.
fn env_file() -> crate::error::Result<PathBuf> {
    Ok(config_home()?.join("m1loop").join("env"))
}

/// A value for systemd's `Environment=` or `ExecStart=`: quoted, `%` doubled.
fn quoted(value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// The environment a loop needs that a user service does not have: where programs are
/// (`claude`), which agent and stop file, where the per-user state is. The unit and the tmux
/// and cron lines carry the same, so a daemon runs the same agent whichever keeps it.
const PASSED_ENV: [&str; 4] = ["PATH", "LOOP_AGENT", "LOOP_STOP_FILE", "XDG_STATE_HOME"];

/// [`PASSED_ENV`] as this shell has it.
fn passed_env() -> Vec<(String, String)> {
    PASSED_ENV
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), std::env::var(k).ok()?)))
        .collect()
}

/// The daemon's command line for a shell: `env VAR=value … LOOP daemon [--telegram]`.
#[must_use]
pub(crate) fn daemon_command(exe: &Path, telegram: bool, env: &[(String, String)]) -> String {
    let mut words: Vec<String> = Vec::new();
    if !env.is_empty() {
        words.push("env".into());
        words.extend(env.iter().map(|(k, v)| shell_word(&format!("{k}={v}"))));
    }
    words.push(shell_word(&exe.display().to_string()));
    words.push("daemon".into());
    if telegram {
        words.push("--telegram".into());
    }
    words.join(" ")
}

/// The unit's text: `loop daemon` (with `--telegram`), restarted whenever it ends.
#[must_use]
pub(crate) fn unit_text(
    exe: &Path,
    telegram: bool,
    env: &[(String, String)],
    env_file: &Path,
) -> String {
    let mut exec = format!("{} daemon", quoted(&exe.display().to_string()));
    if telegram {
        exec.push_str(" --telegram");
    }
    let mut text = String::from(
        "[Unit]\nDescription=m1loop: keeps loops running (loop daemon)\n\n[Service]\nType=simple\n",
    );
    let _ = writeln!(text, "ExecStart={exec}");
    for (k, v) in env {
        let _ = writeln!(text, "Environment={}", quoted(&format!("{k}={v}")));
    }
    let _ = write!(
        text,
        "EnvironmentFile=-{}\nRestart=always\nRestartSec=5\n\n[Install]\nWantedBy=default.target\n",
        env_file.display()
    );
    text
}

/// The systemctl to use: `LOOP_SYSTEMCTL` (empty: none), else `systemctl` where it exists.
fn systemctl() -> Option<PathBuf> {
    let name = std::env::var("LOOP_SYSTEMCTL").unwrap_or_else(|_| "systemctl".into());
    if name.is_empty() {
        return None;
    }
    crate::runner::settings::find_program(&name).ok()
}

/// What `systemctl --user is-active` answers when it can tell (it exits non-zero for all but
/// `active`); anything else on its output is an error, such as no user bus.
const UNIT_STATES: [&str; 8] = [
    "active",
    "inactive",
    "failed",
    "activating",
    "deactivating",
    "reloading",
    "maintenance",
    "unknown",
];

/// The unit's state, or why systemd could not say.
fn unit_state(program: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .args(["--user", "is-active", UNIT])
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if UNIT_STATES.contains(&said.as_str()) {
        return Ok(said);
    }
    Err(format!(
        "`systemctl --user is-active {UNIT}` failed: {}{}",
        said,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// Runs `systemctl --user ARGS`; its combined output, or why it failed.
fn user_systemctl(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .arg("--user")
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text.trim().to_owned())
    } else {
        Err(format!(
            "`systemctl --user {}` failed: {}",
            args.join(" "),
            text.trim()
        ))
    }
}

/// `loop service ACTION` for the loop at `file`.
///
/// # Errors
/// No per-user directories, or a unit or list that cannot be written.
pub(crate) fn run(file: &Path, action: &ServiceAction) -> crate::error::Result<Status> {
    match action {
        ServiceAction::Install { telegram } => install(file, *telegram),
        ServiceAction::Status => status(),
        ServiceAction::Uninstall => uninstall(),
    }
}

fn install(file: &Path, telegram: bool) -> crate::error::Result<Status> {
    if !file.exists() {
        return Err(Error::bad_input(format!(
            "no loop at {}: name one with --file (or LOOP_FILE)",
            file.display()
        )));
    }
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let mut loops = installed_loops();
    if !loops.contains(&abs) {
        loops.push(abs.clone());
    }
    let list = loops_file()?;
    if let Some(dir) = list.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("while creating {}", dir.display()))?;
    }
    let mut text = String::new();
    for p in &loops {
        let _ = writeln!(text, "{}", p.display());
    }
    std::fs::write(&list, text).with_context(|| format!("while writing {}", list.display()))?;
    crate::outln!(
        "loop service: keeps {} (list: {})",
        abs.display(),
        list.display()
    );
    let exe = std::env::current_exe().context("while finding the loop binary")?;
    let env = passed_env();
    let secrets = env_file()?;
    let Some(ctl) = systemctl() else {
        crate::errln!("loop service: no systemctl here, so no unit was written");
        print_alternatives(&exe, telegram, &env, &secrets);
        return Ok(Status::Failed);
    };
    // Asked before anything is written: without a user bus (a login without a user session,
    // `su`, a container) systemd would never run the unit.
    if let Err(e) = user_systemctl(&ctl, &["show-environment"]) {
        crate::errln!("loop service: {e}; so no unit was written");
        print_alternatives(&exe, telegram, &env, &secrets);
        return Ok(Status::Failed);
    }
    let unit = unit_path()?;
    if let Some(dir) = unit.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("while creating {}", dir.display()))?;
    }
    let before = std::fs::read(&unit).ok();
    std::fs::write(&unit, unit_text(&exe, telegram, &env, &secrets))
        .with_context(|| format!("while writing {}", unit.display()))?;
    crate::outln!("loop service: wrote {}", unit.display());
    if telegram {
        crate::outln!(
            "loop service: put TELEGRAM_BOT_TOKEN=… and TELEGRAM_CHAT_ID=… in {} (chmod 600)",
            secrets.display()
        );
    }
    for args in [&["daemon-reload"][..], &["enable", "--now", UNIT]] {
        if let Err(e) = user_systemctl(&ctl, args) {
            // The unit systemd would not take is not left in place of what was there.
            let _ = match &before {
                Some(text) => std::fs::write(&unit, text),
                None => std::fs::remove_file(&unit),
            };
            let _ = user_systemctl(&ctl, &["daemon-reload"]);
            crate::errln!("loop service: {e}; {} is as it was", unit.display());
            print_alternatives(&exe, telegram, &env, &secrets);
            return Ok(Status::Failed);
        }
    }
    crate::outln!(
        "loop service: {UNIT} enabled and started; it starts again at every login and boot (with `loginctl enable-linger` for boots without a login)"
    );
    Ok(Status::Ok)
}

/// Where systemd cannot keep it: the lines that keep `loop daemon` running by other means,
/// with the environment the unit would have carried.
fn print_alternatives(exe: &Path, telegram: bool, env: &[(String, String)], secrets: &Path) {
    let daemon = daemon_command(exe, telegram, env);
    let out = crate::dirs::user_state_dir()
        .map_or_else(|_| PathBuf::from("daemon.out"), |d| d.join("daemon.out"));
    // In a crontab a `%` ends the command.
    let cron = daemon.replace('%', "\\%");
    crate::outln!(
        "loop service: keep `loop daemon` running with either of:\n  tmux new-session -d -s \
         m1loop {}\n  crontab -e, then add:  @reboot {cron} >> {} 2>&1",
        shell_word(&daemon),
        shell_word(&out.display().to_string())
    );
    crate::outln!(
        "loop service: unlike the unit, these do not read {}: give the daemon \
         TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID another way if it should notify",
        secrets.display()
    );
}

fn status() -> crate::error::Result<Status> {
    let unit = unit_path()?;
    let mut answered = Status::Ok;
    let state = match (unit.exists(), systemctl()) {
        (false, _) => "not installed".to_owned(),
        (true, None) => {
            answered = Status::Failed;
            "installed, but there is no systemctl here to ask".to_owned()
        }
        (true, Some(ctl)) => unit_state(&ctl).unwrap_or_else(|e| {
            answered = Status::Failed;
            format!("cannot tell: {e}")
        }),
    };
    crate::outln!("service  {UNIT}: {state} ({})", unit.display());
    let now = chrono::Utc::now();
    for file in installed_loops() {
        let what = match revive::look(&file, now) {
            Revival::Driven => "a runner drives it".to_owned(),
            Revival::Idle => "not RUNNING (nothing to keep)".to_owned(),
            Revival::Stopped => "a stop file holds it".to_owned(),
            Revival::WaitsUntil(t) => format!("waits until {}; revived then", t.to_rfc3339()),
            Revival::Started | Revival::Halted(_) => {
                "RUNNING with no runner: revived at the next look".to_owned()
            }
        };
        crate::outln!("loop     {}: {what}", file.display());
    }
    Ok(answered)
}

fn uninstall() -> crate::error::Result<Status> {
    let unit = unit_path()?;
    let mut done = Status::Ok;
    if let Some(ctl) = systemctl()
        && unit.exists()
        && let Err(e) = user_systemctl(&ctl, &["disable", "--now", UNIT])
    {
        // The files go all the same (the unit no longer starts at a login or boot), but a
        // daemon systemd still runs could not be stopped: exit 1 says so.
        crate::errln!(
            "loop service: {e}; the unit is removed, but a daemon it started may still run \
             until its session ends (`systemctl --user stop {UNIT}` where the user's systemd \
             can be reached stops it)"
        );
        done = Status::Failed;
        if let Some(dir) = unit.parent() {
            let _ = std::fs::remove_file(dir.join("default.target.wants").join(UNIT));
        }
    }
    for path in [unit.clone(), loops_file()?] {
        match std::fs::remove_file(&path) {
            Ok(()) => crate::outln!("loop service: removed {}", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(anyhow::Error::from(e)
                    .context(format!("while removing {}", path.display()))
                    .into());
            }
        }
    }
    if let Some(ctl) = systemctl() {
        let _ = user_systemctl(&ctl, &["daemon-reload"]);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_the_daemon_restarts_it_and_quotes_what_needs_it() {
        let text = unit_text(
            Path::new("/opt/my tools/loop"),
            true,
            &[("PATH".into(), "/usr/bin:/home/a b/bin".into())],
            Path::new("/home/a/.config/m1loop/env"),
        );
        assert!(
            text.contains("ExecStart=\"/opt/my tools/loop\" daemon --telegram\n"),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"PATH=/usr/bin:/home/a b/bin\"\n"),
            "{text}"
        );
        assert!(text.contains("EnvironmentFile=-/home/a/.config/m1loop/env\n"));
        assert!(text.contains("Restart=always\n"));
        assert!(text.contains("[Install]\nWantedBy=default.target\n"));
        assert_eq!(quoted("50% \"x\""), "\"50%% \\\"x\\\"\"");
    }

    #[test]
    fn the_daemon_line_for_a_shell_carries_the_environment_quoted_as_needed() {
        let env = [
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            ("LOOP_AGENT".to_owned(), "/opt/it's here/claude".to_owned()),
        ];
        assert_eq!(
            daemon_command(Path::new("/usr/local/bin/loop"), true, &env),
            "env PATH=/usr/bin:/bin 'LOOP_AGENT=/opt/it'\\''s here/claude' \
             /usr/local/bin/loop daemon --telegram"
        );
        assert_eq!(
            daemon_command(Path::new("/bin/loop"), false, &[]),
            "/bin/loop daemon"
        );
    }
}
