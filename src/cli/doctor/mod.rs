//! `loop doctor`: whether a loop will work here, told before one fails at 3 a.m. For each
//! agent backend in use: the program and its version; every flag the loop passes, against
//! this version's `--help` (a flag it hides there must then pass the contract run); the
//! permission modes (Claude Code) or sandboxes (Codex) this version knows, against the one in
//! force; and a contract run against a loopback stand-in of the model API ([`mock`]): the
//! events and fields the loop reads are there, the hooks fire, a resume keeps the session.
//! Then the sandbox (bubblewrap starts, and a confined run cannot read a planted key nor write
//! outside its work tree), the stop file, the state directory, Telegram (`getMe`, nothing
//! sent) and the daemon.
//! A table, or `--json`; exit 0 when nothing failed, 1 otherwise.

mod contract;
mod mock;
mod sandbox;
mod verify;

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use crate::agent::AgentConfig;
use crate::exit::Status;
use crate::m1::M1;
use crate::m1::settings::AgentKind;
use crate::runner::settings::{Overrides, Settings, find_program};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mark {
    Ok,
    /// Not set up, and not needed (Telegram, the daemon): said, not failed.
    Off,
    Fail,
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub check: String,
    pub status: Mark,
    pub detail: String,
}

fn row(check: impl Into<String>, status: Mark, detail: impl Into<String>) -> Row {
    Row {
        check: check.into(),
        status,
        detail: detail.into(),
    }
}

/// `loop doctor`: `backends` to check (none: those the loop of `file` uses, else those a new
/// loop would).
///
/// # Errors
/// A malformed `loop.yaml`.
pub(crate) fn doctor(
    file: &Path,
    backends: &[AgentKind],
    verify_cmd: Option<&str>,
    json: bool,
) -> crate::error::Result<Status> {
    let layout = crate::layout::Layout::of(file);
    let state_dir = layout.state_dir().to_path_buf();
    let m = crate::m1::load(file).map(|d| d.view()).ok();
    // With no loop here, `--backend X` is the backend of a new loop, as `loop start --backend
    // X` takes it: its program from `LOOP_AGENT`.
    let overrides = Overrides {
        backend: m.is_none().then(|| backends.first().copied()).flatten(),
        ..Overrides::default()
    };
    let settings = Settings::load(&state_dir, overrides)?;
    let view = m.clone().unwrap_or_default();
    let used = if backends.is_empty() {
        in_use(&settings, m.as_ref())
    } else {
        backends.to_vec()
    };
    let mut rows = Vec::new();
    // Each contract call runs as the loop's runs do: in its sandbox, where one is in force.
    // With the person's paths (`SandboxSettings::paths`), as the loop's runs have them.
    let sandboxed = settings.sandbox(&view);
    let bwrap = (sandboxed.mode == crate::m1::SandboxMode::Bwrap)
        .then(|| crate::sandbox::probe().ok())
        .flatten();
    let home = crate::runner::confine::home();
    let confined = bwrap.as_deref().map(|bwrap| contract::Confined {
        bwrap,
        paths: sandboxed.paths(&home),
        env: sandboxed.env.clone(),
    });
    for b in used {
        let from = program_from(b, &settings, m.as_ref(), file);
        let cfg = AgentConfig {
            // Where a call's own files would go: the flags are read, nothing is written.
            files_dir: Some(state_dir.clone()),
            ..match &m {
                Some(m) => settings.agent_on(m, b),
                // No loop here: a new loop's, as `loop start` would call it.
                None => settings.agent_on_new(b),
            }
        };
        rows.extend(check_backend(b, &cfg, &from, confined.as_ref()));
    }
    // The agent's hooks run the loop's own binary in the sandbox, shown its directory too.
    if confined.is_some()
        && let Ok(exe) = std::env::current_exe()
        && let Some(why) = crate::sandbox::program_shows_home("the loop's own program", &exe, &home)
    {
        rows.push(row("loop: program", Mark::Fail, why));
    }
    rows.push(sandbox::check(&settings.sandbox(&view)));
    // The loop's VERIFY, or the one asked for, as the loop's runs get it.
    if let Some(cmd) = verify_cmd.or(view.verify.as_deref()) {
        // Run where the person runs `loop doctor`, as `loop start` runs the loop there.
        let project = std::env::current_dir().unwrap_or_else(|_| state_dir.clone());
        rows.push(verify::check(cmd, &project, &state_dir, &sandboxed));
    }
    rows.push(stop_file(&state_dir));
    rows.push(state_directory(&state_dir));
    rows.push(telegram());
    rows.push(daemon());
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else {
        crate::outln!("{}", table(&rows));
    }
    Ok(if rows.iter().any(|r| r.status == Mark::Fail) {
        Status::Failed
    } else {
        Status::Ok
    })
}

