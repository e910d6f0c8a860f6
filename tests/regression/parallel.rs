//! Parallel steps, off the happy path, as a new user met them: each test is named after what
//! went wrong, and holds the loop the person started to the promise the rest of the loop
//! keeps (nothing reported that was not done, every decision taken where the person is).

use std::path::PathBuf;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{GateKind, GateState, Status, StepState};

use crate::support::bot::{CHAT, DEADLINE, start_real_bot, with_telegram};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, stderr, stdout, wait_until};

/// `loop start GOAL --step …` with `--parallel N` and `extra`, run to its end; its exit code.
fn start_parallel(env: &TestLoop, goal: &str, steps: &[&str], n: &str, extra: &[&str]) -> i32 {
    let mut args = vec!["start", goal, "--parallel", n];
    for s in steps {
        args.extend(["--step", s]);
    }
    args.extend(extra);
    crate::support::code(&env.run(&args))
}

/// The `M1.md` of step `n`'s own loop, as the loop the person started records it.
fn step_loop(env: &TestLoop, n: u32) -> PathBuf {
    PathBuf::from(
        env.m1().parallel.runs[&n]
            .loop_file
            .clone()
            .expect("the step's loop is recorded"),
    )
}

/// Nothing of the loop's git is left: one worktree (the project's), no `loop/*` branch, no
/// merge worktree.
#[track_caller]
fn assert_no_git_left(env: &TestLoop) {
    assert_eq!(
        env.git(&["worktree", "list"]).lines().count(),
        1,
        "{}",
        env.git(&["worktree", "list"])
    );
    assert_eq!(env.git(&["branch", "--list", "loop/*"]).trim(), "");
}

#[test]
fn a_second_parallel_loop_in_the_same_project_runs_its_own_steps_instead_of_adopting_the_first_ones()
 {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("b").write("b.txt", "b\n")),
    );
    assert_eq!(start_parallel(&env, "first goal", &["a", "b"], "2", &[]), 0);
    env.assert_status(Status::Done);
    let first_calls = env.calls().len();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("c").write("c.txt", "c\n"))
            .step(2, Action::done("d").write("d.txt", "d\n")),
    );
    let code = start_parallel(
        &env,
        "a completely different goal",
        &["delete everything", "rewrite in rust"],
        "2",
        &[],
    );
    assert_eq!(code, 0, "{}\n{}", env.text(), env.log());
    env.assert_status(Status::Done);
    assert_eq!(
        env.calls().len(),
        first_calls + 2,
        "the second loop's two steps ran their agents\n{}",
        env.log()
    );
    for f in ["c.txt", "d.txt"] {
        assert!(
            env.path().join(f).exists(),
            "{f}: the second loop's work\n{}",
            env.log()
        );
    }
    assert_no_git_left(&env);
    env.assert_no_processes();
}

/// Two steps at once, `--max-retries 1`; step 2's first attempt fails: returns once the loop
/// the person started shows the FAILED gate of step 2 (its runner may still drive step 1).
fn step_two_fails(env: &TestLoop, then: Action) -> crate::support::Guard {
    let runner = a_and_b_at_once(
        env,
        &Scenario::new()
            .step(1, Action::done("a").sleep_ms(300).write("a.txt", "a\n"))
            .step(2, [Action::failed("b does not build"), then]),
        &["--max-retries", "1"],
    );
    let shown = wait_until(DEADLINE, || {
        env.m1()
            .gates
            .iter()
            .any(|g| g.step == 2 && g.kind == GateKind::Failed && g.is_pending())
    });
    assert!(
        shown,
        "no gate of step 2 in the loop\n{}\n{}",
        env.text(),
        env.log()
    );
    runner
}

