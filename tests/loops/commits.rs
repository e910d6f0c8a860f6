//! A commit per DONE step in a git project: the step's own work, named for its loop and its
//! step, recorded as `RESULTS.STEP_N.COMMIT`; never a person's uncommitted changes from
//! before it, nor the loop's own files; once, whatever dies on the way.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};

use crate::support::{TestLoop, stderr, stdout};

/// Every step writes `step-N.txt` (by its shell, as an agent does) and passes.
fn writes_its_file() -> Action {
    Action::done("wrote its file").bash("echo step $LOOP_STEP > step-$LOOP_STEP.txt")
}

/// `git log` of the project, newest first: each commit's subject and the files it changed.
fn history(env: &TestLoop) -> Vec<(String, Vec<String>)> {
    env.git(&["log", "--format=%x1e%s", "--name-only"])
        .split('\x1e')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            let mut lines = c.lines().filter(|l| !l.is_empty());
            let subject = lines.next().unwrap_or_default().to_owned();
            (subject, lines.map(str::to_owned).collect())
        })
        .collect()
}

/// `git status --porcelain` of the project, one line a path.
fn status(env: &TestLoop) -> Vec<String> {
    env.git(&["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The short id of `rev` in the project.
fn short(env: &TestLoop, rev: &str) -> String {
    env.git(&["rev-parse", "--short=7", rev]).trim().to_owned()
}

#[test]
fn each_done_step_is_one_commit_of_its_own_work_and_your_changes_stay_yours() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.path().join("tracked.txt"), "v1\n").unwrap();
    std::fs::write(env.path().join("staged.txt"), "v1\n").unwrap();
    env.git(&["add", "tracked.txt", "staged.txt"]);
    env.git(&["commit", "-qm", "the project"]);
    // The person's work in progress: a change, a staged change, a new file.
    std::fs::write(env.path().join("tracked.txt"), "mine, not committed\n").unwrap();
    std::fs::write(env.path().join("staged.txt"), "mine, staged\n").unwrap();
    env.git(&["add", "staged.txt"]);
    std::fs::write(env.path().join("notes.txt"), "my notes\n").unwrap();
    let before = status(&env);
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    env.run_ok(&[
        "start", "ship it", "--step", "a", "--step", "b", "--step", "c",
    ]);

    let log = history(&env);
    let subjects: Vec<&str> = log.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "loop: step 3/3: c",
            "loop: step 2/3: b",
            "loop: step 1/3: a",
            "the project",
            "start"
        ],
        "{}",
        env.log()
    );
    for (k, n) in (1..=3).rev().enumerate() {
        assert_eq!(log[k].1, [format!("step-{n}.txt")], "commit of step {n}");
    }
    // What the person had is as it was: changed, staged, untracked; nothing else is.
    assert_eq!(status(&env), before);
    assert_eq!(
        std::fs::read_to_string(env.path().join("tracked.txt")).unwrap(),
        "mine, not committed\n"
    );
    let m = env.m1();
    for n in 1..=3u32 {
        let want = short(&env, &format!("HEAD~{}", 3 - n));
        assert_eq!(
            m.results[&n].commit.as_deref(),
            Some(want.as_str()),
            "step {n}"
        );
        assert!(!m.results[&n].commit_pending);
    }
    assert!(env.text().contains("COMMIT_STEPS: on\n"), "{}", env.text());
    // The message names the step, what it did, the goal and the loop.
    let body = env.git(&["log", "-1", "--format=%B", "HEAD~1"]);
    let id = m.loop_id.unwrap();
    assert!(
        body.starts_with("loop: step 2/3: b\n\nwrote its file\n\nGoal: ship it\n")
            && body.contains(&format!("Loop-Id: {id}\nLoop-Step: 2\n")),
        "{body}"
    );
}

