//! Decisions a person makes by hand that the loop took silently or made hard (issue "Fourth
//! trial from outside", item 8): each test names what happened, and pins what happens now.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{GateKind, Status, StepState};

use crate::support::bot::{CHAT, start_real_bot, with_telegram};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, flag_value, line_with, stderr, stdout, wait_until};

/// Steps that each work `ms`, then pass.
fn steady(env: &TestLoop, ms: u64) {
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(ms)));
}

/// Steps that pass once the test's edit is saved ([`TestLoop::save_then_go_on`]): the edit lands while
/// step 1 runs, however slow the machine.
fn held(env: &TestLoop) {
    env.scenario(&Scenario::new().otherwise(Action::done("ok").bash(&env.hold())));
}

/// While step 1 runs, `edit` changes M1.md's text as a person's editor would.
fn edit_while_step_1_runs(env: &TestLoop, args: &[&str], edit: impl Fn(&str) -> String) -> String {
    let mut runner = env.spawn(args);
    env.wait_for_calls(1, 1);
    env.save_then_go_on(edit);
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.log()
}

/// A step added by hand was refused until `TOTAL_STEPS` was raised too (`TOTAL_STEPS is 3 but
/// PLAN.STEPS lists 4 steps`). The count follows the list: the runner keeps it for the person.
#[test]
fn a_step_added_by_hand_needs_no_count_raised_by_hand() {
    let env = TestLoop::new();
    held(&env);
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
    held(&env);
    let args = ["start", "g", "--step", "a", "--step", "b", "--step", "c"];
    let mut runner = env.spawn(&args);
    env.wait_for_calls(1, 1);
    env.save_then_go_on(|t| t.replacen("3: [PENDING] c", "3: [DONE] c", 1));
    let out = runner.wait(Duration::from_secs(60));
    assert!(out.success(), "{}", env.log());
    assert_eq!(env.calls_for(3), 0, "a step done by hand does not run");
    let log = env.log();
    assert!(log.contains("step 3 set DONE by hand"), "{log}");
    let done = line_with(&log, "notify (done)");
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

/// A step set `[SKIPPED]` or `[DONE]` by hand while it ran was logged as a hand edit, then
/// overwritten when its run ended: the failed run was retried, and the loop ended FAILED at a
/// step the person had closed. The person's state now stands at the run's end, the next
/// decision: the run is recorded, not retried, and the loop goes on.
fn closed_by_hand_while_it_runs(state: &str) -> TestLoop {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, [Action::failed("cannot").bash(&env.hold())])
            .otherwise(Action::done("ok")),
    );
    let args = TestLoop::start_args(&["one", "two"], &["--max-retries", "3"]);
    let log = edit_while_step_1_runs(&env, &args, |t| {
        t.replacen("1: [RUNNING] one", &format!("1: [{state}] one"), 1)
    });
    assert!(
        log.contains(&format!("step 1 set {state} by hand while it runs")),
        "{log}"
    );
    assert!(
        log.contains(&format!("the step stays {state}, as set by hand")),
        "{log}"
    );
    assert_eq!(env.calls_for(1), 1, "not retried\n{log}");
    assert_eq!(env.calls_for(2), 1, "{log}");
    let m = env.m1();
    assert_eq!(m.status, Status::Done, "{log}");
    assert_eq!(m.results[&1].attempts, Some(1), "the run is on record");
    assert!(
        m.results[&1].cost_usd.is_some_and(|c| c > 0.0),
        "and its cost"
    );
    env
}

#[test]
fn a_running_step_set_skipped_by_hand_is_not_retried_and_stays_skipped() {
    let env = closed_by_hand_while_it_runs("SKIPPED");
    assert_eq!(env.m1().plan.steps[0].state, StepState::Skipped);
}

#[test]
fn a_running_step_set_done_by_hand_is_not_retried_and_stays_done_by_hand() {
    let env = closed_by_hand_while_it_runs("DONE");
    assert_eq!(env.m1().plan.steps[0].state, StepState::Done);
    let status = stdout(&env.run_ok(&["status"]));
    assert!(
        status.contains("done by hand after 1 run of the loop"),
        "{status}"
    );
    let done = env.log();
    assert!(
        done.contains("1. [DONE by hand after 1 run of the loop] one"),
        "{done}"
    );
}

