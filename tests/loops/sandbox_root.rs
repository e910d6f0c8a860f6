//! The sandbox as root: root is nobody inside. A loop run by root kept every capability in its
//! runs (`CapEff: 000001fffeffffff`): the agent remounted the read-only state directory
//! writable and forged `M1.md`, and `loop doctor` said the sandbox held. Each test needs root
//! (it says `skipped:` otherwise) and bubblewrap.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{PATIENCE, TestLoop, stdout};

/// Whether this test can run here: as root, with bubblewrap; when not, it says so.
fn root_and_bwrap_here(test: &str) -> bool {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: {test}: needs root (what root keeps in the sandbox is what is tried)");
        return false;
    }
    if !crate::support::bwrap_here() {
        println!("skipped: {test}: bubblewrap (`bwrap`) is not installed here or cannot start");
        return false;
    }
    true
}

/// The effective capabilities in a `/proc/PID/status` text (`CapEff:`), as written.
fn cap_eff(status: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| v.trim().to_owned())
}

#[test]
fn as_root_an_agent_cannot_remount_the_state_directory_writable_and_forge_m1() {
    if !root_and_bwrap_here("as root an agent cannot remount the state directory …") {
        return;
    }
    let env = TestLoop::new();
    let state = env.state();
    let m1 = state.join("M1.md");
    env.scenario(
        &Scenario::new().step(
            1,
            Action::done("did my work")
                .bash("cat /proc/self/status > status.txt")
                .bash(&format!(
                    "mount -o remount,rw,bind {s} > mount.txt 2>&1; echo $? >> mount.txt",
                    s = state.display()
                ))
                .bash(&format!(
                    "sed -i 's/^GOAL: g$/GOAL: forged by the agent/' {m}; echo $? > forged.txt",
                    m = m1.display()
                )),
        ),
    );
    env.run_ok(&["start", "g", "--step", "one"]);
    env.assert_status(Status::Done);
    let status = std::fs::read_to_string(env.path().join("status.txt")).unwrap_or_default();
    assert_eq!(
        cap_eff(&status).as_deref(),
        Some("0000000000000000"),
        "the agent kept capabilities:\n{status}"
    );
    let mount = std::fs::read_to_string(env.path().join("mount.txt")).unwrap_or_default();
    assert_ne!(
        mount.lines().last().map(str::trim),
        Some("0"),
        "the remount was allowed: {mount}"
    );
    assert_ne!(
        std::fs::read_to_string(env.path().join("forged.txt"))
            .unwrap_or_default()
            .trim(),
        "0",
        "M1.md was written"
    );
    assert!(!env.text().contains("forged"), "{}", env.text());
    assert!(
        !env.log().contains("changed by hand"),
        "the agent's write to M1.md reached it:\n{}",
        env.log()
    );
    // Root is nobody inside, yet the person outside: what the agent wrote is root's.
    let meta = std::fs::metadata(env.path().join("status.txt")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    env.assert_no_processes();
}

#[test]
fn as_root_loop_doctor_checks_that_a_sandboxed_run_has_no_capability() {
    if !root_and_bwrap_here("as root loop doctor checks the capabilities …") {
        return;
    }
    let env = TestLoop::new();
    let config = env.temp.join("config");
    let env = env.env("XDG_CONFIG_HOME", config);
    env.scenario(&Scenario::new());
    let out = env.run_for(&["doctor"], PATIENCE * 4);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("sandbox"))
        .unwrap_or_else(|| panic!("no sandbox row: {text}"));
    assert!(line.starts_with("ok"), "{text}");
    assert!(line.contains("no capability inside (CapEff 0)"), "{line}");
}
