//! The prompts a run is given, rendered from `templates/`: which one (a pure choice from
//! M1.md) and its text.

use crate::m1::{M1, StepState};
use std::fmt::Write as _;

const STEP: &str = include_str!("../../templates/step.md");
const FIX: &str = include_str!("../../templates/fix.md");
const PLAN: &str = include_str!("../../templates/plan.md");
const INTERRUPTED: &str = include_str!("../../templates/interrupted.md");
const HANDOFF: &str = include_str!("../../templates/handoff.md");
const VERDICTS: &str = include_str!("../../templates/verdicts.md");
const REVIEW: &str = include_str!("../../templates/review.md");

fn fill(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = template.replace("{verdicts}", VERDICTS.trim_end());
    for (k, v) in vars {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

/// The goal as a run is told it: for a loop started from a GitHub issue, the issue's text
/// follows, which the one line of `GOAL` cannot hold.
fn goal(m: &M1) -> String {
    match (&m.github.issue, m.github.issue_body.as_deref()) {
        (Some(n), Some(body)) if !body.trim().is_empty() => {
            format!(
                "{}\n\nThe goal is issue #{n}, which says:\n{}\n",
                m.goal,
                body.trim_end()
            )
        }
        _ => m.goal.clone(),
    }
}

fn constraints(m: &M1) -> String {
    m.constraints
        .clone()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "(none)".into())
}

/// The plan as the agent sees it: each step with its state and what earlier steps reported.
#[must_use]
pub(crate) fn plan_listing(m: &M1) -> String {
    let mut out = String::new();
    for s in &m.plan.steps {
        let _ = writeln!(out, "  {}: [{}] {}", s.n, s.state.as_str(), s.text);
        if s.state == StepState::Done
            && let Some(sum) = m.results.get(&s.n).and_then(|r| r.summary.as_deref())
        {
            let _ = writeln!(out, "     reported: {sum}");
        }
    }
    out.trim_end().to_string()
}

fn step_text(m: &M1, n: u32) -> &str {
    m.plan
        .steps
        .iter()
        .find(|s| s.n == n)
        .map_or("", |s| s.text.as_str())
}

/// The prompt of a step's first attempt.
#[must_use]
/// `handoff` is where the agent writes its note before `STEP_RESTART`.
pub(crate) fn step(m: &M1, n: u32, handoff: &str) -> String {
    fill(STEP, &step_vars(m, n, handoff))
}

/// What every prompt of step `n` may name.
fn step_vars(m: &M1, n: u32, handoff: &str) -> Vec<(&'static str, String)> {
    vec![
        ("goal", goal(m)),
        ("constraints", constraints(m)),
        ("total", m.plan.steps.len().to_string()),
        ("plan", plan_listing(m)),
        ("step_text", step_text(m, n).to_string()),
        ("step", n.to_string()),
        ("handoff", handoff.to_string()),
    ]
}

/// The first prompt of a fresh session that carries a step on: `why` the earlier session
/// ended, and the `note` it (and the loop) left.
#[must_use]
pub(crate) fn handoff(m: &M1, n: u32, why: &str, note: &str, handoff: &str) -> String {
    let mut vars = step_vars(m, n, handoff);
    vars.push(("reason", why.to_string()));
    vars.push(("note", note.to_string()));
    fill(HANDOFF, &vars)
}

/// The prompt of a retry, in the same session, carrying what failed.
#[must_use]
pub(crate) fn fix(
    m: &M1,
    n: u32,
    (attempt, max_retries): (u32, u32),
    failure: &str,
    handoff: &str,
) -> String {
    let mut vars = step_vars(m, n, handoff);
    vars.push(("attempt", attempt.to_string()));
    vars.push(("max_retries", max_retries.to_string()));
    vars.push(("failure", failure.to_string()));
    fill(FIX, &vars)
}

/// The prompt after an API error (or the loop's cost cap) cut a run off and the loop waited it
/// out: carry on, in the same session. `failure` is the step's last real failure, still to be
/// fixed, if any.
#[must_use]
pub(crate) fn interrupted(
    m: &M1,
    n: u32,
    reason: &str,
    failure: Option<&str>,
    handoff: &str,
) -> String {
    let still_open = failure.map_or_else(String::new, |f| {
        format!("\nThe attempt before it had not passed, and that still needs fixing:\n{f}\n")
    });
    let mut vars = step_vars(m, n, handoff);
    // The loop's cost cap, once a person raised it; else what the loop waits out.
    let cause = if reason.starts_with(super::judge::BUDGET_CUT) {
        "the loop's cost cap, which a person has since raised"
    } else {
        "an API error"
    };
    vars.push(("cause", cause.to_string()));
    vars.push(("reason", reason.to_string()));
    vars.push(("still_open", still_open));
    fill(INTERRUPTED, &vars)
}

/// The prompt after a human answered a `STEP_BLOCKED` question: with their `answer`, or by
/// editing M1.md.
#[must_use]
pub(crate) fn answered(
    m: &M1,
    n: u32,
    question: &str,
    answer: Option<&str>,
    handoff: &str,
) -> String {
    match answer {
        Some(answer) => format!(
            "You asked: {question}\n\nThe human answered: {answer}\n\nThe goal and \
             constraints read:\nGOAL: {}\nCONSTRAINTS: {}\n\n{}",
            goal(m),
            constraints(m),
            step(m, n, handoff)
        ),
        None => format!(
            "You asked: {question}\n\nThe human has answered by editing the loop's state. \
             The goal and constraints now read:\nGOAL: {}\nCONSTRAINTS: {}\n\n{}",
            goal(m),
            constraints(m),
            step(m, n, handoff)
        ),
    }
}

/// The planning call's prompt.
#[must_use]
pub(crate) fn plan(m: &M1, max_steps: u32) -> String {
    fill(
        PLAN,
        &[
            ("goal", goal(m)),
            ("constraints", constraints(m)),
            ("max_steps", max_steps.to_string()),
        ],
    )
}

/// What a session working on `step` of the loop in `file` is told when it starts, resumes or
/// was compacted (the `SessionStart` hook): the goal, the plan and what earlier steps
/// reported, its step, and how to end it.
#[must_use]
pub(crate) fn session_context(m: &M1, step: u32, file: &str, handoff: &str) -> String {
    let mut out = format!(
        "You work inside an autonomous loop (m1loop). Its state is in {file}; only the loop \
         writes it.\nSTATUS: {}\nGOAL: {}\nCONSTRAINTS: {}\n\nPLAN:\n{}\n",
        m.status.as_str(),
        goal(m),
        constraints(m),
        plan_listing(m)
    );
    if step > 0 {
        let _ = write!(
            out,
            "\nYOUR STEP ({step}): {}\nDo this step, and only this step.",
            step_text(m, step)
        );
        if let Some(err) = m.results.get(&step).and_then(|r| r.error.as_deref()) {
            let _ = write!(out, " Its last attempt did not pass: {err}");
        }
        let verdicts = VERDICTS.trim_end().replace("{handoff}", handoff);
        let _ = write!(
            out,
            "\n\nYour answer's LAST line must be exactly one of these, with nothing after it:\n{verdicts}\n"
        );
    } else if let Some(next) = &m.next_action {
        let _ = write!(out, "\nNEXT_ACTION: {next}\n");
    }
    out
}

/// What a person's own Claude Code session in the project is told when it starts (the hook of
/// `loop hook install`): the loop's state, so that it knows what runs beside it, and none of a
/// step agent's orders (its step, the verdict line that must end its answer), which are not a
/// person's.
#[must_use]
pub(crate) fn person_context(m: &M1, file: &str) -> String {
    let mut out = format!(
        "An autonomous loop (m1loop) works in this project. Its state is in {file}, which its \
         runner writes; this session is not one of its steps.\nSTATUS: {}\nGOAL: {}\n\
         CONSTRAINTS: {}\n\nPLAN:\n{}",
        m.status.as_str(),
        goal(m),
        constraints(m),
        plan_listing(m)
    );
    if m.plan.current_step > 0 {
        let _ = write!(
            out,
            "\nThe loop is at step {}: {}\n",
            m.plan.current_step,
            step_text(m, m.plan.current_step)
        );
    }
    for (key, value) in [
        ("LAST_ACTION", &m.last_action),
        ("NEXT_ACTION", &m.next_action),
    ] {
        if let Some(v) = value {
            let _ = writeln!(out, "{key}: {v}");
        }
    }
    out.push_str(
        "\n`loop status` shows where it stands; `loop stop` stops it and `loop resume` carries \
         it on.\n",
    );
    out
}

/// The prompt of a review of step `n`: what it was to do, what its agent claims, what VERIFY
/// said, and the diff.
#[must_use]
pub(crate) fn review(m: &M1, n: u32, summary: &str, verify: &str, diff: &str) -> String {
    let mut vars = step_vars(m, n, "");
    vars.push(("summary", summary.to_string()));
    vars.push(("verify", verify.to_string()));
    vars.push(("diff", diff.to_string()));
    fill(REVIEW, &vars)
}

/// Which prompt the next run gets, from M1.md alone (so a spawn a crash interrupted is redone
/// identically). Some need what only I/O can tell ([`Gathered`]) before they are written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Prompt {
    /// The planning call, told why its previous answer was not usable, if it was not.
    Plan { previous_error: Option<String> },
    /// The step again, after a human answered its `STEP_BLOCKED` question.
    Answered {
        question: String,
        /// The answer given through the question's gate (`loop answer`, a reply in the chat);
        /// `None`: the person answered by editing M1.md.
        answer: Option<String>,
    },
    /// No prompt at all: the session resumes at the question tool call the loop's hook
    /// deferred, and the hook gives it the person's answer as the tool's result.
    ToolAnswer,
    /// The first prompt of a fresh session that carries the step on, and why.
    Handoff { why: String },
    /// The run after an API error cut the previous one off: carry on.
    Interrupted {
        why: String,
        still_open: Option<String>,
    },
    /// A retry in the same session: attempt `nth` of `Caps::max_retries` (counting the attempts that
    /// can fail: a retake or a wait is not one), and what failed last.
    Fix { nth: u32, failure: String },
    /// The step's first prompt.
    Step,
    /// A review of the step.
    Review,
}

