//! The agent call is built as the manual's "How the agent is called" says: stream-json with --verbose, exactly one session
//! flag, configured flags, and the environment fixed so Claude Code does not refuse to nest.

use m1loop::agent::{AgentConfig, Invocation, Session, invocation, new_session_id};

fn flag_values<'a>(inv: &'a Invocation, flag: &str) -> Vec<&'a str> {
    inv.args
        .iter()
        .position(|a| a == flag)
        .map(|i| vec![inv.args[i + 1].as_str()])
        .unwrap_or_default()
}

fn count(inv: &Invocation, flag: &str) -> usize {
    inv.args.iter().filter(|a| *a == flag).count()
}

#[test]
fn a_first_attempt_names_a_new_session() {
    let id = new_session_id();
    let inv = invocation(
        &AgentConfig::default(),
        "do step 1",
        &Session::New(id.clone()),
    );
    assert_eq!(inv.program, "claude");
    assert_eq!(
        inv.args,
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--session-id",
            &id
        ]
    );
    assert_eq!(count(&inv, "--resume"), 0);
    assert_eq!(inv.input, "do step 1");
}

#[test]
fn a_retry_resumes_and_never_names_a_session_too() {
    let inv = invocation(
        &AgentConfig::default(),
        "fix it",
        &Session::Resume("abc".into()),
    );
    assert_eq!(flag_values(&inv, "--resume"), ["abc"]);
    assert_eq!(count(&inv, "--session-id"), 0);
    assert_eq!(count(&inv, "--verbose"), 1);
}

#[test]
fn the_environment_removes_nesting_markers_and_asks_for_startup_results() {
    let inv = invocation(
        &AgentConfig::default(),
        "p",
        &Session::New(new_session_id()),
    );
    assert_eq!(inv.env_remove, ["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"]);
    assert_eq!(
        inv.env_set,
        [(
            "CLAUDE_CODE_STARTUP_FAILURE_RESULTS".to_owned(),
            "1".to_owned()
        )]
    );
    let cmd = inv.command();
    let envs: Vec<_> = cmd.get_envs().collect();
    assert!(envs.contains(&("CLAUDECODE".as_ref(), None)));
    assert!(envs.contains(&("CLAUDE_CODE_ENTRYPOINT".as_ref(), None)));
    assert!(envs.contains(&(
        "CLAUDE_CODE_STARTUP_FAILURE_RESULTS".as_ref(),
        Some("1".as_ref())
    )));
}

#[test]
fn configured_flags_follow_and_allowed_tools_cannot_swallow_arguments() {
    let cfg = AgentConfig {
        backend: m1loop::m1::AgentKind::Claude,
        program: "/opt/bin/claude-sim".into(),
        permission_mode: Some(m1loop::m1::PermissionMode::AcceptEdits),
        allowed_tools: vec!["Bash(git commit:*)".into(), "Edit".into()],
        tools: None,
        max_turns: Some(30),
        max_budget_usd: Some(2.5),
        model: Some("opus".into()),
        extra_args: vec!["--add-dir".into(), "../lib".into()],
        confined: false,
        files_dir: None,
    };
    let inv = invocation(&cfg, "p", &Session::Resume("s1".into()));
    assert_eq!(inv.program, "/opt/bin/claude-sim");
    let at = inv.args.iter().position(|a| a == "--allowedTools").unwrap();
    assert_eq!(inv.args[at + 1..at + 3], ["Bash(git commit:*)", "Edit"]);
    assert!(
        inv.args[at + 3].starts_with("--"),
        "the tool list ends at a flag: {:?}",
        inv.args
    );
    assert_eq!(flag_values(&inv, "--permission-mode"), ["acceptEdits"]);
    assert_eq!(flag_values(&inv, "--max-turns"), ["30"]);
    assert_eq!(flag_values(&inv, "--max-budget-usd"), ["2.5"]);
    assert_eq!(flag_values(&inv, "--model"), ["opus"]);
    assert_eq!(inv.args[inv.args.len() - 2..], ["--add-dir", "../lib"]);
}

#[test]
fn the_prompt_goes_whole_to_standard_input_never_into_an_argument() {
    let long = format!("--help me {}", "x".repeat(200 * 1024));
    let inv = invocation(
        &AgentConfig::default(),
        &long,
        &Session::New(new_session_id()),
    );
    assert_eq!(inv.input, long, "verbatim, a leading dash and all");
    assert!(inv.args.iter().all(|a| !a.contains("help me")));
}

#[test]
fn session_ids_are_fresh_uuids() {
    let a = new_session_id();
    let b = new_session_id();
    assert_ne!(a, b);
    assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 4);
}

#[test]
fn config_reads_from_yaml_with_defaults() {
    let cfg: AgentConfig =
        serde_saphyr::from_str("model: sonnet\nallowed_tools: [Read, Edit]\n").unwrap();
    assert_eq!(cfg.program, "claude");
    assert_eq!(cfg.model.as_deref(), Some("sonnet"));
    assert_eq!(cfg.allowed_tools, ["Read", "Edit"]);
    assert_eq!(cfg.max_turns, None);
}

#[test]
fn a_read_only_call_is_offered_reading_tools_alone_in_one_value_before_the_session_flag() {
    let cfg = AgentConfig {
        allowed_tools: vec!["Bash(git:*)".into(), "Write".into()],
        ..AgentConfig::default()
    }
    .read_only();
    let inv = invocation(&cfg, "p", &Session::New("s1".into()));
    assert_eq!(flag_values(&inv, "--tools"), ["Read,Grep,Glob"]);
    let at = inv.args.iter().position(|a| a == "--tools").unwrap();
    assert_eq!(inv.args[at + 2], "--session-id", "{:?}", inv.args);
    let from = inv.args.iter().position(|a| a == "--allowedTools").unwrap() + 1;
    assert_eq!(
        inv.args[from..at],
        ["Read", "Grep", "Glob"],
        "nothing else pre-approved"
    );
}
