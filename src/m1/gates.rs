//! `GATES:`, the decisions a loop waits for: one block per gate (`G1`, `G2`, …), each with its
//! kind, the step it is about, a fingerprint of what the person was shown, the answers offered,
//! and once decided, the choice, who made it and when. A gate is the loop's record of a
//! question, so it survives every crash the file does, and a decision is written once: a gate
//! that is DECIDED stays so.
//!
//! ```text
//! GATES:
//!   G1:
//!     KIND: PLAN
//!     STEP: 0
//!     SHOWN: 9f3a61c0d2b7e815
//!     OPTIONS: approve | reject
//!     STATE: DECIDED
//!     CHOICE: approve
//!     BY: telegram 4242 (@dj)
//!     AT: 2026-11-24T09:12:03Z
//! ```

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::document::Document;
use super::edit::Edit;
use super::keys::GateKey;
use super::typed;

/// What a gate asks a person to decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum GateKind {
    /// Approve the plan before any step runs (`--approve-plan`).
    Plan,
    /// A step's question (`STEP_BLOCKED`): a free-text answer, or one of the options offered.
    Ask,
    /// A tool the permission settings denied.
    Denied,
    /// A step that spent its attempts.
    Failed,
    /// A review that kept asking for changes past its retakes.
    Review,
    /// A parallel step whose merge into the integration branch kept failing (a conflict, or
    /// VERIFY red on the merged result) past `LimitKey::MaxRetries`.
    Merge,
    /// The loop spent its `LIMITS.MAX_COST_USD`: raise it, or stop.
    Cost,
}

/// Whether a gate still waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum GateState {
    Pending,
    Decided,
}

upper_enum!(
    GateKind,
    "gate KIND",
    Plan = "PLAN",
    Ask = "ASK",
    Denied = "DENIED",
    Failed = "FAILED",
    Review = "REVIEW",
    Merge = "MERGE",
    Cost = "COST"
);
upper_enum!(
    GateState,
    "gate STATE",
    Pending = "PENDING",
    Decided = "DECIDED"
);

/// An answer a gate offers: every kind's but an ASK gate's, whose options are the agent's own
/// words. Each is matched wherever a decision is carried out, so a new one cannot fall
/// through to another's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateOption {
    /// Run the plan.
    Approve,
    /// Run nothing; the plan is edited, then resumed.
    Reject,
    /// Allow what was denied (the narrow rule for it) and run the step again.
    Allow,
    /// Allow the whole tool that was denied, and run the step again.
    AllowAll,
    /// Run the step again with a fresh budget.
    Retry,
    /// Take the step as done, as it is.
    Accept,
    /// Let the loop spend as much again as its cap (`MAX_COST_USD`), and run on.
    Raise,
    /// Leave the step SKIPPED and go on.
    Skip,
    /// End the loop FAILED at this step.
    Stop,
}

impl GateOption {
    /// Every option, in the order gates offer them.
    pub const ALL: &'static [GateOption] = &[
        GateOption::Approve,
        GateOption::Reject,
        GateOption::Allow,
        GateOption::AllowAll,
        GateOption::Retry,
        GateOption::Accept,
        GateOption::Raise,
        GateOption::Skip,
        GateOption::Stop,
    ];

    /// The word M1.md's `OPTIONS` and `CHOICE` write, and a person types.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            GateOption::Approve => "approve",
            GateOption::Reject => "reject",
            GateOption::Allow => "allow",
            GateOption::AllowAll => "allow-all",
            GateOption::Retry => "retry",
            GateOption::Accept => "accept",
            GateOption::Raise => "raise",
            GateOption::Skip => "skip",
            GateOption::Stop => "stop",
        }
    }

    /// The option a word names, ignoring case and surrounding space.
    #[must_use]
    pub fn parse(word: &str) -> Option<GateOption> {
        let w = word.trim();
        Self::ALL
            .iter()
            .copied()
            .find(|o| o.as_str().eq_ignore_ascii_case(w))
    }

    /// What choosing it does, in a few words.
    #[must_use]
    pub const fn what_it_does(self) -> &'static str {
        match self {
            GateOption::Approve => "run the plan",
            GateOption::Reject => "run nothing; edit the plan, then resume",
            GateOption::Allow => "allow what was denied and run the step again",
            GateOption::AllowAll => "allow the whole tool from now on and run the step again",
            GateOption::Retry => "run the step again with a fresh budget",
            GateOption::Accept => "take the step as done, as it is",
            GateOption::Raise => "let the loop spend as much again as its cap, and run on",
            GateOption::Skip => "leave the step SKIPPED and go on",
            GateOption::Stop => "end the loop FAILED at this step",
        }
    }
}

impl fmt::Display for GateOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The separator of `OPTIONS`.
pub(crate) const OPTION_SEPARATOR: &str = " | ";