#[test]
fn a_file_you_had_changed_that_the_step_changes_too_is_left_out_and_named() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.path().join("shared.txt"), "v1\n").unwrap();
    env.git(&["add", "shared.txt"]);
    env.git(&["commit", "-qm", "the project"]);
    std::fs::write(env.path().join("shared.txt"), "v1\nmine\n").unwrap();
    env.scenario(
        &Scenario::new().otherwise(
            Action::done("appended")
                .bash("echo step >> shared.txt")
                .write("own.txt", "own\n"),
        ),
    );
    env.run_ok(&["start", "g", "--step", "a"]);
    let log = history(&env);
    assert_eq!(log[0].1, ["own.txt"], "{log:?}");
    assert_eq!(
        std::fs::read_to_string(env.path().join("shared.txt")).unwrap(),
        "v1\nmine\nstep\n",
        "left as it is"
    );
    let r = env.m1().results[&1].clone();
    assert!(
        r.uncommitted
            .as_deref()
            .is_some_and(|u| u.starts_with("shared.txt: they had uncommitted changes of yours")),
        "{r:?}"
    );
    env.assert_logged("left uncommitted: shared.txt");
}

#[test]
fn the_agents_own_commits_are_recorded_and_what_it_left_besides_them_is_committed() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new().otherwise(
            Action::done("committed part of it")
                .bash(
                    "echo a > a.txt && git add a.txt && git -c user.name=agent \
                     -c user.email=agent@example.invalid commit -qm 'the agent: a.txt'",
                )
                .write("b.txt", "b\n"),
        ),
    );
    env.run_ok(&["start", "g", "--step", "a"]);
    let log = history(&env);
    assert_eq!(log[0], ("loop: step 1/1: a".into(), vec!["b.txt".into()]));
    assert_eq!(log[1].0, "the agent: a.txt");
    let r = env.m1().results[&1].clone();
    assert_eq!(r.commit, Some(short(&env, "HEAD")));
    assert_eq!(r.agent_commits, Some(short(&env, "HEAD~1")));
    assert!(status(&env).is_empty(), "{:?}", status(&env));
}

#[test]
fn a_step_that_changed_no_file_has_no_commit_and_the_loop_goes_on() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().otherwise(Action::done("looked, changed nothing")));
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    assert_eq!(history(&env).len(), 1, "only the first commit");
    let m = env.m1();
    assert_eq!(
        (m.results[&1].commit.clone(), m.results[&1].commit_pending),
        (None, false)
    );
    env.assert_logged("commit: step 1 changed no file: nothing to commit");
}

#[test]
fn in_a_fresh_git_init_the_first_step_makes_the_first_commit() {
    let env = TestLoop::new();
    env.git(&["init", "-q"]);
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    let log = history(&env);
    assert_eq!(log.len(), 2, "{log:?}\n{}", env.log());
    assert_eq!(log[1].1, ["step-1.txt"], "the root commit is step 1's");
    assert!(status(&env).is_empty(), "{:?}", status(&env));
}

#[test]
fn the_loops_own_files_are_never_committed_even_beside_the_project_files() {
    // M1.md at the project's top: the state directory is the project itself, which git
    // does not ignore. (Confined, the agent could write nothing there: the loop's state is
    // never writable to it.)
    let env = TestLoop::new().with_git().env("LOOP_SANDBOX", "off");
    let file = env.path().join("M1.md");
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    let mut c = env.cmd(&["start", "g", "--step", "a"]);
    c.env("LOOP_FILE", &file);
    let out = crate::support::run(c);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let log = history(&env);
    assert_eq!(log[0].1, ["step-1.txt"], "{log:?}");
    // The loop's files are there, untracked, as before the loop ran.
    let left = status(&env);
    assert!(left.iter().all(|l| l.starts_with("??")), "{left:?}");
    assert!(left.iter().any(|l| l.ends_with("M1.md")), "{left:?}");
}

