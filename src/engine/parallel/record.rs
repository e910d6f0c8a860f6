//! The field edits that record each move of a loop whose steps run at once: a step's record
//! before its worktree and loop exist, its merge, a merge that failed, a step dropped or
//! failed, a step's decision shown here or settled there, the wait, and the end.

use super::super::Caps;
use super::super::transitions::{Effect, Transition, actions, results, results_remove, step_state};
use crate::exit::Status as Exit;
use crate::m1::gates;
use crate::m1::keys::{ParallelKey, ResultKey, RunKey, Top, run_block};
use crate::m1::{Edit, Gate, GateKind, GateOption, M1, Status, StepResult, StepState};
use crate::text::one_line;

/// Where step `n` runs: its worktree, branch, the integration head it starts from, and its
/// loop's `M1.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunNames {
    pub worktree: String,
    pub branch: String,
    pub base: String,
    pub loop_file: String,
}

/// Step `n`'s record, written before its worktree and its loop exist: from here on, a crash
/// leaves a record that the next look carries out again.
#[must_use]
pub(crate) fn recorded(n: u32, names: &RunNames) -> Transition {
    let mut edits: Vec<Edit> = step_state(n, StepState::Running).into_iter().collect();
    edits.extend([
        RunKey::Worktree.set(n, names.worktree.clone()),
        RunKey::Branch.set(n, names.branch.clone()),
        RunKey::Base.set(n, names.base.clone()),
        RunKey::Loop.set(n, names.loop_file.clone()),
    ]);
    edits.extend(actions(
        &format!("Step {n} started in its own loop, on {}", names.branch),
        "Merge each step that is done, start those that are ready",
    ));
    Transition::now(
        edits,
        format!(
            "parallel: step {n} runs in {} on {} from {}",
            names.worktree,
            names.branch,
            short(&names.base)
        ),
    )
}

/// A commit's first 7 characters.
fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// How the merge of a step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeOutcome {
    /// These files conflicted.
    Conflict(Vec<String>),
    /// VERIFY failed on the merged result: what it said.
    Red(String),
}

/// What was checked when a step was merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeCheck {
    /// VERIFY ran on the merged result and passed.
    Verified,
    /// No VERIFY is set: nothing ran on the merged result.
    NoVerify,
    /// The integration branch held the step's work already (a crash came after its merge):
    /// nothing new was merged or verified.
    AlreadyIn,
    /// The step's branch has no commit beyond where it started: its agent changed no file, so
    /// nothing was merged, and the step has no commit of its own.
    Nothing,
}

/// Step `n` is merged as `commit`: DONE here, with what its own loop recorded (`child`), its
/// record marked merged until its worktree and branch are cleaned up.
#[must_use]
pub(crate) fn merged(
    m: &M1,
    n: u32,
    commit: &str,
    check: MergeCheck,
    child: &StepResult,
    loop_file: Option<&str>,
) -> Transition {
    let mut edits = vec![
        Edit::StepState(n, StepState::Done),
        // A step that changed nothing has no commit: the integration branch's tip is not its.
        if check == MergeCheck::Nothing {
            ResultKey::Commit.remove(n)
        } else {
            ResultKey::Commit.set(n, short(commit))
        },
        // Every check that applies passed: its own loop's, and VERIFY on the merged result
        // where one is set.
        ResultKey::Verified.set(n, child.verified.unwrap_or(true).to_string()),
        ResultKey::Exit.set(n, child.exit.unwrap_or(0).to_string()),
        ResultKey::Attempts.set(n, child.attempts.unwrap_or(1).to_string()),
        ResultKey::Summary.set(n, child.summary.clone().unwrap_or_else(|| "done".into())),
        ResultKey::CostUsd.set(n, format!("{:.4}", child.cost_usd.unwrap_or(0.0))),
        RunKey::Merged.set(n, commit),
    ];
    edits.extend(
        child
            .session_id
            .clone()
            .map(|s| ResultKey::SessionId.set(n, s)),
    );
    edits.extend(
        child
            .review
            .as_ref()
            .map(|r| ResultKey::Review.set(n, r.to_string())),
    );
    edits.extend(tokens_and_time(n, child));
    edits.extend(loop_file.map(|f| ResultKey::Report.set(n, f)));
    let branch = m.parallel.branch.clone().unwrap_or_default();
    let said = match check {
        MergeCheck::Verified => format!(
            "Step {n} merged into {branch} as {}, VERIFY passed on the merged result",
            short(commit)
        ),
        MergeCheck::NoVerify => format!(
            "Step {n} merged into {branch} as {} (no VERIFY is set)",
            short(commit)
        ),
        MergeCheck::AlreadyIn => format!(
            "Step {n} merged into {branch} as {} (the integration branch held its work already)",
            short(commit)
        ),
        MergeCheck::Nothing => {
            format!("Step {n} changed no file: nothing to merge into {branch}, and no commit")
        }
    };
    edits.extend(actions(
        &said,
        "Merge each step that is done, start those that are ready",
    ));
    let mut t = Transition::now(edits, format!("merge: {}", lower_first(&said)));
    t.effects.push(Effect::TickPlanFile(n));
    t
}

