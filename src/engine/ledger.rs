//! The task ledger's rules: what the record of every task this loop started, and how each was
//! judged, says about a text of M1.md that may be older than that record (a save of an old
//! text, or a runner that died between a judgement and its write).
//!
//! Whatever M1.md says, what was started cannot be unstarted: a task of this loop that was
//! started and not judged is re-adopted, never started again; a task that was judged is never
//! judged again (its recorded edits are put back instead, with those of every task judged
//! after it but for a STATUS they wrote); and a DONE step that an old text reverted is
//! restored from its recorded pass and reviews, unless a person ran the step again with
//! `loop retry`. The records themselves are kept by the runner (`runner::ledger`).

use serde::{Deserialize, Serialize};

use super::judge::LedgerVerdict as Verdict;
use crate::m1::keys::ResultKey;
use crate::m1::{Edit, M1, StoredEdit};

/// One task of this loop.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub task_id: String,
    pub step: u32,
    pub attempt: u32,
    pub session_id: Option<String>,
    /// A review run of the step (`attempt` is the run's number), not an attempt.
    pub review: bool,
    pub judged: Option<Judged>,
    /// A person ran the step again after this task (`loop retry`).
    pub retried: bool,
}

/// How a task was judged, and the M1.md edits that recorded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Judged {
    pub verdict: Verdict,
    pub edits: Vec<StoredEdit>,
    /// The decision's line in `loop.log`, as it was said: a runner that puts the record back
    /// after its first runner died before logging it logs it then (a record from an older
    /// version has none).
    #[serde(default)]
    pub log: Option<String>,
}

impl Judged {
    #[must_use]
    pub(crate) fn new(verdict: Verdict, edits: &[Edit]) -> Self {
        Self {
            verdict,
            edits: edits.iter().map(StoredEdit::from_edit).collect(),
            log: None,
        }
    }

    /// The same, with the decision's log line.
    #[must_use]
    pub(crate) fn said(mut self, log: &str) -> Self {
        self.log = Some(log.to_owned());
        self
    }

    /// The recorded edits, as edits.
    #[must_use]
    pub(crate) fn edits(&self) -> Vec<Edit> {
        self.edits.iter().filter_map(StoredEdit::to_edit).collect()
    }

    /// The value a recorded edit set at `RESULTS.STEP_N.KEY`.
    fn result(&self, step: u32, key: ResultKey) -> Option<&str> {
        let want = key.path(step);
        self.edits.iter().rev().find_map(|e| e.value_at(&want))
    }

    /// The edits that restore a step's recorded pass: its RESULTS and its DONE line, and
    /// nothing about what came after it.
    fn step_record(&self, step: u32) -> Vec<Edit> {
        let block = crate::m1::keys::result_block(step);
        self.edits()
            .into_iter()
            .filter(|e| match e {
                Edit::Set(p, _) | Edit::Remove(p) => p.keys().len() == 3 && p.is_under(&block),
                Edit::StepState(n, _) => *n == step,
                _ => false,
            })
            .collect()
    }
}

/// For a text that names task `task_id`, judged already: the edits that put back its
/// record and those of every task of this loop judged after it, in order (such a text is
/// older than all of them), and the ids of those later tasks. A `STATUS` a later judgement
/// wrote is left out: the loop went on after it (someone resumed it), or no runner would
/// be reading this text now.
#[must_use]
pub(crate) fn record_since(entries: &[Entry], task_id: &str) -> (Vec<Edit>, Vec<String>) {
    let Some(at) = entries.iter().position(|e| e.task_id == task_id) else {
        return (Vec::new(), Vec::new());
    };
    let mut edits = entries[at]
        .judged
        .as_ref()
        .map(Judged::edits)
        .unwrap_or_default();
    let mut later = Vec::new();
    for e in &entries[at + 1..] {
        if let Some(j) = &e.judged {
            edits.extend(
                j.edits()
                    .into_iter()
                    .filter(|e| !matches!(e, Edit::Status(_))),
            );
            later.push(e.task_id.clone());
        }
    }
    (edits, later)
}

/// A task of this loop that was started and never judged: at most one exists, the one
/// that runs or ran last.
#[must_use]
pub(crate) fn unjudged(entries: &[Entry]) -> Option<&Entry> {
    entries.iter().rev().find(|e| e.judged.is_none())
}

