//! What `--file` (and `--plan`) may name: a regular file (a symlink to one is fine) of at most
//! 4 MiB. Anything else is refused at once, by every command that reads it, with what it is: a
//! FIFO would block the read forever, and a device such as /dev/zero would be read until memory
//! runs out.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::{SEED, SIM, Temp, code, loop_on_file, run_within, stderr, stdout};

/// Longer than a refusal can take; shorter than a test run should wait for a hang.
const PROMPTLY: Duration = Duration::from_secs(10);

/// `loop --file FILE ARGS` that cannot take the machine down should it read without end: 1 GiB
/// of address space at most.
fn bounded(args: &[&str], file: &Path) -> Command {
    let mut cmd = loop_on_file(args, file);
    cmd.env("LOOP_AGENT", SIM);
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            use nix::sys::resource::{Resource, setrlimit};
            setrlimit(Resource::RLIMIT_AS, 1 << 30, 1 << 30).map_err(std::io::Error::from)
        });
    }
    cmd
}

/// Each command that reads M1.md, on `file`: refused promptly with exit 2, saying `what`.
fn refused_by_every_reader(file: &Path, what: &str) {
    for args in [
        &["validate"][..],
        &["status"],
        &["status", "--json"],
        &["resume"],
        &["start", "g", "--step", "s"],
    ] {
        let out: Output = run_within(bounded(args, file), PROMPTLY);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {}{err}", stdout(&out));
        assert!(
            err.contains(&file.display().to_string()) && err.contains(what),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_fifo_as_file_is_refused_instead_of_blocking() {
    let d = Temp::new();
    let fifo = d.join("M1.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    refused_by_every_reader(&fifo, "not a regular file but a FIFO");
}

#[test]
fn a_symlink_to_dev_zero_is_refused_instead_of_read_until_memory_runs_out() {
    let d = Temp::new();
    let link = d.join("M1.md");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    refused_by_every_reader(&link, "not a regular file but a character device");
}

#[test]
fn a_directory_as_file_is_refused_with_what_it_is() {
    let d = Temp::new();
    let dir = d.join("M1.md");
    std::fs::create_dir(&dir).unwrap();
    refused_by_every_reader(&dir, "not a regular file but a directory");
}

#[test]
fn an_m1_md_over_4_mib_is_refused_and_left_as_it_is() {
    let d = Temp::new();
    let mut text = SEED.to_owned();
    while text.len() <= 4 << 20 {
        text.push_str("# a long comment line that makes the file grow past its cap\n");
    }
    let file = d.write("M1.md", &text);
    refused_by_every_reader(&file, "more than the 4 MiB");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[test]
fn a_symlink_to_a_regular_m1_md_is_read() {
    let d = Temp::new();
    let real = d.write("real.md", SEED);
    let link = d.join("M1.md");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = run_within(bounded(&["validate"], &link), PROMPTLY);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_fifo_as_plan_is_refused_instead_of_blocking() {
    let d = Temp::new();
    let fifo = d.join("TODO.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let plan = fifo.display().to_string();
    let file = d.join("state").join("M1.md");
    let out = run_within(bounded(&["start", "g", "--plan", &plan], &file), PROMPTLY);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("not a regular file but a FIFO"), "{err}");
    assert!(!file.exists(), "nothing was started");
}
