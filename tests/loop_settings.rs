//! `loop.yaml` beside M1.md: it sets the loop's limits, and a bad one is bad input.

mod harness;

use harness::{Env, code, stderr};
use serde_json::json;

#[test]
fn loop_yaml_limits_apply_below_flags() {
    let env = Env::new();
    env.scenario(&json!({"default": {"result": "no verdict here"}}));
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    let out = env.run(&["start", "g", "--step", "a"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(env.calls_for(1), 1, "loop.yaml allowed one attempt");

    let env = Env::new();
    env.scenario(&json!({"default": {"result": "no verdict here"}}));
    std::fs::write(env.state().join("loop.yaml"), "limits:\n  max_retries: 1\n").unwrap();
    let out = env.run(&["start", "g", "--step", "a", "--max-retries", "2"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(env.calls_for(1), 2, "the flag outranks loop.yaml");
}

#[test]
fn a_malformed_or_misspelled_loop_yaml_is_bad_input_naming_the_file() {
    for (yaml, want) in [
        ("limits:\n  max_retries: [1\n", "loop.yaml"),
        ("limits:\n  max_retrys: 2\n", "max_retrys"),
        ("limits:\n  step_timeout: soon\n", "soon"),
    ] {
        let env = Env::new();
        env.scenario(&json!({"default": {"result": "x\nSTEP_DONE: ok"}}));
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
