//! What `--file` (and `--plan`) may name, and what M1.md may hold: a regular file (a symlink
//! to one is fine) of at most 4 MiB, whose values can be run as they are written. Anything
//! else is refused at once, with what it is and where: a FIFO blocked the read forever, a
//! device such as /dev/zero was read until memory ran out, and values that could never run
//! passed `validate`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use m1loop::m1::Document;

use crate::support::{
    SEED, SIM, Temp, code, loop_on_file, parse_errors as errors, run_within, stderr, stdout,
};

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

/// `--file` naming a FIFO blocked `validate`, `status`, `resume` and `start` for ever. Fixed in
/// 33478a2 (issue 18), as are the next five.
#[test]
fn a_fifo_as_file_is_refused_instead_of_blocking() {
    let d = Temp::new();
    let fifo = d.join("M1.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    refused_by_every_reader(&fifo, "not a regular file but a FIFO");
}

/// A symlink to /dev/zero was read until memory ran out. Fixed in 33478a2.
#[test]
fn a_symlink_to_dev_zero_is_refused_instead_of_read_until_memory_runs_out() {
    let d = Temp::new();
    let link = d.join("M1.md");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    refused_by_every_reader(&link, "not a regular file but a character device");
}

/// A directory is refused saying it is one. Fixed in 33478a2.
#[test]
fn a_directory_as_file_is_refused_with_what_it_is() {
    let d = Temp::new();
    let dir = d.join("M1.md");
    std::fs::create_dir(&dir).unwrap();
    refused_by_every_reader(&dir, "not a regular file but a directory");
}

/// `loop start --file DIR` was refused with the advice to use `--force`; with it, the
/// directory and everything in it became `DIR.<time>.md/`, and the new M1.md a file named
/// `DIR`. A directory is never archived or replaced, and the refusal does not suggest
/// `--force`.
#[test]
fn start_on_a_directory_never_moves_it_and_does_not_suggest_force() {
    let d = Temp::new();
    let dir = d.join("sub");
    std::fs::create_dir_all(dir.join("inner")).unwrap();
    std::fs::write(dir.join("inner").join("work.txt"), "mine\n").unwrap();
    for force in [false, true] {
        let mut args = vec!["start", "x", "--step", "a"];
        if force {
            args.push("--force");
        }
        let out = run_within(bounded(&args, &dir), PROMPTLY);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.contains("not a regular file but a directory"), "{err}");
        assert!(!err.contains("--force"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("inner").join("work.txt")).unwrap(),
            "mine\n",
            "{args:?}"
        );
        let beside: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("sub"))
            .collect();
        assert_eq!(beside, ["sub"], "{args:?}: nothing archived beside it");
    }
}

/// A file of any size was read whole. Fixed in 33478a2: at most 4 MiB is read.
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

/// What the fix of 33478a2 must not refuse: a symlink to a regular file.
#[test]
fn a_symlink_to_a_regular_m1_md_is_read() {
    let d = Temp::new();
    let real = d.write("real.md", SEED);
    let link = d.join("M1.md");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = run_within(bounded(&["validate"], &link), PROMPTLY);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// `--plan` naming a FIFO blocked `start`. Fixed in 33478a2: it is read as M1.md is.
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

/// A `WAIT_UNTIL` that is no time was ignored: the wait ended at once. Fixed in 4c0b417
/// (issue 18).
#[test]
fn a_wait_until_that_is_no_time_is_an_error_not_ignored() {
    assert_eq!(
        errors("STATUS: RUNNING\nGOAL: g\nCURRENT:\n  WAIT_UNTIL: garbage\n"),
        [
            "4:15: WAIT_UNTIL: expected a time such as `2026-11-22T03:00:30Z` (RFC 3339, as the \
             runner writes it), found `garbage`"
        ]
    );
    Document::parse("STATUS: RUNNING\nGOAL: g\nCURRENT:\n  WAIT_UNTIL: 2026-11-22T03:00:30Z\n")
        .unwrap();
}

/// A duration too long to hold was silently clamped (the parse saturated), in
/// `STEP_TIMEOUT_MIN` too. Fixed in 4c0b417 (issue 18).
#[test]
fn a_duration_too_long_to_hold_is_an_error_not_clamped() {
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  STEP_TIMEOUT: 99999999999999999h\n"),
        [
            "4:17: STEP_TIMEOUT: expected a duration above zero and at most a year (8760h), such \
             as `40s`, `15m` or `1h30m`, found `99999999999999999h`"
        ]
    );
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  IDLE_TIMEOUT_MIN: 99999999999999999\n"),
        [
            "4:21: IDLE_TIMEOUT_MIN: expected a whole number of minutes from 1 to 525600 (a \
             year), found `99999999999999999`"
        ]
    );
    let doc = Document::parse("STATUS: IDLE\nGOAL: g\nLIMITS:\n  STEP_TIMEOUT: 8760h\n").unwrap();
    assert_eq!(
        doc.view().limits.step_timeout,
        Some(Duration::from_secs(8760 * 3600))
    );
}

