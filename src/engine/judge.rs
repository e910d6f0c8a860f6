//! Judging a finished attempt: pass, retry, wait, or hand over to a human.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Caps, backoff};
use crate::agent::{BugKind, Class, Verdict};
use crate::m1::settings::AgentKind;
use crate::text::one_line;
use crate::verify;

pub(crate) use crate::bridge::TaskEnd;

/// Everything known about one finished attempt.
#[derive(Debug, Clone)]
#[expect(
    clippy::struct_field_names,
    reason = "an attempt's number is its `attempt`, as M1.md's CURRENT.ATTEMPT calls it"
)]
pub(crate) struct Attempt<'a> {
    pub step: u32,
    pub attempt: u32,
    pub end: TaskEnd,
    /// The agent adapter's class of the outcome (`None` when there was no process to read).
    pub class: Option<Class>,
    /// The agent's final answer (the result event's text): its verdict line, or, for the
    /// planning call, the plan.
    pub answer: &'a str,
    pub denials: &'a [String],
    /// The tool call a hook deferred, where the run ended.
    pub deferred: Option<&'a crate::agent::DeferredCall>,
    /// Background work the CLI stopped after the answer (see
    /// [`crate::agent::StreamSummary::background_stopped`]).
    pub background_stopped: &'a [String],
    /// Whether a VERIFY command is configured.
    pub verify_configured: bool,
    /// The VERIFY run, once it ran.
    pub verify: Option<&'a verify::Outcome>,
    /// Transient errors this step already waited out.
    pub transients: u32,
    /// Fresh sessions this step already asked for (`STEP_RESTART`).
    pub restarts: u32,
    /// Attempts of the step that do not count against `Caps::max_retries` ([`super::uncounted`]):
    /// retakes a review asked for, and those before a person's `loop retry`.
    pub uncounted: u32,
    /// The attempt resumed an earlier session (`--resume`).
    pub resumed: bool,
    /// The tools the agent was allowed (`AGENT.ALLOWED_TOOLS` in force), for the advice after
    /// a denial.
    pub allowed_tools: &'a [String],
    pub caps: &'a Caps,
    /// What the loop has spent, this run included: whether a run cut off at its budget met
    /// the loop's cap (`MAX_COST_USD`) or its own (`AGENT.MAX_BUDGET_USD`).
    pub spent_usd: f64,
    /// The backend that ran the attempt.
    pub backend: AgentKind,
    pub now: DateTime<Utc>,
}

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Judgement {
    /// The step is done.
    Pass { summary: String },
    /// The planning call answered with a usable plan.
    Planned {
        steps: Vec<String>,
        /// `PLAN.AFTER`: the steps each waits for, as the plan said.
        after: std::collections::BTreeMap<u32, Vec<u32>>,
    },
    /// So far so good: run VERIFY, then judge again with its outcome.
    NeedsVerify,
    /// A failed attempt; another follows in the same session.
    Retry { reason: String },
    /// A failed attempt, the last one `Caps::max_retries` allows, or one no retry can pass
    /// (`no_retry`: what it needed the sandbox hid): the step and the loop fail.
    Exhausted { reason: String, no_retry: bool },
    /// Cut off by what is not the attempt's doing: a wait, then the same attempt again; or a
    /// human first. Not a failed attempt.
    Interrupted(Interruption),
    /// The agent asks the human a question.
    Blocked { question: String },
    /// The agent asked with its question tool (`AskUserQuestion`), which the loop's hook
    /// deferred: the run ended there, and the answer goes back as the tool's result when the
    /// session resumes. `options`: the answers offered (none: a free-text answer).
    Asked {
        tool_use: String,
        question: String,
        options: Vec<String>,
    },
    /// The permission settings denied the agent these tools: a human decides whether to allow
    /// them (and `how`, by hand). Not a failed attempt.
    Denied { tools: Vec<String>, how: String },
    /// The agent wrote a handoff note and asks to go on in a fresh session; the attempt does
    /// not count.
    Restart { reason: String },
    /// The session cannot be resumed: start a fresh one, attempt not counted.
    FreshSession { reason: String },
    /// The session id is taken: resume it instead, attempt not counted.
    ResumeSession { reason: String },
    /// The agent's usage limit resets later than `LIMITS.FALLBACK_AFTER`: the step goes on
    /// with `AGENT.FALLBACK` in a fresh session from the runner's handoff, attempt not counted.
    Fallback {
        to: AgentKind,
        until: DateTime<Utc>,
        reason: String,
    },
}

