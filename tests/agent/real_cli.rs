//! A whole loop of the real Claude Code CLI, installed from npm (skipped, saying so, where it
//! cannot be), against the loopback Messages API mock: the step passes on the CLI's own answer,
//! and `loop status` names the transcript the CLI kept of it.

use m1loop::m1::Status;

use crate::support::real_cli::{Mock, VERSIONS, claude_loop_or_skip, run_with_mock};
use crate::support::{PATIENCE, TestLoop, stdout};

fn a_step_passes_and_its_transcript_is_found(version: &str) {
    // The CLI names a project's directory of transcripts after its path, every character but
    // a letter or digit made a dash: this one has a dot, an underscore and a space.
    let env = TestLoop::new().in_project_named("my_project.v2 x");
    let Some(env) = claude_loop_or_skip(env, version) else {
        return;
    };
    let mock = Mock {
        tool: "-",
        command: "",
        env: &[],
    };
    let cmd = env.cmd(&["start", "g", "--step", "one", "--quiet"]);
    let out = run_with_mock(&cmd, &mock, None, PATIENCE);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let session = env.m1().results[&1].session_id.clone().expect("a session");
    let status = stdout(&env.run_ok(&["status"]));
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("TRANSCRIPT"))
        .unwrap_or_else(|| panic!("{version}: no TRANSCRIPT in\n{status}"))
        .trim();
    assert!(
        line.ends_with(&format!("{session}.jsonl")),
        "{version}: {line}"
    );
    assert!(line.contains("-my-project-v2-x/"), "{version}: {line}");
    let transcript = std::fs::read_to_string(line).unwrap();
    assert!(transcript.contains("STEP_DONE"), "{version}: {transcript}");
    env.assert_no_processes();
}

#[test]
fn a_step_of_the_real_cli_passes_and_status_names_its_transcript_2_1_330() {
    a_step_passes_and_its_transcript_is_found(VERSIONS[0]);
}

#[test]
fn a_step_of_the_real_cli_passes_and_status_names_its_transcript_2_1_197() {
    a_step_passes_and_its_transcript_is_found(VERSIONS[1]);
}
