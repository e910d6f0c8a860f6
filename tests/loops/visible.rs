//! What a person sees of a loop: the live line while a step runs, `loop status`, the words
//! the loop records, and the prompt after a wait.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::answers::passing;
use crate::support::{TestLoop, line_with, stderr, stdout, wait_until};

/// Every step passes at once.
/// Every step works `ms`, saying what it does every 100 ms, then passes.
fn working(ms: u64) -> Scenario {
    Scenario::new().otherwise(Action::done("ok").sleep_ms(ms).heartbeat_ms(100))
}

#[test]
fn a_foreground_runner_shows_what_the_agent_is_doing_while_a_step_runs() {
    let env = TestLoop::new();
    env.scenario(&working(600));
    let out = env.run_ok(&["start", "g", "--step", "one"]);
    let text = stdout(&out);
    // Piped: one line per change of activity, each with the step, its clock and what it did.
    let live: Vec<&str> = text.lines().filter(|l| l.starts_with("  … ")).collect();
    assert!(
        live.iter()
            .any(|l| l.starts_with("  … step 1 attempt 1 · 0:0")
                && l.contains("Working on step 1")),
        "{text}"
    );
    assert!(
        !text.contains('\r'),
        "no in-place rewrites into a pipe: {text:?}"
    );
    let mut seen = live.clone();
    seen.dedup();
    assert_eq!(seen.len(), live.len(), "each activity once: {text}");

    let quiet = TestLoop::new();
    quiet.scenario(&working(600));
    let out = quiet.run_ok(&["start", "g", "--step", "one", "--quiet"]);
    assert!(!stdout(&out).contains("  … "), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("pass: Step 1"),
        "decisions still print"
    );
}

#[test]
fn status_shows_the_agents_last_activity_while_a_step_runs() {
    let env = TestLoop::new();
    env.scenario(&working(20_000));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(20), || {
        last = stdout(&env.run(&["status"]));
        last.lines()
            .any(|l| l.starts_with("ACTIVITY     Working on step 1 (") && l.ends_with("s ago)"))
    });
    assert!(seen, "{last}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&env.run(&["status", "--json"])))
        .expect("status --json is one JSON object");
    assert!(
        v["activity"]
            .as_str()
            .unwrap()
            .starts_with("Working on step 1"),
        "{v}"
    );
    assert_eq!(v["stop_file"], serde_json::Value::Null);
    std::fs::write(env.state().join("STOP"), "").unwrap();
    runner.wait(Duration::from_secs(20));
    env.assert_no_processes();
}

#[test]
fn status_says_when_a_stop_file_is_present_and_which() {
    let env = TestLoop::new();
    std::fs::write(
        &env.file,
        "STATUS: WAITING\nGOAL: g\nLAST_ACTION: paused by hand\n",
    )
    .unwrap();
    let out = stdout(&env.run(&["status"]));
    assert!(!out.contains("STOP "), "{out}");
    assert!(out.contains("LAST_ACTION  paused by hand"), "{out}");
    std::fs::write(&env.stop, "").unwrap();
    let out = stdout(&env.run(&["status"]));
    let line = out
        .lines()
        .find(|l| l.starts_with("STOP         "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(&format!("{} exists", env.stop.display())),
        "{line}"
    );
    assert!(
        line.contains(&format!("rm {}", env.stop.display())),
        "{line}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&env.run(&["status", "--json"]))).unwrap();
    assert_eq!(v["stop_file"], env.stop.display().to_string());
    assert_eq!(v["last_action"], "paused by hand");
}

#[test]
fn a_step_that_passes_every_check_that_applies_is_verified_without_a_verify_command() {
    let env = TestLoop::new();
    env.scenario(&passing());
    env.run_ok(&["start", "g", "--step", "one"]);
    assert_eq!(env.m1().results[&1].verified, Some(true));
    assert!(stdout(&env.run(&["status"])).contains("verified"));
}

#[test]
fn the_run_after_a_rate_limit_wait_is_told_to_carry_on_not_to_fix_its_work() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [Action::overloaded(), Action::done("ok")]));
    env.run_ok(&["start", "g", "--step", "one"]);
    assert_eq!(env.calls().len(), 2);
    let again = env.prompt(1);
    assert!(again.contains("cut off by an API error"), "{again}");
    assert!(again.contains("529"), "{again}");
    assert!(
        !again.contains("did not pass"),
        "a wait is no failure: {again}"
    );
    assert_eq!(env.calls()[1]["resume"], env.calls()[0]["session_id"]);
    let m = env.m1();
    assert_eq!(m.results[&1].error, None);
    assert_eq!(m.results[&1].interrupted, None, "the pass clears it");
    env.assert_one_wait_logged();
}

#[test]
fn a_failed_run_is_recorded_with_its_exit_code_and_stderr_tail() {
    let env = TestLoop::new();
    let crashed = Action::error("the tool crashed")
        .subtype("error_during_execution")
        .stderr("fatal: the disk is full\n");
    env.scenario(&Scenario::new().step(1, [crashed, Action::done("ok")]));
    env.run_ok(&["start", "g", "--step", "one"]);
    let log = env.log();
    let retry = line_with(&log, "retry: Step 1 attempt 1");
    assert!(
        retry.contains("the tool crashed (exited with code 1; stderr: fatal: the disk is full)"),
        "{retry}"
    );
}