/// How a task was judged, as the task ledger keeps it (`judged.json`): what a later look at an
/// old text needs to know of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LedgerVerdict {
    /// The attempt passed (or the planning call planned).
    Pass,
    Verify,
    /// A failed attempt, retried.
    Retry,
    /// The last failed attempt: the step FAILED.
    Failed,
    Backoff,
    UsageWait,
    Blocked,
    Halt,
    /// A fresh session, or the named one resumed, not counted.
    Session,
    Restart,
    /// Ended by a stop.
    Stopped,
    /// A review run, whatever it said.
    Review,
    /// A verdict a later version wrote.
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for LedgerVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The same word `judged.json` keeps.
        let word = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        f.write_str(&word)
    }
}

impl From<&Judgement> for LedgerVerdict {
    fn from(j: &Judgement) -> Self {
        match j {
            Judgement::Pass { .. } | Judgement::Planned { .. } => LedgerVerdict::Pass,
            Judgement::NeedsVerify => LedgerVerdict::Verify,
            Judgement::Retry { .. } => LedgerVerdict::Retry,
            Judgement::Exhausted { .. } => LedgerVerdict::Failed,
            // A run cut off by the cost cap is not a failed attempt either: the step goes on
            // in its session once the cap is raised.
            Judgement::Interrupted(
                Interruption::Backoff { .. } | Interruption::OverBudget { .. },
            ) => LedgerVerdict::Backoff,
            Judgement::Interrupted(Interruption::UsageWait { .. }) => LedgerVerdict::UsageWait,
            Judgement::Blocked { .. } | Judgement::Asked { .. } => LedgerVerdict::Blocked,
            Judgement::Interrupted(Interruption::Halt { .. }) | Judgement::Denied { .. } => {
                LedgerVerdict::Halt
            }
            Judgement::FreshSession { .. }
            | Judgement::ResumeSession { .. }
            | Judgement::Fallback { .. } => LedgerVerdict::Session,
            Judgement::Restart { .. } => LedgerVerdict::Restart,
        }
    }
}

/// The runner cannot go on without a human: `reason`, and `how` to go on.
fn halt(reason: String, how: &str) -> Judgement {
    Judgement::Interrupted(Interruption::Halt {
        reason,
        how: how.into(),
    })
}

/// How the reason of a failure no retry can pass begins (a path the sandbox hid): the step
/// waits on a person at once, whatever attempts are left.
pub(crate) const NO_RETRY: &str = "no retry can pass: ";

/// How a run cut off by the loop's cap is said (in `INTERRUPTED`, which the run that goes on
/// reads, see [`super::prompt::interrupted`]).
pub(crate) const BUDGET_CUT: &str = "the loop's cost cap ended the run";

/// When the reset time of a usage limit is unknown, wait this long before trying again.
pub(super) const UNKNOWN_RESET_WAIT: Duration = Duration::from_secs(30 * 60);

fn failed(a: &Attempt<'_>, reason: &str) -> Judgement {
    failed_attempt(failures(a.attempt, a.uncounted), a.caps.max_retries, reason)
}

/// How many of a step's attempts up to `attempt` count as failed: all but the `uncounted`
/// ones (see [`super::uncounted`]).
#[must_use]
pub(crate) fn failures(attempt: u32, uncounted: u32) -> u32 {
    attempt.saturating_sub(uncounted)
}