/// The same during the step's review: a step set `[DONE]` while its reviewer ran was sent
/// back for the changes the review asked for. The review's cost is recorded, its verdict is
/// not acted on, and the step stays DONE.
#[test]
fn a_step_set_done_by_hand_during_its_review_is_not_sent_back() {
    use crate::support::answers::{changes, work};
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [work("half"), changes().bash(&env.hold()), work("whole")],
            )
            .step(2, [Action::done("ok"), Action::approve("fine")]),
    );
    let mut runner = env.spawn(&["start", "g", "--step", "one", "--step", "two", "--review"]);
    env.wait_for_calls(1, 2);
    env.save_then_go_on(|t| t.replacen("1: [RUNNING] one", "1: [DONE] one", 1));
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    let log = env.log();
    assert!(
        log.contains("the review of step 1 (run 1) ended (it asked for changes"),
        "{log}"
    );
    assert_eq!(env.calls_for(1), 2, "no retake\n{log}");
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    assert_eq!(
        m.results[&1].review, None,
        "no review pending: {:?}",
        m.results[&1]
    );
    assert!(
        (m.results[&1].cost_usd.unwrap() - 0.12).abs() < 1e-9,
        "the review is paid for"
    );
    assert_eq!(env.calls_for(2), 2, "step 2's attempt and its review");
    assert_eq!(m.status, Status::Done);
}

/// The same while the step's VERIFY runs, which can take minutes: the runner judged the
/// step on the file as it was before VERIFY, and its record overwrote the person's SKIPPED.
#[test]
fn a_step_set_skipped_by_hand_while_its_verify_runs_stays_skipped() {
    let env = TestLoop::new();
    steady(&env, 10);
    let mut runner = env.spawn(&TestLoop::start_args(
        &["one", "two"],
        // Long enough for the edit below to land while it runs, on a busy machine too.
        &["--verify", "[ \"$LOOP_STEP\" = 2 ] || sleep 5"],
    ));
    assert!(
        wait_until(Duration::from_secs(30), || env
            .log()
            .contains("verify: step 1: running")),
        "{}",
        env.log()
    );
    let text = env
        .text()
        .replacen("1: [RUNNING] one", "1: [SKIPPED] one", 1);
    std::fs::write(&env.file, text).unwrap();
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Skipped, "{}", env.log());
    assert!(
        env.log().contains("the step stays SKIPPED, as set by hand"),
        "{}",
        env.log()
    );
    assert_eq!((env.calls_for(1), env.calls_for(2)), (1, 1));
    assert_eq!(m.status, Status::Done);
}

/// `loop stop` while a step set SKIPPED by hand still runs (as the log says, to end it now)
/// put the step back to PENDING, and `loop resume` ran it again. The stop ends the run, the
/// step stays SKIPPED, and the resume goes on with the next one.
#[test]
fn a_stop_after_a_running_step_was_set_skipped_by_hand_keeps_it_skipped() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, [Action::done("slow").sleep_ms(60_000)])
            .otherwise(Action::done("ok")),
    );
    let mut runner = env.spawn(&["start", "g", "--step", "one", "--step", "two"]);
    env.wait_for_calls(1, 1);
    let text = env
        .text()
        .replacen("1: [RUNNING] one", "1: [SKIPPED] one", 1);
    std::fs::write(&env.file, text).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || env
            .log()
            .contains("step 1 set SKIPPED by hand while it runs")),
        "{}",
        env.log()
    );
    env.run_ok(&["stop"]);
    let status = runner.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(3), "WAITING\n{}", env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    assert_eq!(m.plan.steps[0].state, StepState::Skipped, "{}", env.text());
    assert!(
        env.log().contains("step 1 stays SKIPPED, as set by hand"),
        "{}",
        env.log()
    );
    env.run_ok(&["resume"]);
    assert_eq!(env.calls_for(1), 1, "{}", env.log());
    assert_eq!(env.calls_for(2), 1);
    assert_eq!(env.m1().status, Status::Done);
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