/// Tried as a new user would: a parallel loop that ended with step 2 skipped said
/// `DONE  2 of 2 steps done` in `loop status` and `loop: DONE: 2 step(s)` at its end.
#[test]
fn a_loop_that_ended_with_a_skipped_step_does_not_count_it_done() {
    let env = TestLoop::new().with_git();
    let mut runner = step_two_fails(&env, Action::done("never"));
    assert_eq!(runner.wait(DEADLINE).code(), Some(3), "{}", env.log());
    let g = env
        .m1()
        .gates
        .iter()
        .find(|g| g.is_pending())
        .unwrap()
        .id
        .clone();
    let out = env.run(&["answer", &g, "skip"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    env.assert_status(Status::Done);
    let status = stdout(&env.run_ok(&["status"]));
    assert!(status.contains("1 of 2 steps done, 1 skipped"), "{status}");
    let said = crate::support::stderr(&out);
    assert!(said.contains("DONE: 2 step(s), 1 skipped, $"), "{said}");
}

#[test]
fn a_skipped_parallel_step_is_recorded_skipped_not_done_with_another_steps_commit() {
    let env = TestLoop::new().with_git();
    let mut runner = step_two_fails(&env, Action::done("never"));
    // Step 1 done, step 2 waiting on its gate: the loop waits for the decision.
    assert_eq!(runner.wait(DEADLINE).code(), Some(3), "{}", env.log());
    // Decided in the step's own loop, by hand; the loop the person started follows it.
    let child = step_loop(&env, 2);
    let out = env.run(&["--file", &child.display().to_string(), "skip"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let out = env.run(&["resume"]);
    assert!(out.status.success(), "{}\n{}", env.text(), env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Done);
    assert_eq!(m.plan.steps[1].state, StepState::Skipped, "{}", env.text());
    let r = m.result(2);
    assert!(r.commit.is_none(), "a skipped step has no commit: {r:?}");
    assert_ne!(
        r.verified,
        Some(true),
        "a skipped step is not verified: {r:?}"
    );
    assert!(!env.path().join("b.txt").exists());
    assert!(env.path().join("a.txt").exists());
    assert_eq!(env.calls_for(2), 1, "step 2 ran once, then was skipped");
    let log = env.log();
    assert!(!log.contains("the goal is reached"), "{log}");
    assert!(
        log.contains("step 2 skipped") || log.contains("steps 2 skipped"),
        "{log}"
    );
    env.assert_no_processes();
}

/// Steps a and b at once, their agents as `scenario` says, with `extra` flags: started to plan
/// only, then run by a runner in the background.
fn a_and_b_at_once(env: &TestLoop, scenario: &Scenario, extra: &[&str]) -> crate::support::Guard {
    env.scenario(scenario);
    let mut args = TestLoop::start_args(&["a", "b"], &["--parallel", "2", "--plan-only"]);
    args.extend(extra);
    env.run_ok(&args);
    env.spawn(&["resume"])
}

/// Steps a and b writing a.txt (after `a_ms`) and b.txt.
fn a_and_b(a_ms: u64) -> Scenario {
    Scenario::new()
        .step(1, [Action::done("a").sleep_ms(a_ms).write("a.txt", "a\n")])
        .step(2, [Action::done("b").write("b.txt", "b\n")])
}

/// A step set `[SKIPPED]` by hand while VERIFY ran on its merged result was merged anyway,
/// and recorded DONE over the person's edit. It is not merged: its work stays on its branch.
#[test]
fn a_step_set_skipped_by_hand_while_its_merge_is_verified_is_not_merged() {
    let env = TestLoop::new().with_git();
    // VERIFY takes its time on a merged result only (in the merge queue's worktree, `merge`):
    // long enough for the edit below to land while it runs, on a busy machine too.
    let verify = "case \"$PWD\" in */merge) sleep 5 ;; esac";
    let mut runner = a_and_b_at_once(&env, &a_and_b(0), &["--verify", verify]);
    // The first merge's VERIFY (`merge-<loop>-step-N.verify`): the person's edit comes then.
    let merging = || -> Option<u32> {
        std::fs::read_dir(env.state().join("tasks"))
            .ok()?
            .flatten()
            .find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let n = name.strip_prefix("merge-")?.split("-step-").nth(1)?;
                n.strip_suffix(".verify")?.parse().ok()
            })
    };
    assert!(
        wait_until(DEADLINE, || merging().is_some()),
        "{}",
        env.log()
    );
    let n = merging().unwrap();
    let line = format!("{n}: [RUNNING] ");
    assert!(env.text().contains(&line), "{}", env.text());
    let text = env.text().replacen(&line, &format!("{n}: [SKIPPED] "), 1);
    std::fs::write(&env.file, text).unwrap();
    let status = runner.wait(DEADLINE);
    assert!(status.success(), "{status:?}\n{}", env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Done);
    assert_eq!(
        m.plan.steps[n as usize - 1].state,
        StepState::Skipped,
        "{}",
        env.log()
    );
    let (skipped, other) = if n == 1 {
        ("a.txt", "b.txt")
    } else {
        ("b.txt", "a.txt")
    };
    assert!(
        !env.path().join(skipped).exists(),
        "the skipped step's work was merged"
    );
    assert!(env.path().join(other).exists());
    assert!(
        env.log()
            .contains(&format!("step {n} was set SKIPPED by hand")),
        "{}",
        env.log()
    );
    env.assert_no_processes();
}

/// A step run at once and set `[DONE]` by hand was never merged nor let go: its loop ended
/// DONE, the loop it belongs to waited for it with nothing to do, STATUS RUNNING, forever. It
/// is let go as a step set SKIPPED is (its loop stopped, its work kept on its branch), and
/// stays DONE: done by hand.
#[test]
fn a_running_parallel_step_set_done_by_hand_is_let_go_and_the_loop_ends() {
    let env = TestLoop::new().with_git();
    let mut runner = a_and_b_at_once(&env, &a_and_b(1500), &[]);
    assert!(wait_until(DEADLINE, || env.calls_for(1) >= 1));
    let text = env.text().replacen("1: [RUNNING] a", "1: [DONE] a", 1);
    std::fs::write(&env.file, text).unwrap();
    let status = runner.wait(DEADLINE);
    assert!(
        status.success(),
        "{status:?}\n{}\n{}",
        env.text(),
        env.log()
    );
    let m = env.m1();
    assert_eq!(m.status, Status::Done);
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    assert!(env.path().join("b.txt").exists());
    assert!(!env.path().join("a.txt").exists(), "not merged");
    let log = env.log();
    assert!(log.contains("step 1 set DONE by hand"), "{log}");
    assert!(
        stdout(&env.run_ok(&["status"])).contains("done by hand"),
        "{}",
        env.text()
    );
    env.assert_no_processes();
}

/// `loop answer G stop` on the gate of a step run at once ends the loop FAILED and exits 1, as
/// `loop resume` of a FAILED loop does, and as the same decision on a sequential loop's gate
/// now does too (it exited 3 there, as if the loop still waited).
#[test]
fn stop_on_a_parallel_steps_gate_ends_the_loop_failed_and_exits_as_failed() {
    let env = TestLoop::new().with_git();
    let mut runner = step_two_fails(&env, Action::done("b at last").write("b.txt", "b\n"));
    let status = runner.wait(DEADLINE);
    assert_eq!(status.code(), Some(3), "{}", env.log());
    let g = env
        .m1()
        .gates
        .iter()
        .find(|g| g.step == 2 && g.kind == GateKind::Failed)
        .unwrap()
        .id
        .clone();
    let out = env.run(&["answer", &g, "stop"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stderr(&out),
        env.log()
    );
    env.assert_status(Status::Failed);
    assert_eq!(env.calls_for(2), 1, "stop runs nothing");
    env.assert_no_processes();
}

#[test]
fn a_parallel_steps_failure_is_decided_from_the_loop_the_person_started_with_loop_retry() {
    let env = TestLoop::new().with_git();
    let mut runner = step_two_fails(&env, Action::done("b at last").write("b.txt", "b\n"));
    let listed = stdout(&env.run_ok(&["gates"]));
    assert!(
        listed.contains("FAILED PENDING") && listed.contains("b does not build"),
        "{listed}"
    );
    let status = stdout(&env.run_ok(&["status"]));
    assert!(status.contains("GATE"), "{status}");
    env.run_ok(&["retry", "2"]);
    let status = runner.wait(DEADLINE);
    if status.code() == Some(3) {
        // The loop waited for the decision with nothing else to do: the retry carried it on.
        env.wait_for_status(Status::Done, DEADLINE);
    }
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(2), 2, "step 2 ran again once");
    assert!(env.path().join("b.txt").exists() && env.path().join("a.txt").exists());
    let m = env.m1();
    let g = m
        .gates
        .iter()
        .find(|g| g.step == 2 && g.kind == GateKind::Failed)
        .unwrap();
    assert_eq!(
        (g.state, g.choice.as_deref()),
        (GateState::Decided, Some("retry"))
    );
    // A second decision changes nothing.
    let again = env.run(&["answer", &g.id, "skip"]);
    assert!(
        stdout(&again).contains("already decided"),
        "{}",
        stdout(&again)
    );
    assert_eq!(env.calls_for(2), 2);
    assert_no_git_left(&env);
    env.assert_no_processes();
}

#[test]
fn a_parallel_steps_failure_is_skipped_by_a_tap_on_the_loop_the_person_started() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new().with_git(), &tg.base_url());
    let mut runner = step_two_fails(&env, Action::done("never"));
    let id = env
        .m1()
        .gates
        .iter()
        .find(|g| g.step == 2 && g.is_pending())
        .map(|g| g.id.clone())
        .unwrap();
    assert!(
        wait_until(DEADLINE, || tg.sent().iter().any(|s| s
            .buttons()
            .iter()
            .any(|b| b.starts_with(&format!("{id} "))))),
        "no message with buttons for {id}: {:?}",
        tg.sent()
    );
    let sent = tg.sent();
    let n = sent
        .iter()
        .rposition(|s| s.buttons().iter().any(|b| b.starts_with(&format!("{id} "))))
        .unwrap();
    let msg = sent[n].clone();
    assert!(msg.text.contains("b does not build"), "{}", msg.text);
    let skip = msg
        .buttons()
        .into_iter()
        .find(|b| b.contains(" skip") || b.ends_with("skip"))
        .or_else(|| msg.buttons().get(1).cloned())
        .unwrap();
    let bot = start_real_bot(&env, &tg.base_url());
    tg.push_tap(CHAT, CHAT, n + 1, &skip);
    env.wait_for_status(Status::Done, DEADLINE);
    let _ = runner.wait(DEADLINE);
    let m = env.m1();
    assert_eq!(m.plan.steps[1].state, StepState::Skipped);
    assert_eq!(m.gate(&id).unwrap().choice.as_deref(), Some("skip"));
    assert_eq!(env.calls_for(2), 1);
    drop(bot);
    env.assert_no_processes();
}

