//! Gates: decisions a loop waits for, made from the shell (`loop approve | reject | answer`) or
//! from the chat (a tap on a button, a reply), once, with no agent process alive meanwhile.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{GateKind, GateState, Status, StepState};
use serde_json::Value;

use crate::support::bot::{CHAT, DEADLINE, start_real_bot, with_telegram};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, stderr, stdout, wait_until};

/// What `loop … --json` printed.
fn json_of(out: &std::process::Output) -> Value {
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_plan_gate_approved_from_the_shell_runs_the_steps_once_and_a_second_approval_changes_nothing() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let listed = stdout(&env.run_ok(&["gates"]));
    assert!(
        listed.contains("G1 PLAN PENDING") && listed.contains("loop approve G1"),
        "{listed}"
    );
    env.run_ok(&["approve"]);
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(2, "after one approval");
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(
        (g.state, g.choice.as_deref()),
        (GateState::Decided, Some("approve"))
    );
    assert!(g.by.is_some() && g.at.is_some(), "{g:?}");
    let text = env.text();
    let again = env.run_exits(2, &["approve", "G1", "--json"]);
    assert_eq!(json_of(&again)["outcome"], "already");
    assert_eq!(env.text(), text, "a second approval changes nothing");
    assert_eq!(env.calls().len(), 2);
    env.assert_logged("decide: gate G1 (PLAN): approve by");
}

#[test]
fn a_rejected_plan_runs_no_step_and_resume_after_an_edit_asks_again() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    env.run_exits(3, &["reject", "G1"]);
    env.assert_status(Status::Waiting);
    assert_eq!(env.calls().len(), 0, "a rejected plan runs nothing");
    let m = env.m1();
    assert_eq!(m.gate("G1").unwrap().choice.as_deref(), Some("reject"));
    assert!(m.next_action.unwrap().contains("Edit PLAN.STEPS"));
    std::fs::write(
        &env.file,
        env.text()
            .replace("[PENDING] two", "[PENDING] two, with tests"),
    )
    .unwrap();
    env.run_exits(3, &["resume"]);
    let m = env.m1();
    let g2 = m.gate("G2").expect("a new gate for the edited plan");
    assert!(g2.is_pending());
    assert_eq!(env.calls().len(), 0);
    env.run_ok(&["approve", "G2"]);
    env.assert_status(Status::Done);
    assert!(env.prompt(1).contains("two, with tests"));
}

#[test]
fn a_decision_on_a_plan_shown_before_an_edit_is_refused_and_the_gate_shown_again() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let shown = env.m1().gate("G1").unwrap().shown.clone();
    std::fs::write(
        &env.file,
        env.text()
            .replace("[PENDING] one", "[PENDING] one, differently"),
    )
    .unwrap();
    let stale = env.run_exits(3, &["approve", "G1", "--shown", &shown, "--json"]);
    assert_eq!(json_of(&stale)["outcome"], "stale", "{}", stdout(&stale));
    assert_eq!(
        env.calls().len(),
        0,
        "nothing runs on an out-of-date approval"
    );
    let g = env.m1().gate("G1").cloned().unwrap();
    assert!(g.is_pending() && g.shown != shown, "{g:?}");
    env.run_ok(&["approve", "G1", "--shown", &g.shown]);
    env.assert_status(Status::Done);
}

#[test]
fn an_approved_plan_edited_before_any_step_ran_asks_again() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    // Approved, but the runner never carried it on (as if the decider had died).
    let text = env.text();
    let approved = text
        .replace("STATE: PENDING", "STATE: DECIDED\n    CHOICE: approve")
        .replace("[PENDING] two", "[PENDING] two and three");
    std::fs::write(&env.file, approved).unwrap();
    env.run_exits(3, &["resume"]);
    assert_eq!(env.calls().len(), 0, "the approval was for another plan");
    assert!(
        env.m1()
            .gate("G2")
            .is_some_and(m1loop::m1::Gate::is_pending)
    );
}

