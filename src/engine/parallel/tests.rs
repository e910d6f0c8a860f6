//! The scheduler's rules, each over a parsed M1.md and what the runner saw.

use std::collections::BTreeMap;

use super::inherit::{Inherit, agent_inheritance, limit_inheritance, top_inheritance};
use super::*;
use crate::engine::Caps;
use crate::m1::keys::{AgentKey, Key as _, LimitKey, Top};
use crate::m1::{Document, Edit, GateKind, M1, StepResult, StepState};

/// Four steps, 4 after 2 and 3, two slots; step 1 runs in its own loop.
const LOOP: &str = "STATUS: RUNNING
GOAL: g
LOOP_ID: top1
PLAN:
  TOTAL_STEPS: 4
  CURRENT_STEP: 1
  STEPS:
    1: [RUNNING] a
    2: [PENDING] b
    3: [PENDING] c
    4: [PENDING] d
  AFTER:
    4: 2, 3
LIMITS:
  PARALLEL: 2
PARALLEL:
  BRANCH: loop/top1
  BASE: 1111111
  STEP_1:
    WORKTREE: /p/state/parallel/top1/step-1
    BRANCH: loop/top1-step-1
    BASE: 1111111
    LOOP: /p/state/parallel/top1/step-1.loop/M1.md
";

fn view(text: &str) -> M1 {
    Document::parse(text)
        .unwrap_or_else(|e| panic!("test document invalid: {e}\n{text}"))
        .view()
}

fn seen(of: &[(u32, Seen)]) -> BTreeMap<u32, Observed> {
    of.iter()
        .map(|(n, s)| (*n, Observed::new(s.clone())))
        .collect()
}

fn caps() -> Caps {
    Caps::default()
}

fn plan(text: &str, of: &[(u32, Seen)], slots: u32) -> Vec<Move> {
    schedule(&view(text), &seen(of), slots, &caps())
}

fn gate(id: &str, kind: GateKind, step: u32) -> Gate {
    Gate {
        question: Some("step 2 failed: no build".into()),
        options: vec!["retry".into(), "skip".into(), "stop".into()],
        ..Gate::opening(id.into(), kind, step, "f".into())
    }
}

#[test]
fn a_ready_step_starts_when_a_slot_is_free_and_one_that_waits_does_not() {
    // Slot 2 of 2: step 2 starts; 3 would too, but no slot is left; 4 waits for 2 and 3.
    assert_eq!(plan(LOOP, &[(1, Seen::Driven)], 2), [Move::Start(2)]);
    assert_eq!(
        plan(LOOP, &[(1, Seen::Driven)], 3),
        [Move::Start(2), Move::Start(3)]
    );
    assert!(plan(LOOP, &[(1, Seen::Driven)], 1).is_empty());
}

#[test]
fn a_running_step_whose_record_a_person_removed_starts_again_instead_of_waiting_for_ever() {
    // As the halt on a record git cannot use says: remove PARALLEL.STEP_1, then resume.
    let at = LOOP.find("  STEP_1:\n").unwrap();
    let removed = &LOOP[..at];
    assert_eq!(plan(removed, &[], 2), [Move::Start(1), Move::Start(2)]);
}

#[test]
fn the_readiness_rule_is_one_for_one_slot_and_many() {
    let m = view(LOOP);
    let parallel: Vec<u32> = crate::engine::order::ready(&m, 0).map(|s| s.n).collect();
    assert_eq!(parallel, [1, 2, 3], "4 waits for 2 and 3");
    // One at a time, the next step is the first of the same list.
    assert_eq!(crate::engine::open_step(&m, 0).map(|s| s.n), Some(1));
    // Step 3 about to close: 4 still waits for 2.
    let after3: Vec<u32> = crate::engine::order::ready(&m, 3).map(|s| s.n).collect();
    assert_eq!(after3, [1, 2]);
}

#[test]
fn a_recorded_step_whose_loop_is_missing_is_started_again_and_a_foreign_one_set_aside() {
    assert_eq!(plan(LOOP, &[(1, Seen::Unmade)], 1), [Move::Start(1)]);
    let foreign = Seen::Foreign("it runs step 1 of the loop old".into());
    assert_eq!(plan(LOOP, &[(1, foreign)], 1), [Move::SetAside(1)]);
}

