//! The loop end to end with the simulated agent: passing, retrying, capping, planning, waiting.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use serde_json::json;

use crate::support::{TestLoop, argv, stderr, stdout};

fn done(text: &str) -> Action {
    Action::done(text).sleep_ms(20)
}

/// Every call passes.
fn passing() -> Scenario {
    Scenario::new().otherwise(done("ok"))
}

#[test]
fn three_steps_pass_and_every_result_is_recorded() {
    let env = TestLoop::new();
    env.scenario(&passing());
    env.run_ok(&[
        "start",
        "fix the bug",
        "--step",
        "one",
        "--step",
        "two",
        "--step",
        "three",
    ]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert!(m.plan.steps.iter().all(|s| s.state == StepState::Done));
    for n in 1..=3 {
        let r = &m.results[&n];
        assert_eq!(r.exit, Some(0), "step {n}");
        assert_eq!(r.summary.as_deref(), Some("ok"));
        assert_eq!(r.attempts, Some(1));
        assert!(r.session_id.is_some() && r.cost_usd.is_some() && r.duration_s.is_some());
        assert_eq!(env.calls_for(n), 1, "step {n} started once");
    }
    env.assert_no_processes();
}

#[test]
fn the_agent_gets_the_documented_invocation_and_environment() {
    let env = TestLoop::new()
        .env("CLAUDECODE", "1")
        .env("CLAUDE_CODE_ENTRYPOINT", "cli")
        .env("MY_PROJECT_VAR", "kept");
    env.scenario(&passing());
    env.run_ok(&["start", "g", "--step", "only"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 1);
    let c = &calls[0];
    let argv = argv(c);
    for flag in [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--session-id",
    ] {
        assert!(
            argv.iter().any(|a| a == flag),
            "{flag} missing from {argv:?}"
        );
    }
    assert!(!argv.iter().any(|a| a == "--resume"));
    // The prompt comes on standard input, from the task's file of it.
    assert_eq!(c["stdin_tty_or_pipe"], json!(false));
    let task = c["task_id"].as_str().unwrap();
    let input = m1loop::layout::Layout::of(&env.file).task_prompt(task);
    assert_eq!(std::fs::read_to_string(input).unwrap(), env.prompt(0));
    assert!(env.prompt(0).contains("only"));
    assert_eq!(c["claudecode_env"], json!(false));
    assert_eq!(c["entrypoint_env"], json!(false));
    assert_eq!(c["startup_failure_results"], json!("1"));
    assert_eq!(c["step"].to_string().trim_matches('"'), "1");
    assert_eq!(c["attempt"].to_string().trim_matches('"'), "1");
    assert!(c["task_id"].as_str().unwrap().starts_with("task_"));
    assert_eq!(c["loop_file"].as_str().unwrap(), env.file.to_str().unwrap());
    assert_eq!(c["cwd"].as_str().unwrap(), env.path().to_str().unwrap());
}

#[test]
fn a_failed_attempt_is_retried_in_the_same_session_with_what_failed() {
    let env = TestLoop::new();
    env.scenario(&passing().step(2, [Action::says("I could not finish."), done("fixed")]));
    env.run_ok(&["start", "g", "--step", "one", "--step", "two"]);
    let calls: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c["step"].to_string().trim_matches('"') == "2")
        .collect();
    assert_eq!(calls.len(), 2);
    let argv2 = argv(&calls[1]);
    let first_session = calls[0]["session_id"].as_str().unwrap().to_string();
    let i = argv2
        .iter()
        .position(|a| a == "--resume")
        .expect("retry resumes");
    assert_eq!(argv2[i + 1], first_session);
    assert!(!argv2.contains(&"--session-id".to_string()));
    let prompt = calls[1]["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("STEP_DONE / STEP_BLOCKED / STEP_FAILED"),
        "fix prompt: {prompt}"
    );
    assert_eq!(env.m1().results[&2].attempts, Some(2));
}

#[test]
fn an_always_failing_step_makes_exactly_max_retries_calls_and_fails_the_loop() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, Action::says("nope").exit(0)));
    env.run_exits(
        1,
        &TestLoop::start_args(&["one", "two"], &["--max-retries", "3"]),
    );
    assert_eq!(env.calls_for(1), 3);
    assert_eq!(env.calls_for(2), 0);
    let m = env.m1();
    assert_eq!(
        (m.status, m.plan.steps[0].state),
        (Status::Failed, StepState::Failed)
    );
    // Resuming a FAILED loop says so and runs nothing.
    env.run_exits(1, &["resume"]);
    assert_eq!(env.calls_for(1), 3);
}

