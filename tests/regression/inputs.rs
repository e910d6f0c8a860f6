//! Inputs that `loop validate` accepted and that could not run, or that froze a runner: a
//! prompt too long for an argument, a FIFO where M1.md or STOP should be, a duration too long
//! to hold or without its unit, an agent program that cannot run.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, code, save_by_rename, stderr, wait_until};

/// A goal past Linux's 128 KiB cap on one argument (`MAX_ARG_STRLEN`), in many languages, and
/// starting with a dash, as an option would.
fn long_goal() -> String {
    use std::fmt::Write as _;
    let mut goal = String::from("-the goal, long: ");
    for n in 0..6000 {
        let _ = write!(goal, "part {n:06} ünïcödé 日本語; ");
    }
    goal.push_str("THE END");
    assert!(goal.len() > 200 * 1024);
    goal
}

/// A long GOAL passed `validate` and then could not start ("Argument list too long"): the
/// prompt went to the agent as an argument, which Linux caps at 128 KiB. Fixed in 07fe34d
/// (issue 18): it goes on standard input.
#[test]
fn a_goal_over_128_kib_reaches_the_agent_whole() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let goal = long_goal();
    std::fs::write(
        &env.file,
        format!(
            "STATUS: RUNNING\nGOAL: {goal}\n\nPLAN:\n  TOTAL_STEPS: 1\n  CURRENT_STEP: 0\n  \
             STEPS:\n    1: [PENDING] write the note\n"
        ),
    )
    .unwrap();
    env.run_ok(&["validate"]);
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert!(env.prompt(0).contains(&goal), "the goal was cut or mangled");
    env.assert_no_processes();
}

/// A FIFO in place of M1.md blocked whoever read it, the runner too. Fixed in 33478a2
/// (issue 18): the runner waits for the fix, as for a malformed text.
#[test]
fn a_fifo_put_in_place_of_m1_md_while_a_step_runs_is_waited_out_not_read() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(1500).heartbeat_ms(50)));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let text = env.text();
    let fifo = env.state().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::rename(&fifo, &env.file).unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || env
            .log()
            .contains("not a regular file but a FIFO")),
        "{}",
        env.log()
    );
    save_by_rename(&env.file, &text);
    assert_eq!(runner.wait(Duration::from_secs(30)).code(), Some(0));
    env.assert_status(Status::Done);
    env.assert_no_processes();
}

/// A FIFO made as the loop's STOP froze its runner, which read STOP with a plain read at
/// every decision. Fixed in e8b72a6 (issue 18).
#[test]
fn a_fifo_as_stop_beside_m1_md_stops_the_loop_instead_of_blocking_it() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(60_000).heartbeat_ms(50)));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    nix::unistd::mkfifo(&env.state().join("STOP"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_eq!(runner.wait(Duration::from_secs(30)).code(), Some(3));
    env.assert_status(Status::Waiting);
    env.assert_no_processes();
}

/// A duration too long to hold was silently clamped. Fixed in 4c0b417 (issue 18): durations are parsed exactly and capped at a year.
#[test]
fn a_timeout_flag_too_long_to_hold_is_refused_not_clamped() {
    let env = TestLoop::new();
    for args in [
        &[
            "start",
            "g",
            "--step",
            "a",
            "--step-timeout",
            "99999999999999999h",
        ][..],
        &["fire", "--timeout", "99999999999999999h", "--", "true"],
    ] {
        let out = env.run(args);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.contains("longer than a year"), "{args:?}: {err}");
    }
    assert!(!env.file.exists());
    assert!(env.calls().is_empty());
}

/// An `AGENT.PROGRAM` that cannot run passed `validate`, and `resume` refused it without a
/// line, pointing at `LOOP_AGENT`, which that line outranks. Fixed in 4c0b417 (issue 18).
#[test]
fn an_agent_program_that_cannot_run_is_an_error_at_its_line_in_validate_and_resume() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    for program in ["/nonexistent/claude", "clau de"] {
        let text = format!(
            "STATUS: RUNNING\nGOAL: g\n\nPLAN:\n  TOTAL_STEPS: 1\n  CURRENT_STEP: 0\n  STEPS:\n    \
             1: [PENDING] a\n\nAGENT:\n  PROGRAM: {program}\n"
        );
        std::fs::write(&env.file, &text).unwrap();
        let at = format!("{}:11:12: AGENT.PROGRAM: ", env.file.display());
        for args in [&["validate"][..], &["resume"]] {
            let out = env.run(args);
            let err = stderr(&out);
            assert_eq!(code(&out), 2, "{program}, {args:?}: {err}");
            assert!(
                err.contains(&at) && err.contains(program),
                "{program}, {args:?}: {err}"
            );
        }
        assert_eq!(env.text(), text, "left as it was");
    }
    assert!(env.calls().is_empty());
}

/// `--step-timeout 60`, meant as an hour, was taken as 60 seconds and killed every real step
/// after a minute. Fixed in dbe5467: a number without its unit is refused wherever a duration
/// is given, with where it was and what it could mean, before anything is written.
#[test]
fn a_duration_without_a_unit_is_refused_saying_where_and_which_units_it_could_mean() {
    let env = TestLoop::new();
    std::fs::write(
        &env.file,
        "STATUS: RUNNING  # an old loop\nGOAL: old\nPLAN:\n  STEPS:\n    1: [PENDING] x\n",
    )
    .unwrap();
    for flag in ["--step-timeout", "--idle-timeout"] {
        env.assert_refused(
            &["start", "g", "--step", "a", "--force", flag, "10"],
            |_| {},
            "`10s` or `10m`",
        );
    }
    for args in [
        &["fire", "--timeout", "30", "--", "true"][..],
        &["telegram", "--poll-timeout", "50"],
        &["daemon", "--loop", "x/M1.md", "--every", "5"],
    ] {
        env.assert_refused(args, |_| {}, "s` or `");
    }
    std::fs::write(
        env.state().join("loop.yaml"),
        "# defaults\nlimits:\n  max_retries: 2\n  step_timeout: 60\n",
    )
    .unwrap();
    env.assert_refused(
        &["start", "g", "--step", "a", "--force"],
        |_| {},
        "loop.yaml:4:17: limits.step_timeout: invalid duration \"60\": a duration needs its \
         unit: `60s` or `60m`",
    );
}

/// `loop start --stpe` printed `Usage: loop start --step <TEXT> <GOAL>`, which reads as if
/// `--step` were required: the usage says what `loop start` takes.
#[test]
fn a_mistyped_flag_of_loop_start_shows_a_usage_that_requires_no_step() {
    let env = TestLoop::new();
    let out = env.run(&["start", "--stpe", "x", "g"]);
    env.assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("a similar argument exists: '--step'"), "{err}");
    assert!(err.contains("Usage: loop start [OPTIONS] <GOAL>"), "{err}");
    assert!(!err.contains("Usage: loop start --step"), "{err}");
}