/// A failed attempt, the `failures`-th of the step: retried, unless it was the last one
/// `Caps::max_retries` allows.
#[must_use]
pub(crate) fn failed_attempt(failures: u32, max_retries: u32, reason: &str) -> Judgement {
    let reason = one_line(reason, 300);
    if failures >= max_retries {
        Judgement::Exhausted {
            reason,
            no_retry: false,
        }
    } else {
        Judgement::Retry { reason }
    }
}

fn minutes(d: Duration) -> String {
    let secs = d.as_secs();
    if secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// Judges one finished attempt. Order matters: how the process ended, then the agent's class,
/// then its permission denials and verdict, then VERIFY.
#[must_use]
pub(crate) fn judge(a: &Attempt<'_>) -> Judgement {
    cut_off(a).unwrap_or_else(|| judge_success(a))
}

/// What ended a run before its answer could count: how the process ended, or the agent's
/// class when it is not a success. `None`: the run ended by itself with a result, and its
/// answer decides. A step's attempt and a review run are cut off by the same things.
pub(super) fn cut_off(a: &Attempt<'_>) -> Option<Judgement> {
    judge_end(a).or_else(|| match a.class.clone() {
        None => Some(failed(a, "the agent left no output to judge")),
        Some(Class::Success) => None,
        Some(Class::Other(msg)) => Some(failed(a, &msg)),
        Some(class) => Some(judge_failure(a, class)),
    })
}

/// What cut a run off that is not the run's doing: an API error to wait out, the usage
/// limit, or something only a human can fix (the login, the bill, the agent itself).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Interruption {
    /// A transient error: wait `delay`, then run again.
    Backoff { delay: Duration, reason: String },
    /// The usage limit: wait until it resets, then carry on. `guess`: how `until` was
    /// guessed from words that did not fix it, said beside the wait.
    UsageWait {
        until: DateTime<Utc>,
        guess: Option<String>,
        reason: String,
    },
    /// The runner cannot go on without a human.
    Halt { reason: String, how: String },
    /// The run was given what was left of the loop's `MAX_COST_USD`, and spent it: the loop
    /// waits on a COST gate, and the step goes on in its session once the cap is raised.
    OverBudget { reason: String },
}

/// How the process ended, when that alone decides: the loop's limits or a kill ended it, it
/// was lost, or it never started. `None` when it exited by itself.
fn judge_end(a: &Attempt<'_>) -> Option<Judgement> {
    Some(match &a.end {
        TaskEnd::Timeout => failed(
            a,
            &format!(
                "step timeout: killed after {}",
                minutes(a.caps.step_timeout)
            ),
        ),
        // Silent while its CLI waited out an API error it retries (saying so only on stderr):
        // the outage, not the work, is what the idle limit caught, and the class says so.
        TaskEnd::Idle if matches!(a.class, Some(Class::Transient(_))) => return None,
        TaskEnd::Idle => {
            let idle = a
                .caps
                .idle_timeout
                .map_or_else(|| "the idle limit".into(), minutes);
            failed(a, &format!("idle timeout: no output for {idle}, killed"))
        }
        // Ended (by the runner, or `loop kill`) while the CLI retried a refused key: the class
        // says so, and only a human can fix it.
        TaskEnd::Killed if matches!(a.class, Some(Class::Auth(_))) => return None,
        // Ended (by the runner as soon as it saw it, or by `loop kill`) in a storm of rate-limit
        // retries: the class says so, and the limit is waited out.
        TaskEnd::Killed if matches!(a.class, Some(Class::RateLimited(_))) => return None,
        TaskEnd::Killed => failed(a, "the step's task was killed (loop kill)"),
        TaskEnd::Lost => failed(
            a,
            "the step's task was lost (its supervisor died: reboot or kill -9)",
        ),
        TaskEnd::SpawnFailed(msg) => halt(
            format!("the agent could not be started: {}", one_line(msg, 200)),
            &format!(
                "{}, or set AGENT.PROGRAM in M1.md to the agent program (a loop runs what its \
                 M1.md says; LOOP_AGENT is for new loops), then `loop resume`",
                crate::agent::backend_for(a.backend).install()
            ),
        ),
        TaskEnd::Exited { .. } => return None,
    })
}

