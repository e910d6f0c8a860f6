//! `loop doctor`'s sandbox row: which sandbox the loop's runs get, whether bubblewrap can
//! start here, and what a confined run does and does not see, tried for real: a key planted
//! in a scratch home must not be readable, a write outside the work tree must fail, the work
//! tree must take one, and the run must hold no capability (`CapEff` of `/proc/self/status`
//! is 0), whoever runs the loop: root keeping its capabilities inside could remount the
//! read-only state writable, which no planted key would show.

use std::path::Path;

use super::{Mark, Row, row};
use crate::m1::SandboxMode;
use crate::runner::settings::SandboxSettings;
use crate::sandbox::{self, Access, Policy};

/// The sandbox row for runs confined as `s` says.
pub(super) fn check(s: &SandboxSettings) -> Row {
    if s.mode == SandboxMode::Off {
        return row(
            "sandbox",
            Mark::Off,
            "AGENT.SANDBOX off: every agent run and VERIFY has your whole authority (`--sandbox \
             bwrap` confines them)",
        );
    }
    let bwrap = match sandbox::probe() {
        Ok(b) => b,
        Err(why) => return row("sandbox", Mark::Fail, why),
    };
    match tried(&bwrap) {
        Ok(()) => row(
            "sandbox",
            Mark::Ok,
            format!(
                "bubblewrap ({}{}): a key planted in ~/.ssh unreadable, a write outside the work \
                 tree refused, the work tree writable, no capability inside (CapEff 0)",
                bwrap.display(),
                version(&bwrap)
                    .map(|v| format!(", {v}"))
                    .unwrap_or_default()
            ),
        ),
        Err(why) => row("sandbox", Mark::Fail, why),
    }
}

fn version(bwrap: &Path) -> Option<String> {
    let out = std::process::Command::new(bwrap)
        .arg("--version")
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A confined shell in a scratch project, with a scratch home holding a planted key: what it
/// could read and write, or what went wrong.
fn tried(bwrap: &Path) -> Result<(), String> {
    let scratch = super::contract::Scratch::new("sandbox").map_err(|e| e.to_string())?;
    let root = scratch.0.as_path();
    let (home, work, outside, state) = (
        root.join("home"),
        root.join("project"),
        root.join("other-project"),
        root.join("project/state"),
    );
    for d in [&home.join(".ssh"), &state, &outside] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    std::fs::write(home.join(".ssh/id_doctor"), "planted").map_err(|e| e.to_string())?;
    let policy = Policy {
        work_tree: work.clone(),
        work_tree_writable: true,
        state_dir: state,
        state_writes: Vec::new(),
        home: home.clone(),
        paths: vec![(home.join(".claude"), Access::Write)],
        programs: Vec::new(),
        env: sandbox::kept_env(&[]),
        named_files: Vec::new(),
    };
    let script = format!(
        "cat {k} 2>/dev/null && echo READ-KEY; echo x > {o}/x 2>/dev/null && echo WROTE-OUTSIDE; \
         echo x > {w}/doctor.txt && echo WROTE-TREE; grep '^CapEff:' /proc/self/status",
        k = home.join(".ssh/id_doctor").display(),
        o = outside.display(),
        w = work.display()
    );
    let args = sandbox::confined(bwrap, &policy, &["sh".into(), "-c".into(), script]);
    let out = std::process::Command::new(&args[0])
        .args(&args[1..])
        .env("HOME", &home)
        .output()
        .map_err(|e| format!("bubblewrap could not be run: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if said.contains("READ-KEY") {
        return Err("a confined run read a key planted in ~/.ssh".into());
    }
    if said.contains("WROTE-OUTSIDE") || outside.join("x").exists() {
        return Err("a confined run wrote outside its work tree".into());
    }
    let caps = said
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(str::trim);
    match caps.map(|c| u64::from_str_radix(c, 16)) {
        Some(Ok(0)) => {}
        Some(Ok(_)) => {
            return Err(format!(
                "a confined run holds capabilities (CapEff {}): it could remount what is \
                 read-only; bubblewrap must drop them all in a user namespace of its own",
                caps.unwrap_or_default()
            ));
        }
        Some(Err(_)) | None => {
            return Err(format!(
                "a confined run's capabilities could not be read from /proc/self/status: {}",
                crate::text::one_line(String::from_utf8_lossy(&out.stderr).trim(), 300)
            ));
        }
    }
    if !said.contains("WROTE-TREE") || !work.join("doctor.txt").exists() {
        return Err(format!(
            "a confined run could not write its work tree: {}",
            crate::text::one_line(String::from_utf8_lossy(&out.stderr).trim(), 300)
        ));
    }
    Ok(())
}
