//! What a click does: the loop's own command, run as a child of the `loop` binary, as the
//! chat bot runs it for a tap (`loop answer G1 retry --by … --detach --json`). So a click, a
//! tap and a shell answer go through the one decision path, whose lock and compare-and-swap
//! write make one decision of any number of them at once; the server holds nothing of it.
//! The child runs in the loop's project, with the server's environment, and in a process
//! group of its own: a server killed meanwhile leaves it to finish what it began.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a command may take: `loop stop` waits up to 10 s for a runner to let go.
const PATIENCE: Duration = Duration::from_secs(60);

/// How a command ended: its exit code (`None`: killed, or it could not start) and what it
/// printed.
#[derive(Debug, Clone)]
pub(super) struct Ran {
    pub code: Option<i32>,
    pub output: String,
}

impl Ran {
    /// The one JSON object a `--json` decision printed (`outcome`, `gate`, `message`).
    pub(super) fn outcome(&self) -> Option<serde_json::Value> {
        self.output
            .lines()
            .filter(|l| l.starts_with('{'))
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("outcome").is_some())
    }
}

/// Runs the `loop` binary.
#[derive(Debug, Clone)]
pub(super) struct Loop {
    pub program: PathBuf,
}

impl Loop {
    /// `loop --file FILE ARGS`, in `project`, to its end (at most [`PATIENCE`]).
    pub(super) fn run(&self, file: &Path, project: &Path, args: &[String]) -> Ran {
        let failed = |why: String| Ran {
            code: None,
            output: why,
        };
        // Output goes to a file, not a pipe: a detached runner that inherited a pipe would hold
        // it open. The file is unlinked at once; only the two descriptors know it.
        let mut out = match unlinked_file() {
            Ok(f) => f,
            Err(e) => return failed(format!("could not make a file for its output: {e}")),
        };
        let (stdout, stderr) = match (out.try_clone(), out.try_clone()) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return failed(format!("could not share its output: {e}")),
        };
        let mut cmd = Command::new(&self.program);
        cmd.arg("--file")
            .arg(file)
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        if project.is_dir() {
            cmd.current_dir(project);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("could not run {}: {e}", self.program.display())),
        };
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let mut output = String::new();
        let _ = out.seek(SeekFrom::Start(0));
        let _ = out.read_to_string(&mut output);
        if status.is_none() {
            let _ = write!(output, "\n(killed after {}s)", PATIENCE.as_secs());
        }
        Ran {
            code: status.and_then(|s| s.code()),
            output: output.trim().to_owned(),
        }
    }
}

/// A new file in the temporary directory, already unlinked.
fn unlinked_file() -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::env::temp_dir().join(format!(
        "loop-serve-{}-{}.out",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// Who decides from the page, for M1.md and `loop.log`: this user from the web page, as the
/// shell says `alice (shell)`; a request from another machine (`--expose`) by its address.
pub(super) fn who(peer: Option<std::net::IpAddr>) -> String {
    match peer {
        Some(ip) if !ip.is_loopback() => format!("web {ip}"),
        _ => {
            let user = std::env::var("USER").unwrap_or_default();
            if user.is_empty() {
                "web".to_owned()
            } else {
                format!("{user} (web)")
            }
        }
    }
}

/// The arguments of the decision `choice` on gate `gate`: the same command a tap runs.
/// `--` keeps a choice that starts with `-` an answer, not a flag.
pub(super) fn answer_args(gate: &str, choice: &str, shown: Option<&str>, by: &str) -> Vec<String> {
    let mut args = vec!["answer".to_owned()];
    if let Some(s) = shown {
        args.extend(["--shown".to_owned(), s.to_owned()]);
    }
    args.extend([
        "--by".to_owned(),
        by.to_owned(),
        "--detach".to_owned(),
        "--json".to_owned(),
        "--".to_owned(),
        gate.to_owned(),
        choice.to_owned(),
    ]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_that_looks_like_a_flag_stays_an_answer() {
        let args = answer_args("G1", "--help", Some("abc"), "me (web)");
        let cli = crate::cli::parse_from(
            ["loop"]
                .into_iter()
                .map(String::from)
                .chain(args)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        match cli.command {
            crate::cli::Command::Answer { words, decide } => {
                assert_eq!(words, ["G1", "--help"]);
                assert_eq!(decide.by.as_deref(), Some("me (web)"));
                assert_eq!(decide.shown.as_deref(), Some("abc"));
                assert!(decide.detach && decide.json);
            }
            other => panic!("{other:?}"),
        }
    }
}