#[test]
fn a_parallel_steps_loop_runs_under_the_retakes_the_loop_the_person_started_allows() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("b").write("b.txt", "b\n"))
            .review(Action::changes("make it better")),
    );
    env.run_ok(&TestLoop::start_args(
        &["a", "b"],
        &["--parallel", "2", "--review", "--plan-only"],
    ));
    let text = env
        .text()
        .replace("LIMITS:\n", "LIMITS:\n  MAX_RETAKES: 1\n");
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    let _ = env.run(&["resume"]);
    assert!(
        wait_until(DEADLINE, || env
            .m1()
            .gates
            .iter()
            .filter(|g| g.kind == GateKind::Review && g.is_pending())
            .count()
            == 2),
        "{}\n{}",
        env.text(),
        env.log()
    );
    let reviews = env
        .calls()
        .iter()
        .filter(|c| crate::support::is_review(c))
        .count();
    assert_eq!(
        reviews, 4,
        "each step reviewed twice (MAX_RETAKES 1), not 4 times"
    );
    env.assert_no_processes();
}

#[test]
fn a_parallel_loop_without_verify_never_says_verify_passed() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("b").write("b.txt", "b\n")),
    );
    assert_eq!(start_parallel(&env, "g", &["a", "b"], "2", &[]), 0);
    let log = env.log();
    assert!(log.contains("merge: step 1 merged"), "{log}");
    assert!(!log.contains("VERIFY passed"), "{log}");
    let m = env.m1();
    for n in [1, 2] {
        assert_ne!(m.result(n).verified, Some(false), "{}", env.text());
    }
}