#[test]
fn no_commit_leaves_every_step_for_you_to_commit_by_flag_environment_or_loop_yaml() {
    // How it is turned off: the flag, `LOOP_COMMIT`, or `loop.yaml`.
    for how in ["flag", "env", "yaml"] {
        let env = TestLoop::new().with_git();
        env.scenario(&Scenario::new().otherwise(writes_its_file()));
        if how == "yaml" {
            std::fs::write(env.state().join("loop.yaml"), "commit: false\n").unwrap();
        }
        let mut args = vec!["start", "g", "--step", "a"];
        if how == "flag" {
            args.push("--no-commit");
        }
        let mut c = env.cmd(&args);
        if how == "env" {
            c.env("LOOP_COMMIT", "off");
        }
        let out = crate::support::run(c);
        assert!(
            out.status.success(),
            "{how}: {}",
            crate::support::stderr(&out)
        );
        assert_eq!(history(&env).len(), 1, "{how}: no commit");
        assert!(env.text().contains("COMMIT_STEPS: off\n"), "{how}");
        assert!(
            status(&env).contains(&"?? step-1.txt".to_owned()),
            "{how}: the work is in the tree"
        );
        assert!(!env.m1().results[&1].commit_pending, "{how}");
    }
    let env = TestLoop::new().env("LOOP_COMMIT", "sometimes");
    let out = env.run_exits(2, &["start", "g", "--step", "a"]);
    assert!(
        crate::support::stderr(&out)
            .contains("LOOP_COMMIT: expected `on` or `off`, found `sometimes`"),
        "{}",
        crate::support::stderr(&out)
    );
}

#[test]
fn a_failed_step_is_not_committed_and_the_next_one_does_not_take_its_leftovers() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().otherwise(writes_its_file()).step(
        2,
        Action::failed("could not finish").bash("echo half > half-done.txt"),
    ));
    let out = env.run(&TestLoop::start_args(
        &["a", "b", "c"],
        &["--max-retries", "1"],
    ));
    env.assert_exit(&out, 1);
    assert_eq!(history(&env).len(), 2, "step 1's commit only");
    env.run_ok(&["skip", "2"]);
    let m = env.m1();
    assert_eq!(m.plan.steps[1].state, StepState::Skipped);
    assert_eq!(m.status, Status::Done);
    assert!(
        !m.results[&2].commit_pending,
        "a skipped step is marked for no commit: {}",
        env.text()
    );
    let log = history(&env);
    assert_eq!(
        log[0].1,
        ["step-3.txt"],
        "step 3's commit is its own: {log:?}"
    );
    assert_eq!(log.len(), 3);
    assert!(
        status(&env).contains(&"?? half-done.txt".to_owned()),
        "the failed step's work is left as it is"
    );
}

#[test]
fn two_loops_in_a_row_in_one_project_each_commit_their_steps() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .otherwise(Action::done("appended").bash("echo $LOOP_STEP >> work-$LOOP_ID.txt")),
    );
    env.run_ok(&["start", "first", "--step", "a", "--step", "b"]);
    env.run_ok(&["start", "second", "--step", "a", "--step", "b"]);
    let log = history(&env);
    assert_eq!(log.len(), 5, "{log:?}");
    assert!(status(&env).is_empty(), "{:?}", status(&env));
}

#[test]
fn a_reviewed_step_is_committed_once_approved() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .otherwise(writes_its_file())
            .review([Action::changes("say more"), Action::approve("fine")]),
    );
    env.run_ok(&["start", "g", "--step", "a", "--review"]);
    let log = history(&env);
    assert_eq!(
        log.len(),
        2,
        "one commit after the retake and the approval: {log:?}"
    );
    assert_eq!(log[0].1, ["step-1.txt"]);
    assert_eq!(env.m1().results[&1].commit, Some(short(&env, "HEAD")));
}

#[test]
fn a_reviewed_step_a_person_accepts_over_its_review_is_committed_too() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.state().join("loop.yaml"), "review:\n  max_retakes: 0\n").unwrap();
    env.scenario(
        &Scenario::new()
            .otherwise(writes_its_file())
            .review(Action::changes("say more")),
    );
    env.run_exits(3, &["start", "g", "--step", "a"]);
    assert_eq!(
        history(&env).len(),
        1,
        "not yet: the step waits on its review's gate"
    );
    env.run_ok(&["answer", "accept"]);
    let log = history(&env);
    assert_eq!(log.len(), 2, "{log:?}\n{}", env.log());
    assert_eq!(log[0].1, ["step-1.txt"]);
    assert_eq!(env.m1().results[&1].commit, Some(short(&env, "HEAD")));
}