impl Prompt {
    /// The prompt of run `number` of `step`, of `kind`, in a session it `resumed` or not.
    #[must_use]
    pub(crate) fn choose(
        kind: super::RunKind,
        m: &M1,
        step: u32,
        number: u32,
        resumed: bool,
    ) -> Prompt {
        let r = m.result(step);
        match kind {
            super::RunKind::Review => return Prompt::Review,
            super::RunKind::Plan => {
                return Prompt::Plan {
                    previous_error: r.error.clone(),
                };
            }
            super::RunKind::Attempt => {}
        }
        if let Some(question) = &r.blocked {
            if resumed && super::gate::deferred_call_answered(m, step, question) {
                return Prompt::ToolAnswer;
            }
            return Prompt::Answered {
                question: question.clone(),
                answer: super::gate::answer_to(m, step, question),
            };
        }
        if let Some(why) = r.handoff.as_ref().filter(|_| !resumed) {
            return Prompt::Handoff { why: why.clone() };
        }
        match (&r.interrupted, &r.error) {
            (Some(why), error) if resumed => Prompt::Interrupted {
                why: why.clone(),
                still_open: error.clone(),
            },
            (None, Some(failure)) if resumed => Prompt::Fix {
                nth: super::failures(number, super::uncounted(m, step)),
                failure: failure.clone(),
            },
            _ => Prompt::Step,
        }
    }

