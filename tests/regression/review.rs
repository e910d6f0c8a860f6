//! Reviews (`--review`) that cost what they should not have, approved what they should not
//! have, or halted for the wrong reason.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use serde_json::Value;

use crate::support::answers::{approve, changes, work};
use crate::support::{TestLoop, flag_value, line_with, review_text, stdout};

/// A reviewed step that passes, is asked for a change, and fails its retake once (then `then`
/// follows): the loop run with `--max-retries max`.
fn a_failed_retake(then: &[Action], max: &str) -> (TestLoop, std::process::Output) {
    let env = TestLoop::new().with_git();
    let broken = Action::failed("the file would not write").cost(0.01);
    let mut calls = vec![work("half"), changes(), broken];
    calls.extend_from_slice(then);
    env.scenario(&Scenario::new().step(1, calls));
    let args = [
        "start",
        "g",
        "--step",
        "write a.txt",
        "--review",
        "--max-retries",
        max,
    ];
    let out = env.run(&args);
    (env, out)
}

/// A retake the reviewer asked for was counted as a failed attempt, so a step that failed
/// once in its retake had spent its `MAX_RETRIES` 2. Fixed in 26e8816.
#[test]
fn a_review_retake_does_not_cost_a_failed_attempt() {
    // One failed attempt of two allowed: the retake that failed is retried, not the last.
    let (env, out) = a_failed_retake(&[work("whole"), approve()], "2");
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(3), "{}", env.text());
    assert_eq!(r.retakes, 1);
}

/// A retake that failed left `VERIFIED: true` from the pass before the review. Fixed in
/// 26e8816.
#[test]
fn a_failed_retake_is_not_shown_as_verified() {
    let (env, out) = a_failed_retake(&[], "1");
    env.assert_exit(&out, 1);
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Failed, "{}", env.text());
    assert_eq!(m.results[&1].verified, Some(false), "{}", env.text());
    let status = stdout(&env.run(&["status"]));
    assert!(status.contains("not verified"), "{status}");
}

/// `LOOP_AGENT=claude-sim loop start x --step a --review` always halted: the simulated agent
/// answered a reviewer as it answers a step (`STEP_DONE`), never with a review's verdict; and
/// a review run's live line said "attempt". Fixed in cf61db3.
#[test]
fn the_simulated_agent_approves_a_review_unless_its_scenario_says_otherwise() {
    let env = TestLoop::new().with_git();
    let mut start = env.cmd(&["start", "x", "--step", "a", "--review"]);
    start.env_remove("CLAUDE_SIM_SCENARIO");
    let out = crate::support::run(start);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let review = &env.m1().results[&1].review;
    assert!(
        matches!(review, Some(m1loop::m1::Review::Approved(_))),
        "{review:?}"
    );
    // The live line of a review run says so, with the run's number, not "attempt".
    let text = stdout(&out);
    let live: Vec<&str> = text.lines().filter(|l| l.starts_with("  … ")).collect();
    assert!(
        live.iter().any(|l| l.starts_with("  … step 1 review 1 · ")),
        "{text}"
    );
    assert!(
        !live.iter().any(|l| l.starts_with("  … step 1 attempt 2")),
        "{text}"
    );
}

/// The halt after review runs that gave no verdict did not say which review task to look at.
/// Fixed in cf61db3.
#[test]
fn a_review_that_never_gives_a_verdict_halts_naming_its_last_review_task() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, work("whole"))
            .review(Action::says("Looks fine to me.")),
    );
    env.run_exits(
        3,
        &[
            "start",
            "g",
            "--step",
            "write a.txt",
            "--review",
            "--max-retries",
            "2",
        ],
    );
    let m = env.m1();
    let (_, reviews) = env.step_and_review_calls();
    assert_eq!(reviews.len(), 2);
    let last_task = reviews[1].1["task_id"].as_str().unwrap().to_owned();
    let said = format!(
        "{}\n{}",
        m.last_action.unwrap_or_default(),
        m.next_action.unwrap_or_default()
    );
    assert!(said.contains(&last_task), "{said}");
    assert!(said.contains("loop check"), "{said}");
}

/// The value of `--tools` in a call's argv, if it has one.
fn tools(call: &Value) -> Option<String> {
    flag_value(call, "--tools")
}