/// A runner killed together with its running `git add` or `git commit` left
/// `.git/index.lock` in 9 of 34 such kills; every later step's commit then failed ("Unable to
/// create … index.lock: File exists"), and the loop said DONE. A lock no process holds is a
/// dead git's: it is removed, said, and the steps are committed.
#[test]
fn a_stale_index_lock_left_by_a_killed_git_does_not_leave_every_later_step_uncommitted() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.path().join(".git/index.lock"), "").unwrap();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n"))
            .step(2, Action::done("b").write("b.txt", "b\n")),
    );
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    env.assert_status(Status::Done);
    env.assert_logged("index.lock was left by a git that is gone (no process holds it): removed");
    let m = env.m1();
    for n in [1, 2] {
        assert!(m.results[&n].commit.is_some(), "step {n}:\n{}", env.text());
        assert_eq!(m.results[&n].uncommitted, None, "step {n}");
    }
    let files = env.git(&["ls-files"]);
    assert!(
        files.contains("a.txt") && files.contains("b.txt"),
        "{files}"
    );
}

/// A loop whose promised commits are missing does not end a plain DONE: the DONE line, the
/// message and the last action say how many steps are uncommitted.
#[test]
fn a_loop_whose_step_commits_failed_says_so_at_its_done() {
    let env = TestLoop::new().with_git();
    // A lock that cannot be cleared (a directory where git wants its lock file).
    std::fs::create_dir(env.path().join(".git/index.lock")).unwrap();
    env.scenario(&Scenario::new().step(1, Action::done("a").write("a.txt", "a\n")));
    let out = env.run_ok(&["start", "g", "--step", "a"]);
    env.assert_status(Status::Done);
    let said = stdout(&out) + &stderr(&out);
    assert!(said.contains("DONE: 1 step(s), 1 uncommitted"), "{said}");
    let m = env.m1();
    assert!(
        m.last_action
            .as_deref()
            .is_some_and(|a| a.contains("1 step(s) uncommitted")),
        "{}",
        env.text()
    );
    assert!(
        m.results[&1]
            .uncommitted
            .as_deref()
            .is_some_and(|u| u.starts_with("all of it")),
        "{}",
        env.text()
    );
    env.assert_logged("1 step(s) uncommitted");
    assert!(
        env.path().join("a.txt").exists(),
        "its work is in the work tree"
    );
}

/// Outside a git repository a loop never said that nothing would be committed: it says so at
/// its start, on the terminal and in its log.
#[test]
fn outside_a_git_repository_the_start_says_no_step_will_be_committed() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let out = env.run_ok(&["start", "g", "--step", "one"]);
    let said = stdout(&out);
    assert!(
        said.contains("is not in a git repository, so no step's work will be committed"),
        "{said}"
    );
    env.assert_logged("no step's work will be committed");
    // In one, or with --no-commit, nothing of it is said.
    let git = TestLoop::new().with_git();
    git.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let out = git.run_ok(&["start", "g", "--step", "one"]);
    assert!(!stdout(&out).contains("not in a git repository"));
    let off = TestLoop::new();
    off.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let out = off.run_ok(&["start", "g", "--step", "one", "--no-commit"]);
    assert!(!stdout(&out).contains("not in a git repository"));
}

