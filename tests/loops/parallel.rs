//! Steps at once (`--parallel N`), each in a git worktree of its own, merged one by one into
//! an integration branch and verified there: real git, real processes, the simulated agent.

use std::os::unix::process::ExitStatusExt;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;
use m1loop::runner::PARALLEL_POINTS;

use crate::support::TestLoop;

/// A loop of `steps` started with `--parallel N` and `--plan-only`, with `after` as its
/// `PLAN.AFTER` lines, then resumed to its end.
fn run_parallel(env: &TestLoop, n: &str, steps: &[&str], after: &str, verify: Option<&str>) {
    let mut args = vec!["start", "g", "--parallel", n, "--plan-only"];
    for s in steps {
        args.extend(["--step", s]);
    }
    if let Some(v) = verify {
        args.extend(["--verify", v]);
    }
    env.run_ok(&args);
    if !after.is_empty() {
        let last = format!(
            "    {}: [PENDING] {}\n",
            steps.len(),
            steps[steps.len() - 1]
        );
        let text = env
            .text()
            .replace(&last, &format!("{last}  AFTER:\n{after}"));
        std::fs::write(env.state().join("M1.md"), text).unwrap();
    }
    env.run_ok(&["resume"]);
}

/// When each agent run of the step loops began and ended (RFC 3339).
fn task_spans(env: &TestLoop) -> Vec<(String, String)> {
    let mut spans = Vec::new();
    // Each loop's steps are under `parallel/<LOOP_ID>/`, each step's loop in `step-N.loop`.
    let root = env.state().join("parallel");
    let step_loops = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .flat_map(|l| std::fs::read_dir(l.path()).into_iter().flatten().flatten());
    for entry in step_loops {
        let tasks = entry.path().join("tasks");
        let Ok(dirs) = std::fs::read_dir(&tasks) else {
            continue;
        };
        for t in dirs.flatten() {
            let json = |f: &str| -> serde_json::Value {
                serde_json::from_slice(&std::fs::read(t.path().join(f)).unwrap_or_default())
                    .unwrap_or_default()
            };
            let spec = json("spec.json");
            // The agent's runs only (not the VERIFY runs of the step loops), confined or not.
            let agent = spec["command"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|a| a.as_str().is_some_and(|a| a.ends_with("claude-sim")))
            });
            if agent {
                let began = spec["created_at"].as_str().unwrap_or_default().to_owned();
                let ended = json("exit.json")["ended_at"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                spans.push((began, ended));
            }
        }
    }
    spans
}

#[test]
fn three_independent_steps_run_at_once_and_a_fourth_that_needs_them_sees_all_their_work() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                Action::done("api").sleep_ms(1500).write("api.txt", "api\n"),
            )
            .step(2, Action::done("ui").sleep_ms(1500).write("ui.txt", "ui\n"))
            .step(
                3,
                Action::done("docs")
                    .sleep_ms(1500)
                    .write("docs.txt", "docs\n"),
            )
            .step(4, Action::done("all there")),
    );
    let verify =
        "test \"$LOOP_STEP\" != 4 || (test -f api.txt && test -f ui.txt && test -f docs.txt)";
    run_parallel(
        &env,
        "3",
        &["api", "ui", "docs", "end-to-end"],
        "    4: 1, 2, 3\n",
        Some(verify),
    );
    env.assert_status(Status::Done);
    // The three ran at once: each began before any of them ended.
    let spans = task_spans(&env);
    assert_eq!(spans.len(), 4, "{spans:?}");
    let mut first3 = spans.clone();
    first3.sort();
    let first3 = &first3[..3];
    let last_start = first3.iter().map(|s| s.0.clone()).max().unwrap();
    let first_end = first3.iter().map(|s| s.1.clone()).min().unwrap();
    assert!(last_start < first_end, "not at once: {spans:?}");
    // The project has the result, and nothing of the loop's git is left.
    for f in ["api.txt", "ui.txt", "docs.txt"] {
        assert!(env.path().join(f).exists(), "{f} missing");
    }
    assert_eq!(env.git(&["worktree", "list"]).lines().count(), 1);
    assert_eq!(env.git(&["branch", "--list", "loop/*"]).trim(), "");
    let m = env.m1();
    for n in 1..=3 {
        assert!(m.results[&n].commit.is_some(), "step {n} has its commit");
    }
    // Step 4 wrote nothing: no commit is its own.
    assert_eq!(m.results[&4].commit, None);
    env.assert_logged("merge: step 3 merged");
    env.assert_no_processes();
}

