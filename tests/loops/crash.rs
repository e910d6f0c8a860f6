//! Crash safety, hand edits and the stop file: the promises that make the loop trustworthy.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use m1loop::runner::CRASH_POINTS;

use crate::support::answers::steady;
use crate::support::{TestLoop, line_with, save_by_rename, stderr, wait_until};

/// Every step works `ms`, then passes.
fn assert_complete(env: &TestLoop, steps: u32) {
    env.assert_status(Status::Done);
    let m = env.m1();
    for n in 1..=steps {
        assert_eq!(m.plan.steps[n as usize - 1].state, StepState::Done);
        let r = &m.results[&n];
        assert_eq!(r.exit, Some(0), "step {n}: {}", env.text());
        assert_eq!(r.summary.as_deref(), Some("ok"));
        assert!(r.session_id.is_some() && r.attempts.is_some());
    }
    assert_eq!(m.current.task_id, None);
}

/// The text of each step of the loops here, in order.
const STEP: [&str; 3] = ["a", "b", "c"];

/// Each of steps 1 to `steps` is one commit of the file it wrote, named for the step, and
/// nothing else is left.
fn assert_one_commit_each(env: &TestLoop, steps: u32, point: &str) {
    let log = env.git(&["log", "--format=%x1e%s", "--name-only"]);
    let commits: Vec<&str> = log.split('\x1e').filter(|c| !c.trim().is_empty()).collect();
    let want = usize::try_from(steps).unwrap() + 1;
    assert_eq!(commits.len(), want, "{point}: {commits:?}\n{}", env.log());
    for n in 1..=steps {
        let c = commits[(steps - n) as usize];
        assert!(
            c.contains(&format!(
                "loop: step {n}/{steps}: {}\n\nstep-{n}.txt",
                STEP[n as usize - 1]
            )),
            "{point}: step {n}: {c:?}"
        );
    }
    let left = env.git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(left.is_empty(), "{point}: left in the tree: {left}");
}

#[test]
fn a_crash_at_every_point_resumes_to_done_starting_each_agent_once_committing_each_step_once() {
    for point in CRASH_POINTS {
        let env = TestLoop::new().with_git();
        // Long enough, with output to wake the runner, for the CC_PID write to happen; each
        // step writes a file of its own, which its commit holds.
        env.scenario(
            &Scenario::new().otherwise(
                Action::done("ok")
                    .sleep_ms(250)
                    .heartbeat_ms(40)
                    .bash("echo $LOOP_STEP > step-$LOOP_STEP.txt"),
            ),
        );
        // Crash in the middle of the loop (step 2), or at the one DONE write.
        let nth = if point.contains("done") { 1 } else { 2 };
        let mut c = env.cmd(&[
            "start", "g", "--step", "a", "--step", "b", "--step", "c", "--verify", "true",
        ]);
        c.env("LOOP_CRASH_AT", format!("{point}@{nth}"));
        let status = c.status().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "{point}: the runner did not crash there: {status:?}"
        );
        env.run_ok(&["resume"]);
        assert_complete(&env, 3);
        env.assert_each_step_started_once(3, point);
        assert_one_commit_each(&env, 3, point);
        env.assert_no_processes();
    }
}

#[test]
fn kill_minus_nine_at_random_moments_never_loses_or_repeats_a_step() {
    let env = TestLoop::new();
    env.scenario(&steady(150));
    let steps = [
        "--step", "a", "--step", "b", "--step", "c", "--step", "d", "--step", "e",
    ];
    let mut args = vec!["start", "g"];
    args.extend(steps);
    let mut runner = env.spawn(&args);
    // Kills from the moment the loop exists (before, there is nothing to resume).
    assert!(wait_until(Duration::from_secs(20), || env.file.exists()));
    // A cheap deterministic spread of delays: 37 ms apart, modulo 400 ms.
    let mut kills = 0;
    for i in 0..40u64 {
        std::thread::sleep(Duration::from_millis(60 + (i * 37) % 400));
        runner.kill9();
        kills += 1;
        if env.m1().status == Status::Done {
            break;
        }
        runner = env.spawn(&["resume"]);
    }
    let mut last = env.spawn(&["resume"]);
    let status = last.wait(Duration::from_secs(60));
    assert!(status.success(), "final resume: {status:?}\n{}", env.log());
    assert_complete(&env, 5);
    env.assert_each_step_started_once(5, &format!("after {kills} kills"));
    env.assert_no_processes();
}