/// A reviewer wrote files into the next commit: plan mode let through a Bash call that a
/// project's allow rule covered, and `--allowedTools` only pre-approves. Fixed in 777ef11
/// (issue 18): the planner and the reviewer get `--tools Read,Grep,Glob`.
#[test]
fn the_planner_and_the_reviewer_are_offered_only_tools_that_read() {
    // `--permission-mode plan` lets a Bash call through that a user's allow rule covers, and
    // `--allowedTools` only pre-approves (captures `reviewer-plan-mode-allow-rule*`);
    // `--tools` is what removes the others (captures `reviewer-tools-read-only*`).
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .plan(Action::plan(["write a.txt"]))
            .step(1, work("whole"))
            .review(Action::approve("fine")),
    );
    env.run_ok(&["start", "g", "--review"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 3, "plan, step, review");
    let read_only = Some("Read,Grep,Glob".to_owned());
    assert_eq!(tools(&calls[0]), read_only, "the planning call");
    assert_eq!(tools(&calls[1]), None, "the step's agent keeps its tools");
    assert_eq!(tools(&calls[2]), read_only, "the reviewer");
}

/// A change to the work tree during a review by a reviewer that could write (here an older
/// CLI that offers every tool whatever `--tools` says: its `Write` calls run, and its stream
/// shows them) went unreviewed into the next step's commit under an approval. Fixed in
/// 1bf0732 (issue 18); since issue 30 the halt says who could have made the change.
/// Unconfined (`--sandbox off`): confined, a reviewer cannot write at all (`loops::sandbox`).
#[test]
fn a_review_that_changed_the_work_tree_is_not_an_approval() {
    let env = TestLoop::new().with_git().env("LOOP_SANDBOX", "off");
    let meddling = Action::approve("fine")
        .write("made_by_reviewer.txt", "x\n")
        .write("a.txt", "half\n")
        .ignoring_tools();
    env.scenario(
        &Scenario::new()
            .step(1, work("whole"))
            .step(2, work("whole"))
            .review(meddling),
    );
    env.run_exits(
        3,
        &TestLoop::start_args(&["write a.txt", "more"], &["--review"]),
    );
    assert_eq!(env.calls_for(2), 0, "nothing runs on top of it");
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let r = &m.results[&1];
    assert_eq!(review_text(r).as_deref(), Some("pending"));
    let error = r.error.clone().unwrap_or_default();
    for file in ["made_by_reviewer.txt (new)", "a.txt (changed)"] {
        assert!(error.contains(file), "{file}: {error}");
        assert!(env.log().contains(file), "{file}: {}", env.log());
    }
    assert!(
        error.contains("the reviewer called Write: made_by_reviewer.txt"),
        "{error}"
    );
    let next = m.next_action.unwrap_or_default();
    assert!(next.contains("git status"), "{next}");
}

/// `loop start "add notes" --step … --step … --review > loop.out 2>&1` halted at the first
/// review (`the work tree changed while step 1 was reviewed, so the review is not an
/// approval: loop.out (changed)`), and every resume halted again: the loop's own output, and
/// anything another process writes in the project during a review (an editor, a watcher, the
/// CLI's own log), was taken for the reviewer's. A reviewer offered only tools that read
/// (`--tools Read,Grep,Glob`) can write nothing: what changed is not its.
#[test]
fn a_review_halts_on_no_change_its_read_only_reviewer_could_not_make() {
    reviews_beside_a_watcher(
        "off",
        "(not by the reviewer: its run had only read-only tools (--tools Read,Grep,Glob))",
    );
}

/// The same, confined: the loop's sandbox keeps the reviewer's work tree read-only.
#[test]
fn a_confined_review_halts_on_no_change_beside_it() {
    if !crate::support::bwrap_here() {
        return;
    }
    reviews_beside_a_watcher(
        "bwrap",
        "(not by the reviewer: its run ran in the loop's sandbox, its work tree read-only)",
    );
}

