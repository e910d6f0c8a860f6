//! A revoked key against the real CLI: the loop halts as soon as the CLI's first retry of the
//! 401 shows in its stream, not after its ten retries (about 3 minutes).

use std::time::Duration;

use m1loop::m1::Status;

use crate::support::real_cli::{Mock, VERSIONS, claude_or_skip, run_with_mock};
use crate::support::{TestLoop, code, stderr};

/// A third of the CLI's own retrying: a loop that halts later did not notice the retries.
const WELL_BEFORE_THE_RETRIES_END: Duration = Duration::from_secs(60);

fn a_revoked_key_halts_the_loop(version: &str) {
    let Some(claude) = claude_or_skip(version) else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = env.env("LOOP_AGENT", &claude).env("HOME", &home);
    let mock = Mock {
        tool: "-",
        command: "",
        env: &[
            ("MOCK_ERROR_STATUS", "401"),
            ("MOCK_ERROR_TYPE", "authentication_error"),
        ],
    };
    let cmd = env.cmd(&["start", "g", "--step", "one", "--quiet"]);
    let out = run_with_mock(&cmd, &mock, None, WELL_BEFORE_THE_RETRIES_END);
    assert_eq!(code(&out), 3, "{version}: {}\n{}", stderr(&out), env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let error = m.results[&1].error.clone().unwrap_or_default();
    assert!(error.contains("authentication"), "{version}: {error}");
    assert!(env.log().contains("auth: task"), "{version}: {}", env.log());
    env.assert_no_processes();
}

#[test]
fn a_revoked_key_halts_a_loop_of_the_real_cli_within_seconds_2_1_330() {
    a_revoked_key_halts_the_loop(VERSIONS[0]);
}

#[test]
fn a_revoked_key_halts_a_loop_of_the_real_cli_within_seconds_2_1_197() {
    a_revoked_key_halts_the_loop(VERSIONS[1]);
}