#[test]
fn a_step_whose_runner_died_is_carried_on_and_a_stopped_one_only_when_resumed() {
    assert_eq!(plan(LOOP, &[(1, Seen::Undriven)], 1), [Move::Drive(1)]);
    let halted = Seen::Halted("Stopped by `loop stop`".into());
    // Waiting of its own accord, it waits for a person: so does the loop.
    assert_eq!(plan(LOOP, &[(1, halted.clone())], 1), [Move::Wait]);
    // Stopped with this loop (marked), it runs on with it.
    let stopped = LOOP.replace(
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n",
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n    STOPPED: true\n",
    );
    assert_eq!(plan(&stopped, &[(1, halted)], 1), [Move::Drive(1)]);
}

#[test]
fn a_done_step_is_merged_and_a_merged_one_only_cleaned_up() {
    assert_eq!(plan(LOOP, &[(1, Seen::Done)], 1), [Move::Merge(1)]);
    let merged = LOOP.replace("1: [RUNNING] a", "1: [DONE] a").replace(
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n",
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n    MERGED: 2222222\n",
    );
    assert_eq!(plan(&merged, &[(1, Seen::Done)], 1), [Move::CleanUp(1)]);
}

#[test]
fn a_step_skipped_in_its_loop_or_here_is_dropped_never_merged() {
    assert_eq!(plan(LOOP, &[(1, Seen::Skipped)], 1), [Move::Drop(1)]);
    let by_hand = LOOP.replace("1: [RUNNING] a", "1: [SKIPPED] a");
    assert_eq!(plan(&by_hand, &[(1, Seen::Driven)], 1), [Move::Drop(1)]);
}

#[test]
fn a_step_set_done_by_hand_before_its_merge_is_dropped_not_waited_for() {
    let by_hand = LOOP.replace("1: [RUNNING] a", "1: [DONE] a");
    for seen in [Seen::Driven, Seen::Done] {
        assert_eq!(plan(&by_hand, &[(1, seen)], 1), [Move::Drop(1)]);
    }
    let t = dropped(1, true, Some("loop/x-step-1"), &StepResult::default());
    assert!(
        !t.edits.iter().any(|e| matches!(e, Edit::StepState(..))),
        "{t:?}"
    );
    assert!(t.log.contains("step 1 set DONE by hand"), "{}", t.log);
}

#[test]
fn a_steps_gate_is_shown_here_once_and_carried_there_once_decided() {
    let g = gate("G1", GateKind::Failed, 1);
    let moves = plan(LOOP, &[(1, Seen::Decision(Box::new(g.clone())))], 1);
    assert_eq!(
        moves,
        [Move::Mirror {
            step: 1,
            gate: Box::new(g.clone())
        }]
    );
    let shown = format!(
        "{LOOP}GATES:\n  G4:\n    KIND: FAILED\n    STEP: 1\n    STEP_GATE: G1\n    STATE: PENDING\n"
    );
    // Shown and pending: the loop waits for the decision, nothing more.
    assert_eq!(
        plan(&shown, &[(1, Seen::Decision(Box::new(g.clone())))], 1),
        [Move::Wait]
    );
    let decided = shown.replace(
        "    STATE: PENDING\n",
        "    STATE: DECIDED\n    CHOICE: retry\n    BY: loop retry\n",
    );
    assert_eq!(
        plan(&decided, &[(1, Seen::Decision(Box::new(g)))], 1),
        [Move::Carry {
            step: 1,
            gate: "G4".into(),
            step_gate: "G1".into(),
            choice: "retry".into(),
            by: "loop retry".into(),
        }]
    );
}

#[test]
fn a_gate_decided_in_the_steps_own_loop_closes_the_one_standing_for_it_here() {
    let shown = format!(
        "{LOOP}GATES:\n  G4:\n    KIND: FAILED\n    STEP: 1\n    STEP_GATE: G1\n    STATE: PENDING\n"
    );
    let mut o = seen(&[(1, Seen::Driven)]);
    o.get_mut(&1).unwrap().decided = vec![("G1".into(), "skip".into(), "me".into())];
    assert_eq!(
        schedule(&view(&shown), &o, 1, &caps()),
        [Move::Settled {
            step: 1,
            gate: "G4".into(),
            choice: "skip".into(),
            by: "me".into(),
        }]
    );
}

