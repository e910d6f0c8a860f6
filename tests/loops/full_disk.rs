//! A state directory that cannot be written for a while, during a step: a full disk, a spent
//! quota, a file system remounted read-only. Faked here with a read-only bind mount of the
//! loop's state directory over itself, which refuses every new write there (`Read-only file
//! system`) while files opened before (the agent's output) go on being written, as on a disk
//! that filled up. Needs what a bind mount needs (root, as CI runs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{Guard, TestLoop, wait_until};

/// `dir` made read-only (a bind mount of it over itself) until dropped.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn mount(dir: &Path) -> Self {
        let ok = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let d = dir.to_str().unwrap();
        // A file opened for writing through the new mount before it turns read-only makes the
        // remount busy: then it is tried again from the start.
        for _ in 0..50 {
            assert!(
                ok(&["--bind", d, d]),
                "this test fakes a full disk with a bind mount, which needs root"
            );
            let guard = Self(dir.to_path_buf());
            if ok(&["-o", "remount,bind,ro", d]) {
                assert!(
                    std::fs::write(dir.join("probe"), "x").is_err(),
                    "{d} is still writable"
                );
                return guard;
            }
            drop(guard);
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("{d} could not be remounted read-only: always busy");
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let d = self.0.to_str().unwrap();
        let gone = Command::new("umount")
            .arg(d)
            .status()
            .is_ok_and(|s| s.success());
        if !gone {
            let _ = Command::new("umount").args(["-l", d]).status();
        }
    }
}

/// The state directory turned read-only for 3 s during a step (while its agent wrote its
/// output and ended): the runner exited 70 within 0.3–2.2 s without recording why (the log
/// later blamed "reboot or kill -9"), and the step, which had usually finished, was killed
/// and cost an attempt (12 of 12). Issue 30.
#[test]
fn a_state_directory_full_for_a_while_during_a_step_costs_nothing() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("first").sleep_ms(1200).heartbeat_ms(50))
            .step(2, Action::done("second")),
    );
    let said = env.path().join("runner.err");
    let mut start = env.cmd(&["start", "g", "--step", "a", "--step", "b"]);
    start.stderr(std::fs::File::create(&said).unwrap());
    let mut runner = Guard::spawn(&mut start);
    assert!(wait_until(Duration::from_secs(30), || env.calls().len() == 1));
    let ended = {
        let _full = ReadOnly::mount(&env.state());
        // The agent ends meanwhile: its record, and the runner's, wait for room.
        std::thread::sleep(Duration::from_secs(3));
        runner.try_wait().unwrap()
    };
    assert_eq!(ended, None, "the runner waited: {}", env.log());
    let status = runner.wait(Duration::from_secs(60));
    let log = env.log();
    assert_eq!(status.code(), Some(0), "{log}\n{}", env.text());
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.results[&1].attempts, Some(1), "{}", env.text());
    assert_eq!(env.calls().len(), 2, "each step's agent ran once");
    assert!(!log.contains("LOST"), "{log}");
    // Said on the terminal and in the log: that it waited, why, and that it could go on.
    let terminal = std::fs::read_to_string(&said).unwrap();
    assert!(
        terminal.contains("cannot be written (Read-only file system")
            && terminal.contains("the running step goes on"),
        "{terminal}"
    );
    assert!(terminal.contains("can be written again"), "{terminal}");
    assert!(
        log.contains("cannot be written for now")
            && log.contains("Read-only file system")
            && log.contains("can be written again"),
        "{log}"
    );
}
