//! What a loop on a backend other than Claude does the same on each (Codex, Gemini), written
//! once and run per backend with the simulated agent speaking its dialect: each step's session
//! on record and a retry resuming it, settings it cannot honour refused before anything is
//! written, a Claude usage limit far off continued on it in a fresh session, and it reviewing
//! Claude's work reading only. Each case is a test per backend, named `CASE::BACKEND`. What only
//! one backend does is in its own file (`codex.rs`, `gemini.rs`).

use chrono::Utc;
use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{AgentKind, Status};
use serde_json::Value;

use crate::support::bot::with_telegram;
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{
    PATIENCE, SIM, TestLoop, argv, flag_value, is_review, per_backend, stderr, stdout, wait_until,
};

/// A backend, as the shared cases need to know it.
pub struct Backend {
    /// Its name on the command line (`--backend NAME`).
    pub name: &'static str,
    pub kind: AgentKind,
    /// The variable that names its program, set to the simulated agent.
    pub program_var: &'static str,
    /// Whether a recorded call was made to it.
    pub is_call: fn(&Value) -> bool,
    /// The environment of the two-step loop beyond [`Backend::test_loop`]'s.
    pub two_step_env: &'static [(&'static str, &'static str)],
    /// Whether the loop names a fresh session (Gemini), rather than the CLI (Codex).
    pub loop_names_session: bool,
    /// The arguments of a retry that resumes session `id`.
    pub resumed: fn(id: &str) -> Vec<String>,
    /// Checks that the review call `call` of `env`'s loop was made to read only.
    pub reads_only: fn(env: &TestLoop, call: &Value),
}

impl Backend {
    /// A temporary loop whose agents, this backend and Claude, are the simulated agent.
    pub fn test_loop(&self) -> TestLoop {
        TestLoop::new()
            .env(self.program_var, SIM)
            .env("LOOP_AGENT_CLAUDE", SIM)
    }
}

pub const CODEX: Backend = Backend {
    name: "codex",
    kind: AgentKind::Codex,
    program_var: "LOOP_AGENT_CODEX",
    is_call: |call| argv(call).first().map(String::as_str) == Some("exec"),
    // Unconfined by the loop, Codex's own sandbox is what keeps the run in the project.
    two_step_env: &[("LOOP_SANDBOX", "off")],
    loop_names_session: false,
    // The sandbox given again before `resume` (a resumed run does not keep it).
    resumed: |id| {
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "resume",
            id,
            "-",
        ]
        .map(String::from)
        .to_vec()
    },
    reads_only: |_, call| {
        let args = argv(call);
        assert_eq!(args[3..5], ["-s", "read-only"], "{args:?}");
    },
};