/// For a step about to be spawned: the edits that restore its recorded pass when the
/// text lost it (an older text saved over the record: its RESULTS no longer say what the
/// pass wrote), with what the step's reviews recorded after it. A step whose line alone
/// was set back to PENDING, its RESULTS still those of the pass, was set back on purpose
/// and runs again: `None`.
#[must_use]
pub(crate) fn lost_pass<'a>(
    entries: &'a [Entry],
    m: &M1,
    step: u32,
) -> Option<(&'a Entry, Vec<Edit>)> {
    if step == 0 {
        return None;
    }
    let at = entries
        .iter()
        .rposition(|e| e.step == step && !e.review && e.judged.is_some())?;
    let last = &entries[at];
    let j = last.judged.as_ref()?;
    if j.verdict != Verdict::Pass || last.retried {
        return None;
    }
    let r = m.results.get(&step);
    let attempts = r.and_then(|r| r.attempts).map(|a| a.to_string());
    let summary = r.and_then(|r| r.summary.clone());
    let same = attempts.as_deref() == j.result(step, ResultKey::Attempts)
        && summary.as_deref() == j.result(step, ResultKey::Summary);
    if same {
        return None;
    }
    let mut edits = j.step_record(step);
    for e in &entries[at + 1..] {
        if let Some(review) = e.judged.as_ref().filter(|_| e.review && e.step == step) {
            edits.extend(review.step_record(step));
        }
    }
    Some((last, edits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::{Status, StepState};

    #[test]
    fn stored_edits_come_back_as_they_went() {
        let edits = vec![
            Edit::Status(Status::Waiting),
            ResultKey::Exit.set(2, "0"),
            ResultKey::Error.remove(2),
            crate::m1::keys::clear_current(),
            Edit::StepState(2, StepState::Done),
            Edit::StepText(2, "x".into()),
            Edit::SetSteps(vec![(StepState::Pending, "a".into())]),
        ];
        let j = Judged::new(Verdict::Pass, &edits);
        let back: Judged = serde_json::from_slice(&serde_json::to_vec(&j).unwrap()).unwrap();
        assert_eq!(back.edits(), edits);
    }

    fn entry(task_id: &str, review: bool, judged: Judged) -> Entry {
        Entry {
            task_id: task_id.into(),
            step: 2,
            attempt: 1,
            session_id: None,
            review,
            judged: Some(judged),
            retried: false,
        }
    }

    #[test]
    fn a_lost_pass_comes_back_with_what_its_reviews_recorded_after_it() {
        let set = |k: ResultKey, v: &str| k.set(2, v);
        let pass = Judged::new(
            Verdict::Pass,
            &[
                set(ResultKey::Attempts, "1"),
                set(ResultKey::Summary, "s"),
                set(ResultKey::Review, "pending"),
            ],
        );
        let review = Judged::new(
            Verdict::Review,
            &[
                Edit::StepState(2, StepState::Done),
                set(ResultKey::Review, "approved: fine"),
                crate::m1::keys::PlanKey::CurrentStep.set("3"),
            ],
        );
        let ledger = vec![entry("t1", false, pass), entry("t2", true, review)];
        let old = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  CURRENT_STEP: 2\n  STEPS:\n    1: [DONE] a\n    2: [RUNNING] b\n    3: [PENDING] c\n";
        let m = crate::m1::Document::parse(old).unwrap().view();
        let (e, edits) = lost_pass(&ledger, &m, 2).expect("the pass is lost");
        assert_eq!(e.task_id, "t1");
        assert_eq!(
            edits,
            vec![
                set(ResultKey::Attempts, "1"),
                set(ResultKey::Summary, "s"),
                set(ResultKey::Review, "pending"),
                Edit::StepState(2, StepState::Done),
                set(ResultKey::Review, "approved: fine"),
            ]
        );
    }

    #[test]
    fn a_text_naming_a_judged_task_gets_back_every_later_record_but_its_status() {
        let set = |k: ResultKey, v: &str| k.set(2, v);
        let pass = Judged::new(Verdict::Pass, &[set(ResultKey::Summary, "s")]);
        let halt = Judged::new(
            Verdict::Halt,
            &[
                Edit::Status(Status::Waiting),
                set(ResultKey::Error, "billing"),
            ],
        );
        let unjudged = Entry {
            judged: None,
            ..entry("t3", false, Judged::new(Verdict::Pass, &[]))
        };
        let ledger = vec![entry("t1", false, pass), entry("t2", true, halt), unjudged];
        let (edits, later) = record_since(&ledger, "t1");
        assert_eq!(
            edits,
            vec![
                set(ResultKey::Summary, "s"),
                set(ResultKey::Error, "billing")
            ]
        );
        assert_eq!(later, ["t2"]);
        assert_eq!(record_since(&ledger, "t9"), (Vec::new(), Vec::new()));
    }

    #[test]
    fn a_pass_restores_only_its_own_step() {
        let j = Judged::new(
            Verdict::Pass,
            &[
                Edit::StepState(2, StepState::Done),
                ResultKey::Summary.set(2, "s"),
                crate::m1::keys::PlanKey::CurrentStep.set("3"),
                crate::m1::keys::clear_current(),
            ],
        );
        assert_eq!(
            j.step_record(2),
            vec![
                Edit::StepState(2, StepState::Done),
                ResultKey::Summary.set(2, "s"),
            ]
        );
        assert_eq!(j.result(2, ResultKey::Summary), Some("s"));
    }

    #[test]
    fn a_pass_a_person_retried_is_not_taken_for_a_lost_one() {
        let pass = Judged::new(Verdict::Pass, &[ResultKey::Summary.set(2, "s")]);
        let mut ledger = vec![entry("t1", false, pass)];
        let text =
            "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [DONE] a\n    2: [PENDING] b\n";
        let m = crate::m1::Document::parse(text).unwrap().view();
        assert!(lost_pass(&ledger, &m, 2).is_some());
        ledger[0].retried = true;
        assert!(lost_pass(&ledger, &m, 2).is_none());
    }
}