#[test]
fn approve_plan_after_planning_waits_before_step_one() {
    let env = TestLoop::new();
    // The simulated agent's own answers: a plan of three steps, each step done.
    env.scenario(&Scenario::new());
    env.run_exits(3, &["start", "g", "--approve-plan"]);
    assert_eq!(
        (env.calls_for(0), env.calls().len()),
        (1, 1),
        "planned, then waits"
    );
    env.run_ok(&["approve"]);
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(3, "after the approval");
}

#[test]
fn a_step_question_answered_with_loop_answer_resumes_its_session_with_the_answer() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().step(1, [Action::blocked("which port?"), Action::done("used it")]),
    );
    env.run_exits(3, &["start", "g", "--step", "one"]);
    let m = env.m1();
    let g = m.gate("G1").expect("an ASK gate").clone();
    assert_eq!(
        (g.kind, g.step, g.question.as_deref()),
        (GateKind::Ask, 1, Some("which port?"))
    );
    env.run_ok(&["answer", "use 8080"]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1]["resume"], calls[0]["session_id"],
        "the step resumes in its own session"
    );
    let prompt = env.prompt(1);
    assert!(
        prompt.contains("which port?") && prompt.contains("The human answered: use 8080"),
        "{prompt}"
    );
    assert_eq!(
        env.m1().results[&1].attempts,
        Some(1),
        "a question is not a failed attempt"
    );
    assert_eq!(
        env.m1().gate("G1").unwrap().choice.as_deref(),
        Some("use 8080")
    );
}

#[test]
fn a_question_answered_in_m1_md_and_resumed_closes_its_gate() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().step(1, [Action::blocked("which port?"), Action::done("used it")]),
    );
    env.run_exits(3, &["start", "g", "--step", "one"]);
    std::fs::write(
        &env.file,
        env.text()
            .replace("CONSTRAINTS: (none)", "CONSTRAINTS: port 8080"),
    )
    .unwrap();
    env.run_ok(&["resume"]);
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(
        (g.state, g.choice.as_deref()),
        (GateState::Decided, Some("(answered in M1.md)"))
    );
    let late = env.run_exits(2, &["answer", "G1", "too late", "--json"]);
    assert_eq!(json_of(&late)["outcome"], "already");
}

#[test]
fn a_decision_that_does_not_fit_is_refused_saying_why() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let out = env.run_exits(2, &["answer", "G1", "sure"]);
    assert!(
        crate::support::stderr(&out).contains("approve or reject"),
        "{out:?}"
    );
    let out = env.run_exits(2, &["approve", "G7"]);
    assert!(
        crate::support::stderr(&out).contains("there is no gate G7"),
        "{out:?}"
    );
    assert!(env.m1().gate("G1").unwrap().is_pending());
}

#[test]
fn a_decider_killed_after_writing_its_decision_is_carried_on_by_the_next_once() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let mut cmd = env.cmd(&["approve"]);
    cmd.env("LOOP_CRASH_AT", "after-decision-write");
    let out = crate::support::run(cmd);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9)
    );
    // Decided and RUNNING, with no runner and nothing run.
    assert_eq!(env.m1().status, Status::Running);
    assert_eq!(env.calls().len(), 0);
    // A second tap (or approval) says so and carries the loop on, once.
    let again = env.run(&["approve", "--json"]);
    assert_eq!(json_of(&again)["outcome"], "already");
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(2, "after the decider died");
}