/// A usage limit: wait until it resets, or, when it resets later than
/// `LIMITS.FALLBACK_AFTER`, go on with the next backend of `AGENT.FALLBACK` after the one that
/// ran (see [`next_fallback`]).
fn usage_limit(
    a: &Attempt<'_>,
    resets_at: Option<DateTime<Utc>>,
    guess: Option<String>,
    message: &str,
) -> Judgement {
    let unknown = chrono::Duration::from_std(UNKNOWN_RESET_WAIT).unwrap_or_default();
    let (until, guess) = match resets_at.filter(|t| *t > a.now) {
        Some(t) => (t, guess),
        None => (a.now + unknown, None),
    };
    let reason = one_line(message, 200);
    if let Some((chain, after)) = &a.caps.fallback
        && let Some(to) = next_fallback(chain, a.backend)
        && a.step > 0
        && until - a.now > chrono::Duration::from_std(*after).unwrap_or_default()
    {
        let reason = match guess {
            Some(g) => format!("{reason}; {g}"),
            None => reason,
        };
        return Judgement::Fallback { to, until, reason };
    }
    Judgement::Interrupted(Interruption::UsageWait {
        until,
        guess,
        reason,
    })
}

/// The backend a step on `on` goes on with when `on`'s usage limit resets too late: the one
/// after `on` in the chain, or the chain's first where `on` is not in it (the loop's own
/// backend). A step only ever moves forward along its chain, so it never goes back to a
/// backend whose limit it already met; `None` when the chain has nothing after `on`.
pub(crate) fn next_fallback(chain: &[AgentKind], on: AgentKind) -> Option<AgentKind> {
    let rest = match chain.iter().position(|k| *k == on) {
        Some(i) => &chain[i + 1..],
        None => chain,
    };
    rest.iter().copied().find(|k| *k != on)
}

/// A failure of a class that is not the work's fault: wait it out, or hand it to a human.
fn judge_failure(a: &Attempt<'_>, class: Class) -> Judgement {
    match class {
        Class::Transient(why) | Class::RateLimited(why) => {
            let n = a.transients + 1;
            if n > a.caps.transient_cap {
                let reason = format!(
                    "{n} transient errors on step {}, over the cap of {}; last: {}",
                    a.step,
                    a.caps.transient_cap,
                    one_line(&why, 200)
                );
                halt(
                    reason,
                    "check the network and the API status, then `loop resume`",
                )
            } else {
                Judgement::Interrupted(Interruption::Backoff {
                    delay: backoff(n),
                    reason: one_line(&why, 200),
                })
            }
        }
        Class::UsageLimit {
            resets_at,
            guess,
            message,
        } => usage_limit(a, resets_at, guess, &message),
        Class::Auth(msg) => halt(
            format!("authentication failed: {}", one_line(&msg, 200)),
            &format!(
                "{}, then `loop resume`",
                crate::agent::backend_for(a.backend).login()
            ),
        ),
        Class::Billing(msg) if msg.contains("maximum budget") => budget_spent(a, &msg),
        Class::Billing(msg) => halt(
            format!("billing: {}", one_line(&msg, 200)),
            "add credit to the account the agent uses (the Claude Console's billing page), \
             then `loop resume`",
        ),
        Class::InvocationBug { kind, message } => match kind {
            BugKind::UnknownSession if a.resumed => Judgement::FreshSession {
                reason: one_line(&message, 200),
            },
            // Past the window its resume runs with (2.1.197 resumes a 1M session with 200k):
            // every resume would fail alike, so the step goes on fresh, from a handoff.
            BugKind::ContextTooLong if a.resumed => Judgement::FreshSession {
                reason: format!(
                    "the session's context does not fit the model's window on resume: {}",
                    one_line(&message, 200)
                ),
            },
            BugKind::SessionInUse if !a.resumed => Judgement::ResumeSession {
                reason: one_line(&message, 200),
            },
            BugKind::Sandboxed => halt(
                format!(
                    "the agent program cannot start in the sandbox: {}",
                    one_line(&message, 300)
                ),
                "grant what it names as it says, then `loop resume`",
            ),
            _ => halt(
                format!(
                    "the agent refused its invocation: {}",
                    one_line(&message, 200)
                ),
                "fix the agent's settings in M1.md's AGENT block (PROGRAM, MODEL, \
                 PERMISSION_MODE, EXTRA_ARGS: a loop runs what its M1.md says, loop.yaml is for \
                 new loops), then `loop resume`",
            ),
        },
        Class::Success | Class::Other(_) => failed(a, &class.to_string()),
    }
}

