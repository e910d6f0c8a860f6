//! Decisions a person makes by hand that the loop took silently or made hard (issue "Fourth
//! trial from outside", item 8): each test names what happened, and pins what happens now.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};

use crate::support::{TestLoop, stderr, stdout};

/// Steps that each work `ms`, then pass.
fn steady(env: &TestLoop, ms: u64) {
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(ms)));
}

/// While step 1 runs, `edit` changes M1.md's text as a person's editor would.
fn edit_while_step_1_runs(env: &TestLoop, args: &[&str], edit: impl Fn(&str) -> String) -> String {
    let mut runner = env.spawn(args);
    env.wait_for_calls(1, 1);
    std::fs::write(&env.file, edit(&env.text())).unwrap();
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.log()
}

/// A step added by hand was refused until `TOTAL_STEPS` was raised too (`TOTAL_STEPS is 3 but
/// PLAN.STEPS lists 4 steps`). The count follows the list: the runner keeps it for the person.
#[test]
fn a_step_added_by_hand_needs_no_count_raised_by_hand() {
    let env = TestLoop::new();
    steady(&env, 1500);
    let log = edit_while_step_1_runs(&env, &["start", "g", "--step", "a", "--step", "b"], |t| {
        t.replacen(
            "    2: [PENDING] b\n",
            "    2: [PENDING] b\n    3: [PENDING] c\n",
            1,
        )
    });
    assert!(log.contains("TOTAL_STEPS set to 3"), "{log}");
    assert!(!log.contains("invalid"), "{log}");
    let m = env.m1();
    assert_eq!(m.status, Status::Done);
    assert_eq!(m.plan.total_steps, 3);
    assert_eq!(env.calls_for(3), 1, "the step added by hand ran");
    // A file with a step added while no runner ran is valid, and a resume writes the count.
    let text = env.text().replacen(
        "    3: [DONE] c\n",
        "    3: [DONE] c\n    4: [PENDING] d\n",
        1,
    );
    std::fs::write(
        &env.file,
        text.replacen("STATUS: DONE", "STATUS: WAITING", 1),
    )
    .unwrap();
    env.run_ok(&["validate"]);
    env.run_ok(&["resume"]);
    assert_eq!(env.m1().plan.total_steps, 4);
    assert_eq!(env.calls_for(4), 1);
}

/// A step set `[DONE]` by hand while the loop ran was taken without a word, never ran, and the
/// DONE message listed it as if it were a result. It is logged as done by hand and shown so.
#[test]
fn a_step_set_done_by_hand_is_logged_and_shown_as_done_by_hand() {
    let env = TestLoop::new();
    steady(&env, 1500);
    let args = ["start", "g", "--step", "a", "--step", "b", "--step", "c"];
    let mut runner = env.spawn(&args);
    env.wait_for_calls(1, 1);
    let text = env.text().replacen("3: [PENDING] c", "3: [DONE] c", 1);
    std::fs::write(&env.file, text).unwrap();
    let out = runner.wait(Duration::from_secs(60));
    assert!(out.success(), "{}", env.log());
    assert_eq!(env.calls_for(3), 0, "a step done by hand does not run");
    let log = env.log();
    assert!(log.contains("step 3 set DONE by hand"), "{log}");
    let done = log
        .lines()
        .find(|l| l.contains("notify (done)"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        done.contains("3. [DONE by hand, not run by the loop] c"),
        "{done}"
    );
    let status = stdout(&env.run_ok(&["status"]));
    let line = status
        .lines()
        .find(|l| l.trim_start_matches(['>', ' ']).starts_with("3 "))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        line.contains("done by hand, not run by the loop"),
        "{status}"
    );
    assert_eq!(env.m1().plan.steps[2].state, StepState::Done);
}

/// The same seen from the closing line of a foreground runner.
#[test]
fn the_closing_line_counts_the_steps_done_by_hand() {
    let env = TestLoop::new();
    steady(&env, 10);
    env.run_ok(&["start", "g", "--step", "a", "--step", "b", "--plan-only"]);
    let text = env.text().replacen("1: [PENDING] a", "1: [DONE] a", 1);
    std::fs::write(&env.file, text).unwrap();
    let out = env.run_ok(&["resume"]);
    let err = stderr(&out);
    assert!(
        err.contains("DONE: 2 step(s), 1 of them done by hand"),
        "{err}"
    );
    assert_eq!(env.calls_for(1), 0);
}