#[test]
fn a_parallel_steps_status_is_said_in_the_words_of_the_loop_the_person_started() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").sleep_ms(1500).write("a.txt", "a\n"))
            .step(2, Action::done("b").sleep_ms(1500).write("b.txt", "b\n"))
            .step(3, Action::done("c").sleep_ms(1500).write("c.txt", "c\n")),
    );
    env.run_ok(&TestLoop::start_args(
        &["a", "b", "c"],
        &["--parallel", "3", "--plan-only"],
    ));
    let mut runner = env.spawn(&["resume"]);
    assert!(wait_until(DEADLINE, || env.calls_for(3) >= 1));
    let status = stdout(&env.run_ok(&["status"]));
    // The step's own loop's private plan (its other steps SKIPPED) is not this loop's.
    assert!(!status.contains("skipped)"), "{status}");
    assert!(!status.contains("All 3 steps done"), "{status}");
    assert!(
        status.contains("STEP 2 ") && status.contains("RUNNING"),
        "{status}"
    );
    assert!(runner.wait(DEADLINE).success());
}

#[test]
fn a_conflict_past_max_retries_waits_on_a_gate_that_says_where_the_work_is() {
    let env = TestLoop::new().with_git();
    env.git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("one").write("a.txt", "one\n"))
            .step(2, Action::done("two").sleep_ms(500).write("a.txt", "two\n")),
    );
    let code = start_parallel(&env, "g", &["one", "two"], "2", &["--max-retries", "1"]);
    assert_eq!(code, 3, "{}\n{}", env.text(), env.log());
    let m = env.m1();
    let g = m
        .gates
        .iter()
        .find(|g| g.kind == GateKind::Merge && g.is_pending())
        .unwrap_or_else(|| panic!("no MERGE gate\n{}", env.text()));
    assert_eq!(g.step, 2);
    let q = g.question.clone().unwrap();
    let run = &m.parallel.runs[&2];
    assert!(q.contains(run.branch.as_deref().unwrap()), "{q}");
    assert!(q.contains(run.worktree.as_deref().unwrap()), "{q}");
    assert!(q.contains("a.txt"), "{q}");
    let listed = stdout(&env.run_ok(&["gates"]));
    assert!(
        listed.contains("retry:") && listed.contains("skip:"),
        "{listed}"
    );
    // `loop status` says how step 2 stands in this loop's words, not in its own loop's (whose
    // plan has the other step SKIPPED, and which is DONE).
    let status = stdout(&env.run_ok(&["status"]));
    assert!(!status.contains("skipped)"), "{status}");
    assert!(!status.contains("All 2 steps done"), "{status}");
    assert!(
        status.contains("STEP 2 ") && status.contains("MERGE"),
        "{status}"
    );
    // Skipped: the loop ends DONE with step 2 skipped, its work kept on its branch.
    env.run_ok(&["answer", &g.id, "skip"]);
    let m = env.m1();
    assert_eq!(m.status, Status::Done, "{}\n{}", env.text(), env.log());
    assert_eq!(m.plan.steps[1].state, StepState::Skipped);
    assert_eq!(
        std::fs::read_to_string(env.path().join("a.txt")).unwrap(),
        "one\n"
    );
    let branches = env.git(&["branch", "--list", "loop/*"]);
    assert!(
        branches.contains("-step-2"),
        "step 2's work is kept: {branches}"
    );
    env.assert_logged("kept on branch");
    env.assert_no_processes();
}