/// Where the program doctor checks for `kind` comes from, as the loop resolves it: the loop's
/// own `AGENT.PROGRAM` first (which a `LOOP_AGENT` of this shell does not change: said when they
/// differ), then `LOOP_AGENT`, `loop.yaml`, the default; another backend's from its own
/// variable (`LOOP_AGENT_CODEX`), else its default.
fn program_from(kind: AgentKind, settings: &Settings, m: Option<&M1>, file: &Path) -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let own = m.map_or(settings.agent.backend, |m| settings.agent_for(m).backend);
    if kind != own {
        return env(&kind.program_env())
            .map_or_else(|| "the default".to_owned(), |_| kind.program_env());
    }
    if let Some(pinned) = m.and_then(|m| m.agent.program.as_deref()) {
        let over = env("LOOP_AGENT")
            .filter(|a| a != pinned)
            .map(|a| format!(" (over LOOP_AGENT={a})"))
            .unwrap_or_default();
        return format!("AGENT.PROGRAM of {}{over}", file.display());
    }
    if env("LOOP_AGENT").is_some() {
        "LOOP_AGENT".to_owned()
    } else if settings.file.agent.program.is_some() {
        "agent.program of loop.yaml".to_owned()
    } else if env(&kind.program_env()).is_some() {
        kind.program_env()
    } else {
        "the default".to_owned()
    }
}

/// The backends a loop uses: its steps', its reviewer's and its fallback's.
fn in_use(settings: &Settings, m: Option<&M1>) -> Vec<AgentKind> {
    let Some(m) = m else {
        return settings.backends_for_new();
    };
    let mut used = vec![settings.agent_for(m).backend];
    used.extend(m.agent.review_backend);
    used.extend(m.agent.fallback.iter().copied());
    let mut seen = Vec::new();
    for b in used {
        if !seen.contains(&b) {
            seen.push(b);
        }
    }
    seen
}

/// The table: one line per check, its mark, what it found.
fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.check.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in rows {
        let mark = match r.status {
            Mark::Ok => "ok  ",
            Mark::Off => "off ",
            Mark::Fail => "FAIL",
        };
        let _ = writeln!(out, "{mark}  {:width$}  {}", r.check, r.detail);
    }
    let failed = rows.iter().filter(|r| r.status == Mark::Fail).count();
    if failed == 0 {
        out.push_str("all is well: a loop can run here");
    } else {
        let _ = write!(
            out,
            "{failed} check(s) failed: a loop would not run as it should here"
        );
    }
    out
}

/// What `program ARGS` printed on stdout (stderr if stdout is empty), within 30 s.
fn output_of(program: &Path, args: &[&str]) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let out = contract::wait_output(&mut child, Duration::from_secs(30))?;
    let text = if out.stdout.is_empty() {
        String::from_utf8_lossy(&out.stderr).into_owned()
    } else {
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "`{} {}` failed ({}): {}",
            program.display(),
            args.join(" "),
            out.status,
            crate::text::one_line(&text, 200)
        ))
    }
}

