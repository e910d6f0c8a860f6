//! `loop list` and `loop clean`: every loop of the user, found from anywhere; what finished
//! loops left, removed only when asked, never a running loop's files nor the project's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use serde_json::Value;

use crate::support::{Guard, PATIENCE, TestLoop, run, stderr, stdout, wait_until};

/// A project `name` beside the test loop's own, sharing its per-user directory.
fn project(env: &TestLoop, name: &str) -> PathBuf {
    let p = env.temp.join(name);
    std::fs::create_dir_all(p.join("state")).unwrap();
    p
}

/// `loop ARGS` for the loop of `project`, run from it.
fn in_project(env: &TestLoop, project: &Path, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    c.current_dir(project)
        .env("LOOP_FILE", project.join("state/M1.md"));
    c
}

/// `loop ARGS` from a directory that holds no loop, naming none.
fn from_elsewhere(env: &TestLoop, args: &[&str]) -> Command {
    let nowhere = env.temp.join("elsewhere");
    std::fs::create_dir_all(&nowhere).unwrap();
    let mut c = env.cmd(args);
    c.current_dir(&nowhere).env_remove("LOOP_FILE");
    c
}

fn ok(c: Command) -> String {
    let out = run(c);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// Every file and directory under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            all.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    all.sort();
    all
}

/// A loop of `project` whose one step runs `ms`, started in the background; returns once its
/// agent runs.
fn running(env: &TestLoop, project: &Path, ms: u64) -> Guard {
    let slow = env.temp.write(
        "sim/slow.json",
        serde_json::to_string(&Scenario::new().otherwise(Action::done("slow").sleep_ms(ms)))
            .unwrap(),
    );
    let mut c = in_project(env, project, &["start", "slow one", "--step", "long"]);
    c.env("CLAUDE_SIM_SCENARIO", slow);
    let g = Guard::spawn(&mut c);
    let file = project.join("state/M1.md");
    assert!(
        wait_until(PATIENCE, || std::fs::read_to_string(&file)
            .is_ok_and(|t| t.contains("1: [RUNNING] long"))
            && env.calls().iter().any(|c| c["loop_file"]
                .as_str()
                .is_some_and(|f| f.starts_with(project.to_str().unwrap())))),
        "the slow loop never ran"
    );
    g
}

