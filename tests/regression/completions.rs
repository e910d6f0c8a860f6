//! Shell completions and the manual page, generated from the command line's own definition:
//! every command a person may type, and none of the internal ones a runner starts.

use crate::support::{TestLoop, code, stdout};

/// The commands a person types (not the internal `__…` ones).
const PUBLIC: &[&str] = &[
    "start",
    "resume",
    "retry",
    "status",
    "gates",
    "answer",
    "stop",
    "doctor",
    "telegram",
    "daemon",
    "service",
    "completions",
    "man",
];

/// The commands a runner starts, never a person.
const INTERNAL: &[&str] = &["__starter", "__supervise", "__deliver", "__revive"];

#[test]
fn completions_are_printed_for_each_shell_with_every_command_and_no_internal_one() {
    let env = TestLoop::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env.run(&["completions", shell]);
        let text = stdout(&out);
        assert_eq!(code(&out), 0, "{shell}: {text}");
        for c in PUBLIC {
            assert!(text.contains(c), "{shell}: no `{c}` in\n{text}");
        }
        for internal in INTERNAL {
            assert!(!text.contains(internal), "{shell}: {internal} is offered");
        }
    }
    let out = env.run(&["completions", "tcsh"]);
    assert_eq!(code(&out), 2, "a shell it cannot complete in is bad input");
}

#[test]
fn the_man_page_is_roff_naming_every_command_and_no_internal_one() {
    let env = TestLoop::new();
    let out = env.run(&["man"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.starts_with(".ie") || text.contains(".TH loop"),
        "{text}"
    );
    for c in PUBLIC {
        assert!(text.contains(c), "no `{c}` in the man page");
    }
    assert!(
        !text.contains("__"),
        "an internal command is in the man page"
    );
    assert!(
        text.contains("LOOP_FILE"),
        "the environment is in the man page"
    );
}
