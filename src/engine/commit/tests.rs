//! The rules of a commit per step, each a test over a parsed M1.md.

use super::*;
use crate::m1::Document;

const DONE_2: &str = "STATUS: RUNNING
GOAL: fix the bug
LOOP_ID: 4f2a9c1d0b3e
PLAN:
  TOTAL_STEPS: 3
  CURRENT_STEP: 3
  STEPS:
    1: [DONE] investigate
    2: [DONE] fix the handler
    3: [PENDING] test
RESULTS:
  STEP_1:
    COMMIT: a690fb3
    VERIFIED: true
  STEP_2:
    COMMIT: (pending)
    SUMMARY: handler fixed
    VERIFIED: true
";

fn view(text: &str) -> M1 {
    Document::parse(text).unwrap().view()
}

#[test]
fn an_attempt_of_a_step_in_git_marks_its_work_and_nothing_else_does() {
    let m = view(DONE_2);
    let on = Caps::default();
    assert!(wanted(&m, &on, RunKind::Attempt, 3, true));
    assert!(!wanted(&m, &on, RunKind::Attempt, 3, false), "not in git");
    assert!(!wanted(&m, &on, RunKind::Plan, 0, true));
    assert!(!wanted(&m, &on, RunKind::Review, 3, true));
    let off = Caps {
        commit_steps: false,
        ..Caps::default()
    };
    assert!(!wanted(&m, &off, RunKind::Attempt, 3, true));
    let child = view(&format!("{DONE_2}PARENT_STEP: 3\n"));
    assert!(
        !wanted(&child, &on, RunKind::Attempt, 3, true),
        "a parallel step's own loop: its merge queue commits it"
    );
}

#[test]
fn a_done_step_still_marked_is_owed_its_commit_unless_a_person_set_it_done() {
    let m = view(DONE_2);
    assert_eq!(m.results[&2].commit, None, "(pending) is no commit");
    assert!(m.results[&2].commit_pending);
    assert_eq!(due(&m, &Caps::default()), Some(Due::Commit(2)));
    let by_hand = view(&DONE_2.replace(
        "    SUMMARY: handler fixed\n    VERIFIED: true\n",
        "    SUMMARY: handler fixed\n",
    ));
    assert!(matches!(
        due(&by_hand, &Caps::default()),
        Some(Due::Drop { step: 2, why }) if why.contains("by hand")
    ));
    let off = Caps {
        commit_steps: false,
        ..Caps::default()
    };
    assert!(matches!(due(&m, &off), Some(Due::Drop { step: 2, .. })));
    let running = view(&DONE_2.replace("2: [DONE]", "2: [RUNNING]"));
    assert_eq!(due(&running, &Caps::default()), None, "not DONE yet");
    let skipped = view(&DONE_2.replace("2: [DONE]", "2: [SKIPPED]"));
    assert!(matches!(
        due(&skipped, &Caps::default()),
        Some(Due::Drop { step: 2, why }) if why.contains("skipped")
    ));
}

#[test]
fn the_message_names_the_loop_the_step_and_its_summary_and_is_found_again() {
    let m = view(DONE_2);
    let msg = message(&m, 2, None, Some("task_1"));
    assert!(
        msg.starts_with("loop: step 2/3: fix the handler\n\nhandler fixed\n\nGoal: fix the bug\n"),
        "the subject is the step, the body what it did: {msg}"
    );
    assert!(msg.ends_with("Loop-Id: 4f2a9c1d0b3e\nLoop-Step: 2\nLoop-Run: task_1\n"));
    assert!(is_commit_of(&msg, "4f2a9c1d0b3e", 2, "task_1"));
    assert!(
        !is_commit_of(&msg, "4f2a9c1d0b3e", 2, "task_2"),
        "another run of it"
    );
    assert!(!is_commit_of(&msg, "4f2a9c1d0b3e", 1, "task_1"));
    assert!(!is_commit_of(&msg, "ffffffffffff", 2, "task_1"));
}

#[test]
fn a_step_too_long_for_the_subject_is_whole_in_the_body_and_a_summary_like_it_is_not_repeated() {
    let long = "x".repeat(120);
    let m = view(&DONE_2.replace("fix the handler", &long));
    let msg = message(&m, 2, Some("done"), None);
    let subject = msg.lines().next().unwrap();
    assert!(
        subject.ends_with('…') && subject.chars().count() < 110,
        "{subject}"
    );
    assert!(
        msg.contains(&format!("done\n\nStep 2: {long}\nGoal: ")),
        "{msg}"
    );
    let m = view(DONE_2);
    let msg = message(&m, 2, Some("fix the handler"), None);
    assert!(
        msg.starts_with("loop: step 2/3: fix the handler\n\nGoal: fix the bug\n"),
        "{msg}"
    );
}

fn applied(t: &Transition) -> M1 {
    let mut d = Document::parse(DONE_2).unwrap();
    for e in &t.edits {
        d.apply(e);
    }
    d.view()
}