#[test]
fn a_verify_command_that_prints_nothing_is_said_to_have_printed_nothing() {
    let env = TestLoop::new();
    env.scenario(&passing());
    env.run_exits(
        1,
        &[
            "start",
            "g",
            "--step",
            "one",
            "--verify",
            "false",
            "--max-retries",
            "1",
        ],
    );
    env.assert_status(Status::Failed);
    assert_eq!(
        env.m1().results[&1].error.as_deref(),
        Some("VERIFY failed (exit 1) and printed nothing")
    );
}

#[test]
fn one_step_done_is_not_called_all_1_steps_and_nothing_skipped_is_not_mentioned() {
    let env = TestLoop::new();
    env.scenario(&passing());
    env.run_ok(&["start", "g", "--step", "one"]);
    assert_eq!(
        env.m1().last_action.as_deref(),
        Some("The only step is done")
    );
    let two = TestLoop::new();
    two.scenario(&passing());
    two.run_ok(&["start", "g", "--step", "one", "--step", "two"]);
    assert_eq!(two.m1().last_action.as_deref(), Some("All 2 steps done"));
    assert!(!two.log().contains("skipped"), "{}", two.log());
}

#[test]
fn loop_demo_honours_file() {
    let env = TestLoop::new();
    let file = env.temp.path().join("elsewhere").join("M1.md");
    let out = env.run_for(
        &["demo", "--quiet", "--file", file.to_str().unwrap()],
        Duration::from_secs(60),
    );
    env.assert_exit(&out, 0);
    let text = std::fs::read_to_string(&file).expect("the demo's M1.md is where --file says");
    assert!(text.starts_with("STATUS: DONE"), "{text}");
    assert!(stdout(&out).contains(&file.display().to_string()));
}

#[test]
fn a_foreground_run_says_where_its_files_are_how_to_stop_it_and_ends_with_cost_and_time() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").cost(0.25)));
    let out = env.run_ok(&["start", "ship it", "--step", "one", "--step", "two"]);
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(first.contains("ship it"), "{err}");
    assert!(first.contains(&env.file.display().to_string()), "{err}");
    assert!(first.contains("loop.log"), "{err}");
    assert!(
        first.contains("Ctrl-C") && first.contains("loop stop"),
        "{err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("loop: DONE: 2 step(s), $0.50 in "),
        "{err}"
    );

    // A loop that needs a human ends with why and what to do.
    env.scenario(&Scenario::new().otherwise(Action::blocked("which file?")));
    let out = env.run_exits(3, &["start", "ask", "--step", "one", "--force"]);
    let last = stderr(&out).lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with("loop: WAITING: "), "{last}");
    assert!(
        last.contains("which file?") && last.contains("next: "),
        "{last}"
    );
}

/// A detached loop had no `loop logs [-f]`, and its `runner.out` appended across loops: `loop
/// logs` prints this loop's part of `loop.log`, and `-f` follows it until the runner exits.
#[test]
fn loop_logs_shows_this_loops_decisions_and_follows_a_detached_one_until_its_runner_exits() {
    let env = TestLoop::new();
    env.scenario(&working(1500));
    env.run_ok(&["start", "the first goal", "--step", "one", "--detach"]);
    assert!(wait_until(Duration::from_secs(30), || env.m1().status
        == Status::Done
        && m1loop::runner::lock::holder(&env.file).is_none()));
    let first_report = env.m1().results[&1].report.clone().unwrap();
    let first_task = first_report.split('/').nth(1).unwrap().to_owned();
    assert!(
        std::fs::read_to_string(env.state().join("runner.out"))
            .unwrap()
            .contains(&first_task)
    );
    env.run_ok(&["start", "the second goal", "--step", "two", "--detach"]);
    let followed = env.temp.join("followed.out");
    let mut follow = env.cmd(&["logs", "-f"]);
    follow.stdout(std::fs::File::create(&followed).unwrap());
    let mut follow = crate::support::Guard::spawn(&mut follow);
    assert!(follow.wait(Duration::from_secs(30)).success());
    // It ended only once the runner had: the loop is DONE, and its last decision was printed.
    env.assert_status(Status::Done);
    let text = std::fs::read_to_string(&followed).unwrap();
    let last = env.log().lines().last().unwrap().to_owned();
    assert!(
        text.ends_with(&format!("{last}\n")),
        "{text}\n---\n{}",
        env.log()
    );
    assert!(text.starts_with(&format!(
        "{} start: new loop, goal: the second goal",
        &text[..24]
    )));
    assert!(!text.contains("the first goal"), "{text}");
    // Without -f: the same part, at once.
    assert_eq!(stdout(&env.run(&["logs"])), text);
    let out = std::fs::read_to_string(env.state().join("runner.out")).unwrap();
    assert!(
        !out.contains(&first_task),
        "the first loop's runner.out: {out}"
    );
}