/// A command or a tap from a chat (or a person) the bot does not obey changed nothing, which
/// is right, but `loop.log` did not say who was refused, nor what they asked: it names both.
#[test]
fn a_refused_command_or_tap_is_logged_with_who_sent_it_and_what_it_asked() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new());
    env.run_exits(3, &["start", "g", "--step", "one", "--approve-plan"]);
    let sent = || tg.sent();
    assert!(wait_until(Duration::from_secs(30), || sent()
        .iter()
        .any(|s| !s.buttons().is_empty())));
    let (n, buttons) = sent()
        .iter()
        .enumerate()
        .rfind(|(_, s)| !s.buttons().is_empty())
        .map(|(i, s)| (i + 1, s.buttons()))
        .unwrap();
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_message(999, "/stop");
    tg.push_tap(CHAT + 1, CHAT + 1, n, &buttons[0]);
    let logged = |what: &str| env.log().lines().any(|l| l.contains(what));
    assert!(
        wait_until(Duration::from_secs(30), || logged("ignored a message")
            && logged("ignored a tap")),
        "{}",
        env.log()
    );
    let log = env.log();
    let message = log
        .lines()
        .find(|l| l.contains("ignored a message"))
        .unwrap();
    assert!(
        message.contains("/stop") && message.contains("from telegram 999 (T)"),
        "{message}"
    );
    let tap = log.lines().find(|l| l.contains("ignored a tap")).unwrap();
    let stranger = format!("telegram {} (@user{})", CHAT + 1, CHAT + 1);
    assert!(
        tap.contains("gate G1 (approve)") && tap.contains(&stranger),
        "{tap}"
    );
    assert!(env.m1().gate("G1").unwrap().is_pending(), "nothing changed");
}

/// A DENIED gate's `allow` added bare `Bash` to `ALLOWED_TOOLS` when one command (`chmod +x
/// tool.sh`) was denied: all of Bash for every later step. `allow` allows that command, and
/// `allow-all` the whole tool, when a person says so.
#[test]
fn allowing_a_denied_command_allows_that_command_not_all_of_bash() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                Action::done("made it runnable").denied(["Bash: chmod +x tool.sh"]),
            )
            .step(2, Action::done("cleaned").denied(["Bash: rm -rf build"])),
    );
    env.run_exits(
        3,
        &TestLoop::start_args(&["make tool.sh runnable", "clean"], &[]),
    );
    let g = env.m1().gate("G1").expect("a DENIED gate").clone();
    assert_eq!(g.kind, GateKind::Denied);
    assert_eq!(g.tools, ["Bash(chmod +x tool.sh)"]);
    assert_eq!(g.options, ["allow", "allow-all", "skip", "stop"]);
    // The narrow rule: step 1 runs again with it and passes; step 2's other command is denied.
    env.run_exits(3, &["answer", "G1", "allow"]);
    let m = env.m1();
    let allowed = m.agent.allowed_tools.clone().unwrap_or_default();
    assert!(
        allowed.contains(&"Bash(chmod +x tool.sh)".to_owned()),
        "{allowed:?}"
    );
    assert!(!allowed.contains(&"Bash".to_owned()), "{allowed:?}");
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    let g2 = m.gate("G2").expect("step 2 denied in turn").clone();
    assert_eq!(g2.tools, ["Bash(rm -rf build)"]);
    // All of the tool, when a person chooses it.
    env.run_ok(&["answer", "G2", "allow-all"]);
    let allowed = env.m1().agent.allowed_tools.unwrap_or_default();
    assert!(allowed.contains(&"Bash".to_owned()), "{allowed:?}");
    env.assert_status(Status::Done);
    let log = env.log();
    assert!(log.contains("may now run Bash(chmod +x tool.sh)"), "{log}");
    assert!(log.contains("may now use all of Bash"), "{log}");
}