/// The checks of one backend, run as `cfg` calls it; `from`: where its program comes from.
fn check_backend(
    kind: AgentKind,
    cfg: &AgentConfig,
    from: &str,
    confined: Option<&contract::Confined<'_>>,
) -> Vec<Row> {
    let name = kind.as_str();
    let program = match find_program(&cfg.program) {
        Ok(p) => p,
        Err(why) => {
            return vec![row(
                format!("{name}: program"),
                Mark::Fail,
                format!(
                    "{from}: {why}; {}",
                    crate::runner::settings::install_hint(kind)
                ),
            )];
        }
    };
    if confined.is_some()
        && let Some(why) = crate::sandbox::program_shows_home(
            "the agent program",
            &program,
            &crate::runner::confine::home(),
        )
    {
        return vec![row(
            format!("{name}: program"),
            Mark::Fail,
            format!("{from}: {why}"),
        )];
    }
    let mut rows = vec![match output_of(&program, &["--version"]) {
        Ok(v) => row(
            format!("{name}: program"),
            Mark::Ok,
            format!(
                "{from}: {} ({})",
                program.display(),
                crate::text::one_line(v.trim(), 80)
            ),
        ),
        Err(why) => row(
            format!("{name}: program"),
            Mark::Fail,
            format!("{from}: {why}"),
        ),
    }];
    let mut help = String::new();
    for args in crate::agent::backend_for(kind).help_args() {
        match output_of(&program, args) {
            Ok(text) => help.push_str(&text),
            Err(why) => rows.push(row(format!("{name}: help"), Mark::Fail, why)),
        }
    }
    let run = contract::run(kind, cfg, &program, confined);
    rows.push(flags_row(kind, cfg, &help, &run));
    rows.push(modes_row(kind, cfg, &help));
    rows.push(row(
        format!("{name}: contract"),
        if run.failures.is_empty() {
            Mark::Ok
        } else {
            Mark::Fail
        },
        if run.failures.is_empty() {
            run.held.join("; ")
        } else {
            run.failures.join("; ")
        },
    ));
    rows
}

/// Every flag the loop passes to `kind`, for a fresh run, a resumed one and a review.
fn flags_passed(kind: AgentKind, cfg: &AgentConfig) -> Vec<String> {
    let backend = crate::agent::backend_for(kind);
    let exe = std::env::current_exe().unwrap_or_else(|_| "loop".into());
    let mut flags: Vec<String> = Vec::new();
    let review = cfg.clone().read_only();
    for (cfg, session) in [
        (
            cfg,
            crate::agent::Session::New(crate::agent::new_session_id()),
        ),
        (
            cfg,
            crate::agent::Session::Resume(crate::agent::new_session_id()),
        ),
        (
            &review,
            crate::agent::Session::New(crate::agent::new_session_id()),
        ),
    ] {
        let Ok(inv) = backend.invocation(cfg, "x", &session) else {
            continue;
        };
        let inv = backend.with_hooks(inv, "settings.json", &exe);
        for a in inv.args {
            let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f).to_owned();
            if flag.starts_with('-') && flag != "-" && !flags.contains(&flag) {
                flags.push(flag);
            }
        }
    }
    flags
}

/// Whether `help` lists `flag` as an option of its own: at the start of a line, alone or
/// among its aliases (`-s, --sandbox <MODE>`, `--allowedTools, --allowed-tools <tools...>`),
/// not merely named in another option's description.
fn listed(help: &str, flag: &str) -> bool {
    help.lines().any(|line| {
        let line = line.trim_start();
        if !line.starts_with('-') {
            return false;
        }
        let names = line.split("  ").next().unwrap_or_default();
        names.split(", ").any(|alias| {
            let name = alias.split([' ', '=', '[', '<']).next().unwrap_or_default();
            name == flag
        })
    })
}