#[test]
fn the_record_names_the_commit_the_agents_own_and_what_was_left_out() {
    let made = Made {
        commit: Some("b1c2d3e".into()),
        files: 2,
        agent_commits: vec!["1111111".into()],
        left_out: vec!["notes.txt".into()],
        ..Made::default()
    };
    let t = recorded(2, &made);
    let r = applied(&t).results[&2].clone();
    assert_eq!(r.commit.as_deref(), Some("b1c2d3e"));
    assert!(!r.commit_pending);
    assert_eq!(r.agent_commits.as_deref(), Some("1111111"));
    assert!(r.uncommitted.unwrap().starts_with("notes.txt: "));
    assert_eq!(t.write, Write::WithNextSpawn);
    assert!(
        t.log
            .contains("as b1c2d3e (2 file(s)), after the agent's own"),
        "{}",
        t.log
    );
    assert!(
        t.effects.is_empty(),
        "left out is in the log and in RESULTS, not a message"
    );

    // The agent committed everything itself: its last commit is the step's.
    let own = recorded(
        2,
        &Made {
            agent_commits: vec!["1111111".into(), "2222222".into()],
            ..Made::default()
        },
    );
    let r = applied(&own).results[&2].clone();
    assert_eq!(r.commit.as_deref(), Some("2222222"));
    assert_eq!(r.uncommitted, None);
    assert!(own.effects.is_empty());

    // A change of the person's the agent's own commit took: said, and told.
    let took = recorded(
        2,
        &Made {
            agent_commits: vec!["1111111".into()],
            gone: vec!["notes.txt".into()],
            ..Made::default()
        },
    );
    assert!(
        took.log
            .contains("notes.txt had uncommitted changes of yours"),
        "{}",
        took.log
    );
    assert!(matches!(&took.effects[..], [Effect::Said(s)] if s.contains("notes.txt")));

    // Nothing changed: no commit, and the mark is gone.
    let none = applied(&recorded(2, &Made::default())).results[&2].clone();
    assert_eq!((none.commit, none.commit_pending), (None, false));
}

#[test]
fn only_what_the_step_changed_is_its_own_and_a_file_both_changed_is_left_out() {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(p, h)| ((*p).to_owned(), (*h).to_owned()))
            .collect()
    };
    let before = map(&[
        ("yours.txt", "h1"),
        ("both.txt", "h2"),
        ("committed.txt", "h3"),
        ("staged.txt", "h4"),
    ]);
    let now = map(&[
        ("yours.txt", "h1"),
        ("both.txt", "h9"),
        ("staged.txt", "h4"),
        ("new.txt", "h5"),
        ("deleted.txt", "-"),
        ("nested", "dir"),
    ]);
    let a = attribute(&before, &now);
    assert_eq!(a.step, ["deleted.txt", "new.txt"]);
    assert_eq!(a.left_out, ["both.txt"]);
    assert_eq!(a.gone, ["committed.txt"]);
}

#[test]
fn a_commit_that_could_not_be_made_says_why_and_the_loop_goes_on() {
    let t = recorded(
        2,
        &Made {
            failed: Some("git update-ref failed".into()),
            ..Made::default()
        },
    );
    assert_eq!(t.outcome, Outcome::Continue);
    assert!(matches!(&t.effects[..], [Effect::Said(s)] if s.contains("git update-ref failed")));
    let r = applied(&t).results[&2].clone();
    assert_eq!(
        r.uncommitted.as_deref(),
        Some("all of it: git update-ref failed")
    );
    assert!(!r.commit_pending);
}

#[test]
fn a_done_steps_commit_comes_before_the_next_step_but_never_while_a_run_is_on_record() {
    let now = chrono::Utc::now();
    let m = view(DONE_2);
    assert_eq!(
        super::super::next(&m, &Caps::default(), now),
        super::super::Next::Commit(Due::Commit(2))
    );
    // A loop that waits, or is DONE, still gets its DONE step's commit.
    for status in ["WAITING", "DONE"] {
        let m = view(&DONE_2.replace("STATUS: RUNNING", &format!("STATUS: {status}")));
        assert_eq!(
            super::super::next(&m, &Caps::default(), now),
            super::super::Next::Commit(Due::Commit(2)),
            "{status}"
        );
    }
    let running = view(
        &DONE_2
            .replace(
                "RESULTS:\n",
                "CURRENT:\n  TASK_ID: task_20260101T000000_abcdef\n  ATTEMPT: 1\nRESULTS:\n",
            )
            .replace("3: [PENDING]", "3: [RUNNING]"),
    );
    assert!(
        matches!(
            super::super::next(&running, &Caps::default(), now),
            super::super::Next::Await(_)
        ),
        "its agent works in the tree a commit would take from"
    );
}

#[test]
fn an_attempt_marked_to_be_committed_clears_what_an_earlier_run_of_its_step_recorded() {
    // Step 1 was DONE and committed; `loop retry 1` runs it again.
    let again = DONE_2.replace(
        "    COMMIT: a690fb3\n",
        "    COMMIT: a690fb3\n    AGENT_COMMITS: 1111111\n    UNCOMMITTED: x.txt: theirs\n",
    );
    let t = super::super::started(&super::super::SpawnFacts {
        kind: RunKind::Attempt,
        step: 1,
        attempt: 2,
        review_number: 2,
        task_id: "task_b",
        session_id: "uuid-2",
        command: "again",
        git_head: None,
        new_loop_id: None,
        commit: true,
        superseded: Vec::new(),
        now: chrono::Utc::now(),
    });
    let mut d = Document::parse(&again).unwrap();
    for e in &t.edits {
        d.apply(e);
    }
    let r = d.view().results[&1].clone();
    assert!(r.commit_pending);
    assert_eq!(
        (r.commit, r.agent_commits, r.uncommitted),
        (None, None, None)
    );
}