/// A second decision that came as the first one's background runner took the loop (its lock
/// taken, its pid not written yet) failed: "another runner already runs the loop", where it
/// is told the gate was already decided, as any second decision is.
#[test]
fn a_decision_as_a_runner_takes_the_loop_is_told_it_was_already_decided() {
    use std::io::Write as _;
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let mut cmd = env.cmd(&["approve"]);
    cmd.env("LOOP_CRASH_AT", "after-decision-write");
    crate::support::run(cmd);
    assert_eq!(env.m1().status, Status::Running, "decided, and no runner");
    // A runner taking the loop: the lock is held, its pid written a moment later.
    let mut lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(env.state().join("M1.md.lock"))
        .unwrap();
    lock.lock().unwrap();
    lock.set_len(0).unwrap();
    let second = std::thread::scope(|s| {
        let second = s.spawn(|| env.run(&["reject", "--json"]));
        std::thread::sleep(Duration::from_millis(300));
        write!(lock, "{}", std::process::id()).unwrap();
        second.join().unwrap()
    });
    assert!(
        stdout(&second).contains(r#""outcome":"already""#),
        "{}{}",
        stdout(&second),
        stderr(&second)
    );
    let said = json_of(&second);
    assert_eq!(said["gate"]["choice"], "approve");
    drop(lock);
    assert_eq!(
        env.m1().gate("G1").unwrap().choice.as_deref(),
        Some("approve")
    );
}

/// The latest message of gate `id` the chat got, and its number, once one has arrived (it is
/// sent beside the loop, by a delivery process).
fn gate_message(tg: &FakeTelegram, id: &str) -> (usize, crate::support::telegram_fake::Sent) {
    let find = |sent: &[crate::support::telegram_fake::Sent]| {
        sent.iter()
            .rposition(|s| s.buttons().iter().any(|b| b.starts_with(&format!("{id} "))))
    };
    wait_until(DEADLINE, || find(&tg.sent()).is_some());
    let sent = tg.sent();
    let i = find(&sent).unwrap_or_else(|| panic!("no message with buttons for {id}: {sent:?}"));
    (i + 1, sent[i].clone())
}

#[test]
fn a_plan_gate_approved_by_a_tap_runs_to_done_once_and_other_taps_change_nothing() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.start_waiting_for_approval();
    let (n, msg) = gate_message(&tg, "G1");
    assert!(
        msg.text.contains("Approve the plan?") && msg.text.contains("1. one"),
        "{}",
        msg.text
    );
    let buttons = msg.buttons();
    assert_eq!(buttons.len(), 2, "Approve and Reject");
    let bot = start_real_bot(&env, &tg.base_url());
    // Taps from another chat, and from another person of a private chat, change nothing.
    tg.push_tap(CHAT + 1, CHAT + 1, n, &buttons[0]);
    tg.push_tap(CHAT, CHAT + 2, n, &buttons[0]);
    tg.push_tap(CHAT, CHAT, n, "G1 9 0000");
    assert!(wait_until(DEADLINE, || tg.count("answerCallbackQuery") == 3));
    assert!(env.m1().gate("G1").unwrap().is_pending());
    assert_eq!(env.calls().len(), 0);
    env.assert_logged("ignored a tap on gate G1 (approve) from telegram");
    // The person's tap decides, and the loop runs to DONE.
    tg.push_tap(CHAT, CHAT, n, &buttons[0]);
    assert!(wait_until(DEADLINE, || env.m1().status == Status::Done));
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(g.choice.as_deref(), Some("approve"));
    assert!(g.by.unwrap().contains(&format!("telegram {CHAT}")));
    assert!(
        wait_until(DEADLINE, || tg.count("editMessageText") == 1),
        "{}",
        bot.stderr()
    );
    let edits = tg.bodies("editMessageText");
    assert!(
        edits.iter().any(|e| e["message_id"] == n
            && e["text"].as_str().unwrap().contains("Decided: approve")
            && e.get("reply_markup").is_none()),
        "{edits:?}"
    );
    // A second tap on the same button: "already answered", nothing else.
    tg.push_tap(CHAT, CHAT, n, &buttons[0]);
    assert!(wait_until(DEADLINE, || tg.count("answerCallbackQuery") == 5));
    let answers = tg.bodies("answerCallbackQuery");
    assert!(
        answers[4]["text"]
            .as_str()
            .unwrap()
            .contains("already answered: approve"),
        "{answers:?}"
    );
    env.assert_each_step_started_once(2, "after two taps");
}