#[test]
fn a_runner_killed_right_after_the_last_merge_still_ends_the_loop_with_its_end() {
    for point in [
        "parallel-after-cleanup@2",
        "parallel-before-finish",
        "parallel-after-finish",
    ] {
        let env = TestLoop::new().with_git();
        env.plan_parallel(&[("a", 0), ("b", 300)], &[]);
        let mut c = env.cmd(&["resume"]);
        c.env("LOOP_CRASH_AT", point);
        let status = c.status().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{point}: no crash there"
        );
        let out = env.run(&["resume"]);
        assert!(
            out.status.success(),
            "{point}: {}\n{}",
            env.text(),
            env.log()
        );
        env.assert_status(Status::Done);
        // The end: the project has the result, and nothing of the loop's git is left.
        assert!(
            env.path().join("a.txt").exists() && env.path().join("b.txt").exists(),
            "{point}: the project was not fast-forwarded"
        );
        assert_no_git_left(&env);
        let merge = env.state().join("parallel");
        let left: Vec<_> = walk_named(&merge, "merge");
        assert!(left.is_empty(), "{point}: merge worktree left: {left:?}");
        env.assert_each_step_started_once(2, point);
    }
}

/// Directories named `name` under `dir`.
fn walk_named(dir: &std::path::Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == name) {
                found.push(p.clone());
            }
            found.extend(walk_named(&p, name));
        }
    }
    found
}