#[test]
fn loop_list_finds_the_loops_of_several_projects_from_anywhere() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .otherwise(Action::done("ok"))
            .step(2, Action::blocked("which database?")),
    );
    let (a, b, c) = (project(&env, "a"), project(&env, "b"), project(&env, "c"));
    ok(in_project(
        &env,
        &a,
        &["start", "first of a", "--step", "x"],
    ));
    ok(in_project(
        &env,
        &a,
        &["start", "second of a", "--step", "x"],
    ));
    let out = run(in_project(
        &env,
        &b,
        &["start", "asks", "--step", "x", "--step", "y"],
    ));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let _slow = running(&env, &c, 60_000);

    let listed: Vec<Value> =
        serde_json::from_str(&ok(from_elsewhere(&env, &["list", "--json"]))).unwrap();
    let by_goal = |g: &str| {
        listed
            .iter()
            .find(|e| e["goal"] == g)
            .unwrap_or_else(|| panic!("{g} not listed: {listed:#?}"))
    };
    assert_eq!(listed.len(), 3, "{listed:#?}");
    let slow = by_goal("slow one");
    assert_eq!(slow["status"], "RUNNING");
    assert!(slow["runner_pid"].as_u64().is_some(), "{slow}");
    assert_eq!(
        (slow["step"].as_u64(), slow["steps"].as_u64()),
        (Some(1), Some(1))
    );
    let asks = by_goal("asks");
    assert_eq!(asks["status"], "WAITING");
    assert_eq!(asks["runner_pid"], Value::Null);
    assert_eq!(
        (asks["step"].as_u64(), asks["steps_done"].as_u64()),
        (Some(2), Some(1))
    );
    let done = by_goal("second of a");
    assert_eq!(done["status"], "DONE");
    assert!(done["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(done["last_activity"].is_string());
    assert_eq!(
        done["file"].as_str().unwrap(),
        std::fs::canonicalize(a.join("state/M1.md"))
            .unwrap()
            .to_str()
            .unwrap()
    );
    // Running first, then waiting, then finished; the archive of a with --all.
    let text = ok(from_elsewhere(&env, &["list"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("STATUS"), "{text}");
    assert!(
        lines[1].starts_with("RUNNING") && lines[1].contains("slow one"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("WAITING") && lines[3].starts_with("DONE"),
        "{text}"
    );
    assert!(
        text.contains("3 loops: 1 running, 1 waiting, 1 finished; 1 archived M1.md file ("),
        "{text}"
    );
    let all: Vec<Value> =
        serde_json::from_str(&ok(from_elsewhere(&env, &["list", "--json", "--all"]))).unwrap();
    let archived: Vec<&Value> = all.iter().filter(|e| e["archived"] == true).collect();
    assert_eq!(archived.len(), 1, "{all:#?}");
    assert_eq!(archived[0]["goal"], "first of a");
}

#[test]
fn loop_list_says_so_when_there_is_no_loop_and_never_writes() {
    let env = TestLoop::new();
    let out = ok(from_elsewhere(&env, &["list"]));
    assert!(out.starts_with("no loop found"), "{out}");
    assert!(!env.xdg().join("m1loop/loops").exists());
}

/// The task directories of `state` that belong to loop `id`.
fn tasks_of(state: &Path, id: &str) -> Vec<PathBuf> {
    std::fs::read_dir(state.join("tasks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let spec: Value = std::fs::read_to_string(p.join("spec.json"))
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            spec["env"]
                .as_array()
                .is_some_and(|env| env.iter().any(|kv| kv[0] == "LOOP_ID" && kv[1] == id))
        })
        .collect()
}

/// `loop list --json --all` from elsewhere.
fn listed(env: &TestLoop) -> Vec<Value> {
    serde_json::from_str(&ok(from_elsewhere(env, &["list", "--json", "--all"]))).unwrap()
}

/// Two projects of five loops each (four archives each, the oldest of which goes): in `a`, the
/// first loop's steps at once left a step's loop and a git worktree, and the project has files
/// of its own in the state directory and around it; in `c`, the fifth loop runs.
struct Fixture {
    env: TestLoop,
    c: PathBuf,
    slow: Guard,
    /// (loop id, archive) of a1 and c1, which go.
    a1: (String, PathBuf),
    c1: (String, PathBuf),
    /// The running loop's files: its M1.md, its lock, its tasks.
    live: Vec<PathBuf>,
}

fn fixture() -> Fixture {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let a = env.path().to_path_buf();
    let c = project(&env, "c");
    for k in 1..=5 {
        ok(in_project(
            &env,
            &a,
            &["start", &format!("a{k}"), "--step", "x"],
        ));
    }
    for k in 1..=4 {
        ok(in_project(
            &env,
            &c,
            &["start", &format!("c{k}"), "--step", "x"],
        ));
    }
    let slow = running(&env, &c, 60_000);
    let all = listed(&env);
    let of = |goal: &str| {
        let e = all.iter().find(|e| e["goal"] == goal).unwrap();
        (
            e["loop_id"].as_str().unwrap().to_owned(),
            PathBuf::from(e["file"].as_str().unwrap()),
        )
    };
    let (a1, c1, live) = (of("a1"), of("c1"), of("slow one"));
    let state = a.join("state");
    let left = state.join("parallel").join(&a1.0);
    std::fs::create_dir_all(left.join("step-1.loop")).unwrap();
    std::fs::write(left.join("step-1.loop/M1.md"), "STATUS: DONE\nGOAL: g\n").unwrap();
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        left.join("step-2").to_str().unwrap(),
    ]);
    std::fs::write(state.join("README.md"), "the project's own\n").unwrap();
    std::fs::write(a.join("src.txt"), "the project's own\n").unwrap();
    let live: Vec<PathBuf> = tasks_of(&c.join("state"), &live.0)
        .into_iter()
        .chain([live.1, c.join("state/M1.md.lock")])
        .collect();
    assert!(live.len() >= 3, "{live:?}");
    Fixture {
        env,
        c,
        slow,
        a1,
        c1,
        live,
    }
}

#[test]
fn loop_clean_lists_first_then_removes_what_finished_loops_left_never_a_running_loop() {
    let Fixture {
        env,
        c,
        mut slow,
        a1: (a1, a1_file),
        c1: (c1, c1_file),
        live,
    } = fixture();
    let state = env.state();
    let left = state.join("parallel").join(&a1);
    let before_a = tree(&state);
    let c1_tasks = tasks_of(&c.join("state"), &c1);
    let said = ok(from_elsewhere(&env, &["clean", "--all-projects"]));
    assert_eq!(
        tree(&state),
        before_a,
        "without -f nothing is removed:\n{said}"
    );
    // (c's running loop writes its own files meanwhile.)
    assert!(c1_file.exists() && !c1_tasks.is_empty(), "{said}");
    assert!(c1_tasks.iter().all(|t| t.exists()), "{said}");
    assert!(said.contains("`loop clean -f` removes them"), "{said}");
    for (file, goal) in [(&a1_file, "a1"), (&c1_file, "c1")] {
        let line = format!(
            "Would remove {} (an archived loop, DONE: {goal})",
            file.display()
        );
        assert!(said.contains(&line), "{line}\n{said}");
    }
    assert!(said.contains("Would keep"), "the worktree: {said}");

    let removed = ok(from_elsewhere(&env, &["clean", "-f", "--all-projects"]));
    assert!(!a1_file.exists() && !c1_file.exists(), "{removed}");
    assert!(tasks_of(&state, &a1).is_empty() && tasks_of(&c.join("state"), &c1).is_empty());
    assert!(
        !state.join(format!("tasks/.ledger/{a1}.jsonl")).exists(),
        "{removed}"
    );
    assert!(!left.join("step-1.loop").exists(), "{removed}");
    assert!(
        left.join("step-2/.git").is_file(),
        "a worktree is kept: {removed}"
    );
    assert!(state.join("README.md").exists() && env.path().join("src.txt").exists());
    let after = listed(&env);
    assert_eq!(
        after.iter().filter(|e| e["archived"] == true).count(),
        6,
        "three archives of each are kept: {after:#?}"
    );
    // The running loop's files are all there, and it still runs under its runner.
    for f in &live {
        assert!(f.exists(), "{} removed: {removed}", f.display());
    }
    let live_now = after.iter().find(|e| e["goal"] == "slow one").unwrap();
    assert_eq!(live_now["status"], "RUNNING");
    assert!(live_now["runner_pid"].is_u64());
    let stop = run(in_project(&env, &c, &["stop"]));
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert_eq!(slow.wait(Duration::from_secs(30)).code(), Some(3));
    // Nothing is left to remove: the worktree is kept, as said.
    let again = ok(from_elsewhere(&env, &["clean", "--all-projects"]));
    assert!(!again.contains("Would remove"), "{again}");
    env.assert_no_processes();
}

#[test]
fn loop_clean_removes_nothing_of_a_directory_whose_loop_file_cannot_be_read() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    for k in 1..=5 {
        env.run_ok(&["start", &format!("g{k}"), "--step", "x"]);
    }
    // A person mid-edit: the loop file does not read, and its LOOP_ID line is gone too.
    let text = env.text().replace("STATUS: DONE", "STATUS: DONNE");
    let text: String = text
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("LOOP_ID:"))
        .collect();
    std::fs::write(&env.file, text).unwrap();
    let before = tree(&env.state());
    let said = ok(from_elsewhere(&env, &["clean", "-f", "--all-projects"]));
    assert_eq!(tree(&env.state()), before, "{said}");
    assert!(said.contains("cannot be read; fix it"), "{said}");
}

