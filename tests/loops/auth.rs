//! A login only a human can fix halts the loop as soon as the stream shows it, not after the
//! CLI's own retries.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{PATIENCE, TestLoop};

#[test]
fn an_auth_error_the_cli_keeps_retrying_halts_the_loop_within_seconds() {
    // The real CLI retries a 401 ten times, about 3 minutes (capture
    // `auth-401-invalid-api-key`), each retry in the stream as it happens (capture
    // `auth-401-retrying-killed-2.1.197`). The simulated one retries and hangs for good: only
    // the runner can end it, and the step's timeout is an hour away.
    let env = TestLoop::new();
    let retrying = Action::hang()
        .api_retry(401, "authentication_failed")
        .api_retry(401, "authentication_failed");
    env.scenario(&Scenario::new().step(1, retrying));
    let out = env.run_for(&["start", "g", "--step", "one"], PATIENCE);
    env.assert_exit(&out, 3);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let next = m.next_action.clone().unwrap_or_default();
    assert!(next.contains("log in"), "{next}");
    let r = &m.results[&1];
    assert!(
        r.error
            .as_deref()
            .unwrap_or_default()
            .contains("authentication"),
        "{r:?}"
    );
    assert_eq!(r.attempts, None, "not a failed attempt");
    env.assert_logged("401");
    env.assert_no_processes();
}