#[test]
fn a_plan_rejected_by_a_tap_runs_no_step() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.start_waiting_for_approval();
    let (n, msg) = gate_message(&tg, "G1");
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_tap(CHAT, CHAT, n, &msg.buttons()[1]);
    assert!(wait_until(DEADLINE, || !env
        .m1()
        .gate("G1")
        .unwrap()
        .is_pending()));
    assert_eq!(
        env.m1().gate("G1").unwrap().choice.as_deref(),
        Some("reject")
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.calls().len(), 0);
    env.assert_status(Status::Waiting);
}

#[test]
fn a_tap_on_a_plan_edited_since_its_message_is_refused_and_a_fresh_message_sent() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.start_waiting_for_approval();
    let (n, msg) = gate_message(&tg, "G1");
    std::fs::write(
        &env.file,
        env.text()
            .replace("[PENDING] two", "[PENDING] two, then ship"),
    )
    .unwrap();
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_tap(CHAT, CHAT, n, &msg.buttons()[0]);
    assert!(wait_until(DEADLINE, || gate_message(&tg, "G1").0 != n));
    let (fresh_n, fresh) = gate_message(&tg, "G1");
    assert!(fresh.text.contains("two, then ship"), "{}", fresh.text);
    assert_eq!(env.calls().len(), 0, "the old message approved nothing");
    assert!(env.m1().gate("G1").unwrap().is_pending());
    tg.push_tap(CHAT, CHAT, fresh_n, &fresh.buttons()[0]);
    assert!(wait_until(DEADLINE, || env.m1().status == Status::Done));
    env.assert_each_step_started_once(2, "after the fresh message's tap");
}

#[test]
fn a_step_question_answered_by_replying_to_its_message_resumes_the_step_with_the_answer() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(
        &Scenario::new().step(1, [Action::blocked("which port?"), Action::done("used it")]),
    );
    env.run_exits(3, &["start", "g", "--step", "one"]);
    assert!(wait_until(DEADLINE, || tg
        .sent()
        .iter()
        .any(|s| s.text.contains("which port?"))));
    let sent = tg.sent();
    let n = sent
        .iter()
        .rposition(|s| s.text.contains("which port?"))
        .expect("the question's message")
        + 1;
    assert!(sent[n - 1].text.contains("Reply to this message"));
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_reply(CHAT, "use 8080", n);
    assert!(wait_until(DEADLINE, || env.m1().status == Status::Done));
    let prompt = env.prompt(1);
    assert!(prompt.contains("The human answered: use 8080"), "{prompt}");
    let calls = env.calls();
    assert_eq!(calls[1]["resume"], calls[0]["session_id"]);
}

/// A loop whose step 1 of two spent its attempts (`--max-retries 1`): FAILED, on gate G1.
fn failed_on_a_gate(env: &TestLoop, after: Action) {
    env.scenario(&Scenario::new().step(1, [Action::failed("the tests do not build"), after]));
    env.run_exits(
        1,
        &TestLoop::start_args(&["one", "two"], &["--max-retries", "1"]),
    );
    env.assert_status(Status::Failed);
    let m = env.m1();
    let g = m.gate("G1").expect("a FAILED gate");
    assert_eq!(
        (g.kind, g.step, g.state),
        (GateKind::Failed, 1, GateState::Pending)
    );
    assert_eq!(g.options, ["retry", "skip", "stop"]);
    assert!(
        g.question
            .as_deref()
            .unwrap()
            .contains("the tests do not build"),
        "{g:?}"
    );
    let listed = stdout(&env.run_ok(&["gates"]));
    assert!(
        listed.contains("G1 FAILED PENDING: step 1:")
            && listed.contains("retry: run the step again with a fresh budget"),
        "{listed}"
    );
}

