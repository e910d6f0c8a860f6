//! `loop fire`, `loop check` and `loop kill` as a user sees them: answers, files, errors.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::support::{PATIENCE, TestLoop, run, wait_until};

fn stdout_of(w: &TestLoop, id: &str) -> String {
    fs::read_to_string(w.task_file(id, "stdout")).unwrap()
}

/// Fires `sh -c script` and waits until it ends: its id and its final report.
fn ran(w: &TestLoop, script: &str) -> (String, serde_json::Value) {
    let id = w.fire(&["--", "sh", "-c", script]);
    let report = w.wait_final(&id);
    (id, report)
}

#[test]
fn a_command_that_exits_0_is_done_with_its_output_in_files() {
    let w = TestLoop::new();
    let (id, report) = ran(&w, "echo out; echo err >&2");
    assert_eq!(report["state"], "DONE", "{report}");
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["reason"], "exited");
    assert_eq!(stdout_of(&w, &id), "out\n");
    assert_eq!(
        fs::read_to_string(w.task_file(&id, "stderr")).unwrap(),
        "err\n"
    );
    assert!(report["elapsed"].is_f64(), "{report}");
    for key in ["started_at", "ended_at"] {
        let t = report[key].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t).unwrap_or_else(|e| panic!("{key} {t}: {e}"));
    }
    let line = String::from_utf8(w.run(&["check", &id]).stdout).unwrap();
    let pattern = regex::Regex::new(r"^task_\S+ DONE exit 0 after \d+\.\ds\n$").unwrap();
    assert!(pattern.is_match(&line), "{line:?}");
}

#[test]
fn a_nonzero_exit_is_failed_with_its_code() {
    let w = TestLoop::new();
    let (id, report) = ran(&w, "exit 3");
    assert_eq!(report["state"], "FAILED", "{report}");
    assert_eq!(report["exit_code"], 3);
    let out = w.run(&["check", &id]);
    assert_eq!(out.status.code(), Some(11), "check exits 11 for FAILED");
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.contains(&format!("{id} FAILED exit 3 after ")),
        "{line:?}"
    );
}

#[test]
fn a_running_task_is_reported_with_its_pid_until_it_ends() {
    let w = TestLoop::new();
    let go = w.path().join("go");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo finished",
        go.display()
    );
    let id = w.fire(&["--", "sh", "-c", &script]);
    // fire returned: the task is already under supervision, never LOST.
    assert_eq!(w.check(&id)["state"], "RUNNING");
    let leader = w.leader(&id);
    let line = String::from_utf8(w.run(&["check", &id]).stdout).unwrap();
    assert!(line.starts_with(&format!("{id} RUNNING for ")), "{line:?}");
    assert!(
        line.trim_end().ends_with(&format!("pid {leader}")),
        "{line:?}"
    );
    fs::write(&go, "").unwrap();
    assert_eq!(w.wait_final(&id)["state"], "DONE");
    assert_eq!(stdout_of(&w, &id), "finished\n");
}

#[test]
fn stdin_comes_from_the_given_file_or_else_from_dev_null() {
    let w = TestLoop::new();
    let input = w.path().join("prompt.txt");
    fs::write(&input, "hello from a file\n").unwrap();
    let fed = w.fire(&["--stdin", "prompt.txt", "--", "cat"]);
    // With no --stdin, `cat` must see end of input at once, not hang on an open pipe.
    let null = w.fire(&["--", "sh", "-c", "cat; echo end"]);
    assert_eq!(w.wait_final(&fed)["state"], "DONE");
    assert_eq!(w.wait_final(&null)["state"], "DONE");
    assert_eq!(stdout_of(&w, &fed), "hello from a file\n");
    assert_eq!(stdout_of(&w, &null), "end\n");
}