/// Runs a loop of `steps` steps while a person appends `# note N` lines to M1.md, saving with
/// `save` every `pause`, until the loop is DONE; then checks that every note survived (only
/// the last can race the runner's final write) and that each step's agent started once.
fn edit_while_the_loop_runs(
    steps: usize,
    step_ms: u64,
    pause: Duration,
    save: fn(&std::path::Path, &str),
) {
    let env = TestLoop::new();
    env.scenario(&steady(step_ms));
    let names: Vec<String> = (1..=steps).map(|i| format!("s{i}")).collect();
    let mut args = vec!["start", "g"];
    for n in &names {
        args.extend(["--step", n.as_str()]);
    }
    let mut runner = env.spawn(&args);
    env.wait_for_calls(1, 1);
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.m1().status != Status::Done && Instant::now() < deadline {
        n += 1;
        let text = env.text();
        save(&env.file, &format!("{text}# note {n}\n"));
        std::thread::sleep(pause);
    }
    let status = runner.wait(Duration::from_secs(60));
    assert!(
        status.success(),
        "{status:?} after {n} edits\n{}",
        env.log()
    );
    let text = env.text();
    for i in 1..n {
        assert!(
            text.contains(&format!("# note {i}\n")),
            "hand edit {i} of {n} lost:\n{text}\n{}",
            env.log()
        );
    }
    if env.m1().status != Status::Done {
        // The last save, made from the text read just before the runner's final write, landed
        // after the runner exited: the next resume puts the record back from the task ledger
        // and starts nothing.
        env.run_ok(&["resume"]);
    }
    let steps = u32::try_from(steps).unwrap();
    assert_complete(&env, steps);
    env.assert_each_step_started_once(steps, "after the hand edits");
}

/// How editors that truncate and rewrite save: a reader can catch the file half written.
fn save_in_place(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn hand_edits_saved_twenty_times_a_second_while_the_runner_works_all_survive() {
    // A person who re-reads the file before each save, saving far faster than anyone types.
    edit_while_the_loop_runs(4, 80, Duration::from_millis(50), save_by_rename);
}

#[test]
fn hand_edits_saved_in_place_at_a_human_pace_all_survive() {
    edit_while_the_loop_runs(3, 300, Duration::from_millis(150), save_in_place);
}

#[test]
fn edits_to_steps_and_limits_take_effect_at_the_next_decision() {
    let env = TestLoop::new();
    env.scenario(&steady(600));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b", "--step", "c"]);
    env.wait_for_calls(1, 1);
    let text = env
        .text()
        .replace("2: [PENDING] b", "2: [SKIPPED] b")
        .replace("3: [PENDING] c", "3: [PENDING] c, edited");
    std::fs::write(&env.file, text).unwrap();
    assert!(runner.wait(Duration::from_secs(60)).success());
    assert_eq!(env.calls_for(2), 0);
    let m = env.m1();
    assert_eq!(m.plan.steps[1].state, StepState::Skipped);
    let last = env.prompt(env.calls().len() - 1);
    assert!(last.contains("c, edited"), "{last}");
    // A person's decisions are in loop.log like the runner's.
    let log = env.log();
    let edit = line_with(&log, "edit: M1.md was changed by hand");
    assert!(
        edit.contains("PLAN.STEPS.2: [PENDING] b → [SKIPPED] b"),
        "{edit}"
    );
    assert!(
        edit.contains("PLAN.STEPS.3: [PENDING] c → [PENDING] c, edited"),
        "{edit}"
    );
}

#[test]
fn a_hand_edited_verify_or_limit_outranks_the_start_flag_that_wrote_it() {
    let env = TestLoop::new();
    env.scenario(&steady(800));
    let mut runner = env.spawn(&[
        "start",
        "g",
        "--step",
        "a",
        "--verify",
        "false",
        "--max-retries",
        "1",
    ]);
    env.wait_for_calls(1, 1);
    let text = env.text();
    assert!(
        text.contains("VERIFY: false\n") && text.contains("MAX_RETRIES: 1\n"),
        "{text}"
    );
    std::fs::write(&env.file, text.replace("VERIFY: false\n", "VERIFY: true\n")).unwrap();
    assert!(
        runner.wait(Duration::from_secs(30)).success(),
        "{}",
        env.log()
    );
    assert_eq!(env.m1().results[&1].verified, Some(true));
}

#[test]
fn status_waiting_by_hand_pauses_after_the_current_step() {
    let env = TestLoop::new();
    env.scenario(&steady(800));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    std::fs::write(
        &env.file,
        env.text().replacen("STATUS: RUNNING", "STATUS: WAITING", 1),
    )
    .unwrap();
    let status = runner.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(3));
    let m = env.m1();
    assert_eq!(
        m.plan.steps[0].state,
        StepState::Done,
        "the current step finished"
    );
    assert_eq!(env.calls_for(2), 0, "and no further one started");
    env.run_ok(&["resume"]);
}

