//! The VERIFY command: a shell command that must exit 0 after every step.
//!
//! It runs as an exec bridge task of its own, `tasks/<step task>.verify`, so it is ended the
//! way a step is: its own process group under a supervisor and a guardian, the timeout that
//! ends the whole group (SIGTERM, the bridge's grace, SIGKILL), the cleanup of processes that
//! left the group (`setsid`), and an exit record. Its stdout and stderr go, together and in
//! order, to the task's `stdout`; the step's task directory links to it as `verify.log`, and
//! a failure's tail goes into the fix prompt.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::bridge::{self, FireRequest, TaskEnd, TaskReport, TaskState};

/// How a VERIFY run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Exited 0.
    Passed,
    /// Exited non-zero, or was killed by a signal (`code` is then `None`).
    Failed { code: Option<i32>, tail: String },
    /// Failed on a path the sandbox hid or kept read-only ([`crate::sandbox::Refusal`]): `said`
    /// names the path and the flag that grants it. No retry can pass.
    Refused {
        code: Option<i32>,
        tail: String,
        said: String,
    },
    /// Ran past its time limit; its process group was killed.
    TimedOut { tail: String },
    /// `should_stop` asked to stop; its process group was killed.
    Stopped,
}

/// Lines of output a failure carries.
const TAIL_LINES: usize = 40;
/// The first wait between looks for the task's end, doubled up to [`POLL_MAX`]: a quick
/// command is seen ending soon, a long one costs one look (and one `should_stop`) per
/// [`POLL_MAX`].
const POLL_FIRST: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(50);
/// How often the task's lock is probed as well, for a supervisor that died leaving no
/// record (LOST).
const LOST_CHECK: Duration = Duration::from_secs(1);

/// The shell that runs the command with stderr joined to stdout, so the output keeps its
/// order; the inner `sh -c` reads the command exactly as a plain `sh -c COMMAND` would.
const JOINED_OUTPUT: &str = r#"exec 2>&1; exec sh -c "$1""#;

/// Runs `command` with `sh -c` in `cwd` with `env` added, as task `<step_task>.verify` of
/// the exec bridge in `state_dir` (`LOOP_TASK_ID` is that task's id), and waits for it,
/// asking `should_stop` about every 50 ms. On a stop, the whole task is killed and
/// confirmed dead before this returns. `env` must not carry `LOOP_ID`: the runner's ledger
/// takes the tasks whose spec has its loop's id for steps' tasks.
///
/// # Errors
/// When the task cannot be created or started, the shell cannot be started, or a stop
/// cannot confirm the task dead.
#[cfg(test)]
pub(crate) fn run(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    state_dir: &Path,
    step_task: &str,
    timeout: Duration,
    should_stop: &mut dyn FnMut() -> bool,
) -> crate::error::Result<Outcome> {
    let how = Run {
        command,
        cwd,
        env,
        state_dir,
        step_task,
        timeout,
    };
    run_confined(&how, &mut |req, _| req, should_stop)
}

/// What a VERIFY run is: [`run`]'s arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    pub state_dir: &'a Path,
    pub step_task: &'a str,
    pub timeout: Duration,
}

