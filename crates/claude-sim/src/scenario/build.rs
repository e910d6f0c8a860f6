//! Scenarios built in code instead of written as JSON by hand: a test says what the agent
//! answers (`Action::failed("no build")`), not how the simulation spells it.
//!
//! ```
//! use claude_sim::scenario::{Action, Scenario};
//!
//! let scenario = Scenario::new()
//!     .otherwise(Action::done("ok"))
//!     .step(1, [Action::failed("no build"), Action::done("fixed").cost(0.1)])
//!     .review(Action::approve("fine"));
//! let json = serde_json::to_string(&scenario).unwrap();
//! assert_eq!(Scenario::parse(&json).unwrap(), scenario);
//! ```
//!
//! What the builder makes is the [`Scenario`] the simulation reads, and its JSON is written
//! from the same structs, so a builder cannot say what the format cannot.

use serde_json::{Map, Value, json};

use super::{Action, Scenario, WriteFile};

/// What an entry of a scenario takes: one action, or the actions of successive calls.
pub trait IntoActions {
    fn into_actions(self) -> Vec<Action>;
}

impl IntoActions for Action {
    fn into_actions(self) -> Vec<Action> {
        vec![self]
    }
}

impl<const N: usize> IntoActions for [Action; N] {
    fn into_actions(self) -> Vec<Action> {
        self.into()
    }
}

impl IntoActions for Vec<Action> {
    fn into_actions(self) -> Vec<Action> {
        self
    }
}

impl Scenario {
    /// A scenario that lists nothing: every call answers as it would without one.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// What the planning call answers, call after call.
    #[must_use]
    pub fn plan(mut self, calls: impl IntoActions) -> Self {
        self.plan = calls.into_actions();
        self
    }

    /// What step `n`'s calls answer, one entry a call; past the end, the last repeats.
    #[must_use]
    pub fn step(mut self, n: u32, calls: impl IntoActions) -> Self {
        self.steps.insert(n, calls.into_actions());
        self
    }

    /// What the reviewers answer, one entry a review run of a step.
    #[must_use]
    pub fn review(mut self, calls: impl IntoActions) -> Self {
        self.review = calls.into_actions();
        self
    }

    /// What every call that nothing else lists answers (the scenario's `default`).
    #[must_use]
    pub fn otherwise(mut self, action: Action) -> Self {
        self.default = Some(action);
        self
    }
}

/// The answers, as an agent words them: a line of its own, then the verdict line the runner
/// reads.
impl Action {
    /// The answer of a call's kind without a scenario: a plan of three steps, `STEP_DONE`, or
    /// a reviewer's approval. Something to add the rest to.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An answer of exactly `text`, with or without a verdict line.
    #[must_use]
    pub fn says(text: impl Into<String>) -> Self {
        Self {
            result: Some(text.into()),
            ..Self::default()
        }
    }

    /// `STEP_DONE: summary`.
    #[must_use]
    pub fn done(summary: &str) -> Self {
        Self::says(format!("Worked on it.\nSTEP_DONE: {summary}"))
    }

    /// `STEP_FAILED: reason`.
    #[must_use]
    pub fn failed(reason: &str) -> Self {
        Self::says(format!("Tried.\nSTEP_FAILED: {reason}"))
    }

    /// `STEP_BLOCKED: question`.
    #[must_use]
    pub fn blocked(question: &str) -> Self {
        Self::says(format!("I need to ask.\nSTEP_BLOCKED: {question}"))
    }

    /// `STEP_RESTART: reason`: go on in a fresh session.
    #[must_use]
    pub fn restart(reason: &str) -> Self {
        Self::says(format!("Handing over.\nSTEP_RESTART: {reason}"))
    }

    /// A reviewer's `REVIEW_APPROVE: why`.
    #[must_use]
    pub fn approve(why: &str) -> Self {
        Self::says(format!("Checked.\nREVIEW_APPROVE: {why}"))
    }

    /// A reviewer's `REVIEW_CHANGES: what`.
    #[must_use]
    pub fn changes(what: &str) -> Self {
        Self::says(format!("Not yet.\nREVIEW_CHANGES: {what}"))
    }