/// A run the CLI ended at the budget it was given: the loop's cap, when the loop has now spent
/// it (the run was given what was left of it), which a person raises or not on a COST gate;
/// else the attempt's own cap (`AGENT.MAX_BUDGET_USD`), which only a hand edit raises.
fn budget_spent(a: &Attempt<'_>, msg: &str) -> Judgement {
    match a.caps.max_cost_usd.filter(|max| a.spent_usd >= *max) {
        Some(max) => Judgement::Interrupted(Interruption::OverBudget {
            reason: format!(
                "{BUDGET_CUT} (${:.2} spent of MAX_COST_USD ${max:.2}): {}",
                a.spent_usd,
                one_line(msg, 200)
            ),
        }),
        None => halt(
            format!("the attempt reached its budget: {}", one_line(msg, 200)),
            "raise AGENT.MAX_BUDGET_USD in M1.md (the cap of one attempt, in US dollars), or \
             remove that line for none, then `loop resume`",
        ),
    }
}

/// A run that ended on a deferred tool call: a question for the person when it is the
/// agent's `AskUserQuestion` (the loop's hook defers nothing else), else a failed attempt.
fn asked(a: &Attempt<'_>, call: &crate::agent::DeferredCall) -> Judgement {
    let Some(questions) = call.questions() else {
        return failed(
            a,
            &format!(
                "a PreToolUse hook deferred the agent's call to {}, which the loop cannot \
                 answer; remove that hook's `defer` for loop runs",
                call.name
            ),
        );
    };
    // One question: its options are the buttons. Several: one free-text answer for them all.
    let (question, options) = match questions.as_slice() {
        [(q, options)] => (q.clone(), options.clone()),
        many => (
            many.iter()
                .map(|(q, _)| q.as_str())
                .collect::<Vec<_>>()
                .join(" / "),
            Vec::new(),
        ),
    };
    Judgement::Asked {
        tool_use: call.id.clone(),
        question,
        options,
    }
}

/// What to change after a denial: the exact text that allows the denied tools on M1.md's
/// `AGENT.ALLOWED_TOOLS` line (a loop runs what its M1.md says: `loop.yaml` and
/// `--allowed-tools` are for new loops).
fn allow_advice(allowed: &[String], denied: &[&str]) -> String {
    let missing: Vec<&str> = denied
        .iter()
        .copied()
        .filter(|t| !allowed.iter().any(|a| a == t))
        .collect();
    let edit = if allowed.is_empty() {
        format!(
            "make the line under AGENT `ALLOWED_TOOLS: {}`",
            missing.join(",")
        )
    } else {
        format!(
            "add `,{}` to the end of the line `ALLOWED_TOOLS:` under AGENT",
            missing.join(",")
        )
    };
    let bash = if missing.contains(&"Bash") {
        " (`Bash` allows every command, `Bash(make:*)` one)"
    } else {
        ""
    };
    format!(
        "in M1.md, {edit}{bash}, then `loop resume`; a deny rule in your Claude settings \
         (permissions.deny) wins over any allow: remove it there"
    )
}

