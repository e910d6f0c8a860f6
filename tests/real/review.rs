//! The reviewer's call, as the loop builds it, against the real CLI: it cannot change the
//! project even where a user's rule would allow the tool.

use m1loop::agent::{AgentConfig, Session, invocation, new_session_id};
use m1loop::engine::RunKind;
use m1loop::m1::Document;

use crate::support::real_cli::{Mock, VERSIONS, claude_or_skip, run_with_mock};
use crate::support::{PATIENCE, Temp, summary};

/// A git project whose local settings allow `Bash(touch:*)` (what "don't ask again" leaves),
/// and a HOME whose settings allow Bash, Write and Edit; the reviewer is asked to review and
/// the model answers with `touch made_by_reviewer.txt`.
fn reviewer_runs_touch(version: &str) {
    let Some(claude) = claude_or_skip(version) else {
        return;
    };
    let t = Temp::new();
    let project = t.join("project");
    t.write(
        "project/.claude/settings.local.json",
        r#"{"permissions":{"allow":["Bash(touch:*)"]}}"#,
    );
    t.write(
        "home/.claude/settings.json",
        r#"{"permissions":{"allow":["Bash","Write","Edit"]}}"#,
    );
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status()
        .unwrap();
    assert!(git.success());
    let m = Document::parse("STATUS: RUNNING\nGOAL: g\n")
        .unwrap()
        .view();
    let program = claude.display().to_string();
    let cfg = RunKind::Review.agent_config(
        AgentConfig {
            program,
            ..AgentConfig::default()
        },
        &m,
    );
    let inv = invocation(&cfg, "Review the step.", &Session::New(new_session_id()));
    let mut cmd = inv.command();
    cmd.current_dir(&project).env("HOME", t.join("home"));
    let mock = Mock {
        tool: "Bash",
        command: "touch made_by_reviewer.txt",
        env: &[],
    };
    let prompt = t.write("prompt.md", &inv.input);
    let out = run_with_mock(&cmd, &mock, Some(&prompt), PATIENCE);
    let stream = summary(&out.stdout);
    assert!(
        stream.result.as_ref().is_some_and(|r| !r.is_error),
        "{version}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stream.unavailable_tools,
        ["Bash"],
        "{version}: Bash was offered"
    );
    assert!(
        !project.join("made_by_reviewer.txt").exists(),
        "{version}: the reviewer changed the project"
    );
}

#[test]
fn the_reviewer_cannot_run_a_tool_a_users_rule_allows_on_the_real_cli_2_1_330() {
    reviewer_runs_touch(VERSIONS[0]);
}

#[test]
fn the_reviewer_cannot_run_a_tool_a_users_rule_allows_on_the_real_cli_2_1_197() {
    reviewer_runs_touch(VERSIONS[1]);
}
