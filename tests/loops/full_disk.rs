//! A state directory that cannot be written for a while, during a step: a full disk, a spent
//! quota, a file system remounted read-only. Faked here with a read-only bind mount of the
//! loop's state directory over itself, which refuses every new write there (`Read-only file
//! system`) while files opened before (the agent's output) go on being written, as on a disk
//! that filled up. Needs what a bind mount needs (root, as CI runs). And an `M1.md` at the size
//! every reader takes, which the runner's own record must not push over.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{Guard, TestLoop, code, stderr, wait_until};

/// Whether the agent of the loop's only task so far has ended (its processes are gone; its
/// supervisor may still wait to write what it left).
fn agent_ended(env: &TestLoop) -> bool {
    let tasks: Vec<String> = std::fs::read_dir(env.state().join("tasks"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("task_"))
        .collect();
    tasks.len() == 1 && crate::support::procs::task_processes(&tasks[0]).is_empty()
}

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
        unmount(&self.0);
    }
}

/// Unmounts what is mounted on `dir`, lazily where it is busy.
fn unmount(dir: &Path) {
    let d = dir.to_str().unwrap();
    let gone = Command::new("umount")
        .arg(d)
        .status()
        .is_ok_and(|s| s.success());
    if !gone {
        let _ = Command::new("umount").args(["-l", d]).status();
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
    // The runner writes once more while the step runs (the agent's pid, 0.1 s in): when the
    // file system turned read-only before that, the runner meets it and must say so; on a
    // machine so busy that the write came first, the runner has nothing to write until the
    // agent's exit record can be, and only the outcome is held.
    let (ended, meets_it) = {
        let _full = ReadOnly::mount(&env.state());
        let meets_it = env.m1().current.cc_pid.is_none();
        // The agent ends meanwhile: its record, and the runner's, wait for room.
        let said_so =
            || std::fs::read_to_string(&said).is_ok_and(|t| t.contains("cannot be written"));
        let done = wait_until(Duration::from_secs(60), || {
            agent_ended(&env) && (said_so() || !meets_it)
        });
        assert!(
            done,
            "the agent ended: {}; the runner said: {}",
            agent_ended(&env),
            std::fs::read_to_string(&said).unwrap_or_default()
        );
        (runner.try_wait().unwrap(), meets_it)
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
    if !meets_it {
        println!(
            "note: the agent's pid was on record before the mount; the runner had no write to wait"
        );
        return;
    }
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

/// `dir` on a small file system of its own (a tmpfs mounted over it) until dropped, which a
/// test can fill to the last byte, as a real disk fills up.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let d = dir.to_str().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs", d])
            .status()
            .is_ok_and(|s| s.success());
        assert!(mounted, "this test mounts a small tmpfs, which needs root");
        Self(dir.to_path_buf())
    }

    /// Fills the file system with `filler`, to its last byte.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let filler = self.0.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        let small = [0u8; 512];
        while f.write_all(&small).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        unmount(&self.0);
    }
}

/// A disk that filled up while a step's agent wrote its output: the agent's own writes to
/// the task's `stdout` failed, it ended with an empty stream, and the step was charged a
/// failed attempt, while the log said "no attempt was counted". The agent's output waits for
/// room as the loop's own records do.
#[test]
fn a_disk_full_while_the_agent_writes_its_output_costs_no_attempt() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("first").sleep_ms(1500).heartbeat_ms(50))
            .step(2, Action::done("second")),
    );
    let disk = SmallDisk::mount(&env.state());
    let mut start = env.cmd(&["start", "g", "--step", "a", "--step", "b"]);
    let mut runner = Guard::spawn(&mut start);
    assert!(wait_until(Duration::from_secs(60), || env.calls().len() == 1));
    let filler = disk.fill();
    // Full until the agent has ended, its heartbeats and its result written while it was.
    assert!(wait_until(Duration::from_secs(60), || agent_ended(&env)));
    std::fs::remove_file(&filler).unwrap();
    let status = runner.wait(Duration::from_secs(120));
    let log = env.log();
    assert_eq!(status.code(), Some(0), "{log}\n{}", env.text());
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.results[&1].attempts, Some(1), "{log}\n{}", env.text());
    assert_eq!(env.calls().len(), 2, "each step's agent ran once: {log}");
    let outputs: Vec<String> = std::fs::read_dir(env.state().join("tasks"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stdout")).ok())
        .collect();
    assert!(
        outputs.iter().any(|o| o.contains("STEP_DONE: first")),
        "the agent's whole output is kept: {outputs:?}"
    );
    drop(disk);
}

/// `loop resume` on a full disk exited 70 with "No space left on device (os error 28)",
/// naming no file and not saying the disk was full. It says which file it could not write
/// and that the disk is full, and once there is room, `loop resume` carries on.
#[test]
fn loop_resume_on_a_full_disk_says_which_file_it_could_not_write() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, Action::done("did it")));
    let disk = SmallDisk::mount(&env.state());
    env.run_ok(&["start", "g", "--step", "one", "--plan-only"]);
    let filler = disk.fill();
    let out = env.run(&["resume"]);
    let said = stderr(&out);
    assert!(
        said.contains("No space left on device")
            && said.contains(&env.state().display().to_string()),
        "{said}"
    );
    assert!(said.contains("full"), "{said}");
    std::fs::remove_file(&filler).unwrap();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 1, "{}", env.log());
    drop(disk);
}

/// An M1.md just under its 4 MiB limit: the runner's own record pushed it over, then logged that
/// record as a hand edit, and every command refused the file from then on. The runner never
/// makes its own file unreadable: it halts, WAITING, with the file within its limit.
#[test]
fn a_runner_never_writes_its_m1_md_past_the_size_every_reader_takes() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, Action::done("did it").sleep_ms(200)));
    env.run_ok(&["start", "g", "--step", "one", "--plan-only"]);
    let trimmed = env.text();
    let mut padded = trimmed.clone();
    let line = "# a long comment line a person keeps in the file, to make it big\n";
    while padded.len() + line.len() <= (4 << 20) - 40 {
        padded.push_str(line);
    }
    std::fs::write(env.path().join("state/M1.md"), &padded).unwrap();
    let out = env.run(&["resume"]);
    assert_eq!(code(&out), 3, "{}\n{}", stderr(&out), env.log());
    let len = std::fs::metadata(env.path().join("state/M1.md"))
        .unwrap()
        .len();
    assert!(len <= 4 << 20, "the runner wrote {len} bytes");
    env.assert_status(Status::Waiting);
    assert!(env.log().contains("over the 4 MiB"), "{}", env.log());
    assert!(!env.log().contains("changed by hand"), "{}", env.log());
    // Every command still reads it, and once trimmed the loop carries on, running the step once.
    env.run_ok(&["status"]);
    let text = env.text().replace(line, "");
    std::fs::write(env.path().join("state/M1.md"), text).unwrap();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 1, "{}", env.log());
}