/// The option `choice` names on a gate of `kind`: `None` for a step's question (`ASK`), whose
/// answer is the text itself, and for a word that is no option.
#[must_use]
pub(crate) fn option_of(kind: GateKind, choice: &str) -> Option<GateOption> {
    match kind {
        GateKind::Ask => None,
        GateKind::Plan
        | GateKind::Denied
        | GateKind::Failed
        | GateKind::Review
        | GateKind::Merge
        | GateKind::Cost => GateOption::parse(choice),
    }
}

/// What choosing `option` on a gate of `kind` does, in a few words.
#[must_use]
pub(crate) fn what_it_does(kind: GateKind, option: &str) -> &'static str {
    match (kind, GateOption::parse(option)) {
        (GateKind::Ask, _) | (_, None) => "the answer",
        (GateKind::Merge, Some(GateOption::Retry)) => {
            "send the step back to its session to merge the integration branch, with a fresh \
             budget of merges"
        }
        (GateKind::Merge, Some(GateOption::Skip)) => {
            "leave the step SKIPPED, its work kept on its branch, and go on"
        }
        (_, Some(o)) => o.what_it_does(),
    }
}

/// One gate, as M1.md records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    /// `G1`, `G2`, …: the key of its block, which the shell verbs and the chat name.
    pub id: String,
    pub kind: GateKind,
    /// The step it is about; 0 for the plan.
    pub step: u32,
    /// The fingerprint of what was shown ([`fingerprint`]).
    pub shown: String,
    pub question: Option<String>,
    /// The answers offered; empty: a free-text answer.
    pub options: Vec<String>,
    /// The tools a DENIED gate is about.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The deferred question call an ASK gate answers, whose answer goes back as that tool's
    /// result when the session resumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<String>,
    /// The gate of a parallel step's own loop this gate stands for (`STEP_GATE`): decided
    /// here, the decision is carried there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_gate: Option<String>,
    pub state: GateState,
    pub choice: Option<String>,
    pub by: Option<String>,
    pub at: Option<DateTime<Utc>>,
}

impl Gate {
    #[must_use]
    pub fn is_pending(&self) -> bool {
        self.state == GateState::Pending
    }

    /// The option `answer` names (ignoring case and surrounding space), as written in OPTIONS.
    #[must_use]
    pub fn option(&self, answer: &str) -> Option<&str> {
        let answer = answer.trim();
        self.options
            .iter()
            .find(|o| o.trim().eq_ignore_ascii_case(answer))
            .map(String::as_str)
    }
}

/// `G12` → 12.
#[must_use]
pub(crate) fn gate_number(key: &str) -> Option<u32> {
    let n = key.strip_prefix('G')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// `g3` or ` G3 ` as the gate id `G3`, when the word is one.
#[must_use]
pub(crate) fn id_of(word: &str) -> Option<String> {
    let up = word.trim().to_ascii_uppercase();
    gate_number(&up).map(|_| up)
}

/// The gates of `doc`, in the file's order. A block whose KIND or STATE does not read is left
/// out (`validate` reports it first).
pub(crate) fn list(doc: &Document) -> Vec<Gate> {
    let Some(block) = doc.find(&["GATES"]) else {
        return Vec::new();
    };
    doc.children(Some(block))
        .filter_map(|i| {
            let id = doc.key_at(i).key.clone();
            gate_number(&id)?;
            let field = |k: GateKey| {
                doc.child(Some(i), k.name())
                    .and_then(|j| doc.key_at(j).value.as_ref().map(|v| v.text.clone()))
            };
            Some(Gate {
                kind: field(GateKey::Kind)?.parse().ok()?,
                state: field(GateKey::State)?.parse().ok()?,
                step: field(GateKey::Step)
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0),
                shown: field(GateKey::Shown).unwrap_or_default(),
                question: field(GateKey::Question),
                options: field(GateKey::Options)
                    .map(|v| options(&v))
                    .unwrap_or_default(),
                tools: field(GateKey::Tools)
                    .and_then(|v| typed::tools(&v).ok())
                    .unwrap_or_default(),
                tool_use: field(GateKey::ToolUse).filter(|v| !v.trim().is_empty()),
                step_gate: field(GateKey::StepGate).filter(|v| !v.trim().is_empty()),
                choice: field(GateKey::Choice),
                by: field(GateKey::By),
                at: field(GateKey::At).and_then(|v| typed::time(&v).ok()),
                id,
            })
        })
        .collect()
}