#[test]
fn a_step_that_failed_fails_the_loop_and_a_retry_here_reaches_its_loop() {
    let failed = Seen::Failed("Stopped at step 1".into());
    assert_eq!(
        plan(LOOP, &[(1, failed.clone())], 1),
        [Move::Fail {
            step: 1,
            reason: "Stopped at step 1".into()
        }]
    );
    let retried = LOOP.replace("1: [RUNNING] a", "1: [PENDING] a");
    assert_eq!(plan(&retried, &[(1, failed)], 1), [Move::RetryThere(1)]);
}

#[test]
fn a_merge_past_its_retries_waits_on_its_gate_and_a_retry_there_sends_it_back() {
    let failing = LOOP.replace(
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n",
        "    LOOP: /p/state/parallel/top1/step-1.loop/M1.md\n    MERGE_FAILS: 3\n",
    );
    let pending =
        format!("{failing}GATES:\n  G2:\n    KIND: MERGE\n    STEP: 1\n    STATE: PENDING\n");
    assert_eq!(plan(&pending, &[(1, Seen::Done)], 1), [Move::Wait]);
    let retry = pending.replace(
        "    STATE: PENDING\n",
        "    STATE: DECIDED\n    CHOICE: retry\n",
    );
    assert_eq!(
        plan(&retry, &[(1, Seen::Done)], 1),
        [Move::SendBack {
            step: 1,
            gate: "G2".into()
        }]
    );
}

#[test]
fn the_end_comes_when_every_step_is_closed_and_none_runs() {
    let all = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [DONE] a\n    2: [SKIPPED] b\n";
    assert_eq!(plan(all, &[], 2), [Move::Finish]);
    let stuck = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [FAILED] a\n    2: [PENDING] b\n  AFTER:\n    2: 1\n";
    assert!(matches!(plan(stuck, &[], 2)[..], [Move::Halt { .. }]));
}

#[test]
fn a_cost_cap_holds_new_steps_back_and_waits_on_a_cost_gate_once_none_runs() {
    let text = LOOP.replace("  PARALLEL: 2\n", "  PARALLEL: 2\n  MAX_COST_USD: 1\n");
    let c = Caps {
        max_cost_usd: Some(1.0),
        ..Caps::default()
    };
    let mut o = seen(&[(1, Seen::Driven)]);
    o.get_mut(&1).unwrap().spent = 1.5;
    // Step 1 runs on; nothing new starts.
    assert!(schedule(&view(&text), &o, 2, &c).is_empty());
    let idle = "STATUS: RUNNING\nGOAL: g\nRESULTS:\n  STEP_1:\n    COST_USD: 2\nPLAN:\n  STEPS:\n    1: [DONE] a\n    2: [PENDING] b\n";
    assert!(matches!(
        schedule(&view(idle), &BTreeMap::new(), 2, &c)[..],
        [Move::OverBudget { step: 2, .. }]
    ));
}

#[test]
fn a_plan_over_max_steps_halts_before_any_step_starts() {
    let c = Caps {
        max_steps: 1,
        ..Caps::default()
    };
    let text =
        "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [PENDING] a\n    2: [PENDING] b\n";
    assert!(matches!(
        schedule(&view(text), &BTreeMap::new(), 2, &c)[..],
        [Move::Halt { .. }]
    ));
}

#[test]
fn every_limit_and_agent_setting_is_inherited_or_says_why_not() {
    // The matches are exhaustive: a new key does not compile until it is on one side. Here,
    // the side each is on, and a reason for each that is not inherited.
    let not: Vec<&str> = LimitKey::ALL
        .iter()
        .filter_map(|k| match limit_inheritance(*k) {
            Inherit::Kept => None,
            Inherit::Not(why) => {
                assert!(why.len() > 20, "{} needs a reason", k.name());
                Some(k.name())
            }
        })
        .collect();
    let mut not = not;
    not.sort_unstable();
    assert_eq!(not, ["MAX_COST_USD", "MAX_STEPS", "PARALLEL"]);
    for k in AgentKey::ALL {
        assert_eq!(agent_inheritance(*k), Inherit::Kept, "{}", k.name());
    }
    for k in [Top::Goal, Top::Constraints, Top::Verify, Top::Review] {
        assert_eq!(top_inheritance(k), Some(Inherit::Kept), "{}", k.name());
    }
}