#[test]
fn two_steps_that_change_the_same_line_lose_nothing() {
    let env = TestLoop::new().with_git();
    env.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "base",
    ]);
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("one").sleep_ms(300).write("a.txt", "one\n"))
            .step(
                2,
                [
                    Action::done("two").sleep_ms(600).write("a.txt", "two\n"),
                    Action::done("both").write("a.txt", "one\ntwo\n"),
                ],
            ),
    );
    run_parallel(&env, "2", &["one", "two"], "", None);
    env.assert_status(Status::Done);
    assert_eq!(
        std::fs::read_to_string(env.path().join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    // No commit of either step is lost: both are in the result's history.
    let log = env.git(&["log", "--format=%s"]);
    assert!(
        log.contains("loop: step 1/2: one") && log.contains("loop: step 2/2: two"),
        "{log}"
    );
    env.assert_logged("conflicted in a.txt");
    let retry = env
        .calls()
        .iter()
        .filter(|c| c["step"] == 2)
        .nth(1)
        .and_then(|c| c["prompt"].as_str().map(str::to_owned))
        .expect("step 2 ran again");
    assert!(retry.contains("conflict markers in a.txt"), "{retry}");
    env.assert_no_processes();
}

#[test]
fn a_verify_that_fails_only_on_the_merged_result_sends_the_step_back() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [
                    Action::done("a").sleep_ms(300).write("a.txt", "a\n"),
                    Action::done("a and ok").write("ok.txt", "ok\n"),
                ],
            )
            .step(
                2,
                [
                    Action::done("b").sleep_ms(300).write("b.txt", "b\n"),
                    Action::done("b and ok").write("ok.txt", "ok\n"),
                ],
            ),
    );
    // Each step alone passes; both together pass only with ok.txt.
    let verify = "! test -f a.txt || ! test -f b.txt || test -f ok.txt";
    run_parallel(&env, "2", &["a", "b"], "", Some(verify));
    env.assert_status(Status::Done);
    env.assert_logged("VERIFY failed on step");
    assert!(env.path().join("ok.txt").exists());
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    // The report shows every VERIFY of the merge queue: the first merge's, the failed one
    // of the step merged second, and its pass once it came back.
    let out = env.run_ok(&["report", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut merge_verifies: Vec<String> = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["spans"].as_array().unwrap().iter())
        .filter(|x| x["kind"] == "verify" && x["lane"] == "merge queue")
        .map(|x| x["outcome"].as_str().unwrap().to_owned())
        .collect();
    merge_verifies.sort();
    assert_eq!(merge_verifies, ["failed", "passed", "passed"], "{json}");
    env.assert_no_processes();
}

#[test]
fn a_crash_at_each_write_point_then_resume_loses_nothing_and_starts_nothing_twice() {
    for point in PARALLEL_POINTS {
        let env = TestLoop::new().with_git();
        env.plan_parallel(&[("a", 300), ("b", 300)], &["--verify", "true"]);
        let mut c = env.cmd(&["resume"]);
        c.env("LOOP_CRASH_AT", format!("{point}@1"));
        let status = c.status().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "{point}: no crash there: {status:?}"
        );
        let out = env.run(&["resume"]);
        assert!(
            out.status.success(),
            "{point}: {}\n{}",
            env.text(),
            env.log()
        );
        env.assert_status(Status::Done);
        env.assert_each_step_started_once(2, point);
        for f in ["a.txt", "b.txt"] {
            assert!(env.path().join(f).exists(), "{point}: {f} lost");
        }
        // Every commit of the steps is in the result, and no worktree or branch is left.
        let log = env.git(&["log", "--format=%s"]);
        assert!(
            log.contains("loop: step 1/2: a") && log.contains("loop: step 2/2: b"),
            "{point}: {log}"
        );
        assert_eq!(env.git(&["worktree", "list"]).lines().count(), 1, "{point}");
        assert_eq!(
            env.git(&["branch", "--list", "loop/*"]).trim(),
            "",
            "{point}"
        );
        env.assert_no_processes();
    }
}

