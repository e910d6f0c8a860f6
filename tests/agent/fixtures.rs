//! Every real capture of the Claude Code CLI in `tests/fixtures/claude-code/` is classified as
//! the README's index says. The index is read too, so a capture added there without a row here
//! fails the suite.

use std::collections::BTreeSet;

use chrono::{DateTime, TimeZone, Utc};
use m1loop::agent::{
    BugKind, Class, ExitInfo, READ_ONLY_TOOLS, StreamSummary, classify, read_stream_file,
};

use crate::support::{captures, exited};

/// The moment the usage-limit captures were taken (02:06:51Z), so text-only reset times
/// resolve to the same day.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 2, 6, 51).unwrap()
}

fn load(stem: &str) -> (StreamSummary, String) {
    let stream = read_stream_file(&captures().join(format!("{stem}.stdout.jsonl"))).unwrap();
    let stderr = std::fs::read_to_string(captures().join(format!("{stem}.stderr"))).unwrap();
    (stream, stderr)
}

/// A short name of a class, as in the README's last column.
fn label(c: &Class) -> String {
    match c {
        Class::Success => "success".into(),
        Class::Transient(_) => "transient".into(),
        Class::RateLimited(_) => "rate-limited".into(),
        Class::UsageLimit { resets_at, .. } => format!("usage-limit@{resets_at:?}"),
        Class::Auth(_) => "auth".into(),
        Class::Billing(_) => "billing".into(),
        Class::InvocationBug { kind, .. } => format!("invocation-bug:{kind:?}"),
        Class::Other(_) => "other".into(),
    }
}

/// How a capture's process ended.
#[derive(Clone, Copy)]
enum Ended {
    Exit(i32),
    /// Killed by the runner (a timeout): 143 after its SIGTERM.
    Killed,
}