/// Step `step`'s own loop, as the tests of inheritance make it.
fn step_spec(step: u32) -> StepLoop<'static> {
    StepLoop {
        step,
        worktree: "/p/wt",
        parent_file: "/p/state/M1.md",
        parent_id: "top1",
        loop_id: "child1",
        started_at: "2026-11-22T03:00:00Z",
        max_steps: 10,
    }
}

/// The M1.md of a step's loop: its `template` with the edits [`step_loop`] makes from the
/// loop `m`, which runs with what `raw` gives.
fn step_loop_from(
    template: &str,
    m: &M1,
    spec: &StepLoop<'_>,
    raw: &dyn Fn(&crate::m1::KeyPath) -> Option<String>,
) -> Document {
    let mut child = Document::parse(template).unwrap();
    for e in step_loop(m, spec, raw) {
        child.apply(&e);
    }
    child
}

#[test]
fn a_steps_loop_gets_every_inherited_setting_this_loop_has_and_belongs_to_it() {
    let text = "STATUS: RUNNING\nGOAL: g\nLOOP_ID: top1\nCONSTRAINTS: no deps\nVERIFY: make test\nREVIEW: on\nPLAN:\n  STEPS:\n    1: [DONE] a\n    2: [PENDING] b\n    3: [PENDING] c\nLIMITS:\n  MAX_RETAKES: 1\n  MAX_RESTARTS: 5\n  CONTEXT_THRESHOLD: 40\n  MAX_COST_USD: 3\n  PARALLEL: 3\nAGENT:\n  MODEL: opus\n  BACKEND: codex\n";
    let doc = Document::parse(text).unwrap();
    let m = doc.view();
    let spec = step_spec(2);
    let raw = |p: &crate::m1::KeyPath| doc.get_at(p);
    let child = step_loop_from("STATUS: RUNNING\nGOAL: x\n", &m, &spec, &raw);
    let c = child.view();
    assert_eq!(c.limits.max_retakes, Some(1));
    assert_eq!(c.limits.max_restarts, Some(5));
    assert_eq!(c.limits.context_threshold, Some(40));
    assert_eq!(c.limits.max_cost_usd, None, "the parent holds the budget");
    assert_eq!(c.limits.parallel, Some(1));
    assert_eq!(c.agent.model.as_deref(), Some("opus"));
    assert_eq!(c.constraints.as_deref(), Some("no deps"));
    assert_eq!(c.verify.as_deref(), Some("make test"));
    assert!(c.review);
    assert_eq!(
        (c.parent_id.as_deref(), c.parent_step),
        (Some("top1"), Some(2))
    );
    let states: Vec<_> = c.plan.steps.iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [StepState::Done, StepState::Pending, StepState::Skipped]
    );
}

#[test]
fn a_steps_loop_keeps_no_default_of_its_template_that_this_loop_does_not_run_with() {
    let text = "STATUS: RUNNING\nGOAL: g\nLOOP_ID: top1\nPLAN:\n  STEPS:\n    1: [PENDING] a\nLIMITS:\n  PARALLEL: 2\n";
    let doc = Document::parse(text).unwrap();
    let m = doc.view();
    let spec = step_spec(1);
    // This loop runs `/opt/agent` (from the environment) and no permission mode.
    let runs_with = |p: &crate::m1::KeyPath| {
        (*p == AgentKey::Program.path())
            .then(|| "/opt/agent".to_owned())
            .or_else(|| doc.get_at(p))
    };
    let template = "STATUS: RUNNING\nGOAL: x\nLIMITS:\n  MAX_RETRIES: 3\nAGENT:\n  PROGRAM: claude\n  PERMISSION_MODE: acceptEdits\n";
    let child = step_loop_from(template, &m, &spec, &runs_with);
    let c = child.view();
    assert_eq!(c.agent.program.as_deref(), Some("/opt/agent"));
    assert_eq!(c.agent.permission_mode, None, "{}", child.render());
    assert_eq!(c.limits.max_retries, None, "{}", child.render());
}