/// A two-step reviewed loop, its output into the project and a process appending to a file of
/// the project all along, whose runs are confined as `sandbox` says: it ends DONE, each review
/// approved, and `loop.log` says of each review what changed and `why` it is not the
/// reviewer's.
fn reviews_beside_a_watcher(sandbox: &str, why: &str) {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = TestLoop::new().with_git().env("LOOP_SANDBOX", sandbox);
    // The reviewer reads a while and tries to write too: its CLI refuses the call.
    let reviewer = Action::approve("fine")
        .sleep_ms(300)
        .write("made_by_reviewer.txt", "x\n");
    env.scenario(
        &Scenario::new()
            .step(1, work("half"))
            .step(2, work("whole"))
            .review(reviewer),
    );
    let out = std::fs::File::create(env.path().join("loop.out")).unwrap();
    let mut cmd = env.cmd(&[
        "start",
        "add notes",
        "--step",
        "write a note",
        "--step",
        "write another",
        "--review",
    ]);
    cmd.stdout(out.try_clone().unwrap()).stderr(out);
    // Beside the loop, a process appends to a file of the project all along (a watcher's log).
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let appender = {
        let (done, path) = (done.clone(), env.path().join("watcher.log"));
        std::thread::spawn(move || {
            let mut f = std::fs::File::create(path).unwrap();
            while !done.load(Ordering::Relaxed) {
                writeln!(f, "seen").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let status = crate::support::Guard::spawn(&mut cmd).wait(std::time::Duration::from_secs(60));
    done.store(true, Ordering::Relaxed);
    appender.join().unwrap();
    let log = env.log();
    assert_eq!(status.code(), Some(0), "{log}\n{}", env.text());
    env.assert_status(Status::Done);
    let m = env.m1();
    for s in [1, 2] {
        assert!(
            matches!(m.results[&s].review, Some(m1loop::m1::Review::Approved(_))),
            "{:?}",
            m.results[&s].review
        );
    }
    assert!(!env.path().join("made_by_reviewer.txt").exists());
    // loop.log says what changed during each review, and who could have changed it.
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("changed during the review of step"))
        .collect();
    assert_eq!(said.len(), 2, "{log}");
    for line in said {
        assert!(line.contains("watcher.log (changed)"), "{line}");
        assert!(line.contains(why), "{line}");
    }
}

/// A review's approval reached M1.md but not loop.log: the runner was killed right after
/// judging the review, and the revived one put the record back from the task ledger and logged
/// only that it "was judged already". loop.log is the record of every decision: the one
/// recovered from the ledger is logged as the decision it was.
#[test]
fn a_review_approval_recovered_from_the_ledger_is_logged_as_the_decision_it_was() {
    use std::os::unix::process::ExitStatusExt;
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, [work("whole"), approve()]));
    let mut c = env.cmd(&["start", "g", "--step", "write a.txt", "--review"]);
    c.env("LOOP_CRASH_AT", "before-review-record-write@1");
    let status = c.status().unwrap();
    assert_eq!(status.signal(), Some(9), "the runner did not die there");
    assert!(!env.log().contains("approved"), "{}", env.log());
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    let log = env.log();
    let line = line_with(&log, "review: step 1 approved");
    assert!(line.contains("from the task ledger"), "{line}");
    let (_, reviews) = env.step_and_review_calls();
    assert_eq!(reviews.len(), 1, "the review was not run again");
}

/// Tried as a new user would (issue 43): a step whose reviewer gave no verdict three times
/// waited with `… then loop resume (or set REVIEW: off)`. With `REVIEW: off` in M1.md, `loop
/// resume` halted again at once with the same sentence, and `loop retry` ran three more paid
/// reviews. Followed as written, the hint takes the step's passed attempt as done, unreviewed.
#[test]
fn setting_review_off_as_the_hint_says_ends_the_review_without_another_paid_run() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, work("whole"))
            .step(2, Action::done("b.txt written").write("b.txt", "b\n"))
            .review(Action::says("Looks fine to me.")),
    );
    env.run_exits(
        3,
        &TestLoop::start_args(&["write a.txt", "write b.txt"], &["--review"]),
    );
    let m = env.m1();
    let hint = m.next_action.clone().unwrap_or_default();
    assert!(hint.contains("set REVIEW: off"), "{hint}");
    let (steps, reviews) = env.step_and_review_calls();
    let before = (steps.len(), reviews.len());
    assert_eq!(before, (1, 3));
    // As the hint says: REVIEW: off, then `loop resume`.
    let text = env.text().replace("REVIEW: on", "REVIEW: off");
    assert!(text.contains("REVIEW: off"), "{text}");
    std::fs::write(&env.file, text).unwrap();
    let out = env.run(&["resume"]);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!(
        reviews.len(),
        3,
        "no review after REVIEW: off\n{}",
        env.log()
    );
    assert_eq!(steps.len(), 2, "step 1 did not run again\n{}", env.log());
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    assert_eq!(m.results[&1].attempts, Some(1));
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    let log = env.git(&["log", "--format=%s"]);
    assert!(
        log.contains("loop: step 1/2"),
        "step 1's work is committed: {log}"
    );
}