/// The class a capture must get, as [`label`] writes it.
#[derive(Clone, Copy)]
enum Want {
    Is(&'static str),
    /// A usage limit that resets at this epoch second.
    Reset(i64),
    Bug(BugKind),
}

use {Ended::*, Want::*};

/// Every capture: its stem, how its process ended, the class it must get.
const TABLE: &[(&str, Ended, Want)] = &[
    ("success", Exit(0), Is("success")),
    ("success-after-tool-use", Exit(0), Is("success")),
    ("auth-401-invalid-api-key", Exit(1), Is("auth")),
    ("auth-not-logged-in", Exit(1), Is("auth")),
    ("auth-401-oauth-not-logged-in", Exit(1), Is("auth")),
    ("auth-403-forbidden", Exit(1), Is("auth")),
    ("billing-400-credit-balance-too-low", Exit(1), Is("billing")),
    ("rate-limit-429-api", Exit(1), Is("transient")),
    ("usage-limit-429-five-hour", Exit(1), Reset(1_795_324_010)),
    (
        "usage-limit-429-five-hour-2.1.197",
        Exit(1),
        Reset(1_795_324_009),
    ),
    ("overloaded-529", Exit(1), Is("transient")),
    ("server-error-500", Exit(1), Is("transient")),
    ("model-404-not-found", Exit(1), Bug(BugKind::UnknownModel)),
    ("network-unreachable", Exit(1), Is("transient")),
    (
        "resume-no-conversation",
        Exit(1),
        Bug(BugKind::UnknownSession),
    ),
    (
        "resume-no-conversation-startup-results",
        Exit(1),
        Bug(BugKind::UnknownSession),
    ),
    ("session-id-in-use", Exit(1), Bug(BugKind::SessionInUse)),
    (
        "session-id-invalid",
        Exit(1),
        Bug(BugKind::InvalidSessionId),
    ),
    (
        "bypass-permissions-as-root",
        Exit(1),
        Bug(BugKind::BypassPermissionsAsRoot),
    ),
    (
        "bypass-permissions-as-root-startup-results",
        Exit(1),
        Bug(BugKind::BypassPermissionsAsRoot),
    ),
    (
        "stream-json-without-verbose",
        Exit(1),
        Bug(BugKind::StreamJsonNeedsVerbose),
    ),
    ("error-max-turns", Exit(1), Is("other")),
    ("error-max-budget-usd", Exit(1), Is("billing")),
    ("hang-killed-by-timeout", Killed, Is("transient")),
    ("sigterm", Exit(143), Is("other")),
    ("tool-removed-by-deny-rule", Exit(0), Is("success")),
    (
        "background-task-stopped-after-result",
        Exit(0),
        Is("success"),
    ),
    ("tool-permission-not-granted", Exit(0), Is("success")),
    ("tool-error-command-failed", Exit(0), Is("success")),
    ("cost-first-run", Exit(0), Is("success")),
    ("cost-resumed-run", Exit(0), Is("success")),
    ("cost-first-run-2.1.197", Exit(0), Is("success")),
    ("cost-resumed-run-2.1.197", Exit(0), Is("success")),
    ("context-250k-fresh-2.1.197", Exit(0), Is("success")),
    (
        "prompt-too-long-on-resume-2.1.197",
        Exit(1),
        Bug(BugKind::ContextTooLong),
    ),
    (
        "prompt-too-long-on-resume",
        Exit(1),
        Bug(BugKind::ContextTooLong),
    ),
    ("auth-401-retrying-killed-2.1.197", Killed, Is("auth")),
    (
        "compact-failed-not-enough-messages-2.1.197",
        Exit(0),
        Is("success"),
    ),
    ("compact-manual-2.1.197", Exit(0), Is("success")),
    ("compact-manual", Exit(0), Is("success")),
    ("reviewer-plan-mode-allow-rule", Exit(0), Is("success")),
    (
        "reviewer-plan-mode-allow-rule-2.1.197",
        Exit(0),
        Is("success"),
    ),
    ("reviewer-tools-read-only", Exit(0), Is("success")),
    ("reviewer-tools-read-only-2.1.197", Exit(0), Is("success")),
    ("tools-pattern-is-no-tool", Exit(0), Is("success")),
    ("tools-pattern-is-no-tool-2.1.197", Exit(0), Is("success")),
    ("tool-deferred-by-hook", Exit(0), Is("success")),
    ("tool-deferred-resumed", Exit(0), Is("success")),
    ("tool-deferred-by-hook-2.1.197", Exit(0), Is("success")),
    ("tool-deferred-resumed-2.1.197", Exit(0), Is("success")),
    ("tool-deferred-two-calls", Exit(0), Is("success")),
    ("tool-deferred-two-calls-resumed", Exit(0), Is("success")),
    ("ask-user-question-not-offered", Exit(0), Is("success")),
    (
        "ask-user-question-not-offered-2.1.197",
        Exit(0),
        Is("success"),
    ),
    (
        "resume-without-prompt-nothing-deferred",
        Exit(1),
        Is("other"),
    ),
    ("ask-user-question-deferred", Exit(0), Is("success")),
    (
        "ask-user-question-answered-on-resume",
        Exit(0),
        Is("success"),
    ),
    ("ask-user-question-deferred-2.1.197", Exit(0), Is("success")),
    (
        "ask-user-question-answered-on-resume-2.1.197",
        Exit(0),
        Is("success"),
    ),
    ("deferred-resumed-without-its-tool", Exit(1), Is("other")),
    (
        "deferred-resumed-without-its-tool-2.1.197",
        Exit(1),
        Is("other"),
    ),
];

impl Ended {
    fn info(self) -> ExitInfo {
        match self {
            Exit(code) => exited(code),
            Killed => ExitInfo {
                code: Some(143),
                signal: None,
                killed_by_runner: true,
            },
        }
    }
}

impl Want {
    fn label(self) -> String {
        match self {
            Is(name) => name.to_owned(),
            Reset(epoch) => format!(
                "usage-limit@{:?}",
                Some(Utc.timestamp_opt(epoch, 0).unwrap())
            ),
            Bug(kind) => format!("invocation-bug:{kind:?}"),
        }
    }
}

#[test]
fn every_capture_is_classified_as_its_index_row_says() {
    let mut wrong = Vec::new();
    for &(stem, ended, want) in TABLE {
        let (stream, stderr) = load(stem);
        let got = label(&classify(&ended.info(), &stderr, &stream, now()));
        let want = want.label();
        if got != want {
            wrong.push(format!("{stem}: got {got}, want {want}"));
        }
    }
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}

#[test]
fn the_table_covers_every_row_of_the_index_and_every_capture_file() {
    let readme = std::fs::read_to_string(captures().join("README.md")).unwrap();
    let indexed: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(stem, _)| stem.to_owned()))
        .collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(captures())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".stdout.jsonl").map(str::to_owned)
        })
        .collect();
    let tested: BTreeSet<String> = TABLE.iter().map(|(s, _, _)| (*s).to_owned()).collect();
    assert_eq!(indexed.len(), 61, "index rows: {indexed:?}");
    assert_eq!(tested, indexed);
    assert_eq!(tested, on_disk);
}

