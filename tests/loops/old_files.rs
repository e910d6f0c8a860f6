//! State as older versions wrote it (`tests/fixtures/old/`, whose README says which commit
//! wrote each) still loads: `loop validate` accepts it, `loop status` reads it, and `loop
//! resume` carries the loop on from it as it should, running no step twice. A person's loop
//! outlives the version that started it.

use std::path::Path;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use serde_json::Value;

use crate::support::{SIM, TestLoop, review_text, stdout};

/// A loop whose `state/` is the fixture `name`, its paths put back as this test's own.
fn old_loop(name: &str) -> TestLoop {
    let env = TestLoop::new();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/old")
        .join(name);
    copy(&from, &env.state(), &|text: String| {
        text.replace("@PROJECT@", &env.path().display().to_string())
            .replace("@AGENT@", SIM)
    });
    env
}

fn copy(from: &Path, to: &Path, paths: &dyn Fn(String) -> String) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target, paths);
        } else {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(&target, paths(text)).unwrap();
        }
    }
}

/// `loop validate` accepts the file and `loop status` reads it: what `status` and `status
/// --json` say.
fn loads(env: &TestLoop) -> (String, Value) {
    let out = env.run_ok(&["validate"]);
    assert!(stdout(&out).ends_with("ok\n"), "{}", stdout(&out));
    let human = stdout(&env.run_ok(&["status"]));
    assert!(human.contains("parse the new format"), "{human}");
    let json = stdout(&env.run_ok(&["status", "--json"]));
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["goal"], "parse the new format", "{v}");
    (human, v)
}

#[test]
fn a_blocked_loop_of_the_minutes_era_resumes_with_the_steps_it_had_left() {
    let env = old_loop("a875974-blocked");
    let (human, v) = loads(&env);
    assert!(human.contains("STATUS       WAITING"), "{human}");
    assert_eq!(v["limits"]["step_timeout"], "20m", "{v}");
    assert_eq!(v["limits"]["idle_timeout"], "5m", "{v}");
    assert_eq!(v["loop_id"], Value::Null, "{v}");
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(
        (env.calls_for(1), env.calls_for(2), env.calls_for(3)),
        (0, 1, 1),
        "the step that passed is not run again"
    );
    let blocked = &env.calls()[0];
    assert_eq!(
        blocked["resume"], "1f6bc94a-255c-409e-86a8-faef1f2a7218",
        "{blocked}"
    );
    assert!(env.prompt(0).contains("keep the old API or drop it?"));
    let m = env.m1();
    assert!(m.loop_id.is_some(), "it has an id from its first spawn");
    let text = env.text();
    for kept in ["  STEP_TIMEOUT_MIN: 20\n", "  IDLE_TIMEOUT_MIN: 5\n"] {
        assert!(text.contains(kept), "{kept:?} was rewritten:\n{text}");
    }
}

#[test]
fn a_loop_killed_in_a_backoff_waits_out_its_wait_until_and_runs_the_step_again() {
    let env = old_loop("a875974-backoff");
    let (human, v) = loads(&env);
    assert!(human.contains("Wait until 2026-11-24T02:26:59Z"), "{human}");
    assert_eq!(v["current"]["wait_until"], "2026-11-24T02:26:59Z", "{v}");
    env.scenario(&Scenario::new().otherwise(Action::done("ported")));
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!((env.calls_for(1), env.calls_for(2)), (0, 1));
    let again = &env.calls()[0];
    assert_eq!(
        again["resume"], "15272e7d-dee1-4e2d-8672-df692b68b261",
        "the cut-off session goes on: {again}"
    );
    let r = &env.m1().results[&2];
    assert_eq!(r.attempts, Some(1), "the wait cost no attempt: {r:?}");
    assert_eq!(r.transient, 1);
    assert_eq!(r.summary.as_deref(), Some("ported"));
}

/// Every step DONE with the summary the old run recorded, and no agent started.
fn assert_put_back(env: &TestLoop) {
    env.assert_status(Status::Done);
    assert!(env.calls().is_empty(), "{:?}", env.calls());
    let m = env.m1();
    for (n, step) in (1..).zip(&m.plan.steps) {
        assert_eq!(step.state, StepState::Done, "step {n}\n{}", env.text());
        assert_eq!(
            m.results[&n].summary.as_deref(),
            Some("done as asked"),
            "step {n}\n{}",
            env.text()
        );
    }
    env.assert_logged("nothing is judged or run again");
}

#[test]
fn a_stale_text_over_the_first_ledger_gets_its_records_back_and_runs_nothing() {
    let env = old_loop("0a1b38c-stale-save");
    let (human, v) = loads(&env);
    // The task's exit record, as that version wrote it, is read.
    assert!(
        human.contains("TASK         task_20261124T022545_97493d DONE exit 0"),
        "{human}"
    );
    assert_eq!(v["limits"]["step_timeout"], "1h", "{v}");
    assert_eq!(
        v["current"]["task_id"], "task_20261124T022545_97493d",
        "{v}"
    );
    env.scenario(&Scenario::new().otherwise(Action::failed("a step ran again")));
    env.run_ok(&["resume"]);
    assert_put_back(&env);
    env.assert_logged("task task_20261124T022545_97493d was judged already (pass)");
}

#[test]
fn a_stale_text_of_a_review_over_an_old_ledger_neither_reviews_nor_runs_again() {
    let env = old_loop("6d2ba8e-stale-save-in-review");
    let (human, v) = loads(&env);
    assert!(
        human.contains("port the callers  (exit 0, verified, 1 attempt, $0.01, review pending)"),
        "{human}"
    );
    assert_eq!(v["agent"]["model"], "sonnet", "{v}");
    env.scenario(
        &Scenario::new()
            .otherwise(Action::failed("a step ran again"))
            .review(Action::changes("a review ran again")),
    );
    env.run_ok(&["resume"]);
    assert_put_back(&env);
    env.assert_logged("task task_20261124T022638_352049 was judged already (review)");
    let m = env.m1();
    for n in 1..=3 {
        assert_eq!(
            review_text(&m.results[&n]).as_deref(),
            Some("approved: the change does what the step says"),
            "step {n}\n{}",
            env.text()
        );
    }
    let text = env.text();
    for kept in ["REVIEW: on\n", "  MODEL: sonnet\n", "  MAX_TURNS: 30\n"] {
        assert!(text.contains(kept), "{kept:?} is gone:\n{text}");
    }
}