#[test]
fn a_failed_step_retried_on_its_gate_runs_again_with_a_fresh_budget_once() {
    let env = TestLoop::new();
    failed_on_a_gate(&env, Action::done("built"));
    env.run_ok(&["answer", "G1", "retry"]);
    env.assert_status(Status::Done);
    assert_eq!(
        env.calls_for(1),
        2,
        "one failed attempt, one after the retry"
    );
    assert_eq!(env.calls_for(2), 1);
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(g.choice.as_deref(), Some("retry"));
    let again = env.run_exits(2, &["answer", "G1", "retry", "--json"]);
    assert_eq!(json_of(&again)["outcome"], "already");
    assert_eq!(env.calls().len(), 3, "a second decision runs nothing");
    env.assert_logged("decide: gate G1 (FAILED): retry by");
}

#[test]
fn a_failed_step_skipped_from_the_shell_is_left_skipped_and_the_loop_goes_on() {
    let env = TestLoop::new();
    failed_on_a_gate(&env, Action::done("never"));
    env.run_ok(&["skip"]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Skipped);
    assert_eq!(m.plan.steps[1].state, StepState::Done);
    assert_eq!(env.calls_for(1), 1, "a skipped step does not run again");
    assert_eq!(m.gate("G1").unwrap().choice.as_deref(), Some("skip"));
}

