//! The VERIFY command: a shell command that must exit 0 after every step.
//!
//! It runs in its own process group with its output in a file, so a stop or a timeout can end
//! it and everything it started, and the failure's tail can go into the fix prompt.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How a VERIFY run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exited 0.
    Passed,
    /// Exited non-zero, or was killed by a signal (`code` is then `None`).
    Failed { code: Option<i32>, tail: String },
    /// Ran past its time limit; its process group was killed.
    TimedOut { tail: String },
    /// `should_stop` asked to stop; its process group was killed.
    Stopped,
}

/// Runs `command` with `sh -c` in `cwd` with `env` added, output to `log`. Polls
/// `should_stop` every 100 ms.
///
/// # Errors
/// When the shell cannot be started or the log cannot be written.
pub fn run(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
    timeout: Duration,
    should_stop: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Outcome> {
    let out = File::create(log).with_context(|| format!("while creating {}", log.display()))?;
    let err = out.try_clone()?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .with_context(|| format!("while starting VERIFY `{command}`"))?;
    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            // The shell is gone; anything it left running in its group goes too.
            let _ = killpg(pgid, Signal::SIGKILL);
            if status.success() {
                return Ok(Outcome::Passed);
            }
            return Ok(Outcome::Failed {
                code: status.code(),
                tail: tail(log, 40),
            });
        }
        let stop = should_stop();
        if stop || Instant::now() >= deadline {
            kill_group(pgid, &mut child);
            if stop {
                return Ok(Outcome::Stopped);
            }
            return Ok(Outcome::TimedOut {
                tail: tail(log, 40),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill_group(pgid: Pid, child: &mut std::process::Child) {
    let _ = killpg(pgid, Signal::SIGTERM);
    let grace = Instant::now() + Duration::from_secs(2);
    while Instant::now() < grace {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
}

/// The last `n` lines of a file (lossy UTF-8), for messages and fix prompts.
#[must_use]
pub fn tail(path: &Path, n: usize) -> String {
    crate::decision_log::last_lines(path, n).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_simple(cmd: &str) -> Outcome {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("verify.log");
        run(
            cmd,
            dir.path(),
            &[],
            &log,
            Duration::from_secs(20),
            &mut || false,
        )
        .unwrap()
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

    #[test]
    fn stop_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("verify.log");
        let marker = dir.path().join("pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let mut polls = 0;
        let got = run(
            &cmd,
            dir.path(),
            &[],
            &log,
            Duration::from_secs(20),
            &mut || {
                polls += 1;
                marker.exists() && polls > 2
            },
        )
        .unwrap();
        assert_eq!(got, Outcome::Stopped);
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild `sleep` was in the group and must be gone (or a zombie being reaped
        // by init); poll for it with a deadline.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let alive = !stat.is_empty() && !stat.contains(") Z ");
            if !alive {
                break;
            }
            assert!(Instant::now() < deadline, "grandchild {pid} still alive");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