#[test]
fn a_steps_commit_leaves_out_what_verify_wrote() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new().otherwise(
            Action::done("wrote work.txt")
                .write("work.txt", "the agent's\n")
                .write("lib.py", "def f():\n    return 1\n"),
        ),
    );
    // VERIFY leaves a file of its own (as `python -m pytest` leaves `__pycache__`) and
    // rewrites one the agent wrote.
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "write work.txt",
        "--verify",
        "echo x > verify-output.txt && echo VERIFY > work.txt",
    ]);
    let log = history(&env);
    assert_eq!(
        log[0].1,
        ["lib.py", "work.txt"],
        "the agent's files and no other: {log:?}\n{}",
        env.log()
    );
    assert_eq!(
        env.git(&["show", "HEAD:work.txt"]),
        "the agent's\n",
        "as the agent left it"
    );
    // What VERIFY left is in the work tree as it was, uncommitted.
    assert_eq!(
        std::fs::read_to_string(env.path().join("work.txt")).unwrap(),
        "VERIFY\n"
    );
    assert_eq!(status(&env), [" M work.txt", "?? verify-output.txt"]);
    assert_eq!(env.m1().results[&1].commit, Some(short(&env, "HEAD")));
}

#[test]
fn after_a_retake_the_commit_title_is_the_step_and_not_the_last_fix() {
    use crate::support::answers::{approve, changes, work};
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, [work("half"), work("whole")])
            .review([changes(), approve()]),
    );
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    let log = history(&env);
    assert_eq!(
        log[0],
        (
            "loop: step 1/1: write a.txt".to_owned(),
            vec!["a.txt".to_owned()]
        ),
        "{log:?}\n{}",
        env.log()
    );
    assert_eq!(log.len(), 2, "{log:?}");
    let body = env.git(&["log", "-1", "--format=%b"]);
    assert!(
        body.starts_with("a.txt says whole\n") && !body.contains("half"),
        "the body is the summary: {body}"
    );
    assert!(body.contains("Loop-Step: 1\n"), "{body}");
    assert_eq!(env.git(&["show", "HEAD:a.txt"]), "whole\n");
}

#[test]
fn what_an_earlier_attempts_verify_left_is_not_taken_by_the_attempt_that_passes() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new().step(
            1,
            [
                Action::done("half of it").write("work.txt", "half\n"),
                Action::done("all of it")
                    .write("work.txt", "all\n")
                    .write("ok.txt", "ok\n"),
            ],
        ),
    );
    // The first attempt's VERIFY fails, and leaves its cache behind for the second.
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "a",
        "--verify",
        "echo x > cache.pyc && test -f ok.txt",
    ]);
    let log = history(&env);
    assert_eq!(log[0].1, ["ok.txt", "work.txt"], "{log:?}\n{}", env.log());
    assert_eq!(env.git(&["show", "HEAD:work.txt"]), "all\n");
    assert_eq!(status(&env), ["?? cache.pyc"]);
}

#[test]
fn a_runner_killed_around_verify_still_commits_once_what_the_agent_left() {
    use std::os::unix::process::ExitStatusExt;
    for point in [
        "after-pid-write",
        "after-work-noted",
        "before-verify",
        "before-record-write",
        "after-step-commit",
    ] {
        let env = TestLoop::new().with_git();
        env.scenario(
            &Scenario::new().otherwise(
                Action::done("wrote work.txt")
                    .sleep_ms(250)
                    .heartbeat_ms(40)
                    .write("work.txt", "the agent's\n"),
            ),
        );
        let mut c = env.cmd(&[
            "start",
            "g",
            "--step",
            "a",
            "--verify",
            "echo x >> verify-output.txt && echo VERIFY > work.txt",
        ]);
        c.env("LOOP_CRASH_AT", point);
        let ended = c.status().unwrap();
        assert_eq!(
            ended.signal(),
            Some(9),
            "{point}: no crash there: {ended:?}"
        );
        env.run_ok(&["resume"]);
        env.assert_status(Status::Done);
        let log = history(&env);
        assert_eq!(log.len(), 2, "{point}: one commit: {log:?}\n{}", env.log());
        assert_eq!(log[0].1, ["work.txt"], "{point}: {log:?}");
        assert_eq!(
            env.git(&["show", "HEAD:work.txt"]),
            "the agent's\n",
            "{point}"
        );
        assert_eq!(
            status(&env),
            [" M work.txt", "?? verify-output.txt"],
            "{point}"
        );
        env.assert_no_processes();
    }
}