/// A `VERIFY` over 128 KiB passed `validate` and then could never start (`sh -c` takes it as
/// one argument, which Linux caps at 128 KiB), leaving the loop RUNNING with an error on every
/// resume. Fixed in d9c155f (issue 18).
#[test]
fn a_verify_over_128_kib_is_an_error_at_its_line_not_a_command_that_cannot_start() {
    let verify = |n: usize| {
        format!(
            "STATUS: IDLE\nGOAL: g\nVERIFY: true||{}\n",
            "x".repeat(n - 6)
        )
    };
    assert_eq!(
        errors(&verify(131_072)),
        [
            "3:9: VERIFY: a command of 131072 bytes, longer than the 131071 one argument may be \
             (Linux's limit, and `sh -c` takes the command as one): put it in a script, and make \
             VERIFY run that"
        ]
    );
    Document::parse(&verify(131_071)).unwrap();
}

/// A `VERIFY` with nested keys instead of a command was reported twice: the check of its
/// length, added in d9c155f, read the value again and said again that it was not one.
#[test]
fn a_verify_with_nested_keys_is_reported_once() {
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nVERIFY:\n  X: 1\n"),
        ["3:8: expected a value after `VERIFY:`, not nested keys"]
    );
}

/// A bare number in M1.md was taken as seconds: `STEP_TIMEOUT: 60`, meant as an hour, killed
/// every real step after a minute. Fixed in dbe5467.
#[test]
fn a_duration_without_a_unit_is_an_error_that_says_which_units_it_could_mean() {
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  STEP_TIMEOUT: 60\n"),
        [
            "4:17: STEP_TIMEOUT: expected a duration with its unit, such as `60s` or `60m`, \
             found `60`"
        ]
    );
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  MAX_SESSION: 10\n"),
        [
            "4:16: MAX_SESSION: expected a duration with its unit, such as `10s` or `10m`, found `10`"
        ]
    );
    // The older key's unit is in its name: whole minutes, as before.
    let doc = Document::parse("STATUS: IDLE\nGOAL: g\nLIMITS:\n  STEP_TIMEOUT_MIN: 60\n").unwrap();
    assert_eq!(
        doc.view().limits.step_timeout,
        Some(Duration::from_secs(3600))
    );
}

/// An empty `LIMITS.PARALLEL:` or `AGENT.BACKEND:` was taken as unset (the default), where
/// every other value a key needs is an error at its line and column.
#[test]
fn an_empty_value_where_a_value_is_needed_is_an_error_not_the_default() {
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  PARALLEL:\nAGENT:\n  BACKEND:\n"),
        [
            "4:12: PARALLEL: empty: expected a whole number ≥ 1, or remove the line for the \
             default",
            "6:11: BACKEND: empty: expected one of claude, codex, gemini, or remove the line for \
             the default"
        ]
    );
    // A text may be empty, and a key left out is the default.
    Document::parse("STATUS: IDLE\nGOAL: g\nCONSTRAINTS:\nLIMITS:\n  MAX_RETRIES: 2\n").unwrap();
}

/// PLAN's and RESULTS' headers swapped by hand passed `validate`; `resume` then found no
/// plan, planned anew from scratch and ended FAILED.
#[test]
fn plan_and_results_headers_swapped_by_hand_are_an_error_not_a_new_plan() {
    let text = "STATUS: RUNNING\nGOAL: g\nRESULTS:\n  TOTAL_STEPS: 1\n  CURRENT_STEP: 1\n  \
                STEPS:\n    1: [DONE] a\nPLAN:\n  STEP_1:\n    EXIT: 0\n";
    assert_eq!(
        errors(text),
        [
            "4:3: RESULTS holds `TOTAL_STEPS:`, a key of PLAN: move it under `PLAN:` (are the \
             PLAN: and RESULTS: headers swapped?)",
            "5:3: RESULTS holds `CURRENT_STEP:`, a key of PLAN: move it under `PLAN:` (are the \
             PLAN: and RESULTS: headers swapped?)",
            "6:3: RESULTS holds `STEPS:`, a key of PLAN: move it under `PLAN:` (are the PLAN: \
             and RESULTS: headers swapped?)",
            "9:3: PLAN holds `STEP_1:`, a key of RESULTS: move it under `RESULTS:` (are the \
             PLAN: and RESULTS: headers swapped?)",
        ]
    );
    // `loop resume` refuses it as it is, and leaves it as it is.
    let t = Temp::new();
    let file = t.path().join("M1.md");
    std::fs::write(&file, text).unwrap();
    let out = run_within(&mut bounded(&["resume"], &file), PROMPTLY);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("headers swapped"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}