#[test]
fn stop_on_a_gate_ends_the_loop_failed_and_loop_retry_takes_it_up_again() {
    let env = TestLoop::new();
    failed_on_a_gate(&env, Action::done("built"));
    // The loop is FAILED, and the decision says so as `loop resume` would (it exited 3, as
    // if the loop still waited).
    env.run_exits(1, &["answer", "G1", "stop"]);
    env.assert_status(Status::Failed);
    assert_eq!(env.calls().len(), 1, "stop runs nothing");
    assert!(env.m1().next_action.unwrap().contains("loop retry 1"));
    env.run_ok(&["retry"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2);
}

#[test]
fn loop_retry_answers_the_gate_of_its_step() {
    let env = TestLoop::new();
    failed_on_a_gate(&env, Action::done("built"));
    env.run_ok(&["retry"]);
    env.assert_status(Status::Done);
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(
        (g.state, g.choice.as_deref(), g.by.as_deref()),
        (GateState::Decided, Some("retry"), Some("loop retry"))
    );
    // The gate's button, tapped later, runs nothing more.
    let late = env.run_exits(2, &["answer", "G1", "skip", "--json"]);
    assert_eq!(json_of(&late)["outcome"], "already");
    assert_eq!(env.calls_for(1), 2);
}

#[test]
fn a_denied_tool_allowed_on_its_gate_is_added_to_allowed_tools_and_the_step_runs_again() {
    let env = TestLoop::new();
    super::denials::waits_on_a_denied_write(&env);
    let m = env.m1();
    let g = m.gate("G1").expect("a DENIED gate").clone();
    assert_eq!(
        (g.kind, g.tools.clone()),
        (GateKind::Denied, vec!["Write".to_owned()])
    );
    assert_eq!(g.options, ["allow", "skip", "stop"]);
    env.run_ok(&["answer", "G1", "allow"]);
    env.assert_status(Status::Done);
    assert!(
        env.text().contains("ALLOWED_TOOLS: Read,Edit,Write"),
        "{}",
        env.text()
    );
    let argv = env.calls()[1]["argv"].to_string();
    assert!(argv.contains("Write"), "{argv}");
    assert_eq!(env.calls_for(1), 2);
}

#[test]
fn a_review_past_its_retakes_accepted_on_its_gate_is_done_as_it_is() {
    use crate::support::answers::{changes, work};
    let env = TestLoop::new().with_git();
    std::fs::write(env.state().join("loop.yaml"), "review:\n  max_retakes: 1\n").unwrap();
    let still = Action::changes("still half").cost(0.02);
    env.scenario(&Scenario::new().step(1, [work("half"), changes(), work("half"), still]));
    env.run_exits(3, &["start", "g", "--step", "write a.txt"]);
    let m = env.m1();
    let g = m.gate("G1").expect("a REVIEW gate").clone();
    assert_eq!(g.kind, GateKind::Review);
    assert_eq!(g.options, ["accept", "retry", "stop"]);
    let calls = env.calls().len();
    env.run_ok(&["answer", "accept"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls().len(), calls, "accepting runs nothing");
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    let review = env
        .text()
        .lines()
        .find(|l| l.trim_start().starts_with("REVIEW: accepted by"))
        .map(str::to_owned);
    assert!(
        review.as_deref().is_some_and(|r| r.contains("still half")),
        "{}",
        env.text()
    );
}

#[test]
fn a_failed_step_retried_by_a_tap_runs_once_and_skip_from_the_chat_is_already_answered() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    failed_on_a_gate(&env, Action::done("built"));
    let (n, msg) = gate_message(&tg, "G1");
    assert!(
        msg.text.contains("FAILED at step 1 (gate G1)")
            && msg.text.contains("the tests do not build")
            && msg.text.contains("Retry: run the step again"),
        "{}",
        msg.text
    );
    let labels: Vec<String> = tg.sent()[n - 1]
        .markup
        .as_ref()
        .map(|m| {
            m["inline_keyboard"][0]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(labels, ["🔁 Retry", "⏭ Skip", "⏹ Stop"]);
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_tap(CHAT, CHAT, n, &msg.buttons()[0]);
    assert!(wait_until(DEADLINE, || env.m1().status == Status::Done));
    tg.push_message(CHAT, "/skip 1");
    assert!(wait_until(DEADLINE, || tg
        .sent()
        .iter()
        .any(|s| s.text.contains("already answered: retry"))));
    assert_eq!(env.calls_for(1), 2, "the step ran once more, not twice");
    assert_eq!(env.m1().plan.steps[0].state, StepState::Done);
}

/// Step 1's agent asks with its question tool, offering two options; once answered, it uses
/// the answer.
fn asks_which_database(env: &TestLoop) {
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::done("never said").asks(
                "Which database should the cache use?",
                ["SQLite", "Postgres"],
            ),
            Action::done("the cache uses SQLite"),
        ],
    ));
    env.run_exits(3, &["start", "g", "--step", "add a cache"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let g = m
        .gate("G1")
        .expect("an ASK gate for the question tool's call");
    assert_eq!(
        (g.kind, g.question.as_deref()),
        (GateKind::Ask, Some("Which database should the cache use?"))
    );
    assert_eq!(g.options, ["SQLite", "Postgres"]);
    assert!(
        g.tool_use
            .as_deref()
            .is_some_and(|t| t.starts_with("toolu_")),
        "{g:?}"
    );
    assert_eq!(env.calls().len(), 1);
    let argv = env.calls()[0]["argv"].to_string();
    assert!(
        argv.contains("--permission-prompt-tool") && argv.contains("mcp__loop__permit"),
        "a permission host is named, or -p offers no question tool: {argv}"
    );
}

#[test]
fn a_question_asked_with_the_agents_question_tool_waits_on_a_gate_and_the_call_gets_the_answer() {
    let env = TestLoop::new();
    asks_which_database(&env);
    env.run_ok(&["answer", "G1", "sqlite"]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1]["resume"], calls[0]["session_id"]);
    assert!(
        calls[1]["prompt"].as_str().unwrap_or_default().is_empty(),
        "the session resumes at the deferred call, with no prompt: {}",
        calls[1]["prompt"]
    );
    let hooks = env.hook_runs();
    let decisions: Vec<String> = hooks
        .iter()
        .filter(|h| h["hook"] == "PreToolUse")
        .map(|h| h["stdout"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(
        decisions[0].contains(r#""permissionDecision":"defer""#),
        "{decisions:?}"
    );
    assert!(
        decisions[1].contains(r#""permissionDecision":"allow""#)
            && decisions[1].contains(r#""Which database should the cache use?":"SQLite""#),
        "the answer goes back as the tool's input: {decisions:?}"
    );
    assert_eq!(
        env.m1().results[&1].attempts,
        Some(1),
        "a question is no failed attempt"
    );
}

#[test]
fn a_question_tool_answered_by_a_tap_resumes_the_call_once() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    asks_which_database(&env);
    let (n, msg) = gate_message(&tg, "G1");
    assert!(msg.text.contains("Which database"), "{}", msg.text);
    let _bot = start_real_bot(&env, &tg.base_url());
    tg.push_tap(CHAT, CHAT, n, &msg.buttons()[1]);
    assert!(wait_until(DEADLINE, || env.m1().status == Status::Done));
    tg.push_tap(CHAT, CHAT, n, &msg.buttons()[0]);
    assert!(wait_until(DEADLINE, || tg.count("answerCallbackQuery") == 2));
    assert_eq!(
        env.calls().len(),
        2,
        "one resume, whatever was tapped after"
    );
    assert_eq!(
        env.m1().gate("G1").unwrap().choice.as_deref(),
        Some("Postgres")
    );
}

/// Two shell decisions of one gate at once: the loser was told "another runner already runs
/// the loop" in 4 of 5 cases instead of "already decided: …" (once after a reject, which read
/// as if the plan had been approved). Issue 30.
#[test]
fn the_loser_of_two_decisions_at_once_is_told_what_was_already_decided() {
    for (round, (first, second)) in [("approve", "reject"), ("reject", "approve")]
        .into_iter()
        .cycle()
        .take(16)
        .enumerate()
    {
        let env = TestLoop::new();
        env.scenario(&crate::support::answers::passing());
        // Decided the moment the gate is written, while the runner that opened it may still be
        // on its way out.
        let mut start = env.spawn(&TestLoop::start_for_approval());
        assert!(wait_until(Duration::from_secs(30), || {
            std::fs::read_to_string(&env.file).is_ok_and(|t| t.contains("G1"))
        }));
        if round % 4 >= 2 {
            // Or once it has exited.
            start.wait(Duration::from_secs(30));
        }
        let mut a = env.cmd(&[first, "G1", "--json"]);
        let mut b = env.cmd(&[second, "G1", "--json"]);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| crate::support::run(&mut a));
            let b = s.spawn(|| crate::support::run(&mut b));
            (a.join().unwrap(), b.join().unwrap())
        });
        if round % 4 < 2 {
            start.wait(Duration::from_secs(30));
        }
        // Each says what became of its decision, as one JSON object; an error is no answer.
        let said = |out: &std::process::Output| {
            assert!(
                stdout(out).lines().any(|l| l.starts_with('{')),
                "round {round}: no answer, but: {}",
                crate::support::stderr(out)
            );
            json_of(out)
        };
        let (a, b) = (said(&a), said(&b));
        let outcomes = [a["outcome"].as_str(), b["outcome"].as_str()];
        let (won, lost) = match outcomes {
            [Some("decided"), Some("already")] => (&a, &b),
            [Some("already"), Some("decided")] => (&b, &a),
            _ => panic!("round {round}: one decision and one `already`: {a}\n{b}"),
        };
        let choice = won["gate"]["choice"].as_str().unwrap();
        let told = lost["message"].as_str().unwrap();
        assert!(
            told.starts_with(&format!("gate G1 was already decided: {choice}")),
            "round {round}: {told}"
        );
        assert!(!told.contains("another runner"), "round {round}: {told}");
        assert_eq!(env.m1().gate("G1").unwrap().choice.as_deref(), Some(choice));
        // The loop carries on, or stays stopped, as the one decision says.
        let calls = env.calls().len();
        assert_eq!(
            calls,
            if choice == "approve" { 2 } else { 0 },
            "round {round}"
        );
    }
}

/// `loop gates` for a PLAN gate did not list the plan it asks about: it lists its steps, as the
/// chat's message does.
#[test]
fn loop_gates_lists_the_plan_a_plan_gate_asks_about() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new());
    env.run_exits(
        3,
        &TestLoop::start_args(&["parse it", "ship it"], &["--approve-plan"]),
    );
    let said = stdout(&env.run_ok(&["gates"]));
    assert!(
        said.contains("G1 PLAN PENDING")
            && said.contains("1. parse it")
            && said.contains("2. ship it"),
        "{said}"
    );
}