/// A task's processes are found wherever they are by `LOOP_TASK_ID=<its id>`, so a kill of
/// one loop's task ends every process that carries its id: two loops on one machine (or two
/// tests at once) whose merge VERIFY tasks were both `merge-step-1.verify` ended each other's.
#[test]
fn the_merge_verify_tasks_of_two_loops_have_ids_of_their_own() {
    let verify_tasks = |env: &TestLoop| -> Vec<String> {
        std::fs::read_dir(env.state().join("tasks"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".verify"))
            .collect()
    };
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..2 {
        let env = TestLoop::new().with_git();
        env.scenario(
            &Scenario::new()
                .step(1, [Action::done("a").write("a.txt", "a\n")])
                .step(2, [Action::done("b").write("b.txt", "b\n")]),
        );
        run_parallel(&env, "2", &["a", "b"], "", Some("true"));
        env.assert_status(Status::Done);
        let ids = verify_tasks(&env);
        assert_eq!(ids.len(), 2, "one merge VERIFY per step: {ids:?}");
        for id in ids {
            assert!(!seen.contains(&id), "{id} is another loop's task id too");
            seen.push(id);
        }
    }
}

/// Two steps of `ms` each, writing a.txt and b.txt, run at once by a runner in the
/// background: returned once both agents have started.
fn two_steps_running(env: &TestLoop, ms: u64) -> crate::support::Guard {
    env.plan_parallel(&[("a", ms), ("b", ms)], &[]);
    let runner = env.spawn(&["resume"]);
    assert!(crate::support::wait_until(crate::support::PATIENCE, || {
        env.calls_for(1) >= 1 && env.calls_for(2) >= 1
    }));
    runner
}

#[test]
fn a_parallel_loop_whose_runner_died_comes_back_when_a_step_ends() {
    let env = TestLoop::new().with_git().env("LOOP_REVIVE", "on");
    let mut runner = two_steps_running(&env, 1500);
    // `loop status` shows every step running, each in its worktree.
    let status = crate::support::stdout(&env.run_ok(&["status"]));
    for n in [1, 2] {
        assert!(
            status.lines().any(|l| l.starts_with(&format!("STEP {n} "))
                && l.contains("RUNNING")
                && l.contains(&format!("-step-{n}"))),
            "{status}"
        );
    }
    runner.kill9();
    let done =
        crate::support::wait_until(crate::support::PATIENCE, || env.m1().status == Status::Done);
    assert!(done, "{}\n{}", env.text(), env.log());
    env.assert_logged("revived");
    env.assert_each_step_started_once(2, "after the runner died");
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    crate::support::wait_until(crate::support::PATIENCE, || env.processes().is_empty());
    env.assert_no_processes();
}

#[test]
fn loop_stop_stops_every_step_running_and_resume_carries_them_all_on() {
    let env = TestLoop::new().with_git();
    let mut runner = two_steps_running(&env, 3000);
    env.run_ok(&["stop"]);
    let status = runner.wait(crate::support::PATIENCE);
    assert_eq!(status.code(), Some(3), "WAITING after the stop");
    env.assert_status(Status::Waiting);
    assert!(
        env.m1()
            .last_action
            .unwrap_or_default()
            .contains("steps 1, 2 were stopped with it"),
        "{}",
        env.text()
    );
    // No agent of either step runs on.
    env.assert_no_processes();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert!(env.path().join("a.txt").exists() && env.path().join("b.txt").exists());
    env.assert_no_processes();
}

