//! Runs of the agent that the loop misread: what a run cost, a session too long for its
//! resume, a login the CLI kept retrying, a compaction that failed. Each was found against
//! the real CLI; the captures it was read from are in `tests/fixtures/claude-code`.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{PATIENCE, TestLoop};

/// 2.1.330 reports a resumed session's total as `total_cost_usd`, so three runs of $0.40 were
/// recorded as $2.40 and `MAX_COST_USD` halted early. Fixed in 10530e7 (issue 18).
#[test]
fn a_resumed_session_s_runs_are_recorded_at_what_each_cost_not_at_the_session_s_total() {
    // The simulated agent reports as 2.1.330 does: after `--resume`, `total_cost_usd` is the
    // session's total. Three runs of $0.40 spent $1.20, not 0.40 + 0.80 + 1.20.
    let env = TestLoop::new();
    std::fs::write(
        env.state().join("loop.yaml"),
        "limits:\n  max_cost_usd: 1\n",
    )
    .unwrap();
    let not_yet = Action::says("not yet").cost(0.40);
    let done = Action::done("ok").cost(0.40);
    env.scenario(&Scenario::new().step(1, [not_yet.clone(), not_yet, done]));
    env.run_exits(3, &["start", "g", "--step", "one", "--step", "two"]);
    assert_eq!(env.calls_for(1), 3, "$0.80 spent is under MAX_COST_USD 1");
    assert_eq!(env.calls_for(2), 0, "$1.20 spent is over it");
    let m = env.m1();
    let cost = m.results[&1].cost_usd.unwrap();
    assert!((cost - 1.20).abs() < 1e-9, "COST_USD {cost}");
    assert!(
        m.next_action
            .as_deref()
            .unwrap_or_default()
            .contains("MAX_COST_USD")
            || m.last_action
                .as_deref()
                .unwrap_or_default()
                .contains("spent $1.20"),
        "{m:?}"
    );
}

/// 'Prompt is too long' on a resume (2.1.197 resumes a 1M session with a 200k window) was a
/// failed attempt, and the next resume failed the same way until the step was spent. Fixed in
/// acff6ba (issue 18): the step goes on in a fresh session.
#[test]
fn a_prompt_too_long_on_resume_goes_on_in_a_fresh_session_without_costing_an_attempt() {
    let env = TestLoop::new();
    let too_long = crate::support::captures().join("prompt-too-long-on-resume-2.1.197");
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::says("I think it works now."),
            Action::fixture(too_long),
            Action::done("ok"),
        ],
    ));
    env.run_ok(&["start", "g", "--step", "one"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1]["resume"], calls[0]["session_id"]);
    assert!(
        calls[2]["resume"].is_null(),
        "a fresh session, not --resume"
    );
    let third = env.prompt(2);
    assert!(third.contains("Prompt is too long"), "{third}");
    assert!(
        third.contains("did not end with a STEP_DONE"),
        "the handoff says what failed: {third}"
    );
    let r = &env.m1().results[&1];
    assert_eq!(
        r.attempts,
        Some(2),
        "the resume that was too long is not an attempt"
    );
}

/// A resumed run whose agent names a session of its own in its first event (the capture above
/// names the one it was recorded in) was judged as a fresh run when the runner read that name
/// before the run ended (a busy machine): the name went into CURRENT, the run no longer matched
/// the step's session, and a prompt too long on resume halted the loop instead of going on
/// fresh. The session a run resumed stays on record until the run is judged.
#[test]
fn a_resumed_run_that_names_another_session_before_it_ends_is_still_judged_as_a_resume() {
    let env = TestLoop::new();
    let too_long = crate::support::captures().join("prompt-too-long-on-resume-2.1.197");
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::says("I think it works now."),
            Action::fixture(too_long).linger_ms(600),
            Action::done("ok"),
        ],
    ));
    env.run_ok(&["start", "g", "--step", "one"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 3);
    assert!(
        calls[2]["resume"].is_null(),
        "a fresh session, not --resume"
    );
    assert_eq!(env.m1().results[&1].attempts, Some(2));
}

/// A session of the 1M variant was measured against its own window, though its resume gets
/// 200k: it passed the context threshold unseen and its resume was too long. Fixed in acff6ba
/// (issue 18).
#[test]
fn a_1m_context_is_measured_against_the_window_its_resume_gets() {
    // As 2.1.197 without `--model`: the fresh session runs the 1M variant, its resume 200k.
    let env = TestLoop::new();
    let full = Action::says("I think it works now.")
        .model("claude-opus-4-8[1m]", 1_000_000)
        .context_tokens(250_000);
    env.scenario(&Scenario::new().step(1, [full, Action::done("ok")]));
    env.run_in_two_calls_the_second_fresh();
    let second = env.prompt(1);
    assert!(
        second.contains("reached 125% of the model's window"),
        "{second}"
    );
}

/// A revoked key held a step for the CLI's ten retries of the 401, about 3 minutes, before the
/// loop heard of it. Fixed in 94d022b (issue 18): the runner follows
/// the stream and ends the run at its first 401/403 `api_retry`.
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

/// `COMPACTIONS` counted every `PreCompact` hook, which also runs before a compaction that
/// fails. Fixed in 94d022b (issue 18): they are counted from the
/// stream's `compact_boundary`.
#[test]
fn a_compaction_that_failed_is_not_counted() {
    // As 2.1.197's `/compact` of a short session: `PreCompact` runs, then the compaction
    // fails with "Not enough messages to compact."
    let env = TestLoop::new();
    let failing = Action::done("ok").compact_error("Not enough messages to compact.");
    env.scenario(&Scenario::new().step(1, failing));
    env.run_ok(&["start", "g", "--step", "one"]);
    let hooks = env.hook_runs();
    assert!(
        hooks.iter().any(|h| h["hook"] == "PreCompact"),
        "the hook ran: {hooks:?}"
    );
    assert!(
        !hooks.iter().any(|h| h["source"] == "compact"),
        "no compaction happened: {hooks:?}"
    );
    let m = env.m1();
    assert_eq!(m.results[&1].compactions, 0, "{:?}", m.results[&1]);
    env.assert_logged("Not enough messages to compact.");
}

/// A step's loop of a parallel loop was started while its worktree was not there (a runner
/// killed while git made it): the agent ran in the directory the runner was started from,
/// the project itself. A loop never runs its agent anywhere but its WORKDIR.
#[test]
fn a_loop_whose_workdir_is_gone_halts_instead_of_running_the_agent_elsewhere() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new());
    env.run_ok(&["start", "g", "--step", "one", "--plan-only"]);
    let gone = env.path().join("gone");
    let workdir = format!("WORKDIR: {}\n", env.path().display());
    assert!(env.text().contains(&workdir), "{}", env.text());
    let text = env
        .text()
        .replace(&workdir, &format!("WORKDIR: {}\n", gone.display()));
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    env.run_exits(3, &["resume"]);
    assert!(env.calls().is_empty(), "no agent ran: {:?}", env.calls());
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    assert!(
        m.last_action
            .unwrap_or_default()
            .contains("is not a directory"),
        "{}",
        env.text()
    );
    std::fs::create_dir_all(&gone).unwrap();
    env.run_ok(&["resume"]);
    assert_eq!(env.calls()[0]["cwd"].as_str(), Some(gone.to_str().unwrap()));
}
