//! Messages that said more or less than happened (issue "Fourth trial from outside", item 9):
//! each test names what a person read, and pins what they read now.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::bot::with_telegram;
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, code, line_with, stderr, stdout};

/// `loop gates` where no loop is printed the raw `No such file or directory (os error 2)`,
/// where every other command says there is no loop and how to start one.
#[test]
fn loop_gates_without_a_loop_says_there_is_none_not_a_raw_os_error() {
    let env = TestLoop::new();
    let out = env.run(&["gates"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(!err.contains("os error"), "{err}");
    assert!(
        err.starts_with("loop: no loop at ") && err.contains("loop start"),
        "{err}"
    );
}

/// `loop status --file DIR` said `DIR: not a regular file…` without the `loop:` every other
/// command's error starts with.
#[test]
fn loop_status_of_a_directory_speaks_as_every_command_does() {
    let env = TestLoop::new();
    let out = env.run(&["status", "--file", env.state().to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.starts_with("loop: ") && err.contains("not a regular file but a directory"),
        "{err}"
    );
}

/// `--parallel -1` was refused as an unknown argument, with the tip to write `-- -1`, which
/// is refused too. A negative number is a value, refused for what it is.
#[test]
fn a_negative_number_for_a_flag_is_refused_as_a_bad_value_with_no_tip_that_fails_too() {
    let env = TestLoop::new();
    for flag in ["--parallel", "--max-retries", "--max-steps", "--max-turns"] {
        let out = env.run(&["start", "g", "--step", "a", flag, "-1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{flag}: {err}");
        assert!(
            !err.contains("'-- -1'") && !err.contains("unexpected argument"),
            "{flag}: {err}"
        );
        assert!(
            err.contains(&format!("invalid value '-1' for '{flag}")),
            "{flag}: {err}"
        );
    }
    let out = env.run(&["start", "g", "--step", "a", "--max-cost-usd", "-1"]);
    let err = stderr(&out);
    assert!(err.contains("expected an amount in US dollars"), "{err}");
    assert!(!env.file.exists(), "nothing was started");
}

/// `loop strat` suggested the internal `__starter` beside `start` and `status`.
#[test]
fn a_mistyped_command_is_never_told_to_try_an_internal_one() {
    let env = TestLoop::new();
    for typo in ["strat", "supervise", "revive", "deliver"] {
        let out = env.run(&[typo]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{err}");
        assert!(!err.contains("__"), "{typo}: {err}");
    }
    let err = stderr(&env.run(&["strat"]));
    assert!(err.contains("'start'") && err.contains("'status'"), "{err}");
}

/// `--parallel 1000` was accepted without a word, although no plan may hold more than
/// `MAX_STEPS` steps to run at once.
#[test]
fn parallel_above_the_steps_a_plan_may_have_is_refused() {
    let env = TestLoop::new().with_git();
    let out = env.run(&["start", "g", "--step", "a", "--parallel", "1000"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("--parallel 1000") && err.contains("MAX_STEPS 10"),
        "{err}"
    );
    assert!(!env.file.exists(), "nothing was started");
    // Up to the cap is fine, and a raised cap raises it.
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "a",
        "--parallel",
        "12",
        "--max-steps",
        "12",
        "--plan-only",
    ]);
}

/// `loop start --plan TODO.md --plan-only` listed a ticked `- [x]` item as any other step,
/// without saying it is already DONE and will not run.
#[test]
fn plan_only_says_which_imported_steps_are_already_done() {
    let env = TestLoop::new();
    let plan = env.temp.join("TODO.md");
    std::fs::write(&plan, "- [x] set up the repo\n- [ ] write the parser\n").unwrap();
    let out = env.run_ok(&[
        "start",
        "g",
        "--plan",
        plan.to_str().unwrap(),
        "--plan-only",
    ]);
    let text = stdout(&out);
    let first = line_with(&text, "set up the repo");
    assert!(first.contains("already DONE"), "{text}");
    let second = line_with(&text, "write the parser");
    assert!(!second.contains("DONE"), "{text}");
    assert!(text.contains("1 already DONE"), "{text}");
}

/// The live line read `result: done` for an attempt whose answer ended `STEP_FAILED`, or asked
/// a question: the line now says what the answer's verdict line said.
#[test]
fn the_live_line_says_what_the_answer_ended_with_not_done() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [Action::failed("the build is red"), Action::done("fixed")],
            )
            .step(2, Action::blocked("which database?")),
    );
    let out = env.run_exits(3, &["start", "g", "--step", "a", "--step", "b"]);
    let text = stdout(&out);
    let live: Vec<&str> = text.lines().filter(|l| l.starts_with("  … ")).collect();
    let of = |label: &str| {
        live.iter()
            .rfind(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no live line of {label}: {text}"))
            .to_owned()
    };
    let failed = of("  … step 1 attempt 1 ");
    assert!(
        failed.contains("result: STEP_FAILED: the build is red")
            && !failed.contains("result: done"),
        "{failed}"
    );
    assert!(
        of("  … step 1 attempt 2 ").contains("result: done"),
        "{text}"
    );
    let asked = of("  … step 2 attempt 1 ");
    assert!(
        asked.contains("result: asks: which database?") && !asked.contains("result: done"),
        "{asked}"
    );
}

/// A Codex loop, which reports tokens and no dollars, ended `DONE: … $0.00 and 2,100 tokens`
/// and its DONE message said `$0.00`: what it spent is its tokens.
#[test]
fn a_codex_loop_tells_its_tokens_not_zero_dollars() {
    let env = TestLoop::new().env("LOOP_AGENT_CODEX", crate::support::SIM);
    env.scenario(&Scenario::new());
    let out = env.run_ok(&TestLoop::start_args(&["a", "b"], &["--backend", "codex"]));
    let err = stderr(&out);
    let closing = err
        .lines()
        .find(|l| l.starts_with("loop: DONE"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        closing.contains("2,100 tokens") && !closing.contains('$'),
        "{closing}"
    );
    let log = env.log();
    let done = line_with(&log, "notify (done)");
    assert!(
        done.contains("2,100 tokens") && !done.contains('$'),
        "{done}"
    );
}

/// A failed step's gate said "or tap an option on Telegram" where Telegram was not set up: in
/// `NEXT_ACTION`, the closing line and `loop status`. Said only where a chat is set up.
#[test]
fn a_gate_names_telegram_only_where_telegram_is_set_up() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, Action::failed("no")));
    let out = env.run_exits(1, &["start", "g", "--step", "a", "--max-retries", "1"]);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(said.contains("loop answer G1"), "{said}");
    assert!(!said.contains("Telegram"), "{said}");
    let m = env.m1();
    let next = m.next_action.clone().unwrap_or_default();
    assert!(
        next.contains("loop answer G1") && !next.contains("Telegram"),
        "{next}"
    );
    let status = stdout(&env.run_ok(&["status"]));
    let gate = line_with(&status, "decide with `loop answer G1");
    assert!(!gate.contains("Telegram"), "{status}");
    // With a chat set up, the same gate says it can be decided there too.
    let tg = FakeTelegram::start();
    let env = with_telegram(env, &tg.base_url());
    let status = stdout(&env.run_ok(&["status"]));
    let gate = line_with(&status, "decide with `loop answer G1");
    assert!(gate.contains("or tap an option on Telegram"), "{status}");
}

