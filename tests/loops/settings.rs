//! Settings: `loop start` writes every setting that changes what runs into M1.md, and from
//! then on M1.md wins over `loop.yaml` and the environment, in a detached, resumed or revived
//! runner alike. Bad values are refused before anything changes. A bad `loop.yaml` is bad
//! input.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::procs::{running, sigkill};
use crate::support::{Guard, TestLoop, argv, code, flag_value, stderr, stdout, wait_until};

/// Every call answers without a verdict: a failed attempt each time.
fn failing() -> Scenario {
    Scenario::new().otherwise(Action::says("no verdict here"))
}

#[test]
fn loop_yaml_limits_apply_below_flags() {
    let env = TestLoop::new();
    env.scenario(&failing());
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    env.run_exits(1, &["start", "g", "--step", "a"]);
    assert_eq!(env.calls_for(1), 1, "loop.yaml allowed one attempt");

    let env = TestLoop::new();
    env.scenario(&failing());
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    env.run_exits(1, &["start", "g", "--step", "a", "--max-retries", "2"]);
    assert_eq!(env.calls_for(1), 2, "the flag outranks loop.yaml");
}

#[test]
fn a_malformed_or_misspelled_loop_yaml_is_bad_input_naming_the_file() {
    for (yaml, want) in [
        ("limits:\n  max_retries: [1\n", "loop.yaml"),
        ("limits:\n  max_retrys: 2\n", "max_retrys"),
        ("limits:\n  step_timeout: soon\n", "soon"),
    ] {
        let env = TestLoop::new();
        env.scenario(&Scenario::new().otherwise(Action::done("ok")));
        std::fs::write(env.state().join("loop.yaml"), yaml).unwrap();
        let out = env.run(&["start", "g", "--step", "a"]);
        assert_eq!(code(&out), 2, "{yaml:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("loop.yaml") && err.contains(want),
            "{yaml:?}: {err}"
        );
        assert!(!env.file.exists(), "nothing started");
        assert!(env.calls().is_empty());
    }
}

/// The pid `loop start --detach` printed for its background runner.
fn runner_pid(out: &std::process::Output) -> i32 {
    let text = stdout(out);
    let at = text
        .find("(pid ")
        .unwrap_or_else(|| panic!("no pid in {text}"))
        + 5;
    text[at..]
        .split(')')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text}"))
}

/// `kill -9 pid`, then waits until it is gone (or a zombie nobody reaps yet).
fn kill9(pid: i32) {
    sigkill(pid);
    let gone = wait_until(Duration::from_secs(10), || !running(pid));
    assert!(gone, "runner {pid} survived kill -9");
}

#[test]
fn permission_mode_and_tools_survive_detach_kill_and_resume() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("ok").sleep_ms(1500).heartbeat_ms(100))
            .otherwise(Action::done("ok").sleep_ms(10)),
    );
    // loop.yaml says otherwise for everything the flags set: it is only a default.
    std::fs::write(
        env.state().join("loop.yaml"),
        "agent:\n  permission_mode: default\n  allowed_tools: [Write]\n  model: opus\n  \
         max_turns: 99\n  max_budget_usd: 9\n  extra_args: [\"--verbose\"]\nverify: \"false\"\n",
    )
    .unwrap();
    let out = env.run(&TestLoop::start_args(
        &["a", "b"],
        &[
            "--permission-mode",
            "plan",
            "--allowed-tools",
            "Read,Grep",
            "--model",
            "sonnet",
            "--max-turns",
            "7",
            "--max-budget-usd",
            "1.5",
            "--verify",
            "true",
            "--detach",
        ],
    ));
    env.assert_exit(&out, 0);
    let text = env.text();
    for line in [
        "  PERMISSION_MODE: plan\n",
        "  ALLOWED_TOOLS: Read,Grep\n",
        "  MODEL: sonnet\n",
        "  MAX_TURNS: 7\n",
        "  MAX_BUDGET_USD: 1.5\n",
        "  EXTRA_ARGS: --verbose\n",
        "VERIFY: true\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    env.wait_for_calls(1, 1);
    kill9(runner_pid(&out));
    // The file names the agent: a different LOOP_AGENT now is only a default.
    let mut resume = env.cmd(&["resume"]);
    resume.env("LOOP_AGENT", env.temp.path().join("no-such-agent"));
    let errors = env.temp.path().join("resume.stderr");
    resume.stderr(std::fs::File::create(&errors).unwrap());
    let status = Guard::spawn(&mut resume).wait(Duration::from_secs(60));
    assert!(
        status.success(),
        "{status:?}\n{}\n{}\n{}",
        std::fs::read_to_string(&errors).unwrap_or_default(),
        env.log(),
        env.text()
    );
    let m = env.m1();
    assert_eq!(
        m.results[&2].verified,
        Some(true),
        "VERIFY from M1.md, not loop.yaml"
    );
    for step in [1, 2] {
        assert_called_with_the_flags(&env, step);
    }
    env.assert_no_processes();
}