/// The halt after reviews without a verdict said `then loop resume`, which halted again at
/// once with the same words. Its hint now names what reviews the step again, `loop retry N`,
/// and that works as written: one more review, no new attempt of the step.
#[test]
fn the_hint_after_reviews_without_a_verdict_reviews_the_step_again_as_written() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, work("whole"))
            .review(Action::says("Looks fine to me.")),
    );
    env.run_exits(3, &["start", "g", "--step", "write a.txt", "--review"]);
    let hint = env.m1().next_action.unwrap_or_default();
    assert!(hint.contains("`loop retry 1`"), "{hint}");
    env.scenario(&Scenario::new().step(1, work("whole")).review(approve()));
    env.run_ok(&["retry", "1"]);
    env.wait_for_status(Status::Done, crate::support::PATIENCE);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!((steps.len(), reviews.len()), (1, 4), "{}", env.log());
    assert_eq!(
        review_text(&env.m1().results[&1]).as_deref(),
        Some("approved: a.txt is right")
    );
}

/// Past `MAX_RETAKES` the REVIEW gate says: "or fix it by hand and set REVIEW: off (or the
/// step [SKIPPED]) in M1.md, then `loop resume`". Followed as written, the fix by hand is the
/// step's work, taken as done without another paid run.
#[test]
fn a_fix_by_hand_with_review_off_as_the_review_gate_says_is_taken_without_another_paid_run() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.state().join("loop.yaml"), "review:\n  max_retakes: 1\n").unwrap();
    let still = Action::changes("still half").cost(0.02);
    env.scenario(&Scenario::new().step(1, [work("half"), changes(), work("half"), still]));
    env.run_exits(3, &["start", "g", "--step", "write a.txt"]);
    let hint = env.m1().next_action.unwrap_or_default();
    assert!(hint.contains("set REVIEW: off"), "{hint}");
    let calls = env.calls().len();
    std::fs::write(env.path().join("a.txt"), "whole\n").unwrap();
    let text = env.text().replace("REVIEW: on", "REVIEW: off");
    assert!(text.contains("REVIEW: off"), "{text}");
    std::fs::write(&env.file, text).unwrap();
    let out = env.run(&["resume"]);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    assert_eq!(env.calls().len(), calls, "no paid run\n{}", env.log());
    assert_eq!(
        std::fs::read_to_string(env.path().join("a.txt")).unwrap(),
        "whole\n"
    );
    let m = env.m1();
    assert_eq!(m.pending_gates().count(), 0, "{}", env.text());
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    let log = env.git(&["log", "--format=%s"]);
    assert!(
        log.contains("loop: step 1/1"),
        "the fix is committed: {log}"
    );
    assert_eq!(env.git(&["show", "HEAD:a.txt"]), "whole\n");
}

/// The log numbered every review of a step "review 1" (the count of reviews since the last
/// retake), where the report numbers them R1, R2 within the step: the two did not agree on
/// which review said what.
#[test]
fn the_log_numbers_a_steps_reviews_as_the_report_does() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, [work("half"), changes(), work("whole"), approve()]));
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    env.assert_status(Status::Done);
    let log = env.log();
    let numbers: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("review: step 1 review ")?.1.split(' ').next())
        .collect();
    assert_eq!(numbers, ["1", "2"], "{log}");
    let md = stdout(&env.run_ok(&["report", "--format", "md"]));
    assert!(md.contains("R1 changes asked"), "{md}");
    assert!(md.contains("R2 approved"), "{md}");
}