fn flags_row(kind: AgentKind, cfg: &AgentConfig, help: &str, run: &contract::Outcome) -> Row {
    let name = kind.as_str();
    let check = format!("{name}: flags");
    if let Err(refused) = crate::agent::backend_for(kind).invocation(
        cfg,
        "x",
        &crate::agent::Session::New(String::new()),
    ) {
        return row(
            check,
            Mark::Fail,
            format!("the loop's settings are refused: {refused}"),
        );
    }
    let flags = flags_passed(kind, cfg);
    let hidden: Vec<&String> = flags.iter().filter(|f| !listed(help, f)).collect();
    let refused: Vec<&String> = hidden
        .iter()
        .copied()
        .filter(|f| !run.accepted || run.said.contains(f.as_str()))
        .collect();
    if !refused.is_empty() {
        let said = crate::text::one_line(&run.said, 200);
        return row(
            check,
            Mark::Fail,
            format!(
                "{} not in `{}`'s help{}",
                refused
                    .iter()
                    .map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                cfg.program,
                if said.is_empty() {
                    ", and the contract run did not get through".to_owned()
                } else {
                    format!(", and the contract run said: {said}")
                }
            ),
        );
    }
    let detail = if hidden.is_empty() {
        format!("{} flags the loop passes, all in --help", flags.len())
    } else {
        format!(
            "{} flags the loop passes; {} not in --help but accepted by the contract run ({})",
            flags.len(),
            hidden.len(),
            hidden
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    row(check, Mark::Ok, detail)
}

/// The modes this version's help lists for `option`: Claude Code's `(choices: "a", "b")`,
/// Codex's `[possible values: a, b]`.
fn choices(help: &str, option: &str) -> Vec<String> {
    let Some(at) = help.find(option) else {
        return Vec::new();
    };
    let rest = &help[at..];
    let open = match (rest.find("choices:"), rest.find("possible values:")) {
        (Some(i), _) if i < 600 => i + "choices:".len(),
        (_, Some(i)) if i < 600 => i + "possible values:".len(),
        _ => return Vec::new(),
    };
    rest[open..]
        .split([')', ']'])
        .next()
        .unwrap_or_default()
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_owned())
        .filter(|c| !c.is_empty())
        .collect()
}

/// The values of the option that says what a run may do (Claude Code's permission modes,
/// Codex's sandboxes) this version knows, against the one the loop passes.
fn modes_row(kind: AgentKind, cfg: &AgentConfig, help: &str) -> Row {
    let backend = crate::agent::backend_for(kind);
    let option = backend.mode_option();
    let check = format!("{}: {}", kind.as_str(), option.what);
    let long = option.flags.last().copied().unwrap_or_default();
    let known = choices(help, long);
    let args = backend
        .invocation(cfg, "x", &crate::agent::Session::New(String::new()))
        .map(|i| i.args)
        .unwrap_or_default();
    let at = args.iter().position(|a| option.flags.contains(&a.as_str()));
    let flag = at.map_or(long, |i| args[i].as_str()).to_owned();
    let passed = at.and_then(|i| args.get(i + 1)).cloned();
    let knows = || {
        if known.is_empty() {
            "this version's --help lists none (the contract run is called with it)".to_owned()
        } else {
            format!("this version knows {}", known.join(", "))
        }
    };
    let Some(value) = passed else {
        let flags: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| a.starts_with('-') && *a != "-")
            .collect();
        return row(
            check,
            Mark::Ok,
            format!("none passed ({}); {}", flags.join(" "), knows()),
        );
    };
    if known.is_empty() || known.contains(&value) {
        return row(
            check,
            Mark::Ok,
            format!("{long} {value} passed; {}", knows()),
        );
    }
    // The loop's own mode passed as it is, under another name in this version.
    let mode = cfg.permission_mode.filter(|m| m.as_str() == value);
    let same = mode.and_then(|mode| {
        known
            .iter()
            .filter_map(|k| k.parse::<crate::m1::settings::PermissionMode>().ok())
            .find(|k| k.same_as(mode))
    });
    let fix = same.map_or_else(
        || "choose one of those".to_owned(),
        |s| format!("this version calls it `{s}`: write that"),
    );
    let what = match mode {
        Some(mode) => format!("AGENT.PERMISSION_MODE {mode} is unknown to this version"),
        None => format!("the loop passes {flag} {value}, which this version does not know"),
    };
    row(
        check,
        Mark::Fail,
        format!("{what} ({}); {fix}", known.join(", ")),
    )
}

fn stop_file(state_dir: &Path) -> Row {
    match crate::runner::stopfile::present(state_dir) {
        Some(p) => row(
            "stop file",
            Mark::Fail,
            format!(
                "{} is there: every loop it covers halts at once; remove it to run",
                p.display()
            ),
        ),
        None => row(
            "stop file",
            Mark::Ok,
            format!(
                "none ({} halts every loop when it appears)",
                crate::runner::stopfile::global().display()
            ),
        ),
    }
}