#[test]
fn a_parallel_record_git_cannot_use_halts_the_loop_saying_which_step_instead_of_exiting_70() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new());
    env.run_ok(&TestLoop::start_args(
        &["a", "b"],
        &["--parallel", "2", "--plan-only"],
    ));
    // A record written by hand whose base is a commit the repository does not have.
    let text =
        env.text() + "PARALLEL:\n  STEP_1:\n    BASE: 0123456789abcdef0123456789abcdef01234567\n";
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    let out = env.run(&["resume"]);
    env.assert_exit(&out, 3);
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let said = format!(
        "{} {}",
        m.last_action.unwrap_or_default(),
        m.next_action.unwrap_or_default()
    );
    assert!(said.contains("PARALLEL.STEP_1"), "{said}");
    env.assert_no_processes();
}

#[test]
fn an_old_text_saved_over_a_merged_steps_cleanup_never_starts_that_step_again() {
    let env = TestLoop::new().with_git();
    env.plan_parallel(&[("a", 0), ("b", 2500)], &[]);
    let mut runner = env.spawn(&["resume"]);
    // A text read while step 1 still has its record, saved once it is merged and cleaned up.
    assert!(wait_until(DEADLINE, || env
        .m1()
        .parallel
        .runs
        .contains_key(&1)));
    let old = env.text();
    assert!(
        wait_until(DEADLINE, || {
            let m = env.m1();
            m.plan.steps[0].state == StepState::Done && !m.parallel.runs.contains_key(&1)
        }),
        "{}",
        env.log()
    );
    crate::support::save_by_rename(&env.state().join("M1.md"), &old);
    assert!(
        runner.wait(DEADLINE).success(),
        "{}\n{}",
        env.text(),
        env.log()
    );
    env.assert_status(Status::Done);
    env.assert_logged("stale save");
    env.assert_each_step_started_once(2, "after an old text was saved over step 1's cleanup");
    assert!(!env.text().contains("STEP_1:\n    \n"), "{}", env.text());
    assert_no_git_left(&env);
    env.assert_no_processes();
}

/// A parallel step whose agent changed no file was recorded with `COMMIT:` the integration
/// branch's tip, another step's merge or the project's start, and the log said it was "merged
/// … (the integration branch held its work already)". The soak met it when its agent's writes
/// were refused: the step looked committed. It has no commit of its own, and says so.
#[test]
fn a_parallel_step_that_changed_nothing_is_not_given_another_commit_as_its_own() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("nothing to change")),
    );
    assert_eq!(start_parallel(&env, "goal", &["a", "look"], "2", &[]), 0);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert!(m.results[&1].commit.is_some(), "{}", env.text());
    assert_eq!(
        m.results[&2].commit,
        None,
        "step 2 made no commit\n{}",
        env.text()
    );
    let log = env.log();
    assert!(
        log.contains("step 2 changed no file: nothing to merge into"),
        "{log}"
    );
    assert!(!log.contains("step 2 merged"), "{log}");
    assert_no_git_left(&env);
}