#[test]
fn success_fields_are_extracted() {
    let (s, _) = load("success");
    let r = s.result.unwrap();
    assert_eq!(
        s.session_id.as_deref(),
        Some("9d1f0722-d156-47e1-a326-bf472cd503f4")
    );
    assert_eq!(r.subtype, "success");
    assert!(!r.is_error);
    assert_eq!(r.api_error_status, None);
    assert_eq!(r.result.as_deref(), Some("Hello from mock. n_messages=2"));
    let cost = r.total_cost_usd.unwrap();
    assert!((cost - 0.000_14).abs() < 1e-12, "{cost}");
    assert_eq!(r.num_turns, Some(1));
    assert_eq!(r.duration_ms, Some(1819));
    assert!(r.permission_denials.is_empty());
    assert_eq!(
        s.last_assistant_text.as_deref(),
        Some("Hello from mock. n_messages=2")
    );
    assert_eq!(s.events, 3);
    assert_eq!(s.garbage_lines, 0);
}

/// Whether two dollar figures agree to a hundredth of a cent.
fn same_cost(got: Option<f64>, want: f64) -> bool {
    got.is_some_and(|g| (g - want).abs() < 1e-6)
}

#[test]
fn a_resumed_run_costs_what_it_spent_not_the_session_s_total() {
    // 2.1.330 reports the session's total after `--resume` ($0.84 after two runs of $0.42);
    // what the run itself spent is in `model_usage_since_last_result`.
    for (stem, total, own) in [
        ("cost-first-run", 0.42, 0.42),
        ("cost-resumed-run", 0.84, 0.42),
        // 2.1.197 reports each run alone.
        ("cost-first-run-2.1.197", 0.525, 0.525),
        ("cost-resumed-run-2.1.197", 0.525, 0.525),
    ] {
        let (s, _) = load(stem);
        let reported = s.result.as_ref().and_then(|r| r.total_cost_usd);
        assert!(same_cost(reported, total), "{stem}: {reported:?}");
        assert!(same_cost(s.cost_usd, own), "{stem}: {:?}", s.cost_usd);
    }
}