/// The step's one call got what `loop start`'s flags set, and loop.yaml's extra argument.
#[track_caller]
fn assert_called_with_the_flags(env: &TestLoop, step: u64) {
    let calls: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c["step"].as_u64() == Some(step))
        .collect();
    assert_eq!(calls.len(), 1, "step {step}");
    let call = &calls[0];
    let argv = argv(call);
    for (flag, want) in [
        ("--permission-mode", "plan"),
        ("--model", "sonnet"),
        ("--max-turns", "7"),
        ("--max-budget-usd", "1.5"),
    ] {
        assert_eq!(flag_value(call, flag).as_deref(), Some(want), "{argv:?}");
    }
    let tools = argv.iter().position(|a| a == "--allowedTools").unwrap();
    assert_eq!(argv[tools + 1..tools + 3], ["Read", "Grep"], "{argv:?}");
    assert!(argv[tools + 3].starts_with("--"), "{argv:?}");
    assert_eq!(
        argv.last().map(String::as_str),
        Some("--verbose"),
        "{argv:?}"
    );
}

#[test]
fn max_retries_from_start_and_by_hand_win_over_loop_yaml() {
    let failing = Scenario::new().otherwise(
        Action::says("no verdict here")
            .sleep_ms(600)
            .heartbeat_ms(100),
    );
    // The flag, written into M1.md, holds in a detached runner.
    let env = TestLoop::new();
    env.scenario(&failing);
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    let out = env.run(&[
        "start",
        "g",
        "--step",
        "a",
        "--max-retries",
        "2",
        "--detach",
    ]);
    env.assert_exit(&out, 0);
    assert!(env.text().contains("  MAX_RETRIES: 2\n"), "{}", env.text());
    assert!(wait_until(Duration::from_secs(30), || {
        env.m1().status == Status::Failed
    }));
    assert_eq!(env.calls_for(1), 2, "M1.md allowed two attempts");
    env.assert_no_processes();

    // A hand edit of the line wins too.
    let env = TestLoop::new();
    env.scenario(&failing);
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let text = env.text();
    assert!(text.contains("  MAX_RETRIES: 1\n"), "{text}");
    std::fs::write(
        &env.file,
        text.replace("  MAX_RETRIES: 1\n", "  MAX_RETRIES: 3\n"),
    )
    .unwrap();
    assert_eq!(runner.wait(Duration::from_secs(60)).code(), Some(1));
    assert_eq!(env.calls_for(1), 3, "the hand edit allowed three attempts");
}

#[test]
fn a_step_timeout_of_seconds_is_stored_exactly_and_enforced_after_a_resume() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().otherwise(Action::done("ok").sleep_ms(120_000).heartbeat_ms(100)),
    );
    let out = env.run(&[
        "start",
        "g",
        "--step",
        "a",
        "--step-timeout",
        "3s",
        "--idle-timeout",
        "90s",
        "--max-cost-usd",
        "4.5",
        "--max-retries",
        "2",
        "--detach",
    ]);
    env.assert_exit(&out, 0);
    let text = env.text();
    for line in [
        "  STEP_TIMEOUT: 3s\n",
        "  IDLE_TIMEOUT: 1m30s\n",
        "  MAX_COST_USD: 4.5\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    env.wait_for_calls(1, 1);
    kill9(runner_pid(&out));
    // The second attempt is the resumed runner's: it too ends after 3 s, not 60 min.
    let started = std::time::Instant::now();
    let out = env.run_for(&["resume"], Duration::from_secs(60));
    env.assert_exit(&out, 1);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(env.calls_for(1), 2);
    let m = env.m1();
    let err = m.results[&1].error.clone().unwrap_or_default();
    assert!(err.contains("killed after 3 s"), "{err}");
    env.assert_no_processes();
}