/// What becomes of a step whose merge failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MergeFailure {
    /// Sent back to its session: `told` is what its agent is told; the transition counts it.
    SendBack {
        transition: Transition,
        told: String,
    },
    /// Past `Caps::max_retries`: a gate here, for a person.
    Gate(Transition),
}

/// Where a step's work is, for a person deciding about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkPlace {
    pub branch: String,
    pub worktree: String,
    /// A merge is in progress in the worktree (`MERGE_HEAD`).
    pub mid_merge: bool,
}

/// Step `n`'s merge failed (`outcome`: a conflict, or VERIFY red on the merged result): back
/// to its session with what went wrong, or, past `Caps::max_retries` of those, a MERGE gate that
/// says where its work is and what each answer does.
#[must_use]
pub(crate) fn merge_failed(
    m: &M1,
    n: u32,
    outcome: &MergeOutcome,
    caps: &Caps,
    place: &WorkPlace,
) -> MergeFailure {
    let integration = m.parallel.branch.clone().unwrap_or_default();
    let fails = m.parallel.runs.get(&n).map_or(0, |r| r.merge_fails) + 1;
    let (why, files) = match outcome {
        MergeOutcome::Conflict(files) => (
            format!(
                "merging step {n} into {integration} conflicted in {}",
                files.join(", ")
            ),
            files.clone(),
        ),
        MergeOutcome::Red(failure) => (
            format!("VERIFY failed on step {n} merged with {integration}: {failure}"),
            Vec::new(),
        ),
    };
    let max = caps.max_retries;
    let count = RunKey::MergeFails.set(n, fails.to_string());
    let log = format!("merge: {why} ({fails} of MAX_RETRIES {max})");
    if fails < max {
        let told = if files.is_empty() {
            format!("{why}. The integration branch is merged into your worktree now: fix it.")
        } else {
            format!(
                "{why}. The integration branch is merged into your worktree with conflict \
                 markers in {}: resolve them keeping the work of both sides, and commit.",
                files.join(", ")
            )
        };
        return MergeFailure::SendBack {
            transition: Transition::now(
                vec![count],
                format!("{log}; step {n} goes back to its session"),
            ),
            told,
        };
    }
    let in_progress = if place.mid_merge {
        " (a merge of the integration branch is in progress there: MERGE_HEAD)"
    } else {
        ""
    };
    let question = format!(
        "{why}; {fails} merge(s) of step {n} failed. Its work is on branch {} in worktree \
         {}{in_progress}",
        place.branch, place.worktree
    );
    let id = gates::next_id(&m.gates);
    let g = Gate {
        question: Some(question.clone()),
        options: super::super::gate::options_of(GateKind::Merge),
        ..Gate::opening(
            id.clone(),
            GateKind::Merge,
            n,
            super::super::gate::question_shown(m, n, &question),
        )
    };
    let mut edits = vec![count];
    edits.extend(g.open_edits());
    edits.extend(actions(
        &format!("Step {n} does not merge: {}", one_line(&why, 200)),
        &format!("Decide gate {id}: {}", super::super::gate::how(&g)),
    ));
    MergeFailure::Gate(
        Transition::now(edits, format!("{log}; gate {id} opened for a person"))
            .then(Effect::Gate { id }),
    )
}

/// A person chose `retry` on step `n`'s MERGE gate: the step goes back to its session with a
/// fresh budget of merges.
#[must_use]
pub(crate) fn sent_back_by_a_person(n: u32, gate: &str) -> (Transition, String) {
    let told = format!(
        "A person asked (gate {gate}) for this step's work to be merged again: the integration \
         branch is merged into your worktree now; resolve what conflicts, keeping the work of \
         both sides, make sure the checks pass, and commit."
    );
    (
        Transition::now(
            vec![RunKey::MergeFails.remove(n)],
            format!("merge: step {n} goes back to its session with a fresh budget (gate {gate})"),
        ),
        told,
    )
}