    /// A plan of these steps, as a JSON block after a line of text.
    #[must_use]
    pub fn plan<const N: usize>(steps: [&str; N]) -> Self {
        Self::says(format!(
            "Here is the plan:\n```json\n{}\n```",
            json!({ "steps": steps.as_slice() })
        ))
    }

    /// An error result with `text` and no API status: the run itself failed (exit 1).
    #[must_use]
    pub fn error(text: &str) -> Self {
        Self {
            is_error: true,
            ..Self::says(text)
        }
    }

    /// An API error with this HTTP status, as the CLI reports it (exit 1).
    #[must_use]
    pub fn api_error(status: u16, text: &str) -> Self {
        Self {
            api_error_status: Some(status),
            ..Self::error(text)
        }
    }

    /// The API at capacity (529), which the loop waits out.
    #[must_use]
    pub fn overloaded() -> Self {
        Self::api_error(
            529,
            "API Error: Repeated 529 Overloaded errors. The API is at capacity",
        )
    }

    /// The account's usage limit (429, rejected), which resets at `resets_at` (Unix seconds).
    #[must_use]
    pub fn usage_limit(resets_at: i64) -> Self {
        Self::api_error(429, "You've hit your 5-hour limit · resets 5:06am (UTC)")
            .rate_limit("rejected", resets_at)
    }

    /// `system/init`, then nothing: only a timeout or a stop ends the call.
    #[must_use]
    pub fn hang() -> Self {
        Self {
            hang: true,
            ..Self::default()
        }
    }

    /// A real capture (`<stem>.stdout.jsonl`, `<stem>.stderr`) replayed verbatim.
    #[must_use]
    pub fn fixture(stem: impl AsRef<std::path::Path>) -> Self {
        Self {
            fixture: Some(stem.as_ref().display().to_string()),
            ..Self::default()
        }
    }
}

/// How the call goes before it answers, and what it leaves behind.
impl Action {
    /// Works this long before the answer.
    #[must_use]
    pub fn sleep_ms(mut self, ms: u64) -> Self {
        self.sleep_ms = ms;
        self
    }

    /// While working, an assistant event this often (which an idle timeout sees).
    #[must_use]
    pub fn heartbeat_ms(mut self, ms: u64) -> Self {
        self.heartbeat_ms = Some(ms);
        self
    }

    /// The result's cost in dollars (default 0.01).
    #[must_use]
    pub fn cost(mut self, usd: f64) -> Self {
        self.cost_usd = Some(usd);
        self
    }

    /// Writes `text` to `path` (relative to the working directory).
    #[must_use]
    pub fn write(mut self, path: &str, text: &str) -> Self {
        self.write.push(WriteFile {
            path: path.into(),
            text: text.into(),
            append: false,
        });
        self
    }

    /// After a replayed capture, stays `ms` before exiting (see [`Action::linger_ms`]).
    #[must_use]
    pub fn linger_ms(mut self, ms: u64) -> Self {
        self.linger_ms = ms;
        self
    }

    /// Runs `command` with `sh -c` in the working directory, as the agent's Bash tool would.
    #[must_use]
    pub fn bash(mut self, command: &str) -> Self {
        self.bash.push(command.into());
        self
    }

    /// Creates (or bumps) `path`.
    #[must_use]
    pub fn touch(mut self, path: &str) -> Self {
        self.touch.push(path.into());
        self
    }

    /// Plays an older CLI that offers every tool whatever `--tools` says.
    #[must_use]
    pub fn ignoring_tools(mut self) -> Self {
        self.ignores_tools = true;
        self
    }

    /// Writes `text` to stderr right after it starts.
    #[must_use]
    pub fn stderr(mut self, text: &str) -> Self {
        self.stderr = Some(text.into());
        self
    }

    /// Exits with `code` whatever the result says.
    #[must_use]
    pub fn exit(mut self, code: i32) -> Self {
        self.exit = Some(code);
        self
    }

    /// The result's subtype (default `success`).
    #[must_use]
    pub fn subtype(mut self, subtype: &str) -> Self {
        self.subtype = Some(subtype.into());
        self
    }