pub const GEMINI: Backend = Backend {
    name: "gemini",
    kind: AgentKind::Gemini,
    program_var: "LOOP_AGENT_GEMINI",
    is_call: |call| argv(call).iter().any(|a| a == "--approval-mode"),
    two_step_env: &[],
    loop_names_session: true,
    resumed: |id| {
        [
            "--output-format",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            "auto_edit",
            "-r",
            id,
        ]
        .map(String::from)
        .to_vec()
    },
    // In plan mode, under the loop's read-only policy, which the loop writes.
    reads_only: |env, call| {
        let policy = std::path::absolute(env.state().join("gemini-read-only.toml")).unwrap();
        assert_eq!(flag_value(call, "--approval-mode").as_deref(), Some("plan"));
        assert_eq!(
            flag_value(call, "--policy"),
            Some(policy.display().to_string())
        );
        let text = std::fs::read_to_string(&policy).unwrap();
        assert!(text.contains("decision = \"deny\""), "{text}");
    },
};

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    /// Two steps, the first failing once: each step's session is on record and its own, the
    /// retry resumes it, and the tokens are counted once (1,050 a call in the simulation).
    fn a_two_step_loop_records_each_steps_session_and_a_retry_resumes_it(b: &Backend) {
        let env = b.two_step_env.iter().fold(b.test_loop(), |env, (k, v)| env.env(k, v));
        env.scenario(
            &Scenario::new()
                .step(1, [Action::failed("not yet"), Action::done("one")])
                .step(2, Action::done("two").write("two.txt", "2\n")),
        );
        let out = env.run_ok(&[
            "start", "g", "--backend", b.name, "--step", "one", "--step", "two",
        ]);
        env.assert_status(Status::Done);
        assert!(
            stderr(&out).contains("DONE: 2 step(s), 3,150 tokens"),
            "{}",
            stderr(&out)
        );
        let status = stdout(&env.run_ok(&["status"]));
        assert!(status.contains("TOKENS       3,150"), "{status}");
        let m = env.m1();
        assert_eq!(m.agent.backend, Some(b.kind));
        assert_eq!(m.agent.allowed_tools, None, "no Claude tool list for {}", b.name);
        let calls = env.calls();
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert!(calls.iter().all(b.is_call), "{calls:?}");
        let (one, two) = (&m.results[&1], &m.results[&2]);
        let session = one.session_id.clone().expect("step 1's session on record");
        assert_ne!(one.session_id, two.session_id, "each step has its own session");
        // The first run resumes nothing; the retry resumes the step's session.
        assert_eq!(calls[0]["resume"], Value::Null);
        if b.loop_names_session {
            assert_eq!(calls[0]["session_id"].as_str(), Some(session.as_str()));
        }
        assert_eq!(argv(&calls[1]), (b.resumed)(&session));
        // Summed per step: 1,050 twice in step 1's session.
        assert_eq!((one.tokens, one.session_tokens), (Some(2100), Some(2100)));
        assert_eq!(two.tokens, Some(1050));
        assert_eq!(one.attempts, Some(2));
        assert_eq!(
            std::fs::read_to_string(env.path().join("two.txt")).unwrap(),
            "2\n"
        );
        // No hooks: a fresh session's prompt carries the loop's state itself, a resumed one
        // has it already.
        let first = env.prompt(0);
        assert!(first.contains("autonomous loop") && first.contains("one"), "{first}");
        assert!(!env.prompt(1).contains("autonomous loop (m1loop). Its state"));
    }
}

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    fn settings_the_backend_cannot_honour_are_refused_before_anything_is_written(b: &Backend) {
        let env = b.test_loop();
        env.scenario(&Scenario::new());
        for (flags, setting) in [
            (&["--allowed-tools", "Read"][..], "AGENT.ALLOWED_TOOLS"),
            (&["--max-turns", "3"][..], "AGENT.MAX_TURNS"),
            (&["--max-budget-usd", "1"][..], "AGENT.MAX_BUDGET_USD"),
            (&["--max-cost-usd", "5"][..], "LIMITS.MAX_COST_USD"),
        ] {
            let mut args = vec!["start", "g", "--backend", b.name, "--step", "one"];
            args.extend_from_slice(flags);
            let out = env.run_exits(2, &args);
            let said = stderr(&out);
            assert!(
                said.contains(&format!("the agent ({}) cannot honour {setting}", b.name)),
                "{said}"
            );
            assert!(!env.state().join("M1.md").exists(), "nothing written");
        }
        assert!(env.calls().is_empty());
    }
}

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    /// Claude's usage limit resets in three hours: the step goes on with the fallback, in a
    /// fresh session told why, and the person is told.
    fn a_claude_usage_limit_far_off_continues_the_step_on_the_backend_in_a_fresh_session(
        b: &Backend
    ) {
        let tg = FakeTelegram::start();
        let env = with_telegram(b.test_loop(), &tg.base_url());
        let reset = Utc::now().timestamp() + 3 * 3600;
        env.scenario(&Scenario::new().step(1, [Action::usage_limit(reset), Action::done("ok")]));
        env.run_ok(&["start", "g", "--step", "one", "--fallback", b.name]);
        env.assert_status(Status::Done);
        let m = env.m1();
        assert_eq!(m.agent.fallback, [b.kind]);
        assert_eq!(
            m.limits.fallback_after,
            Some(std::time::Duration::from_secs(900))
        );
        let r = &m.results[&1];
        assert_eq!(r.backend, Some(b.kind));
        assert_eq!(r.attempts, Some(1), "the limit was no failed attempt");
        let calls = env.calls();
        assert_eq!(calls.len(), 2);
        assert!(!(b.is_call)(&calls[0]) && (b.is_call)(&calls[1]), "{calls:?}");
        assert_eq!(calls[1]["resume"], Value::Null, "a fresh session");
        assert!(
            env.prompt(1).contains("usage limit"),
            "the handoff says why: {}",
            env.prompt(1)
        );
        env.assert_logged("fallback: Step 1");
        let told = || tg.sent().into_iter().map(|s| s.text).collect::<Vec<_>>();
        assert!(
            wait_until(PATIENCE, || told().iter().any(|t| t
                .contains("Usage limit hit on step 1")
                && t.contains(&format!("goes on with {}", b.name)))),
            "{:?}",
            told()
        );
    }
}

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    fn the_backend_reviews_claudes_work_reading_only(b: &Backend) {
        let env = b.test_loop().env("LOOP_SANDBOX", "off");
        let call = review_call(&env, b);
        (b.reads_only)(&env, &call);
    }
}

/// Whether a recorded call is a reviewer's, whichever backend: a review's permission mode, or
/// a review's prompt.
fn reviews(call: &Value) -> bool {
    is_review(call)
        || call["review"] == true
        || call["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("You review one step"))
}

/// A loop whose one step Claude does and `b` reviews, the reviewer trying to write a file:
/// the review call, after checking that nothing was written and the review was `b`'s.
pub fn review_call(env: &TestLoop, b: &Backend) -> Value {
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("wrote a.txt").write("a.txt", "a\n"))
            .review(Action::approve("fine").touch("made_by_reviewer.txt")),
    );
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "write a.txt",
        "--review",
        "--review-backend",
        b.name,
    ]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    let review: Vec<&Value> = calls.iter().filter(|c| reviews(c)).collect();
    assert_eq!(review.len(), 1, "{calls:?}");
    assert!(
        (b.is_call)(review[0]) && !(b.is_call)(&calls[0]),
        "{calls:?}"
    );
    assert!(!env.path().join("made_by_reviewer.txt").exists());
    assert_eq!(
        env.m1().agent.review_backend,
        Some(b.kind),
        "{}",
        env.text()
    );
    review[0].clone()
}