#[test]
fn a_context_is_measured_against_the_window_its_resume_will_have() {
    // 2.1.197 runs a fresh session without `--model` as `claude-opus-4-8[1m]` (1M), and its
    // `--resume` as `claude-opus-4-8` (200k): 250k tokens are 25 % now and 125 % then.
    let (fresh, _) = load("context-250k-fresh-2.1.197");
    assert_eq!(fresh.context_window(), Some(1_000_000));
    assert_eq!(fresh.context_pct(None), Some(125));
    assert_eq!(fresh.context_pct(Some("sonnet")), Some(125));
    // A resume that asks for the 1M variant itself keeps it.
    assert_eq!(fresh.context_pct(Some("opus[1m]")), Some(25));
    // 2.1.330 resumes with the window the session began with.
    let (resumed, _) = load("cost-resumed-run");
    assert_eq!(resumed.context_pct(None), Some(10));
    let (resumed, _) = load("cost-resumed-run-2.1.197");
    assert_eq!(resumed.context_pct(None), Some(50));
    // The CLI's own message for an error says nothing of the context (its usage is zero).
    let (too_long, _) = load("prompt-too-long-on-resume-2.1.197");
    assert_eq!(too_long.context_tokens, None);
}

#[test]
fn an_auth_error_the_cli_is_still_retrying_is_read_from_its_api_retry_events() {
    // 2.1.197 retries a 401 for about 3 minutes; each retry is in the stream as it happens.
    let (s, _) = load("auth-401-retrying-killed-2.1.197");
    assert!(s.result.is_none());
    assert_eq!(s.api_error_status, Some(401));
    assert!(s.auth_failing());
    // A retried overload is no auth failure; neither is a finished run's.
    let (s, _) = load("overloaded-529");
    assert!(!s.auth_failing());
}

#[test]
fn only_compactions_that_happened_are_counted() {
    for (stem, happened, failed) in [
        ("compact-failed-not-enough-messages-2.1.197", 0, 1),
        ("compact-manual-2.1.197", 1, 0),
        ("compact-manual", 1, 0),
        // The CLI's try to compact a context too long for its window failed too.
        ("prompt-too-long-on-resume-2.1.197", 0, 1),
        ("success", 0, 0),
    ] {
        let (s, _) = load(stem);
        assert_eq!(s.compactions, happened, "{stem}");
        assert_eq!(s.compactions_failed.len(), failed, "{stem}");
    }
    let (s, _) = load("compact-failed-not-enough-messages-2.1.197");
    assert_eq!(s.compactions_failed, ["Not enough messages to compact."]);
}

/// The tools a capture's `system/init` says the model was offered.
fn offered(stem: &str) -> Vec<String> {
    let text = std::fs::read_to_string(captures().join(format!("{stem}.stdout.jsonl"))).unwrap();
    let init: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let mut tools: Vec<String> = serde_json::from_value(init["tools"].clone()).unwrap();
    tools.sort();
    tools
}

#[test]
fn only_tools_flag_keeps_a_reviewer_from_tools_a_user_rule_allows() {
    let mut read_only: Vec<String> = READ_ONLY_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    read_only.sort();
    for v in ["", "-2.1.197"] {
        // Plan mode and an allow list: Bash and Write were offered, and the Bash call ran.
        let plan = offered(&format!("reviewer-plan-mode-allow-rule{v}"));
        assert!(plan.iter().any(|t| t == "Bash") && plan.iter().any(|t| t == "Write"));
        let (ran, _) = load(&format!("reviewer-plan-mode-allow-rule{v}"));
        assert!(ran.unavailable_tools.is_empty(), "{v}");
        // `--tools` with exactly the loop's read-only list: nothing else, whatever allowed it.
        assert_eq!(offered(&format!("reviewer-tools-read-only{v}")), read_only);
        let (refused, _) = load(&format!("reviewer-tools-read-only{v}"));
        assert_eq!(refused.unavailable_tools, ["Bash"], "{v}");
        // A rule is not a name: it leaves no tool at all.
        assert!(offered(&format!("tools-pattern-is-no-tool{v}")).is_empty());
    }
}