/// Step `n`'s loop waits on its gate `g`: shown here as a gate of this loop, which a person
/// decides with `loop answer`, `loop retry`, `loop skip` or a tap, and the runner carries
/// there.
#[must_use]
pub(crate) fn mirrored(m: &M1, n: u32, g: &Gate) -> Transition {
    let id = gates::next_id(&m.gates);
    let question = g
        .question
        .clone()
        .unwrap_or_else(|| format!("step {n} waits"));
    let new = Gate {
        question: Some(question.clone()),
        options: g.options.clone(),
        tools: g.tools.clone(),
        step_gate: Some(g.id.clone()),
        ..Gate::opening(
            id.clone(),
            g.kind,
            n,
            super::super::gate::question_shown(m, n, &question),
        )
    };
    let mut edits = new.open_edits();
    edits.push(Top::LastAction.set(one_line(
        &format!(
            "Step {n} waits on a decision (gate {id}, {}): {question}",
            g.kind
        ),
        300,
    )));
    Transition::now(
        edits,
        format!(
            "gate: {id} opened for step {n}'s {} gate ({} in its own loop): {}",
            g.kind,
            g.id,
            one_line(&question, 200)
        ),
    )
    .then(Effect::Gate { id })
}

/// The decision `choice` on gate `gate` was carried to step `n`'s loop (its gate
/// `step_gate`): the line the log gets.
#[must_use]
pub(crate) fn carried(n: u32, gate: &str, step_gate: &str, choice: &str) -> String {
    format!("decide: gate {gate}'s {choice} carried to step {n}'s own loop (its gate {step_gate})")
}