#[test]
fn parallel_steps_outside_a_git_repository_are_refused_or_wait_saying_why() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new());
    let out = env.run_exits(2, &TestLoop::start_args(&["a", "b"], &["--parallel", "2"]));
    assert!(
        crate::support::stderr(&out).contains("is not a git repository with a commit"),
        "{}",
        crate::support::stderr(&out)
    );
    assert!(!env.state().join("M1.md").exists(), "nothing written");
    // Set by hand in M1.md: the loop waits, saying why, and runs nothing.
    env.run_ok(&["start", "g", "--step", "a", "--step", "b", "--plan-only"]);
    let text = env.text().replace("LIMITS:\n", "LIMITS:\n  PARALLEL: 2\n");
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    env.run_exits(3, &["resume"]);
    assert!(
        env.m1()
            .last_action
            .unwrap_or_default()
            .contains("is not a git repository"),
        "{}",
        env.text()
    );
    assert!(env.calls().is_empty());
}

#[test]
fn steps_running_at_once_are_carried_on_when_parallel_is_lowered_by_hand() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").sleep_ms(1500).write("a.txt", "a\n"))
            .step(2, Action::done("b").sleep_ms(1500).write("b.txt", "b\n"))
            .step(3, Action::done("c").write("c.txt", "c\n")),
    );
    env.run_ok(&TestLoop::start_args(
        &["a", "b", "c"],
        &["--parallel", "2", "--plan-only"],
    ));
    let mut runner = env.spawn(&["resume"]);
    assert!(crate::support::wait_until(crate::support::PATIENCE, || {
        env.calls_for(1) >= 1 && env.calls_for(2) >= 1
    }));
    let text = env.text().replace("  PARALLEL: 2\n", "  PARALLEL: 1\n");
    crate::support::save_by_rename(&env.state().join("M1.md"), &text);
    let status = runner.wait(crate::support::PATIENCE);
    assert!(status.success(), "{}\n{}", env.text(), env.log());
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(3, "PARALLEL lowered while two steps ran");
    for f in ["a.txt", "b.txt", "c.txt"] {
        assert!(env.path().join(f).exists(), "{f}");
    }
    env.assert_no_processes();
}

/// Tried as a new user would: step 1 fixes what the project's VERIFY checks, steps 2 and 3 add
/// other files; their worktrees began at the base commit, where it was still broken, so their
/// VERIFY failed on every attempt, and a retry ran them again on the same stale base. Each
/// attempt of a step now goes on from what the loop has merged so far, its own work kept.
#[test]
fn a_project_wide_verify_does_not_strand_parallel_steps_on_a_stale_base() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.path().join("add.txt"), "broken\n").unwrap();
    env.git(&["add", "add.txt"]);
    env.git(&["commit", "-q", "-m", "add is broken"]);
    // Steps 2 and 3 work long enough for step 1 to be merged before their next attempt.
    let slow = |name: &str| {
        Action::done(name)
            .sleep_ms(2500)
            .write(&format!("{name}.txt"), &format!("{name}\n"))
    };
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("fixed add").write("add.txt", "fixed\n"))
            .step(2, slow("b"))
            .step(3, slow("c")),
    );
    run_parallel(
        &env,
        "3",
        &["fix add", "add b", "add c"],
        "",
        Some("grep -q fixed add.txt"),
    );
    env.assert_status(Status::Done);
    // Each of steps 2 and 3 failed once on the stale base, then took step 1's fix.
    assert_eq!(
        (env.calls_for(2), env.calls_for(3)),
        (2, 2),
        "{}",
        env.log()
    );
    let step_logs: String = std::fs::read_dir(env.state().join("parallel"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".loop"))
        .map(|e| std::fs::read_to_string(e.path().join("loop.log")).unwrap_or_default())
        .collect();
    assert_eq!(
        step_logs
            .matches("goes on from what the loop has merged so far")
            .count(),
        2,
        "{step_logs}"
    );
    for f in ["add.txt", "b.txt", "c.txt"] {
        assert!(env.path().join(f).exists(), "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(env.path().join("add.txt")).unwrap(),
        "fixed\n"
    );
    env.assert_no_processes();
}