#[test]
fn a_plan_over_max_steps_is_refused_before_anything_runs() {
    let env = TestLoop::new();
    env.scenario(&passing());
    let mut args = vec!["start", "g"];
    let texts: Vec<String> = (1..=11).map(|i| format!("step {i}")).collect();
    for t in &texts {
        args.push("--step");
        args.push(t);
    }
    let out = env.run_exits(2, &args);
    assert!(
        stderr(&out).contains("11 steps, over MAX_STEPS 10"),
        "{}",
        stderr(&out)
    );
    assert!(!env.file.exists());
    assert!(env.calls().is_empty());
}

#[test]
fn without_steps_the_agent_plans_them() {
    let env = TestLoop::new();
    env.scenario(&planned());
    env.run_ok(&["start", "g"]);
    let m = env.m1();
    let texts: Vec<&str> = m.plan.steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["read", "write"]);
    assert_eq!(m.plan.total_steps, 2);
    assert_eq!(
        (env.calls_for(0), env.calls_for(1), env.calls_for(2)),
        (1, 1, 1)
    );
}

/// The agent plans two steps, and every step passes.
fn planned() -> Scenario {
    passing().plan(Action::plan(["read", "write"]))
}

#[test]
fn a_planned_loop_prints_its_plan_before_it_spends_on_step_one() {
    let env = TestLoop::new();
    env.scenario(&planned());
    let out = env.run_ok(&["start", "g", "--quiet"]);
    let text = stdout(&out);
    let plan = text
        .find("plan: 2 step(s)\n  1. read\n  2. write")
        .expect(&text);
    let step1 = text.find("spawn: Step 1").expect(&text);
    assert!(plan < step1, "{text}");
}

#[test]
fn plan_only_plans_shows_the_plan_and_runs_no_step_until_resume() {
    let env = TestLoop::new();
    env.scenario(&planned());
    let out = env.run_ok(&["start", "g", "--plan-only"]);
    assert!(stdout(&out).contains("  2. write"), "{}", stdout(&out));
    env.assert_status(Status::Idle);
    let m = env.m1();
    assert_eq!(m.plan.steps.len(), 2);
    assert!(m.next_action.unwrap().contains("loop resume"));
    assert_eq!((env.calls_for(0), env.calls_for(1)), (1, 0));
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(
        (env.calls_for(0), env.calls_for(1), env.calls_for(2)),
        (1, 1, 1)
    );
}

#[test]
fn plan_only_with_steps_given_writes_the_loop_and_calls_no_agent() {
    let env = TestLoop::new();
    env.scenario(&passing());
    let out = env.run_ok(&["start", "g", "--step", "a", "--step", "b", "--plan-only"]);
    assert!(stdout(&out).contains("  1. a\n  2. b"), "{}", stdout(&out));
    env.assert_status(Status::Idle);
    assert!(env.calls().is_empty());
}

#[test]
fn an_unusable_plan_is_a_planning_failure_retried() {
    let env = TestLoop::new();
    env.scenario(&passing().plan([Action::says("I would rather chat."), Action::plan(["only"])]));
    env.run_ok(&["start", "g"]);
    assert_eq!(env.calls_for(0), 2);
    assert_eq!(env.m1().plan.steps.len(), 1);
}

#[test]
fn a_checklist_becomes_the_plan_and_done_steps_tick_their_box() {
    let env = TestLoop::new();
    env.scenario(&passing());
    let plan = env.path().join("TODO.md");
    let before = "# Work\n\n- [ ] first thing\n- [x] already done\n- [ ] last thing\n";
    std::fs::write(&plan, before).unwrap();
    env.run_ok(&["start", "g", "--plan", plan.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(&plan).unwrap(),
        before.replace("[ ]", "[x]")
    );
    assert_eq!(
        (env.calls_for(1), env.calls_for(2), env.calls_for(3)),
        (1, 0, 1)
    );
}

#[test]
fn a_blocked_step_waits_for_the_human_and_resume_carries_the_answer() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::blocked("keep the old API?"),
            done("used the answer"),
        ],
    ));
    env.run_exits(3, &["start", "g", "--step", "one"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert!(m.next_action.unwrap().contains("keep the old API?"));
    let text = env
        .text()
        .replace("CONSTRAINTS: (none)", "CONSTRAINTS: keep the old API");
    std::fs::write(&env.file, text).unwrap();
    env.run_ok(&["resume"]);
    let prompt = env.prompt(env.calls().len() - 1);
    assert!(
        prompt.contains("keep the old API?") && prompt.contains("CONSTRAINTS: keep the old API")
    );
    assert_eq!(
        env.m1().results[&1].attempts,
        Some(1),
        "a question is not a failed attempt"
    );
}

#[test]
fn permission_denials_put_the_loop_in_waiting_naming_the_tool() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("x").denied(["Bash"])));
    env.run_exits(3, &["start", "g", "--step", "one"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert!(m.last_action.unwrap().contains("Bash"));
    assert!(
        m.next_action
            .unwrap()
            .contains("`ALLOWED_TOOLS:` under AGENT")
    );
}

#[test]
fn a_transient_error_is_waited_out_without_spending_an_attempt() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [Action::overloaded(), done("ok")]));
    env.run_ok(&["start", "g", "--step", "one"]);
    let m = env.m1();
    assert_eq!(m.results[&1].attempts, Some(1));
    assert_eq!(m.results[&1].transient, 1);
    env.assert_logged("backoff 2s");
}

