//! Each edit changes only the lines it is about (plus lines for keys that did not exist);
//! everything else in the file keeps its bytes.

use m1loop::m1::keys::{self, CurrentKey, PlanKey, ResultKey, Top};
use m1loop::m1::{Document, Edit, Status, StepState};
use proptest::prelude::*;

use crate::support::SEED;

/// The changed region between two texts: (first changed line, 1-based), removed lines, added
/// lines. Edits touch one contiguous region, so common prefix and suffix are the rest.
fn diff(before: &str, after: &str) -> (usize, Vec<String>, Vec<String>) {
    let a: Vec<&str> = before.split_inclusive('\n').collect();
    let b: Vec<&str> = after.split_inclusive('\n').collect();
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suf = a.len().min(b.len()) - pre;
    let suf = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suf)
        .take_while(|(x, y)| x == y)
        .count();
    let own = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect();
    (
        pre + 1,
        own(&a[pre..a.len() - suf]),
        own(&b[pre..b.len() - suf]),
    )
}

/// Applies `edits` to `text`, checks the result is valid and stable, returns it.
fn edited(text: &str, edits: &[Edit]) -> String {
    let mut doc = Document::parse(text).unwrap();
    for e in edits {
        doc.apply(e);
    }
    let out = doc.render();
    let again = Document::parse(&out).unwrap_or_else(|e| panic!("{e}\n---\n{out}"));
    assert_eq!(again.render(), out);
    out
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn status_rewrites_one_line_keeping_the_comment_column() {
    let out = edited(SEED, &[Edit::Status(Status::Done)]);
    assert_eq!(
        diff(SEED, &out),
        (
            1,
            lines(&["STATUS: RUNNING              # IDLE / RUNNING / WAITING / DONE / FAILED\n"]),
            lines(&["STATUS: DONE                 # IDLE / RUNNING / WAITING / DONE / FAILED\n"]),
        )
    );
}

#[test]
fn step_state_and_text_rewrite_only_their_step_line() {
    let out = edited(SEED, &[Edit::StepState(2, StepState::Done)]);
    assert_eq!(
        diff(SEED, &out),
        (
            10,
            lines(&["    2: [RUNNING] Fix1-5実装 → ai-media.py\n"]),
            lines(&["    2: [DONE] Fix1-5実装 → ai-media.py\n"])
        )
    );
    let out = edited(SEED, &[Edit::StepText(3, "実戦 # テスト".into())]);
    assert_eq!(
        diff(SEED, &out).2,
        lines(&["    3: \"[PENDING] 実戦 # テスト\"\n"])
    );
    let view = Document::parse(&out).unwrap().view();
    assert_eq!(view.plan.steps[2].text, "実戦 # テスト");
    assert_eq!(view.plan.steps[2].state, StepState::Pending);
}

#[test]
fn edits_of_a_missing_step_change_nothing() {
    assert_eq!(
        edited(
            SEED,
            &[
                Edit::StepState(9, StepState::Done),
                Edit::StepText(9, "x".into())
            ]
        ),
        SEED
    );
}

#[test]
fn results_field_set_and_added() {
    let out = edited(SEED, &[ResultKey::Exit.set(2, "0")]);
    assert_eq!(
        diff(SEED, &out),
        (
            26,
            lines(&["    EXIT: (pending)\n"]),
            lines(&["    EXIT: 0\n"])
        )
    );
    let out = edited(SEED, &[ResultKey::Commit.set(2, "b1c2d3e")]);
    assert_eq!(
        diff(SEED, &out),
        (27, vec![], lines(&["    COMMIT: b1c2d3e\n"]))
    );
}

#[test]
fn a_new_results_block_goes_after_the_last_one() {
    let out = edited(
        SEED,
        &[
            ResultKey::Exit.set(3, "(pending)"),
            ResultKey::CostUsd.set(3, "0.42"),
        ],
    );
    assert_eq!(
        diff(SEED, &out),
        (
            27,
            vec![],
            lines(&[
                "  STEP_3:\n",
                "    EXIT: (pending)\n",
                "    COST_USD: 0.42\n"
            ])
        )
    );
    assert_eq!(
        Document::parse(&out).unwrap().view().results[&3].cost_usd,
        Some(0.42)
    );
}

#[test]
fn clear_current_keeps_the_block_line_and_set_refills_it() {
    let out = edited(SEED, &[keys::clear_current()]);
    let (at, removed, added) = diff(SEED, &out);
    assert_eq!((at, removed.len(), added.len()), (14, 4, 0));
    assert!(out.contains("CURRENT:\n\nRESULTS:"));
    let refilled = edited(&out, &[CurrentKey::TaskId.set("task_2")]);
    assert_eq!(
        diff(&out, &refilled),
        (14, vec![], lines(&["  TASK_ID: task_2\n"]))
    );
}

#[test]
fn remove_takes_the_key_and_its_children() {
    let out = edited(SEED, &[Edit::Remove(keys::result_block(2))]);
    assert_eq!(
        diff(SEED, &out),
        (25, lines(&["  STEP_2:\n", "    EXIT: (pending)\n"]), vec![])
    );
    assert_eq!(edited(SEED, &[Top::PlanFile.remove()]), SEED);
}

#[test]
fn a_value_that_would_be_misread_is_quoted_and_reads_back_equal() {
    for goal in [
        "fix #12 then ship",
        " leading",
        "trailing ",
        "\"quoted\"",
        "# hash",
        "two\nlines",
        "a\\b",
    ] {
        let out = edited(SEED, &[Top::Goal.set(goal)]);
        let (at, _, added) = diff(SEED, &out);
        assert_eq!((at, added.len()), (2, 1), "{goal:?}");
        assert_eq!(
            Document::parse(&out).unwrap().get(&["GOAL"]).as_deref(),
            Some(goal)
        );
    }
    let out = edited(SEED, &[Top::Goal.set("plain")]);
    assert_eq!(diff(SEED, &out).2, lines(&["GOAL: plain\n"]));
}

#[test]
fn a_quoted_value_stays_quoted() {
    let out = edited(SEED, &[CurrentKey::Command.set("claude -p next")]);
    assert_eq!(
        diff(SEED, &out).2,
        lines(&["  COMMAND: \"claude -p next\"\n"])
    );
}

#[test]
fn a_new_top_level_key_goes_after_the_last_one_before_trailing_prose() {
    let text = format!("# My loop\n\n{SEED}\n## Notes\nfree text\n");
    let out = edited(&text, &[Top::Verify.set("cargo test")]);
    assert_eq!(
        diff(&text, &out),
        (32, vec![], lines(&["VERIFY: cargo test\n"]))
    );
}

#[test]
fn crlf_is_kept_on_edited_lines_and_used_for_new_ones() {
    let crlf = SEED.replace('\n', "\r\n");
    let out = edited(
        &crlf,
        &[
            Edit::Status(Status::Waiting),
            ResultKey::Error.set(2, "timeout"),
        ],
    );
    assert!(
        !out.replace("\r\n", "").contains('\n'),
        "no bare LF in\n{out}"
    );
    assert!(out.starts_with("STATUS: WAITING              # IDLE"));
    assert!(out.contains("    EXIT: (pending)\r\n    ERROR: timeout\r\n"));
}

#[test]
fn a_missing_final_newline_stays_missing() {
    let text = SEED.trim_end_matches('\n');
    let out = edited(text, &[Top::Verify.set("make check")]);
    assert!(out.ends_with("Step 3へ\nVERIFY: make check"), "{out}");
    let removed = edited(&out, &[Top::Verify.remove()]);
    assert_eq!(removed, text);
}

#[test]
fn set_steps_creates_the_plan_in_a_goal_only_file() {
    let text = "# Loop\nSTATUS: IDLE\nGOAL: ship it\n";
    let out = edited(
        text,
        &[Edit::SetSteps(vec![
            (StepState::Pending, "調査 → notes.md".into()),
            (StepState::Pending, "fix # 2".into()),
        ])],
    );
    assert_eq!(
        out,
        "# Loop\nSTATUS: IDLE\nGOAL: ship it\nPLAN:\n  STEPS:\n    1: [PENDING] 調査 → notes.md\n    2: \"[PENDING] fix # 2\"\n  TOTAL_STEPS: 2\n"
    );
}

#[test]
fn set_steps_replaces_the_list_and_the_total() {
    let out = edited(
        SEED,
        &[
            Edit::SetSteps(vec![
                (StepState::Done, "a".into()),
                (StepState::Running, "b".into()),
            ]),
            PlanKey::CurrentStep.set("2"),
        ],
    );
    let (at, removed, added) = diff(SEED, &out);
    assert_eq!(at, 6);
    assert_eq!(removed.len(), 6);
    assert_eq!(
        added,
        lines(&[
            "  TOTAL_STEPS: 2\n",
            "  CURRENT_STEP: 2\n",
            "  STEPS:\n",
            "    1: [DONE] a\n",
            "    2: [RUNNING] b\n"
        ])
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// Setting any existing scalar of the seed changes exactly its line, and reads back equal.
    #[test]
    fn set_changes_exactly_one_line(
        which in 0usize..6,
        v in prop::string::string_regex(r#"[a-z #"\\→日本🚀]{1,12}"#).unwrap(),
    ) {
        let paths = [
            // Not TASK_ID: task ids have their own alphabet (validation's job, tested elsewhere).
            Top::Goal.path(), Top::Constraints.path(), Top::LastAction.path(),
            CurrentKey::SpawnTime.path(), CurrentKey::Command.path(), ResultKey::Summary.path(1),
        ];
        let path = &paths[which];
        // A blank GOAL is invalid (validation's job, tested elsewhere).
        prop_assume!(which != 0 || !v.trim().is_empty());
        let before = Document::parse(SEED).unwrap().get_at(path).unwrap();
        let out = edited(SEED, &[Edit::Set(path.clone(), v.clone())]);
        let (_, removed, added) = diff(SEED, &out);
        if v == before {
            prop_assert!(removed.len() <= 1 && removed.len() == added.len());
        } else {
            prop_assert_eq!((removed.len(), added.len()), (1, 1));
        }
        prop_assert_eq!(Document::parse(&out).unwrap().get_at(path), Some(v));
    }
}