    /// Reports these tools as silently denied (`permission_denials`): a name (`Write`), or
    /// `Bash: COMMAND` for one command, denied until `--allowedTools` covers it.
    #[must_use]
    pub fn denied<const N: usize>(mut self, tools: [&str; N]) -> Self {
        self.permission_denials
            .extend(tools.iter().map(|t| (*t).to_owned()));
        self
    }

    /// Asks `question` with `AskUserQuestion`, offering `options` (see [`Action::ask`]).
    #[must_use]
    pub fn asks<const N: usize>(mut self, question: &str, options: [&str; N]) -> Self {
        self.ask = Some((
            question.to_owned(),
            options.iter().map(|o| (*o).to_owned()).collect(),
        ));
        self
    }

    /// Calls these tools, which the CLI removed: each gets `No such tool available`.
    #[must_use]
    pub fn unavailable<const N: usize>(mut self, tools: [&str; N]) -> Self {
        self.unavailable_tools
            .extend(tools.iter().map(|t| (*t).to_owned()));
        self
    }

    /// A `rate_limit_event` with this status and reset time (Unix seconds).
    #[must_use]
    pub fn rate_limit(mut self, status: &str, resets_at: i64) -> Self {
        let mut info = Map::new();
        info.insert("status".into(), Value::from(status));
        info.insert("resetsAt".into(), Value::from(resets_at));
        self.rate_limit = Some(info);
        self
    }

    /// Refused for the usage limit until `until` (Unix seconds), as the real service refuses
    /// every call before its reset; from then on, answers as the action says.
    #[must_use]
    pub fn limited_until(mut self, until: i64) -> Self {
        self.limited_until = Some(until);
        self
    }

    /// One more `system/api_retry` event after `system/init`: a failed request the CLI tries
    /// again, with its HTTP status and error.
    #[must_use]
    pub fn api_retry(mut self, status: u16, error: &str) -> Self {
        let mut retry = Map::new();
        retry.insert("error_status".into(), Value::from(status));
        retry.insert("error".into(), Value::from(error));
        self.api_retries.push(retry);
        self
    }

    /// `api_retries` printed `ms` apart, not all at once.
    #[must_use]
    pub fn api_retry_every_ms(mut self, ms: u64) -> Self {
        self.api_retry_every_ms = Some(ms);
        self
    }

    /// Ends without a result event.
    #[must_use]
    pub fn no_result(mut self) -> Self {
        self.no_result = true;
        self
    }

    /// Leaves a `sleep` of this many seconds in the call's process group.
    #[must_use]
    pub fn grandchild_sleep_s(mut self, seconds: f64) -> Self {
        self.grandchild_sleep_s = Some(seconds);
        self
    }

    /// After the answer, before the result event, kills itself with `signal`.
    #[must_use]
    pub fn killed_by_signal(mut self, signal: i32) -> Self {
        self.killed_by_signal = Some(signal);
        self
    }

    /// On SIGTERM, ends only this long after it.
    #[must_use]
    pub fn sigterm_exit_ms(mut self, ms: u64) -> Self {
        self.sigterm_exit_ms = Some(ms);
        self
    }

    /// Compacts its context while working, running the hooks of its `--settings`.
    #[must_use]
    pub fn compact(mut self) -> Self {
        self.compact = true;
        self
    }

    /// Tries to compact its context, which fails with `reason`.
    #[must_use]
    pub fn compact_error(mut self, reason: &str) -> Self {
        self.compact = true;
        self.compact_error = Some(reason.into());
        self
    }

    /// Leaves a background task (`description`) that the CLI stops after the result.
    #[must_use]
    pub fn background_task(mut self, description: &str) -> Self {
        self.background_task = Some(description.into());
        self
    }

    /// The session's context holds this many tokens when it answers.
    #[must_use]
    pub fn context_tokens(mut self, tokens: u64) -> Self {
        self.context_tokens = Some(tokens);
        self
    }