#[test]
fn old_files_with_timeouts_in_minutes_still_run() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(10)));
    std::fs::write(
        &env.file,
        "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [PENDING] a\nLIMITS:\n  \
         STEP_TIMEOUT_MIN: 2\n  IDLE_TIMEOUT_MIN: 1\n",
    )
    .unwrap();
    env.run_ok(&["resume"]);
    assert_eq!(env.calls_for(1), 1);
    assert!(env.text().contains("  STEP_TIMEOUT_MIN: 2\n"));
}

const OLD_LOOP: &str =
    "STATUS: RUNNING  # an old loop\nGOAL: old\nPLAN:\n  STEPS:\n    1: [PENDING] x\n";

#[test]
fn a_zero_step_timeout_is_refused_before_anything_changes() {
    let env = TestLoop::new();
    std::fs::write(&env.file, OLD_LOOP).unwrap();
    for flag in ["--step-timeout", "--idle-timeout"] {
        env.assert_refused(
            &["start", "g", "--step", "a", "--force", flag, "0s"],
            |_| {},
            "above zero",
        );
    }
    for (flag, value) in [
        ("--max-retries", "0"),
        ("--max-steps", "0"),
        ("--max-turns", "0"),
    ] {
        env.assert_refused(
            &["start", "g", "--step", "a", "--force", flag, value],
            |_| {},
            flag,
        );
    }
    env.assert_refused(
        &[
            "start",
            "g",
            "--step",
            "a",
            "--force",
            "--permission-mode",
            "yolo",
        ],
        |_| {},
        "unknown permission mode `yolo`",
    );
    env.assert_refused(
        &["start", "g", "--force", "--plan", "missing.md"],
        |_| {},
        "missing.md",
    );
    std::fs::write(
        env.state().join("loop.yaml"),
        "limits:\n  step_timeout: 0s\n",
    )
    .unwrap();
    env.assert_refused(
        &["start", "g", "--step", "a", "--force"],
        |_| {},
        "step_timeout",
    );
}

#[test]
fn a_missing_agent_is_refused_before_anything_changes_with_how_to_install_it() {
    let env = TestLoop::new();
    std::fs::write(&env.file, OLD_LOOP).unwrap();
    let install = "npm install -g @anthropic-ai/claude-code";
    let start = ["start", "g", "--step", "a", "--force"];
    let missing = env.temp.path().join("no-such-agent");
    env.assert_refused(
        &start,
        |c| {
            c.env("LOOP_AGENT", &missing);
        },
        install,
    );
    let plain = env.temp.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    env.assert_refused(
        &start,
        |c| {
            c.env("LOOP_AGENT", &plain);
        },
        "not an executable",
    );
    let empty_path = env.temp.path().join("empty-path");
    std::fs::create_dir(&empty_path).unwrap();
    env.assert_refused(
        &start,
        |c| {
            c.env_remove("LOOP_AGENT").env("PATH", &empty_path);
        },
        "`claude` is not on PATH",
    );
    env.assert_refused(
        &["start", "g", "--step", "a", "--force", "--detach"],
        |c| {
            c.env("LOOP_AGENT", &missing);
        },
        "LOOP_AGENT",
    );
    // A resume checks the agent the file names before it runs anything.
    env.assert_refused(
        &["resume"],
        |c| {
            c.env("LOOP_AGENT", &missing);
        },
        install,
    );
    env.assert_refused(
        &["resume", "--detach"],
        |c| {
            c.env("LOOP_AGENT", &missing);
        },
        install,
    );
}