#[test]
fn api_error_fields_and_denials_are_extracted() {
    let (s, _) = load("rate-limit-429-api");
    let r = s.result.unwrap();
    assert_eq!(
        (r.subtype.as_str(), r.is_error, r.api_error_status),
        ("success", true, Some(429))
    );
    assert_eq!(r.duration_ms, Some(179_711));

    let (s, _) = load("error-max-turns");
    let r = s.result.unwrap();
    assert_eq!(r.subtype, "error_max_turns");
    assert_eq!(r.result, None);
    assert_eq!(r.errors, ["Reached maximum number of turns (3)"]);
    assert_eq!(r.num_turns, Some(4));
    assert_eq!(r.permission_denials, ["Bash", "Bash", "Bash"]);
}

#[test]
fn usage_limit_reset_comes_from_the_rate_limit_event() {
    let (s, stderr) = load("usage-limit-429-five-hour");
    let rl = s.rate_limit.clone().unwrap();
    assert_eq!(rl.status, "rejected");
    assert_eq!(rl.resets_at, Some(1_795_324_010));
    assert_eq!(rl.kind.as_deref(), Some("five_hour"));
    match classify(&exited(1), &stderr, &s, now()) {
        Class::UsageLimit { message, .. } => {
            assert!(
                message.contains("You've hit your 5-hour limit"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn usage_limit_reset_falls_back_to_the_text() {
    // The same capture without its rate_limit_event: only "resets 5:06am (UTC)" is left, the
    // reset (05:06:49) cut down to its minute, which is read as its end.
    let (mut s, stderr) = load("usage-limit-429-five-hour-2.1.197");
    s.rate_limit = None;
    let want = Utc.with_ymd_and_hms(2026, 11, 22, 5, 7, 0).unwrap();
    match classify(&exited(1), &stderr, &s, now()) {
        Class::UsageLimit { resets_at, .. } => assert_eq!(resets_at, Some(want)),
        other => panic!("{other:?}"),
    }
    // Seen well after 5:06 the same text means the next day.
    let later = Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap();
    match classify(&exited(1), &stderr, &s, later) {
        Class::UsageLimit { resets_at, .. } => {
            assert_eq!(resets_at, Some(want + chrono::Duration::days(1)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn messages_carry_the_cli_s_own_words() {
    let cases = [
        ("auth-401-invalid-api-key", "Invalid API key"),
        ("auth-not-logged-in", "Please run /login"),
        (
            "billing-400-credit-balance-too-low",
            "Credit balance is too low",
        ),
        ("error-max-budget-usd", "Reached maximum budget"),
        ("resume-no-conversation", "No conversation found"),
        ("overloaded-529", "529"),
    ];
    for (stem, needle) in cases {
        let (s, stderr) = load(stem);
        let c = classify(&exited(1), &stderr, &s, now());
        assert!(c.to_string().contains(needle), "{stem}: {c}");
    }
}

#[test]
fn a_tool_removed_by_a_deny_rule_counts_as_a_permission_denial() {
    // The CLI lists nothing in `permission_denials`: only the tool_result tells.
    let (s, _) = load("tool-removed-by-deny-rule");
    assert_eq!(s.unavailable_tools, ["Bash"]);
    let r = s.result.unwrap();
    assert!(!r.is_error);
    assert_eq!(r.permission_denials, ["Bash"]);
}

#[test]
fn a_permission_not_granted_is_listed_once() {
    // Listed by the CLI and said in the tool_result: one entry, not two.
    let (s, _) = load("tool-permission-not-granted");
    assert_eq!(s.unavailable_tools, ["Write"]);
    assert_eq!(s.result.unwrap().permission_denials, ["Write"]);
}

#[test]
fn an_ordinary_tool_error_is_not_a_denial() {
    let (s, _) = load("tool-error-command-failed");
    assert!(s.unavailable_tools.is_empty());
    assert!(s.result.unwrap().permission_denials.is_empty());
    // Nor are the working-directory blocks of error-max-turns (listed by the CLI itself).
    let (s, _) = load("error-max-turns");
    assert!(s.unavailable_tools.is_empty());
}
