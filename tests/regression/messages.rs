//! Messages that said more or less than happened (issue "Fourth trial from outside", item 9):
//! each test names what a person read, and pins what they read now.

use crate::support::{TestLoop, code, stderr, stdout};

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
/// MAX_STEPS steps to run at once.
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
    let first = text
        .lines()
        .find(|l| l.contains("set up the repo"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(first.contains("already DONE"), "{text}");
    let second = text
        .lines()
        .find(|l| l.contains("write the parser"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!second.contains("DONE"), "{text}");
    assert!(text.contains("1 already DONE"), "{text}");
}