/// A loop started with its settings in the environment, decided by a tap to a `loop telegram`
/// started earlier without them, carried on without them and said DONE with nothing done.
/// The loop records the names its runs use (`ENV`); a runner carries it on only where they are
/// set, whoever starts it: the shell, the chat bot (which runs `loop answer`), the daemon.
#[test]
fn a_decision_from_an_environment_without_the_loops_variables_carries_nothing_on_and_says_what() {
    let env = TestLoop::new().env("APP_TOKEN", "abc");
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [Action::blocked("which colour?"), Action::done("blue it is")],
            )
            .otherwise(Action::done("ok")),
    );
    env.run_exits(
        3,
        &["start", "g", "--step", "one", "--sandbox-env", "APP_TOKEN"],
    );
    assert!(
        env.text().contains("ENV: APP_TOKEN"),
        "the names are kept: {}",
        env.text()
    );
    let before = env.text();
    // Decided from where the variable is not set: refused, nothing decided, nothing run.
    let mut answer = env.cmd(&["answer", "G1", "blue"]);
    answer.env_remove("APP_TOKEN");
    let out = crate::support::run(answer);
    env.assert_exit(&out, 2);
    let said = stderr(&out) + &stdout(&out);
    assert!(
        said.contains("this environment lacks APP_TOKEN")
            && said.contains("nothing was carried on"),
        "{said}"
    );
    assert_eq!(env.text(), before, "nothing was decided");
    assert_eq!(env.calls_for(1), 1);
    // From where it is: decided, and carried on with it.
    env.run_ok(&["answer", "G1", "blue"]);
    env.assert_status(Status::Done);
}

/// `--backend claude` and `--parallel 1` name the defaults, which M1.md leaves out; with
/// `loop.yaml` saying otherwise, the loop ran with what `loop.yaml` said once M1.md was read
/// again (a resumed runner, and since the one merge the first one too). A setting given
/// over `loop.yaml` is written, default or not.
#[test]
fn a_flag_that_names_the_default_over_loop_yaml_is_written_into_m1() {
    let env = TestLoop::new();
    std::fs::write(
        env.state().join("loop.yaml"),
        "agent:\n  backend: codex\nlimits:\n  parallel: 3\n",
    )
    .unwrap();
    env.run_exits(
        0,
        &[
            "start",
            "g",
            "--step",
            "a",
            "--backend",
            "claude",
            "--parallel",
            "1",
            "--plan-only",
        ],
    );
    let text = env.text();
    assert!(text.contains("  BACKEND: claude\n"), "{text}");
    assert!(text.contains("  PARALLEL: 1\n"), "{text}");
}

/// A relative path in the sandbox's lists, from the environment or `loop.yaml`, was refused
/// with a line and column of an M1.md that did not exist (`25:17: `data` is neither…`), or,
/// from the environment, dropped without a word: the runs went without the grant. Each is
/// refused where it was given: the variable, or `loop.yaml` at its line and column.
#[test]
fn a_relative_sandbox_path_from_the_environment_or_loop_yaml_is_refused_where_it_was_given() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let mut cmd = env.cmd(&["start", "g", "--step", "a"]);
    cmd.env("LOOP_SANDBOX_READ", "/opt/sdk, data");
    let out = crate::support::run(cmd);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("LOOP_SANDBOX_READ") && err.contains("`data`"),
        "{err}"
    );
    assert!(!env.file.exists(), "nothing started");

    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    std::fs::write(
        env.state().join("loop.yaml"),
        "agent:\n  sandbox_write:\n    - /opt/cache\n    - build\n",
    )
    .unwrap();
    let out = env.run(&["start", "g", "--step", "a"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("loop.yaml:4:")
            && err.contains("agent.sandbox_write")
            && err.contains("`build`"),
        "{err}"
    );
    assert!(!env.file.exists(), "nothing started");
}

/// `--sandbox-read data` was refused with a line and column of an M1.md that did not exist. A
/// path given on the command line is the shell's: taken from the directory `loop` runs in, and
/// kept whole in M1.md.
#[test]
fn a_relative_sandbox_path_given_as_a_flag_is_taken_from_the_current_directory() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    std::fs::create_dir(env.path().join("data")).unwrap();
    env.run_ok(&["start", "g", "--step", "a", "--sandbox-read", "data"]);
    let read = env.m1().agent.sandbox_read.unwrap_or_default();
    let data = env.path().join("data").display().to_string();
    assert!(read.contains(&data), "{data} in {read:?}");
}