    /// Whether writing it out needs the handoff's material (the agent's note, the last answer,
    /// the files changed).
    #[must_use]
    pub(crate) fn needs_handoff(&self) -> bool {
        matches!(self, Prompt::Handoff { .. })
    }

    /// Whether writing it out needs the step's diff and what VERIFY printed.
    #[must_use]
    pub(crate) fn needs_review_material(&self) -> bool {
        *self == Prompt::Review
    }
}

/// What the runner found out, by I/O, for the prompts that need it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gathered {
    /// Where the agent writes its handoff note before `STEP_RESTART`.
    pub handoff_path: String,
    /// The note a fresh session is handed ([`handoff_note`]).
    pub handoff_note: String,
    /// For a review: the VERIFY command in force, what it printed last, and the step's diff
    /// (`None`: not in git).
    pub verify_cmd: Option<String>,
    pub verify_tail: String,
    pub diff: Option<String>,
}

/// What a fresh session of a step is handed: the agent's own note (from `STEP_RESTART`), then
/// what the loop knows: the last failure, the last answer, the files changed.
#[must_use]
pub(crate) fn handoff_note(
    own: Option<&str>,
    error: Option<&str>,
    last_answer: Option<&str>,
    diff_stat: Option<&str>,
) -> String {
    let mut note = String::new();
    if let Some(own) = own {
        let _ = writeln!(
            note,
            "Your note from the previous session:\n{}\n",
            own.trim()
        );
    }
    if let Some(err) = error {
        let _ = writeln!(note, "What failed last: {err}\n");
    }
    if let Some(text) = last_answer.filter(|t| !t.trim().is_empty()) {
        let _ = writeln!(
            note,
            "The previous session's last answer:\n{}\n",
            text.trim()
        );
    }
    if let Some(stat) = diff_stat {
        let _ = writeln!(
            note,
            "Files changed in the working tree (git diff --stat):\n{stat}"
        );
    }
    note
}

/// The text of prompt `p` for `step`.
#[must_use]
pub(crate) fn render(p: &Prompt, m: &M1, step: u32, caps: &super::Caps, g: &Gathered) -> String {
    let path = g.handoff_path.as_str();
    match p {
        Prompt::Plan { previous_error } => {
            let mut text = plan(m, caps.max_steps);
            if let Some(err) = previous_error {
                let _ = writeln!(text, "\n\nYour previous answer was not usable: {err}");
            }
            text
        }
        Prompt::ToolAnswer => String::new(),
        Prompt::Answered { question, answer } => {
            answered(m, step, question, answer.as_deref(), path)
        }
        Prompt::Handoff { why } => handoff(m, step, why, &g.handoff_note, path),
        Prompt::Interrupted { why, still_open } => {
            interrupted(m, step, why, still_open.as_deref(), path)
        }
        Prompt::Fix { nth, failure } => fix(m, step, (*nth, caps.max_retries), failure, path),
        Prompt::Step => self::step(m, step, path),
        Prompt::Review => {
            let r = m.result(step);
            let summary = r.summary.clone().unwrap_or_default();
            let verify = match &g.verify_cmd {
                None => "(no VERIFY command is set)".to_owned(),
                Some(cmd) => format!("`{cmd}` passed; its output ended:\n{}", g.verify_tail),
            };
            let diff = g
                .diff
                .clone()
                .unwrap_or_else(|| "(the project is not a git repository: read the files)".into());
            review(m, step, &summary, &verify, &diff)
        }
    }
}