/// A parallel loop that reached `MAX_COST_USD` halted WAITING with only a line in `NEXT_ACTION`,
/// where a loop of one step at a time waits on a COST gate, with buttons on the phone: raise
/// the cap or stop. It waits on the same gate now, and a raise starts the steps left.
///
/// Each step alone spends the cap, and step 2 ends well after step 1: at the cap no step
/// starts while another still runs. (At half the cap each, a loaded machine that ended step 1
/// first rightly started step 3 under the cap, and the test failed.)
#[test]
fn a_parallel_loop_at_its_cost_cap_waits_on_a_cost_gate_a_raise_carries_on() {
    use m1loop::m1::GateKind;
    let env = TestLoop::new().with_git();
    let work = || {
        Action::done("ok")
            .write("f-{step}.txt", "{step}\n")
            .cost(1.0)
    };
    env.scenario(
        &Scenario::new()
            .step(2, [work().sleep_ms(1500)])
            .otherwise(work()),
    );
    let code = start_parallel(
        &env,
        "goal",
        &["a", "b", "c"],
        "2",
        &["--max-cost-usd", "1"],
    );
    assert_eq!(code, 3, "{}\n{}", env.text(), env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let g = m
        .gates
        .iter()
        .find(|g| g.kind == GateKind::Cost)
        .unwrap_or_else(|| panic!("no COST gate\n{}", env.text()))
        .clone();
    assert_eq!(g.options, ["raise", "stop"]);
    assert_eq!(m.plan.steps[2].state, StepState::Pending);
    assert_eq!(env.calls_for(3), 0, "step 3 started over the cap");
    let out = env.run(&["answer", &g.id, "raise"]);
    assert!(
        wait_until(DEADLINE, || env.m1().status == Status::Done),
        "{}\n{}\n{}",
        crate::support::stdout(&out),
        env.text(),
        env.log()
    );
    assert_eq!(env.calls_for(3), 1);
    assert_no_git_left(&env);
}

/// The `M1.md` of every step's own loop this loop made, wherever its record went.
fn step_loop_files(env: &TestLoop) -> Vec<PathBuf> {
    walk_named(&env.state().join("parallel"), "step-1.loop")
        .into_iter()
        .chain(walk_named(&env.state().join("parallel"), "step-2.loop"))
        .chain(walk_named(&env.state().join("parallel"), "step-3.loop"))
        .map(|d| d.join("M1.md"))
        .filter(|f| f.exists())
        .collect()
}

/// Tried as a new user would (issue 43): a hand-written M1.md with `PARALLEL: 3` and no
/// `AGENT.PROGRAM`, the agent set by `LOOP_AGENT`, resumed. Each step's loop was written with
/// the template's `PROGRAM: claude`, not what this loop runs, which was not installed: every
/// step's loop ended at once, and was started again every few milliseconds, for ever.
#[test]
fn a_step_loop_runs_the_program_its_parent_runs_not_the_default() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").write("f-{step}.txt", "{step}\n")));
    let text = "STATUS: RUNNING\nGOAL: three files\nPLAN:\n  STEPS:\n    1: [PENDING] a\n    \
                2: [PENDING] b\n    3: [PENDING] c\nLIMITS:\n  PARALLEL: 3\n";
    std::fs::write(&env.file, text).unwrap();
    let out = env.run_for(&["resume"], std::time::Duration::from_secs(40));
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    for n in 1..=3 {
        assert_eq!(env.calls_for(n), 1, "step {n}\n{}", env.log());
        assert!(env.path().join(format!("f-{n}.txt")).exists());
    }
    let files = step_loop_files(&env);
    assert_eq!(files.len(), 3, "{files:?}");
    for f in files {
        let step = m1loop::m1::Document::parse(&std::fs::read_to_string(&f).unwrap())
            .unwrap()
            .view();
        assert_eq!(
            step.agent.program.as_deref(),
            Some(crate::support::SIM),
            "{}: {}",
            f.display(),
            std::fs::read_to_string(&f).unwrap()
        );
    }
    let runs_on = env.log().matches("loop runs on").count();
    assert!(runs_on <= 3, "{runs_on} restarts\n{}", env.log());
    env.assert_no_processes();
}