/// The budgets the simulated agent's calls of step `n` were given (`--max-budget-usd`).
fn budgets_of(env: &TestLoop, n: u64) -> Vec<f64> {
    env.calls()
        .iter()
        .filter(|c| c["step"].as_u64() == Some(n))
        .map(|c| {
            flag_value(c, "--max-budget-usd")
                .unwrap_or_else(|| panic!("step {n}'s call had no budget: {c}"))
                .parse()
                .unwrap()
        })
        .collect()
}

/// `--max-cost-usd 1` stopped at $1.20, two steps of $0.60: the cap was checked between
/// steps only, and reaching it halted the loop. Each run is given what is left of the cap
/// (`--max-budget-usd`), a run cut off by it is not a failed attempt, and the loop waits on a
/// COST gate: raise the cap (by as much again, or to an amount), or stop.
#[test]
fn a_cost_cap_is_passed_to_each_run_and_reaching_it_waits_on_a_gate() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").cost(0.6)));
    let args = ["start", "g", "--step", "a", "--step", "b", "--step", "c"];
    env.run_exits(3, &[&args[..], &["--max-cost-usd", "1"]].concat());
    assert_eq!(budgets_of(&env, 1), [1.0]);
    let left = budgets_of(&env, 2);
    assert!((left[0] - 0.4).abs() < 1e-9, "{left:?}");
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    assert_eq!(
        m.plan.steps[1].state,
        StepState::Pending,
        "cut off, not failed"
    );
    assert!(m.results[&2].interrupted.is_some(), "{:?}", m.results[&2]);
    assert_eq!(m.results[&2].error, None, "not a failed attempt");
    let g = m.gate("G1").expect("a COST gate").clone();
    assert_eq!(g.kind, GateKind::Cost);
    assert_eq!(g.options, ["raise", "stop"]);
    let next = m.next_action.clone().unwrap_or_default();
    assert!(next.contains("loop answer G1"), "{next}");
    // Raised by as much again: the step resumes its session and passes; the next one is cut
    // off in turn.
    env.run_exits(3, &["answer", "G1", "raise"]);
    let m = env.m1();
    assert_eq!(m.limits.max_cost_usd, Some(2.2));
    assert_eq!(m.plan.steps[1].state, StepState::Done);
    assert_eq!(
        env.calls()
            .iter()
            .rfind(|c| c["step"].as_u64() == Some(2))
            .unwrap()["resume"],
        m.results[&2].session_id.clone().unwrap().as_str(),
        "the cut-off step goes on in its session"
    );
    assert!(m.gate("G2").is_some_and(m1loop::m1::Gate::is_pending));
    // Raised to an amount.
    env.run_ok(&["answer", "G2", "5"]);
    let m = env.m1();
    assert_eq!(m.limits.max_cost_usd, Some(5.0));
    assert_eq!(m.status, Status::Done);
    let log = env.log();
    assert!(log.contains("MAX_COST_USD"), "{log}");
}

/// A cap reached exactly between steps waits on the gate too, before any run, and `stop` ends
/// the loop there.
#[test]
fn a_cost_cap_reached_between_steps_waits_on_a_gate_and_stop_ends_the_loop() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").cost(0.5)));
    let args = ["start", "g", "--step", "a", "--step", "b", "--step", "c"];
    env.run_exits(3, &[&args[..], &["--max-cost-usd", "1"]].concat());
    assert_eq!(
        (env.calls_for(1), env.calls_for(2), env.calls_for(3)),
        (1, 1, 0)
    );
    let g = env.m1().gate("G1").expect("a COST gate").clone();
    assert_eq!((g.kind, g.step), (GateKind::Cost, 3));
    // A resume without a decision waits on the same gate.
    env.run_exits(3, &["resume"]);
    assert_eq!(env.m1().gates.len(), 1, "{}", env.text());
    let out = env.run_exits(2, &["answer", "G1", "0.5"]);
    assert!(stderr(&out).contains("not above"), "{}", stderr(&out));
    env.run_exits(1, &["answer", "G1", "stop"]);
    env.assert_status(Status::Failed);
    assert_eq!(env.calls_for(3), 0);
}