/// `loop status`'s RUNNER line for a loop of one step whose runner was killed during the step.
fn runner_line_once_the_runner_died(env: &TestLoop) -> String {
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(2500)));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    let status = stdout(&env.run_ok(&["status"]));
    let line = status
        .lines()
        .find(|l| l.starts_with("RUNNER"))
        .unwrap_or_else(|| panic!("{status}"));
    line.to_owned()
}

/// `loop status` said "RUNNER none: `loop resume` carries the loop on" while the step's
/// supervisor was about to revive the loop by itself, as it did 20 s later: it says so now.
#[test]
fn status_says_a_loop_without_a_runner_comes_back_by_itself_when_its_step_ends() {
    let env = TestLoop::new().env("LOOP_REVIVE", "on");
    let line = runner_line_once_the_runner_died(&env);
    assert!(
        line.contains("when the step ends, its supervisor starts one"),
        "{line}"
    );
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    // Without revival, `loop resume` is what carries it on.
    let env = TestLoop::new();
    let line = runner_line_once_the_runner_died(&env);
    assert!(
        line.contains("`loop resume`") && !line.contains("supervisor"),
        "{line}"
    );
}

/// `STATUS: WAITING` set by hand paused the loop after its step, as it should, but left
/// `NEXT_ACTION` naming the next step as if it were running: it says how to carry on.
#[test]
fn a_pause_by_hand_says_loop_resume_carries_on() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").bash(&env.hold())));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    env.save_then_go_on(|t| t.replacen("STATUS: RUNNING", "STATUS: WAITING", 1));
    assert_eq!(runner.wait(Duration::from_secs(30)).code(), Some(3));
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let next = m.next_action.unwrap_or_default();
    assert!(
        next.contains("Paused by hand")
            && next.contains("`loop resume`")
            && next.contains("step 2"),
        "{next}\n{}",
        env.log()
    );
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
}

/// `loop doctor` failed three checks on the simulated agent the README tells people to try
/// (`--version` and `--help` unknown to it, and the `SessionStart` hook never run), and did
/// not say that it checks the program the loop's `M1.md` pins rather than `LOOP_AGENT`.
#[test]
fn doctor_passes_on_the_simulated_agent_and_names_the_program_it_checks() {
    let env = TestLoop::new();
    let config = env.temp.join("config");
    let env = env
        .env("XDG_CONFIG_HOME", config)
        .env("LOOP_AGENT_CODEX", crate::support::SIM);
    env.scenario(&Scenario::new());
    let out = env.run_for(
        &["doctor", "--backend", "claude", "--backend", "codex"],
        Duration::from_secs(120),
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    assert!(text.contains("the SessionStart hook fired"), "{text}");
    let program = |text: &str| {
        text.lines()
            .find(|l| l.contains("claude: program"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    };
    assert!(program(&text).contains("LOOP_AGENT: "), "{text}");
    assert!(program(&text).contains("claude-sim"), "{text}");
    // Once a loop pins its program, that is what doctor checks, whatever this shell says.
    env.run_ok(&["start", "g", "--step", "a", "--plan-only"]);
    let other = env.env("LOOP_AGENT", "claude");
    let text = stdout(&other.run_for(&["doctor"], Duration::from_secs(120)));
    let row = program(&text);
    assert!(
        row.contains("AGENT.PROGRAM of ") && row.contains("(over LOOP_AGENT=claude)"),
        "{row}"
    );
    assert!(row.contains("claude-sim"), "{row}");
}
