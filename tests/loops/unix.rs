//! Unix manners: a closed pipe, exit codes, archives that never
//! replace each other, a state directory git leaves alone. Each test is named after the
//! problem it pins.

use std::process::Stdio;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::answers::steady;
use crate::support::{Guard, TestLoop, stderr, stdout};

/// Every step works `ms`, then passes.
/// Spawns `loop ARGS` with stdout (and stderr) on pipes whose reading ends are closed at
/// once, as `loop ARGS 2>&1 | head -0` would.
fn spawn_with_closed_output(env: &TestLoop, args: &[&str]) -> Guard {
    let mut c = env.cmd(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    Guard::new(child)
}

#[test]
fn a_closed_stdout_never_kills_the_runner() {
    let env = TestLoop::new();
    env.scenario(&steady(100));
    let mut run = spawn_with_closed_output(&env, &["start", "g", "--step", "a", "--step", "b"]);
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", env.log());
    env.assert_status(Status::Done);
    env.assert_no_processes();
}

#[test]
fn status_and_resume_into_a_closed_pipe_exit_as_usual() {
    let env = TestLoop::new();
    env.scenario(&steady(20));
    env.run_ok(&["start", "g", "--step", "a"]);
    for (args, want) in [
        (&["status"][..], 0),
        (&["status", "--json"][..], 0),
        (&["resume"][..], 0),
        (&["validate"][..], 0),
    ] {
        let status = spawn_with_closed_output(&env, args).wait(Duration::from_secs(30));
        assert_eq!(status.code(), Some(want), "loop {args:?}: {status:?}");
    }
}

/// Every step asks a question: each loop waits for a human at once.
fn blocked() -> Scenario {
    Scenario::new().otherwise(Action::blocked("which way?"))
}

fn archives(env: &TestLoop) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(env.state())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("M1.") && name != "M1.md" && name.ends_with(".md")
        })
        .collect();
    found.sort();
    found
}

#[test]
fn four_forced_starts_in_one_second_keep_four_archives() {
    let env = TestLoop::new();
    env.scenario(&blocked());
    env.run_exits(3, &["start", "goal 0", "--step", "a"]);
    // Archives of this second and the next minute already exist, as after a burst of starts:
    // whenever the starts below run, the name they would take first is taken.
    let now = chrono::Utc::now();
    let mut planted = Vec::new();
    for s in 0..60 {
        let stamp = (now + chrono::Duration::seconds(s)).format("%Y%m%dT%H%M%S");
        let p = env.state().join(format!("M1.{stamp}.md"));
        std::fs::write(&p, format!("planted {s}\n")).unwrap();
        planted.push((p, format!("planted {s}\n")));
    }
    for g in ["A", "B", "C", "D"] {
        env.run_exits(
            3,
            &["start", &format!("goal {g}"), "--step", "a", "--force"],
        );
    }
    for (p, text) in &planted {
        assert_eq!(&std::fs::read_to_string(p).unwrap(), text, "{p:?} replaced");
    }
    let goals: Vec<String> = archives(&env)
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .filter(|t| !t.starts_with("planted"))
        .map(|t| m1loop::m1::Document::parse(&t).unwrap().view().goal)
        .collect();
    let mut sorted = goals.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["goal 0", "goal A", "goal B", "goal C"],
        "{goals:?}"
    );
    assert_eq!(env.m1().goal, "goal D");
}

#[test]
fn the_state_directory_stays_out_of_the_agents_commits() {
    let env = TestLoop::new();
    std::fs::remove_dir(env.state()).unwrap();
    let git = |args: &[&str]| env.git(args);
    git(&["init", "-q"]);
    env.scenario(&Scenario::new().otherwise(Action::done("made it").write("out.txt", "made\n")));
    // What an agent does at the end of a step: commit everything.
    let sweep = "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm step";
    env.run_ok(&["start", "g", "--step", "make it", "--verify", sweep]);
    let ignore = std::fs::read_to_string(env.state().join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    let tracked = git(&["ls-files"]);
    assert_eq!(tracked.trim(), "out.txt", "{tracked}");
}

/// A `state/` made by something else (an older `loop doctor`, a person) had no `.gitignore`,
/// and `loop start` kept it as it was: `git status` showed `?? state/`, and the agent's
/// `git add -A` committed the loop's state. The loop's state directory is kept out of git
/// whoever made it.
#[test]
fn a_state_directory_made_before_the_loop_is_kept_out_of_the_agents_commits() {
    let env = TestLoop::new().with_git();
    assert!(env.state().is_dir() && !env.state().join(".gitignore").exists());
    env.scenario(&Scenario::new().otherwise(Action::done("made it").write("out.txt", "made\n")));
    let sweep = "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm step";
    env.run_ok(&["start", "g", "--step", "make it", "--verify", sweep]);
    assert_eq!(env.git(&["ls-files"]).trim(), "out.txt");
    assert_eq!(env.git(&["status", "--porcelain"]), "");
}

/// A directory git tracks files in is the project's, not the loop's alone: a `.gitignore`
/// holding `*` there would hide the project's new files, so none is written, and `loop start`
/// says the loop's files there would be committed.
#[test]
fn a_state_directory_holding_tracked_files_is_not_hidden_from_git_and_start_says_so() {
    let env = TestLoop::new().with_git();
    let docs = env.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("guide.md"), "guide\n").unwrap();
    env.git(&["add", "docs/guide.md"]);
    env.scenario(&steady(20));
    let file = docs.join("M1.md");
    let out = env.run_ok(&[
        "start",
        "g",
        "--step",
        "a",
        "--file",
        file.to_str().unwrap(),
    ]);
    assert!(!docs.join(".gitignore").exists());
    let said = stderr(&out);
    assert!(
        said.contains("git tracks files in") && said.contains("docs"),
        "{said}"
    );
}

#[test]
fn an_existing_gitignore_in_the_state_directory_is_left_as_it_is() {
    let env = TestLoop::new();
    std::fs::write(env.state().join(".gitignore"), "tasks/\n").unwrap();
    env.scenario(&steady(20));
    env.run_ok(&["start", "g", "--step", "a"]);
    assert_eq!(
        std::fs::read_to_string(env.state().join(".gitignore")).unwrap(),
        "tasks/\n"
    );
}

#[test]
fn an_unexpected_error_is_not_reported_as_a_failed_loop() {
    let env = TestLoop::new();
    // The state directory cannot be made: a file is in the way.
    std::fs::write(env.path().join("blocker"), "").unwrap();
    let out = env.run_exits(
        70,
        &["--file", "blocker/state/M1.md", "start", "g", "--step", "a"],
    );
    assert!(stderr(&out).contains("blocker"), "{}", stderr(&out));
}

#[test]
fn help_names_the_environment_and_every_exit_code() {
    let env = TestLoop::new();
    let help = stdout(&env.run(&["--help"]));
    for var in [
        "LOOP_FILE",
        "LOOP_AGENT",
        "LOOP_STOP_FILE",
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_CHAT_ID",
        "TELEGRAM_API_BASE",
        "XDG_STATE_HOME",
    ] {
        assert!(help.contains(var), "{var} missing:\n{help}");
    }
    for code in [
        "0", "1", "2", "3", "10", "11", "12", "13", "14", "70", "101",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "exit code {code} missing:\n{help}"
        );
    }
}