#[test]
fn a_broken_hand_edit_is_reported_and_waited_on_never_overwritten() {
    let env = TestLoop::new();
    env.scenario(&steady(700));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    let good = env.text();
    let broken = good.replacen("STATUS: RUNNING", "STATUS: RUNNNG", 1);
    std::fs::write(&env.file, &broken).unwrap();
    assert!(wait_until(Duration::from_secs(20), || env
        .log()
        .contains("invalid")));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(env.text(), broken, "the runner wrote over a broken file");
    env.assert_logged("M1.md:1:");
    std::fs::write(&env.file, env.text().replacen("RUNNNG", "RUNNING", 1)).unwrap();
    assert!(runner.wait(Duration::from_secs(60)).success());
    assert_complete(&env, 2);
}

#[test]
fn the_stop_file_halts_mid_step_kills_the_group_and_blocks_resume_until_removed() {
    let env = TestLoop::new();
    let long = Action::done("ok")
        .sleep_ms(60_000)
        .grandchild_sleep_s(120.0);
    env.scenario(&steady(10).step(1, [long, Action::done("ok").sleep_ms(10)]));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    assert!(
        wait_until(Duration::from_secs(10), || env.processes().len() >= 3),
        "{:?}",
        env.processes()
    );
    std::fs::write(&env.stop, "").unwrap();
    let status = runner.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(3));
    env.assert_no_processes();
    let m = env.m1();
    assert_eq!(
        (m.status, m.plan.steps[0].state),
        (Status::Waiting, StepState::Pending)
    );
    assert_eq!(
        m.results.get(&1).and_then(|r| r.attempts),
        None,
        "a stop spends no attempt"
    );
    assert!(m.next_action.unwrap().contains("croppy-stop"));

    let refused = env.run_exits(3, &["resume"]);
    assert!(
        stderr(&refused).contains("croppy-stop"),
        "{}",
        stderr(&refused)
    );
    std::fs::remove_file(&env.stop).unwrap();
    env.run_ok(&["resume"]);
    assert_complete(&env, 2);
}

#[test]
fn a_step_timeout_kills_the_whole_group_grandchildren_included() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::hang().grandchild_sleep_s(120.0)));
    let out = env.run_for(
        &[
            "start",
            "g",
            "--step",
            "a",
            "--step-timeout",
            "1s",
            "--max-retries",
            "2",
        ],
        Duration::from_secs(60),
    );
    env.assert_exit(&out, 1);
    assert_eq!(env.calls_for(1), 2);
    let m = env.m1();
    assert!(
        m.results[&1]
            .error
            .as_deref()
            .unwrap()
            .contains("step timeout"),
        "{}",
        env.text()
    );
    env.assert_no_processes();
}