/// [`run`], its task confined by `confine` (given the request and the task's directory):
/// VERIFY runs the project's code, which the agent may have written, in the loop's sandbox.
///
/// # Errors
/// As [`run`].
pub(crate) fn run_confined(
    how: &Run<'_>,
    confine: &mut dyn FnMut(FireRequest, &Path) -> FireRequest,
    should_stop: &mut dyn FnMut() -> bool,
) -> crate::error::Result<Outcome> {
    let state_dir = how.state_dir;
    let id = new_task_id(state_dir, how.step_task)?;
    let req = FireRequest {
        command: ["sh", "-c", JOINED_OUTPUT, "sh", how.command]
            .map(String::from)
            .to_vec(),
        // The bridge refuses a zero limit; the shortest one it takes means the same.
        timeout: Some(how.timeout.max(Duration::from_millis(1))),
        cwd: Some(how.cwd.to_path_buf()),
        env: how.env.to_vec(),
        ..FireRequest::default()
    }
    // The project's command, which the agent may have written, and whose output's tail
    // the agent reads: no more the loop's credentials than the agent's own runs.
    .without_loop_credentials();
    let req = confine(req, &bridge::task_dir(state_dir, &id));
    bridge::fire_with_id(state_dir, &id, &req)
        .map_err(|e| e.context(format!("while starting VERIFY `{}`", how.command)))?;
    link_log(state_dir, how.step_task, &id);
    let exit_record = bridge::exit_record_path(state_dir, &id);
    let mut wait = POLL_FIRST;
    let mut probed = Instant::now();
    let report = loop {
        if exit_record.exists() {
            break bridge::check(state_dir, &id)?;
        }
        if probed.elapsed() >= LOST_CHECK {
            probed = Instant::now();
            let report = bridge::check(state_dir, &id)?;
            if report.state.is_final() {
                break report;
            }
        }
        if should_stop() {
            bridge::kill(state_dir, &id, bridge::DEFAULT_GRACE)
                .map_err(|e| e.context(format!("while ending VERIFY task {id} for a stop")))?;
            return Ok(Outcome::Stopped);
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(POLL_MAX);
    };
    if report.state == TaskState::Lost {
        // Its supervisor and guardian died: what is left of it is ended and confirmed dead.
        bridge::kill(state_dir, &id, bridge::DEFAULT_GRACE).map_err(|e| {
            e.context(format!(
                "while ending what is left of lost VERIFY task {id}"
            ))
        })?;
    }
    Ok(outcome(&report, how.command)?)
}

/// The VERIFY tasks of step task `step_task` in `state_dir`, in the order they ran.
pub(crate) fn task_ids(state_dir: &Path, step_task: &str) -> Vec<String> {
    ids(state_dir, step_task).0
}

/// The VERIFY tasks of step task `step_task` that exist (`<step_task>.verify`, then
/// `.verify-2`, `.verify-3`...), and the id of the next one.
fn ids(state_dir: &Path, step_task: &str) -> (Vec<String>, String) {
    let mut ids = Vec::new();
    let mut id = format!("{step_task}.verify");
    while bridge::exists(state_dir, &id) {
        ids.push(id);
        id = format!("{step_task}.verify-{}", ids.len() + 1);
    }
    (ids, id)
}

/// The id of a new VERIFY task of step task `step_task`: `<step_task>.verify`, or
/// `.verify-2`, `.verify-3`... when VERIFY ran for it before (a runner resumed after a
/// crash, a merge tried again). One that still runs is ended first: no two VERIFY runs of a
/// step overlap.
fn new_task_id(state_dir: &Path, step_task: &str) -> crate::error::Result<String> {
    let (earlier, next) = ids(state_dir, step_task);
    for id in &earlier {
        let state = bridge::check(state_dir, id)?.state;
        if matches!(state, TaskState::Running | TaskState::Lost) {
            bridge::kill(state_dir, id, bridge::DEFAULT_GRACE)
                .map_err(|e| e.context(format!("while ending the earlier VERIFY task {id}")))?;
        }
    }
    Ok(next)
}

/// `verify.log` in the step's task directory: a link to the VERIFY task's output, where a
/// person looking at the step finds it.
fn link_log(state_dir: &Path, step_task: &str, id: &str) {
    let dir = bridge::task_dir(state_dir, step_task);
    if !dir.is_dir() {
        return;
    }
    let link = dir.join("verify.log");
    let _ = std::fs::remove_file(&link);
    let target = Path::new("..").join(id).join(bridge::STDOUT_FILE);
    let _ = std::os::unix::fs::symlink(target, &link);
}

fn outcome(report: &TaskReport, command: &str) -> anyhow::Result<Outcome> {
    let tail = || output_tail(report);
    Ok(match &report.end {
        Some(TaskEnd::Exited { code: Some(0), .. }) => Outcome::Passed,
        Some(TaskEnd::Exited { code, .. }) => Outcome::Failed {
            code: *code,
            tail: tail(),
        },
        Some(TaskEnd::Timeout | TaskEnd::Idle) => Outcome::TimedOut { tail: tail() },
        Some(TaskEnd::SpawnFailed(why)) => {
            anyhow::bail!("VERIFY `{command}` could not be started: {why}")
        }
        // Ended from outside (`loop kill`) or with its supervisor (LOST): not an exit of the
        // command's own.
        Some(TaskEnd::Killed | TaskEnd::Lost) | None => Outcome::Failed {
            code: None,
            tail: tail(),
        },
    })
}

/// The last lines of the task's output: stdout, which holds stderr too, then whatever the
/// outer shell wrote to stderr before joining them.
fn output_tail(report: &TaskReport) -> String {
    let mut lines = crate::decision_log::last_lines(&report.stdout_path, TAIL_LINES);
    lines.extend(crate::decision_log::last_lines(
        &report.stderr_path,
        TAIL_LINES,
    ));
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// The last `n` lines of a file (lossy UTF-8), for messages and fix prompts.
#[must_use]
pub(crate) fn tail(path: &Path, n: usize) -> String {
    crate::decision_log::last_lines(path, n).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VERIFY's tasks are supervised by `loop __supervise`, and this test binary is not
    /// `loop`: use the one beside it (`target/<profile>/loop`, which `cargo test` builds for
    /// the integration tests).
    fn use_loop_binary() {
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .unwrap()
            .join(format!("loop{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.is_file(),
            "{} is missing: VERIFY's tests need the loop binary (cargo build, or all of cargo test)",
            bin.display()
        );
        bridge::use_loop_binary(bin);
    }

    /// Runs `cmd` for step task `step` with the state directory `state` as its cwd.
    fn run_in(state: &Path, step: &str, cmd: &str, timeout: Duration) -> Outcome {
        use_loop_binary();
        run(cmd, state, &[], state, step, timeout, &mut || false).unwrap()
    }

    fn run_simple(cmd: &str) -> Outcome {
        let dir = tempfile::tempdir().unwrap();
        let step = bridge::new_task_id();
        let _reaper = Reaper(format!("{step}.verify"));
        run_in(dir.path(), &step, cmd, Duration::from_secs(20))
    }

    /// Whether `pid` runs (a zombie does not).
    fn alive(pid: i32) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !stat.is_empty() && !stat.contains(") Z ")
    }

    /// Ends, when dropped, whatever of VERIFY task `id` still runs, so a failing test leaves
    /// nothing behind. (Every test has step tasks of its own: processes are found by task id
    /// machine-wide, and tests run side by side.)
    struct Reaper(String);

    impl Drop for Reaper {
        fn drop(&mut self) {
            for pid in bridge::survivors(&self.0) {
                let pid = nix::unistd::Pid::from_raw(pid.cast_signed());
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }

    /// A VERIFY command that first leaves a `setsid` process behind (outside its process
    /// group) and has it write its pid, then does `then`.
    fn escaping(dir: &Path, then: &str) -> (String, std::path::PathBuf) {
        let pid_file = dir.join("escaped.pid");
        let cmd = format!(
            "setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 300' & \
             while [ ! -s {p} ]; do sleep 0.01; done; {then}",
            p = pid_file.display()
        );
        (cmd, pid_file)
    }

    fn read_pid(path: &Path) -> i32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The escaped process is dead when `run` returns, and the VERIFY task's record names it
    /// among those killed outside the group: it was the bridge's cleanup that ended it.
    fn assert_escaped_one_ended(state: &Path, step: &str, pid_file: &Path) {
        let pid = read_pid(pid_file);
        assert!(!alive(pid), "the setsid process {pid} outlived VERIFY");
        let id = format!("{step}.verify");
        assert_eq!(bridge::survivors(&id), Vec::<u32>::new());
        let report = bridge::check(state, &id).unwrap();
        assert!(
            report
                .killed_outside_group
                .iter()
                .any(|s| i64::from(s.pid) == i64::from(pid)),
            "{:?}",
            report.killed_outside_group
        );
    }

    #[test]
    fn exit_zero_passes() {
        assert_eq!(run_simple("true"), Outcome::Passed);
    }

    #[test]
    fn failure_carries_code_and_tail() {
        let got = run_simple("echo one; echo two >&2; exit 3");
        assert_eq!(
            got,
            Outcome::Failed {
                code: Some(3),
                tail: "one\ntwo".into()
            }
        );
    }

    /// Runs `cmd` as step `step`'s VERIFY in `dir` (20 s limit) until `stop` says to stop.
    fn run_stoppable(dir: &Path, step: &str, cmd: &str, stop: &mut dyn FnMut() -> bool) -> Outcome {
        use_loop_binary();
        run(cmd, dir, &[], dir, step, Duration::from_secs(20), stop).unwrap()
    }

    #[test]
    fn stop_kills_the_group() {
        use_loop_binary();
        let dir = tempfile::tempdir().unwrap();
        let step = bridge::new_task_id();
        let _reaper = Reaper(format!("{step}.verify"));
        let marker = dir.path().join("pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let mut polls = 0;
        // The marker exists a moment before the pid is in it (the shell's `>` creates it
        // first): stopped once it names the pid.
        let named =
            |p: &Path| std::fs::read_to_string(p).is_ok_and(|t| t.trim().parse::<i32>().is_ok());
        let got = run_stoppable(dir.path(), &step, &cmd, &mut || {
            polls += 1;
            named(&marker) && polls > 2
        });
        assert_eq!(got, Outcome::Stopped);
        let pid = read_pid(&marker);
        // The grandchild `sleep` was in the group and must be gone (or a zombie being reaped
        // by init); poll for it with a deadline.
        assert!(
            bridge::wait_until(Instant::now() + Duration::from_secs(10), || !alive(pid)),
            "grandchild {pid} still alive"
        );
    }

    #[test]
    fn output_keeps_its_order_and_its_last_40_lines() {
        let got = run_simple("echo out1; echo err1 >&2; echo out2; exit 1");
        assert_eq!(
            got,
            Outcome::Failed {
                code: Some(1),
                tail: "out1\nerr1\nout2".into()
            }
        );
        let got = run_simple("seq 1 100; echo last >&2; exit 2");
        let want: Vec<String> = (62..=100)
            .map(|i| i.to_string())
            .chain(["last".into()])
            .collect();
        assert_eq!(
            got,
            Outcome::Failed {
                code: Some(2),
                tail: want.join("\n")
            }
        );
    }

    #[test]
    fn a_command_killed_by_a_signal_fails_without_a_code() {
        assert_eq!(
            run_simple("echo dying; kill -9 $$"),
            Outcome::Failed {
                code: None,
                tail: "dying".into()
            }
        );
    }

    #[test]
    fn a_timeout_ends_the_group_and_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let step = bridge::new_task_id();
        let _reaper = Reaper(format!("{step}.verify"));
        let pid_file = dir.path().join("pid");
        let cmd = format!(
            "echo working; echo still >&2; sleep 30 & echo $! > {}; wait",
            pid_file.display()
        );
        let got = run_in(dir.path(), &step, &cmd, Duration::from_millis(500));
        assert_eq!(
            got,
            Outcome::TimedOut {
                tail: "working\nstill".into()
            }
        );
        assert!(
            !alive(read_pid(&pid_file)),
            "the group's sleep outlived VERIFY"
        );
    }

    #[test]
    fn a_setsid_process_does_not_outlive_a_pass_a_failure_or_a_timeout() {
        let cases = [
            ("exit 0", Duration::from_secs(20), Outcome::Passed),
            (
                "echo broken; exit 4",
                Duration::from_secs(20),
                Outcome::Failed {
                    code: Some(4),
                    tail: "broken".into(),
                },
            ),
            (
                "sleep 30",
                Duration::from_secs(1),
                Outcome::TimedOut {
                    tail: String::new(),
                },
            ),
        ];
        for (script, timeout, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            let step = bridge::new_task_id();
            let _reaper = Reaper(format!("{step}.verify"));
            let (cmd, pid_file) = escaping(dir.path(), script);
            assert_eq!(run_in(dir.path(), &step, &cmd, timeout), want, "{script}");
            assert_escaped_one_ended(dir.path(), &step, &pid_file);
        }
    }

    #[test]
    fn a_setsid_process_does_not_outlive_a_stop_which_is_prompt() {
        use_loop_binary();
        let dir = tempfile::tempdir().unwrap();
        let step = bridge::new_task_id();
        let _reaper = Reaper(format!("{step}.verify"));
        let (cmd, pid_file) = escaping(dir.path(), "sleep 30");
        let mut seen = None;
        let got = run_stoppable(dir.path(), &step, &cmd, &mut || {
            let stop = pid_file.exists();
            if stop {
                seen.get_or_insert_with(Instant::now);
            }
            stop
        });
        let took = seen.unwrap().elapsed();
        assert_eq!(got, Outcome::Stopped);
        assert_escaped_one_ended(dir.path(), &step, &pid_file);
        // Everything here ends at SIGTERM: the stop never waited for the grace period.
        assert!(took < bridge::DEFAULT_GRACE / 2, "the stop took {took:?}");
    }

    #[test]
    fn the_command_sees_its_task_and_the_step_links_its_output() {
        use_loop_binary();
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path();
        let step = bridge::new_task_id();
        let _reaper = Reaper(format!("{step}.verify"));
        std::fs::create_dir_all(bridge::task_dir(state, &step)).unwrap();
        let env = [("LOOP_STEP".to_string(), "3".to_string())];
        let cmd = format!(
            "echo \"step $LOOP_STEP task $LOOP_TASK_ID in $(pwd)\"; [ \"$LOOP_TASK_ID\" = {step}.verify ]"
        );
        let got = run(
            &cmd,
            state,
            &env,
            state,
            &step,
            Duration::from_secs(20),
            &mut || false,
        )
        .unwrap();
        assert_eq!(got, Outcome::Passed);
        let log = bridge::task_dir(state, &step).join("verify.log");
        let text = std::fs::read_to_string(&log).unwrap();
        let here = state.canonicalize().unwrap();
        assert_eq!(
            text.trim(),
            format!("step 3 task {step}.verify in {}", here.display())
        );
    }

    #[test]
    fn a_second_run_for_the_same_step_ends_the_first_and_takes_a_new_task() {
        use_loop_binary();
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path();
        let step = bridge::new_task_id();
        let first_id = format!("{step}.verify");
        let _reapers = [Reaper(first_id.clone()), Reaper(format!("{step}.verify-2"))];
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                run_in(
                    state,
                    &step,
                    "echo first; sleep 30",
                    Duration::from_secs(60),
                )
            });
            assert!(bridge::wait_until(
                Instant::now() + Duration::from_secs(20),
                || {
                    bridge::check(state, &first_id).is_ok_and(|r| {
                        std::fs::read_to_string(&r.stdout_path).is_ok_and(|t| t == "first\n")
                    })
                }
            ));
            assert_eq!(
                run_in(state, &step, "echo second", Duration::from_secs(20)),
                Outcome::Passed
            );
            // The first was ended before the second started, and reads as a failure.
            assert_eq!(
                first.join().unwrap(),
                Outcome::Failed {
                    code: None,
                    tail: "first".into()
                }
            );
        });
        let second = bridge::check(state, &format!("{step}.verify-2")).unwrap();
        assert_eq!(second.state, TaskState::Done);
        assert_eq!(bridge::survivors(&first_id), Vec::<u32>::new());
    }
}