    /// The model the answer names, and the context window `modelUsage` reports for it.
    #[must_use]
    pub fn model(mut self, model: &str, context_window: u64) -> Self {
        self.model = Some(model.into());
        self.context_window = Some(context_window);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field the reader knows, as its own refusal of an unknown one lists them.
    fn fields() -> Vec<String> {
        let refusal = serde_json::from_str::<Action>(r#"{"?": 0}"#)
            .unwrap_err()
            .to_string();
        let listed = refusal.split("expected one of ").nth(1).unwrap();
        listed
            .split(", ")
            .map(|f| f.trim_matches(|c: char| c == '`' || !c.is_ascii_graphic()))
            .map(|f| f.split('`').next().unwrap().to_owned())
            .collect()
    }

    /// Every field of the format is one a builder method sets and the README documents;
    /// written out and read back, a built scenario is the same.
    #[test]
    fn what_the_builder_writes_reads_back_as_the_same_scenario() {
        let all = Action::api_error(429, "limit {step}")
            .sleep_ms(5)
            .heartbeat_ms(1)
            .cost(0.5)
            .write("a.txt", "x")
            .bash("echo x > c.txt")
            .touch("b.txt")
            .ignoring_tools()
            .stderr("oops")
            .exit(3)
            .subtype("error_during_execution")
            .denied(["Bash"])
            .unavailable(["Write"])
            .rate_limit("rejected", 1_795_324_010)
            .limited_until(1_795_324_010)
            .api_retry(401, "authentication_failed")
            .api_retry_every_ms(10)
            .no_result()
            .grandchild_sleep_s(1.5)
            .killed_by_signal(9)
            .sigterm_exit_ms(100)
            .compact_error("Not enough messages to compact.")
            .background_task("migrate")
            .asks("Which database?", ["SQLite", "Postgres"])
            .context_tokens(150_000)
            .model("claude-opus-4-8[1m]", 1_000_000);
        let scenario = Scenario::new()
            .plan([Action::plan(["read", "write"]), Action::hang()])
            .step(2, [Action::failed("no build"), Action::done("fixed")])
            .step(3, all)
            .review(Action::changes("more"))
            .otherwise(Action::fixture("captures/x").linger_ms(300));
        let json = serde_json::to_string(&scenario).unwrap();
        assert_eq!(Scenario::parse(&json).unwrap(), scenario, "{json}");
        let value: Value = serde_json::from_str(&json).unwrap();
        let mut set: Vec<&str> = [
            &value["steps"]["3"][0],
            &value["plan"][1],
            &value["default"],
        ]
        .iter()
        .flat_map(|a| a.as_object().unwrap().keys().map(String::as_str))
        .collect();
        set.sort_unstable();
        let mut fields = fields();
        fields.sort();
        assert_eq!(set, fields, "a field no builder method sets");
        let readme = include_str!("../../README.md");
        for field in &fields {
            assert!(
                readme.contains(&format!("| `{field}` |")),
                "{field} is not in the README"
            );
        }
    }

    #[test]
    fn a_field_left_at_its_default_is_left_out() {
        let json = serde_json::to_string(&Scenario::new().step(1, Action::done("ok"))).unwrap();
        assert_eq!(
            json,
            r#"{"steps":{"1":[{"result":"Worked on it.\nSTEP_DONE: ok"}]}}"#
        );
        assert_eq!(serde_json::to_string(&Scenario::new()).unwrap(), "{}");
    }

    #[test]
    fn the_readme_example_is_what_the_builder_makes() {
        let built = Scenario::new()
            .step(
                2,
                [
                    Action::says("Tried.\nSTEP_FAILED: the test still fails").sleep_ms(400),
                    Action::says("Fixed it.\nSTEP_DONE: fix.txt written")
                        .sleep_ms(400)
                        .write("fix.txt", "fixed\n"),
                ],
            )
            .review(Action::says(
                "Looks right.\nREVIEW_APPROVE: the fix is there",
            ));
        let readme = include_str!("../../README.md");
        let example = readme
            .split("### Example")
            .nth(1)
            .and_then(|s| s.split("```json\n").nth(1))
            .and_then(|s| s.split("```").next())
            .expect("the README's example");
        assert_eq!(Scenario::parse(example).unwrap(), built);
    }
}