#[test]
fn a_merge_that_fails_goes_back_to_its_session_then_past_its_retries_waits_on_a_gate() {
    let looped = view(LOOP);
    let place = WorkPlace {
        branch: "loop/top1-step-1".into(),
        worktree: "/p/state/parallel/top1/step-1".into(),
        mid_merge: true,
    };
    let conflict = MergeOutcome::Conflict(vec!["a.txt".into()]);
    let MergeFailure::SendBack { told, .. } = merge_failed(&looped, 1, &conflict, &caps(), &place)
    else {
        panic!("the first conflict sends the step back");
    };
    assert!(told.contains("conflict markers in a.txt"), "{told}");
    let once = Caps {
        max_retries: 1,
        ..Caps::default()
    };
    let MergeFailure::Gate(t) = merge_failed(&looped, 1, &conflict, &once, &place) else {
        panic!("past MAX_RETRIES: a gate");
    };
    let mut written = Document::parse(LOOP).unwrap();
    for e in &t.edits {
        written.apply(e);
    }
    let g = written.view().gates.last().cloned().unwrap();
    assert_eq!((g.kind, g.step), (GateKind::Merge, 1));
    let q = g.question.unwrap();
    for said in [
        "loop/top1-step-1",
        "/p/state/parallel/top1/step-1",
        "MERGE_HEAD",
        "a.txt",
    ] {
        assert!(q.contains(said), "{said} in {q}");
    }
}

#[test]
fn a_steps_loop_inherits_exactly_what_the_settings_table_says() {
    use crate::m1::settings::{Kept, SETTINGS};
    let m =
        view("STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [PENDING] a\n    2: [PENDING] b\n");
    let spec = step_spec(2);
    // This loop runs with a value of its own for every setting.
    let edits = step_loop(&m, &spec, &|_| Some("this loop's".to_owned()));
    let inherited = |path: &crate::m1::KeyPath| {
        edits
            .iter()
            .any(|e| matches!(e, Edit::Set(p, v) if p == path && v == "this loop's"))
    };
    let mut checked = 0;
    for s in SETTINGS {
        let path = match s.m1 {
            Kept::Limit(k) => k.path(),
            Kept::Agent(k) => k.path(),
            Kept::Top(k) => k.path(),
            Kept::Runner(_) => continue,
        };
        let want = s.inherit == Inherit::Kept;
        assert_eq!(inherited(&path), want, "{:?}: {:?}", s.m1, s.inherit);
        checked += 1;
    }
    assert!(checked > 25, "{checked}");
}

/// The loop's next move one step at a time, as the sequential loop asks for it.
fn next_of(m: &M1) -> Next {
    crate::engine::next(m, &caps(), chrono::Utc::now())
}

#[test]
fn the_scheduler_of_steps_at_once_decides_a_steps_attempt_and_the_end_while_steps_run_at_once() {
    let fresh = "STATUS: RUNNING
GOAL: g
PLAN:
  TOTAL_STEPS: 2
  CURRENT_STEP: 0
  STEPS:
    1: [PENDING] a
    2: [PENDING] b
";
    let m = view(fresh);
    let next = next_of(&m);
    assert!(matches!(&next, Next::Run(s) if s.kind == RunKind::Attempt));
    // One slot, nothing that ran at once: the loop of one step at a time decides.
    assert!(!decides(&m, &next, 1));
    assert!(decides(&m, &next, 2));
    // A wait is the loop's own, unless steps are in flight: then the scheduler watches them.
    let wait = Next::Paused("a person".into());
    assert!(!decides(&m, &wait, 2));
    let running = view(LOOP);
    assert!(
        decides(&running, &wait, 1),
        "a loop that ran its steps at once ends as one"
    );
    // A loop that is not RUNNING, or has a run of its own on record, is not the scheduler's.
    let waiting = view(&LOOP.replace("STATUS: RUNNING", "STATUS: WAITING"));
    assert!(!decides(&waiting, &wait, 2));
    let own_run = view(&format!("{LOOP}CURRENT:\n  TASK_ID: task_1\n"));
    assert!(!decides(&own_run, &wait, 2));
}