/// Whether the loop can write its state directory, asked of the kernel (`access(2)`): a doctor
/// run before the first loop, as the manual advises, creates nothing in the project. (It made
/// an empty `state/` once, which the loop then kept without its `.gitignore`.)
fn state_directory(state_dir: &Path) -> Row {
    use nix::unistd::{AccessFlags, access};
    let existing = state_dir
        .ancestors()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .find(|d| d.is_dir());
    let Some(existing) = existing else {
        return row(
            "state directory",
            Mark::Fail,
            format!("{}: no directory on its path exists", state_dir.display()),
        );
    };
    match access(existing, AccessFlags::W_OK | AccessFlags::X_OK) {
        Ok(()) if existing == state_dir => row(
            "state directory",
            Mark::Ok,
            format!("{} is writable", state_dir.display()),
        ),
        Ok(()) => row(
            "state directory",
            Mark::Ok,
            format!(
                "{} is not there yet: `loop start` makes it ({} is writable)",
                state_dir.display(),
                existing.display()
            ),
        ),
        Err(e) => row(
            "state directory",
            Mark::Fail,
            format!(
                "{}: {} cannot be written ({e})",
                state_dir.display(),
                existing.display()
            ),
        ),
    }
}

fn telegram() -> Row {
    use crate::notifier::telegram::{Client, Config};
    match Config::from_env() {
        Ok(None) => row(
            "telegram",
            Mark::Off,
            "TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID not set: no messages (see \
             docs/05-telegram.md)",
        ),
        Err(e) => row("telegram", Mark::Fail, e),
        Ok(Some(config)) => {
            let client = Client::new(config);
            match client.call("getMe", &serde_json::json!({}), Duration::from_secs(10)) {
                Ok(reply) if reply.status == 200 => {
                    let name = reply
                        .result
                        .as_ref()
                        .and_then(|r| r["username"].as_str())
                        .unwrap_or("?")
                        .to_owned();
                    row(
                        "telegram",
                        Mark::Ok,
                        format!("the bot is @{name} (getMe; nothing sent)"),
                    )
                }
                Ok(reply) => row(
                    "telegram",
                    Mark::Fail,
                    format!("getMe: {}", reply.summary()),
                ),
                Err(e) => row("telegram", Mark::Fail, format!("getMe: {e}")),
            }
        }
    }
}

fn daemon() -> Row {
    match crate::cli::service::daemon_state() {
        (false, state) => row(
            "daemon",
            Mark::Off,
            format!("{state}: `loop service install` brings loops back after a reboot"),
        ),
        (true, state) if state == "active" => row("daemon", Mark::Ok, "the service is active"),
        (true, state) => row(
            "daemon",
            Mark::Fail,
            format!("the service is installed but {state}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_read_from_either_clis_help() {
        let claude = "  --permission-mode <mode>   Permission mode to use for the session\n      \
                      (choices: \"acceptEdits\", \"auto\",\n      \"bypassPermissions\", \"manual\", \
                      \"dontAsk\", \"plan\")\n";
        assert_eq!(
            choices(claude, "--permission-mode"),
            [
                "acceptEdits",
                "auto",
                "bypassPermissions",
                "manual",
                "dontAsk",
                "plan"
            ]
        );
        let codex = "  -s, --sandbox <SANDBOX_MODE>\n          Select the sandbox\n          \n          \
                     [possible values: read-only, workspace-write, danger-full-access]\n";
        assert_eq!(
            choices(codex, "--sandbox"),
            ["read-only", "workspace-write", "danger-full-access"]
        );
        assert!(listed("  --tools <tools...>  x", "--tools"));
        assert!(listed(
            "  --allowedTools, --allowed-tools <tools...>",
            "--allowed-tools"
        ));
        assert!(listed("  -s, --sandbox <SANDBOX_MODE>", "--sandbox"));
        assert!(!listed("  --toolsets <x>", "--tools"));
        // Named in another option's description is not listed.
        assert!(!listed(
            "  --permission-prompts <target>   Who answers\n      --permission-prompt-tool) or",
            "--permission-prompt-tool"
        ));
    }
}