fn judge_success(a: &Attempt<'_>) -> Judgement {
    if let Some(call) = a.deferred {
        return asked(a, call);
    }
    if !a.denials.is_empty() {
        let mut tools: Vec<&str> = a.denials.iter().map(String::as_str).collect();
        tools.sort_unstable();
        tools.dedup();
        return Judgement::Denied {
            how: allow_advice(a.allowed_tools, &tools),
            tools: tools.into_iter().map(str::to_owned).collect(),
        };
    }
    if a.step == 0 {
        // The planning call answers with a JSON plan, not a verdict line.
        let plan = crate::agent::parse_plan(a.answer).and_then(|steps| {
            let after = crate::agent::parse_plan_after(a.answer, steps.len())?;
            Ok((steps, after))
        });
        return match plan {
            Ok((steps, after)) => Judgement::Planned { steps, after },
            Err(e) => failed(a, &format!("the planning answer held no usable plan: {e}")),
        };
    }
    match &crate::agent::verdict(a.answer) {
        Verdict::Done(_) if !a.background_stopped.is_empty() => failed(
            a,
            &format!(
                "the step's background work was still running when it answered, and the CLI \
                 stopped it unfinished: {}; run it to its end in the foreground, then answer",
                a.background_stopped.join(", ")
            ),
        ),
        Verdict::Done(summary) => {
            if !a.verify_configured {
                return Judgement::Pass {
                    summary: summary.clone(),
                };
            }
            match a.verify {
                // Not run yet. A stop during VERIFY is handled by the runner before it judges.
                None | Some(verify::Outcome::Stopped) => Judgement::NeedsVerify,
                Some(verify::Outcome::Passed) => Judgement::Pass {
                    summary: summary.clone(),
                },
                Some(verify::Outcome::Failed { code, tail }) => {
                    let code = code.map_or_else(|| "a signal".into(), |c| format!("exit {c}"));
                    failed(a, &format!("VERIFY failed ({code}){}", said(tail)))
                }
                // No agent can grant a path: the person decides now, not after more attempts.
                Some(verify::Outcome::Refused { code, said, .. }) => {
                    let code = code.map_or_else(|| "a signal".into(), |c| format!("exit {c}"));
                    Judgement::Exhausted {
                        reason: one_line(&format!("{NO_RETRY}VERIFY failed ({code}): {said}"), 400),
                        no_retry: true,
                    }
                }
                Some(verify::Outcome::TimedOut { tail }) => {
                    failed(a, &format!("VERIFY timed out{}", said(tail)))
                }
            }
        }
        Verdict::Blocked(question) => Judgement::Blocked {
            question: one_line(question, 500),
        },
        Verdict::Failed(reason) => failed(a, &format!("the agent reported STEP_FAILED: {reason}")),
        Verdict::Restart(reason) if a.restarts >= a.caps.max_restarts => failed(
            a,
            &format!(
                "the agent asked for a fresh session past MAX_RESTARTS {} (STEP_RESTART: {reason})",
                a.caps.max_restarts
            ),
        ),
        Verdict::Restart(reason) => Judgement::Restart {
            reason: one_line(reason, 300),
        },
        Verdict::Missing => failed(
            a,
            "the answer did not end with a STEP_DONE / STEP_BLOCKED / STEP_FAILED line",
        ),
    }
}

/// What a VERIFY run printed, to follow its outcome: `: last | lines`, or that it printed
/// nothing.
fn said(tail: &str) -> String {
    let lines = last_lines(tail, 5);
    if lines.is_empty() {
        " and printed nothing".into()
    } else {
        format!(": {lines}")
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
