//! A login only a human can fix halts the loop as soon as the stream shows it, not after the
//! CLI's own retries.

use m1loop::m1::Status;
use serde_json::json;

use crate::support::{PATIENCE, TestLoop, code, stderr};

#[test]
fn an_auth_error_the_cli_keeps_retrying_halts_the_loop_within_seconds() {
    // The real CLI retries a 401 ten times, about 3 minutes (capture
    // `auth-401-invalid-api-key`), each retry in the stream as it happens (capture
    // `auth-401-retrying-killed-2.1.197`). The simulated one retries and hangs for good: only
    // the runner can end it, and the step's timeout is an hour away.
    let env = TestLoop::new();
    let retry = json!({"error_status": 401, "error": "authentication_failed"});
    env.scenario(&json!({"steps": {"1": {"api_retries": [retry, retry], "hang": true}}}));
    let out = env.run_for(&["start", "g", "--step", "one"], PATIENCE);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
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
    assert!(env.log().contains("401"), "{}", env.log());
    env.assert_no_processes();
}