/// A runner killed mid-write leaves its temporary copy of M1.md (`.M1.md.PID.N.tmp`), or of
/// its journal (`.M1.md.versions.PID.tmp`), in the state directory, whole but never renamed: the kill soak found one where a `loop start` was
/// killed before it made its loop. Nothing removed them; `loop clean` does now, but never one
/// of a process that is still alive.
#[test]
fn loop_clean_removes_the_temporary_files_of_writers_that_died() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    env.run_ok(&["start", "g", "--step", "x"]);
    // A pid no process has (beyond pid_max), and this test's own, alive.
    let dead = env.state().join(".M1.md.4194305.0.tmp");
    // The journal's rewrite too (`M1.md.versions`, written whole beside it).
    let dead_journal = env.state().join(".M1.md.versions.4194305.tmp");
    let alive = env
        .state()
        .join(format!(".M1.md.{}.0.tmp", std::process::id()));
    for f in [&dead, &dead_journal, &alive] {
        std::fs::write(f, "STATUS: IDLE\nGOAL: half\n").unwrap();
    }
    let said = ok(from_elsewhere(&env, &["clean", "--all-projects"]));
    for f in [&dead, &dead_journal] {
        assert!(
            said.contains(&format!("Would remove {}", f.display())),
            "{said}"
        );
        assert!(f.exists(), "listed first, not removed: {said}");
    }
    let removed = ok(from_elsewhere(&env, &["clean", "-f", "--all-projects"]));
    assert!(!dead.exists(), "{removed}");
    assert!(!dead_journal.exists(), "{removed}");
    assert!(
        alive.exists(),
        "a live writer's file was removed: {removed}"
    );
    assert!(env.file.exists());
}

/// Inside a project, `loop clean` acted on every loop of the user on the machine, and `--file`
/// did not narrow it. It cleans this project's loops now; `--all-projects` every one.
#[test]
fn loop_clean_in_one_project_never_touches_another_projects_loops() {
    let Fixture {
        env,
        c,
        slow: _slow,
        a1: (_, a1_file),
        c1: (_, c1_file),
        live: _,
    } = fixture();
    let before_a = tree(&env.state());
    let mut here = env.cmd(&["clean", "-f"]);
    here.current_dir(&c).env_remove("LOOP_FILE");
    let said = ok(here);
    assert_eq!(
        tree(&env.state()),
        before_a,
        "another project's loops:\n{said}"
    );
    assert!(a1_file.exists(), "{said}");
    assert!(
        said.contains(&format!("Removing {}", c1_file.display())),
        "this project's own: {said}"
    );
    assert!(!c1_file.exists(), "{said}");
    // `loop list --here` is this project's too.
    let mut list = env.cmd(&["list", "--here"]);
    list.current_dir(&c).env_remove("LOOP_FILE");
    let listed = ok(list);
    assert!(listed.contains("slow one"), "{listed}");
    assert!(!listed.contains("a5"), "another project's loop: {listed}");
}