/// A step's loop that cannot start (its agent program is not there) was started again every
/// few milliseconds, nothing said why. It is said once, with the reason its runner gave, and
/// the loop the person started waits on them; once the program is there, `loop resume` ends
/// the loop, step 2's work merged too.
#[test]
fn a_step_loop_that_cannot_start_is_said_once_and_waits_without_restarting_in_a_tight_loop() {
    let env = TestLoop::new().with_git();
    env.plan_parallel(&[("a", 0), ("b", 0)], &[]);
    // A crash right after step 1's loop is written, before its runner starts.
    let mut c = env.cmd(&["resume"]);
    c.env("LOOP_CRASH_AT", "parallel-after-step-loop@1");
    let status = c.status().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    let step_file = step_loop(&env, 1);
    let good = std::fs::read_to_string(&step_file).unwrap();
    let missing = env.temp.join("no-such-agent");
    let bad: String = good
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("PROGRAM:") {
                format!("  PROGRAM: {}", missing.display())
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert!(bad.contains("no-such-agent"), "{bad}");
    std::fs::write(&step_file, &bad).unwrap();
    let out = env.run_for(&["resume"], std::time::Duration::from_secs(40));
    env.assert_exit(&out, 3);
    let log = env.log();
    let runs_on = log.matches("step 1's loop runs on").count();
    assert!(runs_on <= 2, "{runs_on} restarts of step 1's loop\n{log}");
    assert_eq!(
        log.matches("halt: step 1's loop cannot start").count(),
        1,
        "said once\n{log}"
    );
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let said = m.last_action.clone().unwrap_or_default();
    assert!(
        said.contains("step 1") && said.contains("no-such-agent"),
        "{said}\n{}",
        env.text()
    );
    assert_eq!(env.calls_for(1), 0);
    // Step 2's loop ends its step meanwhile; nothing is started again.
    env.assert_no_processes();
    assert_eq!(env.log().matches("step 1's loop runs on").count(), runs_on);
    // The person puts the program back: the step runs, and the loop ends.
    let fixed = std::fs::read_to_string(&step_file)
        .unwrap()
        .replace(&missing.display().to_string(), crate::support::SIM);
    std::fs::write(&step_file, fixed).unwrap();
    let out = env.run_for(&["resume"], std::time::Duration::from_secs(40));
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    assert_eq!((env.calls_for(1), env.calls_for(2)), (1, 1));
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    env.assert_no_processes();
}

/// A step's loop whose runner dies each time it starts (here killed at a crash point before
/// its first write) is started again a bounded number of times, each later than the one
/// before, then the loop the person started waits, saying which step; `loop resume` carries
/// it on.
#[test]
fn a_step_loop_whose_runner_dies_at_each_start_is_started_a_bounded_number_of_times() {
    let env = TestLoop::new().with_git();
    env.plan_parallel(&[("a", 0), ("b", 0)], &[]);
    let mut c = env.cmd(&["resume"]);
    // The steps' runners take this loop's environment, and die where a step's run is recorded.
    c.env("LOOP_CRASH_AT", "before-spawn-write");
    let started = std::time::Instant::now();
    let out = crate::support::run_within(c, std::time::Duration::from_secs(60));
    env.assert_exit(&out, 3);
    let log = env.log();
    for n in [1, 2] {
        let runs_on = log.matches(&format!("step {n}'s loop runs on")).count();
        assert!(
            runs_on <= 5,
            "step {n}'s loop started {runs_on} times\n{log}"
        );
    }
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    let said = m.last_action.clone().unwrap_or_default();
    assert!(said.contains("step 1") || said.contains("step 2"), "{said}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(env.calls().len(), 0);
    env.assert_no_processes();
    let out = env.run(&["resume"]);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(2, "after the crashes");
    env.assert_no_processes();
}

/// The halt on a record git cannot use says "fix or remove `PARALLEL.STEP_1` in M1.md …, then
/// `loop resume`": removed as it says, the step starts afresh and the loop ends.
#[test]
fn a_parallel_record_git_cannot_use_removed_as_the_halt_says_lets_the_loop_end() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("b").write("b.txt", "b\n")),
    );
    env.run_ok(&TestLoop::start_args(
        &["a", "b"],
        &["--parallel", "2", "--plan-only"],
    ));
    let planned = env.text();
    let text = planned.clone()
        + "PARALLEL:\n  STEP_1:\n    BASE: 0123456789abcdef0123456789abcdef01234567\n";
    std::fs::write(&env.file, text).unwrap();
    env.run_exits(3, &["resume"]);
    let how = env.m1().next_action.unwrap_or_default();
    assert!(how.contains("remove PARALLEL.STEP_1"), "{how}");
    env.assert_no_processes();
    // As it says: the record removed (the rest of the block as the loop left it).
    let m = env.m1();
    let mut in_record = false;
    let text: String = env
        .text()
        .lines()
        .filter(|l| {
            if *l == "  STEP_1:" {
                in_record = true;
            } else if in_record && !l.starts_with("    ") {
                in_record = false;
            }
            !in_record
        })
        .fold(String::new(), |mut text, l| {
            text.push_str(l);
            text.push('\n');
            text
        });
    std::fs::write(&env.file, &text).unwrap();
    assert!(m.parallel.runs.contains_key(&1));
    assert!(!env.m1().parallel.runs.contains_key(&1), "{text}");
    let out = env.run(&["resume"]);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    assert_no_git_left(&env);
    env.assert_no_processes();
}