#[test]
fn a_usage_limit_waits_for_its_reset_and_carries_on() {
    let env = TestLoop::new();
    let reset = chrono::Utc::now().timestamp() + 2;
    env.scenario(&Scenario::new().step(1, [Action::usage_limit(reset), done("ok")]));
    env.run_ok(&["start", "g", "--step", "one"]);
    assert!(
        chrono::Utc::now().timestamp() >= reset,
        "it waited for the reset"
    );
    env.assert_logged("usage limit");
    assert_eq!(env.m1().results[&1].attempts, Some(1));
}

#[test]
fn a_step_that_commits_has_its_new_head_recorded() {
    let env = TestLoop::new();
    let git = |args: &[&str]| env.git(args).trim().to_string();
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    env.scenario(&Scenario::new().otherwise(Action::done("made it").write("out.txt", "made\n")));
    let verify =
        "git add out.txt && git -c user.name=t -c user.email=t@example.invalid commit -qm step";
    env.run_ok(&["start", "g", "--step", "make it", "--verify", verify]);
    let head = git(&["rev-parse", "--short=7", "HEAD"]);
    assert_eq!(env.m1().results[&1].commit.as_deref(), Some(head.as_str()));
}

#[test]
fn a_second_runner_is_refused_naming_the_first() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(3000)));
    let mut first = env.spawn(&["start", "g", "--step", "one"]);
    env.wait_for_calls(1, 1);
    let out = env.run_exits(2, &["resume"]);
    assert!(
        stderr(&out).contains(&format!("pid {}", first.pid())),
        "{}",
        stderr(&out)
    );
    assert!(first.wait(Duration::from_secs(30)).success());
}

#[test]
fn resuming_a_done_loop_says_so() {
    let env = TestLoop::new();
    env.scenario(&passing());
    env.run_ok(&["start", "g", "--step", "one"]);
    let out = env.run_ok(&["resume"]);
    assert!(stdout(&out).contains("DONE"), "{}", stdout(&out));
    assert_eq!(env.calls_for(1), 1);
}

#[test]
fn start_refuses_to_replace_a_live_loop_without_force_and_archives_with_it() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::blocked("?")));
    env.run_exits(3, &["start", "first", "--step", "one"]);
    let out = env.run_exits(2, &["start", "second", "--step", "one"]);
    assert!(stderr(&out).contains("WAITING"), "{}", stderr(&out));
    assert_eq!(env.m1().goal, "first");
    env.scenario(&passing());
    env.run_ok(&["start", "second", "--step", "one", "--force"]);
    assert_eq!(env.m1().goal, "second");
    let archived: Vec<_> = std::fs::read_dir(env.state())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("M1.2"))
        .collect();
    assert_eq!(archived.len(), 1);
}

/// A step's agent inherited `TELEGRAM_BOT_TOKEN` (a step ran `env` and found it). No agent
/// run (planning, attempt, review) gets the loop's own Telegram settings, nor VERIFY, whose
/// output's tail goes into the agent's next prompt; the loop itself still notifies.
#[test]
fn no_agent_run_nor_verify_sees_the_loops_telegram_credentials() {
    let tg = crate::support::telegram_fake::FakeTelegram::start();
    let env = crate::support::bot::with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().plan(Action::plan(["one", "two"])));
    let verify = "env | grep '^TELEGRAM_' && exit 1; exit 0";
    env.run_ok(&["start", "g", "--review", "--verify", verify]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert!(
        calls.iter().any(|c| c["step"] == json!(0)),
        "a planning call"
    );
    assert!(calls.iter().any(|c| c["review"] == json!(true)), "a review");
    for c in &calls {
        let names = c["env_names"].as_array().expect("the call's variables");
        assert!(names.iter().any(|n| n == "LOOP_FILE"), "{names:?}");
        let seen: Vec<_> = names
            .iter()
            .filter(|n| n.as_str().is_some_and(|n| n.starts_with("TELEGRAM_")))
            .collect();
        assert!(seen.is_empty(), "{} saw {seen:?}", c["task_id"]);
    }
    assert!(!tg.sent().is_empty(), "the loop itself still notifies");
}