/// Gate `gate` here stood for a gate step `n`'s loop has decided itself (`choice`, `by`): it
/// is closed with that decision.
#[must_use]
pub(crate) fn settled(
    n: u32,
    gate: &str,
    choice: &str,
    by: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Transition {
    let by = format!("{by} (in step {n}'s own loop)");
    Transition::now(
        gates::decided(gate, choice, &by, now),
        format!("gate: {gate} was decided in step {n}'s own loop: {choice} by {by}"),
    )
}

/// A person's `loop retry` of step `n` reached its loop, which runs on.
#[must_use]
pub(crate) fn retried_there(n: u32) -> Transition {
    let mut edits: Vec<Edit> = step_state(n, StepState::Running).into_iter().collect();
    edits.extend(actions(
        &format!("Step {n} runs again in its own loop (`loop retry`, a person's decision)"),
        "Merge each step that is done, start those that are ready",
    ));
    Transition::now(edits, format!("retry: step {n} runs again in its own loop"))
}

/// What step `n`'s own loop spent (`child`, its record there), taken into this loop's record
/// of the step, whatever became of it: its attempts and cost first, then its tokens and time,
/// each where that loop has one.
fn spent_there(n: u32, child: &StepResult) -> Vec<Edit> {
    let mut edits = Vec::new();
    edits.extend(
        child
            .attempts
            .map(|a| ResultKey::Attempts.set(n, a.to_string())),
    );
    edits.extend(
        child
            .cost_usd
            .map(|c| ResultKey::CostUsd.set(n, format!("{c:.4}"))),
    );
    edits.extend(tokens_and_time(n, child));
    edits
}

/// The tokens and the time step `n`'s own loop spent (`child`), each where that loop has one.
fn tokens_and_time(n: u32, child: &StepResult) -> impl Iterator<Item = Edit> {
    let tokens = child
        .tokens
        .map(|t| ResultKey::Tokens.set(n, t.to_string()));
    let time = child
        .duration_s
        .map(|d| ResultKey::DurationS.set(n, format!("{d:.1}")));
    tokens.into_iter().chain(time)
}

/// Step `n` is SKIPPED, or was set DONE by hand before it was merged (`done_by_hand`, a state
/// that stays): its record goes, and what its own loop spent (`child`) is kept in this loop's;
/// `kept`: the branch its work is kept on, if it has work the result lacks.
#[must_use]
pub(crate) fn dropped(
    n: u32,
    done_by_hand: bool,
    kept: Option<&str>,
    child: &StepResult,
) -> Transition {
    let mut edits: Vec<Edit> = if done_by_hand {
        Vec::new()
    } else {
        step_state(n, StepState::Skipped).into_iter().collect()
    };
    edits.extend(spent_there(n, child));
    edits.push(Edit::Remove(run_block(n)));
    edits.push(results_remove(n, ResultKey::Verified));
    edits.push(results_remove(n, ResultKey::Commit));
    let what = match kept {
        Some(b) => format!("its work is kept on branch {b}, not merged"),
        None => "it left no work to keep".to_owned(),
    };
    let (word, how) = if done_by_hand {
        ("done by hand", "set DONE by hand")
    } else {
        ("skipped", "skipped")
    };
    edits.push(results(n, ResultKey::Summary, format!("{word}: {what}")));
    edits.extend(actions(
        &format!("Step {n} {how}; {what}"),
        "Merge each step that is done, start those that are ready",
    ));
    Transition::now(edits, format!("parallel: step {n} {how}; {what}"))
}

/// Step `n`'s loop FAILED (`reason`): this loop fails at it, with what that loop spent
/// (`child`, its record of the step); `stopped`, the steps that were running, stop with it and
/// are carried on by `loop retry`.
#[must_use]
pub(crate) fn failed(n: u32, reason: &str, stopped: &[u32], child: &StepResult) -> Transition {
    let mut edits = vec![
        Edit::StepState(n, StepState::Failed),
        Edit::Status(Status::Failed),
    ];
    edits.extend(spent_there(n, child));
    let others = match stopped {
        [] => String::new(),
        [one] => format!("; step {one} stopped with it"),
        many => format!(
            "; steps {} stopped with it",
            many.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    edits.extend(actions(
        &format!(
            "Step {n} FAILED in its own loop: {}{others}",
            one_line(reason, 200)
        ),
        &format!("Nothing runs; `loop retry {n}` takes the step up again"),
    ));
    Transition::exit(
        edits,
        format!("fail: step {n} failed in its own loop: {reason}{others}"),
        Exit::Failed,
    )
    .then(Effect::Failed {
        step: n,
        reason: reason.to_owned(),
    })
}

/// Every step in flight waits for a person: on a decision shown here (`decisions`: step and
/// gate), or on something else (`halts`: step and what its loop says). The loop waits; a
/// halted step is marked, so that `loop resume` carries it on.
#[must_use]
pub(crate) fn waiting(m: &M1, halts: &[(u32, String)]) -> Transition {
    let decisions: Vec<&Gate> = m.pending_gates().collect();
    let mut edits = vec![Edit::Status(Status::Waiting)];
    edits.extend(halts.iter().map(|(n, _)| RunKey::Stopped.set(*n, "true")));
    let mut last: Vec<String> = decisions
        .iter()
        .map(|g| format!("step {} waits on gate {} ({})", g.step, g.id, g.kind))
        .collect();
    last.extend(
        halts
            .iter()
            .map(|(n, why)| format!("step {n} waits: {}", one_line(why, 120))),
    );
    let mut how: Vec<String> = decisions
        .iter()
        .map(|g| format!("decide gate {}: {}", g.id, super::super::gate::how(g)))
        .collect();
    if !halts.is_empty() {
        how.push("`loop resume` carries the waiting steps on once that is done".into());
    }
    let (last, how) = (last.join("; "), how.join("; "));
    edits.extend(actions(&format!("Waiting: {last}"), &how));
    let t = Transition::exit(edits, format!("wait: {last}"), Exit::Waiting);
    if halts.is_empty() {
        // Each gate was told when it was shown.
        t
    } else {
        t.then(Effect::Waiting { reason: last, how })
    }
}

/// Where the result of a finished parallel loop is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Landed {
    /// The project's checkout was fast-forwarded to it.
    InProject,
    /// It is on `branch`: the project was left as it was (`why`).
    OnBranch { branch: String, why: String },
    /// No step was merged (none ran here, or all were skipped).
    Nothing,
}

/// Every step is DONE or SKIPPED and the end is done (`result`): the loop is DONE.
#[must_use]
pub(crate) fn finished(m: &M1, result: &Landed) -> Transition {
    let mut t = super::super::complete(m);
    t.edits.insert(0, Edit::Remove(ParallelKey::block()));
    match result {
        Landed::InProject => {
            t.log
                .push_str("; the project is fast-forwarded to the result");
        }
        Landed::Nothing => {}
        Landed::OnBranch { branch, why } => {
            let said =
                format!("The result is on branch {branch}; the project was left as it was ({why})");
            t.log = format!("{}; {said}", t.log);
            t.edits.push(Top::NextAction.set(one_line(
                &format!("Nothing runs. {said}: merge it when you are ready"),
                300,
            )));
            t.effects.push(Effect::Said(said));
        }
    }
    t
}

/// The choice that sends a step back on its MERGE gate.
#[must_use]
pub(crate) fn is_retry(choice: &str) -> bool {
    GateOption::parse(choice) == Some(GateOption::Retry)
}

/// `text` with its first letter in lower case, as a log line's words after its `merge:`.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_lowercase().chain(chars).collect::<String>()
    })
}
