//! Saves of M1.md that raced a runner and lost a step's record or ran a step again.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};

use crate::support::{TestLoop, save_by_rename};

/// A passed step was run again when a text older than a takeover was saved: the runner
/// that took over knew only the versions it had written, so the old text read as a person's
/// edit. Fixed in 1def073 (the versions every runner knew are kept in `M1.md.versions`).
///
/// The text is copied while step 1 runs, the runner killed once step 3 runs and resumed by
/// hand, and the copy saved once the new runner has started step 4: the new runner judged
/// step 3 itself.
#[test]
fn a_passed_step_is_not_run_again_after_a_stale_save_once_another_runner_took_over() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(600).heartbeat_ms(50)));
    let steps = ["a", "b", "c", "d", "e"];
    let mut args = vec!["start", "g"];
    for s in &steps {
        args.extend(["--step", s]);
    }
    let mut first = env.spawn(&args);
    let old = env.text_while_running(1, 3);
    first.kill9();
    let mut second = env.spawn(&["resume"]);
    env.wait_for_calls(4, 1);
    save_by_rename(&env.file, &old);
    let status = second.wait(Duration::from_secs(60));
    assert!(
        status.success(),
        "{status:?}\n{}\n{}",
        env.text(),
        env.log()
    );
    env.assert_each_step_done_once(5, "ok");
}