#[test]
fn env_is_set_and_removed_and_the_rest_passes_through() {
    let w = TestLoop::new();
    let out = run(w
        .cmd(&["fire", "--env", "ADDED=a=b", "--unset-env", "DROPPED", "--"])
        .env("KEPT", "kept")
        .env("DROPPED", "still here")
        .args([
            "sh",
            "-c",
            "echo \"$KEPT|$ADDED|${DROPPED-unset}|${LOOP_SUPERVISOR_LOCK_FD-none}\"",
        ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(w.wait_final(&id)["state"], "DONE");
    assert_eq!(stdout_of(&w, &id), "kept|a=b|unset|none\n");
}

#[test]
fn every_task_sees_its_own_id_in_loop_task_id() {
    let w = TestLoop::new();
    let plain = w.fire(&["--", "sh", "-c", "echo \"$LOOP_TASK_ID\""]);
    // Neither the caller's value nor --env can change it: it is how the task's processes
    // are found.
    let out = run(w
        .cmd(&["fire", "--env", "LOOP_TASK_ID=other", "--"])
        .env("LOOP_TASK_ID", "the_callers")
        .args(["sh", "-c", "echo \"$LOOP_TASK_ID\""]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let forced = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    for id in [&plain, &forced] {
        assert_eq!(w.wait_final(id)["state"], "DONE");
        assert_eq!(stdout_of(&w, id), format!("{id}\n"));
    }
}

#[test]
fn cwd_is_the_callers_or_the_given_directory() {
    let w = TestLoop::new();
    fs::create_dir(w.path().join("sub")).unwrap();
    let here = w.fire(&["--", "pwd"]);
    let sub = w.fire(&["--cwd", "sub", "--", "pwd"]);
    w.wait_final(&here);
    w.wait_final(&sub);
    let root = w.path().canonicalize().unwrap();
    assert_eq!(fs::canonicalize(stdout_of(&w, &here).trim()).unwrap(), root);
    assert_eq!(
        fs::canonicalize(stdout_of(&w, &sub).trim()).unwrap(),
        root.join("sub")
    );
}

#[test]
fn a_program_that_cannot_start_is_failed_with_the_reason() {
    let w = TestLoop::new();
    let missing = w.fire(&["--", "./no-such-program", "arg"]);
    let script = w.path().join("not-executable.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    let denied = w.fire(&["--", script.to_str().unwrap()]);
    for (id, why) in [
        (&missing, "No such file or directory"),
        (&denied, "Permission denied"),
    ] {
        let report = w.wait_final(id);
        assert_eq!(report["state"], "FAILED", "{report}");
        assert_eq!(report["reason"], "spawn_failed");
        assert!(report["exit_code"].is_null());
        let message = report["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
        assert!(message.contains("cannot start"), "{message}");
    }
    let line = String::from_utf8(w.run(&["check", &missing]).stdout).unwrap();
    assert!(
        line.contains("FAILED after") && line.contains("no-such-program"),
        "{line:?}"
    );
}

#[test]
fn bad_and_unknown_ids_are_refused_with_exit_2() {
    let w = TestLoop::new();
    for args in [
        vec!["check", "../etc"],
        vec!["check", "a/b"],
        vec!["kill", ".."],
        vec!["check", "task with spaces"],
    ] {
        let out = w.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("invalid task id"), "{args:?}: {err}");
    }
    for verb in ["check", "kill"] {
        let out = w.run(&[verb, "task_20260101T000000_abcdef"]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("no task \"task_20260101T000000_abcdef\""),
            "{err}"
        );
    }
}

#[test]
fn bad_durations_and_paths_are_refused_with_exit_2_before_anything_runs() {
    let w = TestLoop::new();
    let cases: [(&[&str], &str); 6] = [
        (&["--timeout", "5x"], "invalid duration \"5x\""),
        (&["--idle-timeout", "soon"], "invalid duration \"soon\""),
        (&["--timeout", "0s"], "--timeout must be longer than zero"),
        (&["--cwd", "nowhere"], "no such directory"),
        (&["--stdin", "absent.txt"], "absent.txt"),
        (&["--env", "NOEQUALS"], "expected KEY=VALUE"),
    ];
    for (flags, expected) in cases {
        let out = run(w.cmd(&["fire"]).args(flags).args(["--", "true"]));
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(expected), "{flags:?}: {err}");
    }
    assert!(
        !w.state().join("tasks").exists()
            || fs::read_dir(w.state().join("tasks"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn the_task_directory_appears_complete_or_not_at_all() {
    let w = TestLoop::new();
    let id = w.fire(&["--", "true"]);
    let spec = w
        .json(&id, "spec.json")
        .expect("spec.json present as soon as the dir is");
    assert_eq!(spec["command"], serde_json::json!(["true"]));
    assert!(
        w.json(&id, "supervisor.json").is_some(),
        "fire returns after the supervisor is recorded"
    );
    w.wait_final(&id);
    let names: Vec<String> = fs::read_dir(w.state().join("tasks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![id], "no temporary directory left behind");
}

#[test]
fn kill_of_a_finished_task_reports_it_unchanged() {
    let w = TestLoop::new();
    let (id, _) = ran(&w, "exit 4");
    let out = w.run(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.contains("FAILED exit 4"), "{line:?}");
    assert!(wait_until(PATIENCE, || w.check(&id)["state"] == "FAILED"));
}

#[test]
fn check_exits_with_a_code_of_its_own_for_each_state() {
    let w = TestLoop::new();
    let code = |id: &str| w.run(&["check", id]).status.code();
    let json_code = |id: &str| w.run(&["check", id, "--json"]).status.code();

    let done = w.fire(&["--", "true"]);
    assert_eq!(w.wait_final(&done)["state"], "DONE");
    assert_eq!((code(&done), json_code(&done)), (Some(0), Some(0)));

    let failed = w.fire(&["--", "sh", "-c", "exit 3"]);
    assert_eq!(w.wait_final(&failed)["state"], "FAILED");
    assert_eq!((code(&failed), json_code(&failed)), (Some(11), Some(11)));

    let timeout = w.fire(&["--timeout", "200ms", "--", "sleep", "60"]);
    assert_eq!(w.wait_final(&timeout)["state"], "TIMEOUT");
    assert_eq!(code(&timeout), Some(12));

    let running = w.fire(&["--", "sleep", "60"]);
    assert_eq!(code(&running), Some(10));
    let killed = w.run(&["kill", &running]);
    assert_eq!(killed.status.code(), Some(0));
    let report = w.check(&running);
    assert_eq!(
        report["state"],
        "KILLED",
        "{report}\nkill said: {}{}",
        String::from_utf8_lossy(&killed.stdout),
        String::from_utf8_lossy(&killed.stderr)
    );
    assert_eq!(code(&running), Some(13));

    assert_eq!(code("task_nosuchtask").unwrap_or(-1), 2);
}

/// `loop` run in a fresh directory with no loop there and no `--file` or `LOOP_FILE`.
fn outside_a_loop(w: &TestLoop, args: &[&str]) -> std::process::Output {
    run(w.cmd(args).env_remove("LOOP_FILE"))
}

/// [`outside_a_loop`] for a command that must succeed: what it printed, trimmed.
fn ok_outside_a_loop(w: &TestLoop, args: &[&str]) -> String {
    let out = outside_a_loop(w, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn fire_and_notify_outside_a_loop_leave_no_state_directory_behind() {
    let w = TestLoop::new().without_state();
    let id = ok_outside_a_loop(&w, &["fire", "--", "true"]);
    let user_dir = w.xdg().join("m1loop");
    assert!(user_dir.join("tasks").join(&id).is_dir());
    assert!(wait_until(PATIENCE, || outside_a_loop(&w, &["check", &id])
        .status
        .code()
        == Some(0)));
    ok_outside_a_loop(&w, &["notify", "hello"]);
    let log = fs::read_to_string(user_dir.join("loop.log")).unwrap();
    assert!(log.contains("hello"), "{log}");
    assert!(!w.state().exists(), "a state/ appeared where loop ran");
}

#[test]
fn fire_inside_a_loops_directory_keeps_its_tasks_there() {
    let w = TestLoop::new();
    fs::write(&w.file, crate::support::SEED).unwrap();
    let id = ok_outside_a_loop(&w, &["fire", "--", "true"]);
    assert!(w.task_file(&id, "spec.json").parent().unwrap().is_dir());
    assert!(!w.xdg().exists());
}

/// An empty `state/` (as an older `loop doctor` left, or a project's own directory of that
/// name) holds no loop: `loop fire` wrote its tasks there instead of the per-user directory.
#[test]
fn fire_beside_a_state_directory_that_holds_no_loop_keeps_its_tasks_in_the_per_user_directory() {
    let w = TestLoop::new();
    assert!(w.state().is_dir());
    let id = ok_outside_a_loop(&w, &["fire", "--", "true"]);
    assert!(w.xdg().join("m1loop").join("tasks").join(&id).is_dir());
    assert!(!w.state().join("tasks").exists(), "tasks went into state/");
}