/// `approve | reject` → `["approve", "reject"]`.
#[must_use]
pub(crate) fn options(v: &str) -> Vec<String> {
    v.split(OPTION_SEPARATOR.trim())
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The id the next gate gets: one past the highest in the file.
#[must_use]
pub(crate) fn next_id(gates: &[Gate]) -> String {
    let n = gates
        .iter()
        .filter_map(|g| gate_number(&g.id))
        .max()
        .unwrap_or(0);
    format!("G{}", n + 1)
}

impl Gate {
    /// A gate to open, PENDING: `id`, of `kind`, about step `step` (0: the plan), for what was
    /// shown (`shown`, its [`fingerprint`]); no question, options or tools yet.
    #[must_use]
    pub(crate) fn opening(id: String, kind: GateKind, step: u32, shown: String) -> Gate {
        Gate {
            id,
            kind,
            step,
            shown,
            question: None,
            options: Vec::new(),
            tools: Vec::new(),
            tool_use: None,
            step_gate: None,
            state: GateState::Pending,
            choice: None,
            by: None,
            at: None,
        }
    }

    /// The edits that open it: its block written, PENDING.
    #[must_use]
    pub(crate) fn open_edits(&self) -> Vec<Edit> {
        let id = self.id.as_str();
        let mut e = vec![
            GateKey::Kind.set(id, self.kind.as_str()),
            GateKey::Step.set(id, self.step.to_string()),
            GateKey::Shown.set(id, self.shown.clone()),
        ];
        if let Some(q) = &self.question {
            e.push(GateKey::Question.set(id, crate::text::one_line(q, 600)));
        }
        if !self.options.is_empty() {
            e.push(GateKey::Options.set(id, self.options.join(OPTION_SEPARATOR)));
        }
        if !self.tools.is_empty() {
            e.push(GateKey::Tools.set(id, typed::format_tools(&self.tools)));
        }
        if let Some(t) = &self.tool_use {
            e.push(GateKey::ToolUse.set(id, t.clone()));
        }
        if let Some(g) = &self.step_gate {
            e.push(GateKey::StepGate.set(id, g.clone()));
        }
        e.push(GateKey::State.set(id, GateState::Pending.as_str()));
        e
    }
}

/// The edits that record gate `id` DECIDED: `choice`, by whom, when.
#[must_use]
pub(crate) fn decided(id: &str, choice: &str, by: &str, at: DateTime<Utc>) -> Vec<Edit> {
    vec![
        GateKey::State.set(id, GateState::Decided.as_str()),
        GateKey::Choice.set(id, crate::text::one_line(choice, 600)),
        GateKey::By.set(id, crate::text::one_line(by, 120)),
        GateKey::At.set(id, at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    ]
}

/// A short fingerprint of a text: FNV-1a, 64 bits, as 16 hex digits. Stable across versions
/// and machines (it is written into M1.md and into the buttons of a chat message).
#[must_use]
pub(crate) fn fingerprint(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_read_back_as_written() {
        let mut doc = Document::parse("STATUS: WAITING\nGOAL: g\n").unwrap();
        let g = Gate {
            options: vec!["approve".into(), "reject".into()],
            ..Gate::opening("G1".into(), GateKind::Plan, 0, fingerprint("1: a"))
        };
        let denied = Gate {
            question: Some("the agent was denied these tools: Bash(make:*), Write".into()),
            options: [GateOption::Allow, GateOption::Skip, GateOption::Stop]
                .iter()
                .map(|o| o.as_str().to_owned())
                .collect(),
            tools: vec!["Bash(make:*)".into(), "Write".into()],
            ..Gate::opening("G2".into(), GateKind::Denied, 2, fingerprint("Bash"))
        };
        for e in g.open_edits().into_iter().chain(denied.open_edits()) {
            doc.apply(&e);
        }
        let at = "2026-11-24T09:12:03Z".parse().unwrap();
        for e in decided("G1", "approve", "telegram 4242 (@dj)", at) {
            doc.apply(&e);
        }
        let text = doc.render();
        assert!(text.contains("GATES:\n  G1:\n    KIND: PLAN\n"), "{text}");
        let doc = Document::parse(&text).unwrap();
        let gates = list(&doc);
        assert_eq!(gates.len(), 2);
        assert_eq!(gates[1].tools, ["Bash(make:*)", "Write"]);
        assert_eq!(gates[1].options, ["allow", "skip", "stop"]);
        assert!(gates[1].is_pending());
        let g1 = &gates[0];
        assert_eq!(g1.kind, GateKind::Plan);
        assert_eq!(g1.options, ["approve", "reject"]);
        assert_eq!(g1.state, GateState::Decided);
        assert_eq!(g1.choice.as_deref(), Some("approve"));
        assert_eq!(g1.at, Some(at));
        assert_eq!(g1.option(" Approve "), Some("approve"));
        assert_eq!(next_id(&gates), "G3");
    }

    #[test]
    fn a_fingerprint_changes_with_any_byte_and_never_with_the_machine() {
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_ne!(fingerprint("1: a"), fingerprint("1: b"));
        assert_eq!(fingerprint("1: a").len(), 16);
    }

    #[test]
    fn gate_ids_are_g_and_a_number() {
        assert_eq!(gate_number("G12"), Some(12));
        assert_eq!(gate_number("G"), None);
        assert_eq!(gate_number("GATE"), None);
        assert_eq!(gate_number("G1A"), None);
    }
}
