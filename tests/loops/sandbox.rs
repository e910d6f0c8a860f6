//! Every agent run in a sandbox (bubblewrap): a step's agent works in its project and cannot
//! reach the person's secrets, other projects, the loop's credentials or its state; a
//! reviewer cannot write; a stop ends a confined step; `--sandbox off` runs as before. Real
//! processes, real `bwrap`; where bubblewrap cannot run, each test says `skipped:` and why.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, stderr, stdout};

/// Whether bubblewrap can confine a run here; when not, the test says so and is skipped.
pub(super) fn bwrap_here(test: &str) -> bool {
    let ok = crate::support::bwrap_here();
    if !ok {
        println!("skipped: {test}: bubblewrap (`bwrap`) is not installed here or cannot start");
    }
    ok
}

/// A home of the person with secrets in it, another project, and the loop's Telegram token:
/// what a step's agent must not reach.
struct Secrets {
    home: std::path::PathBuf,
    other: std::path::PathBuf,
}

const TOKEN: &str = "77777:AAsandboxTOKENthe-agent-must-not-see";

fn secrets(env: &TestLoop) -> Secrets {
    let home = env.path().parent().unwrap().join("home");
    for (f, text) in [
        (".ssh/id_test", "SECRET-SSH-KEY"),
        (".aws/credentials", "SECRET-AWS-KEY"),
        (".netrc", "SECRET-NETRC"),
        (".claude/settings.json", "{}"),
    ] {
        let p = home.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let other = env.path().parent().unwrap().join("other-project");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "untouched\n").unwrap();
    Secrets { home, other }
}

/// The commands a prying agent runs, each saying what it saw in a file of the project.
fn prying(s: &Secrets, m1: &std::path::Path) -> Vec<String> {
    vec![
        "cat $HOME/.ssh/id_test > saw-ssh.txt 2>&1".into(),
        format!(
            "cat {}/.aws/credentials > saw-aws.txt 2>&1",
            s.home.display()
        ),
        "cat $HOME/.netrc > saw-netrc.txt 2>&1".into(),
        "env > saw-env.txt".into(),
        format!(
            "echo intruder >> {}/notes.txt; echo $? > wrote-other.txt",
            s.other.display()
        ),
        format!(
            "echo 'STATUS: DONE' >> {}; echo $? > wrote-m1.txt",
            m1.display()
        ),
        "echo mine > own.txt".into(),
    ]
}

fn read(env: &TestLoop, name: &str) -> String {
    std::fs::read_to_string(env.path().join(name)).unwrap_or_default()
}

#[test]
fn a_sandboxed_step_cannot_read_secrets_write_elsewhere_or_see_the_token_and_still_does_its_work() {
    if !bwrap_here("a sandboxed step …") {
        return;
    }
    let env = TestLoop::new();
    let s = secrets(&env);
    let env = env
        .env("HOME", &s.home)
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", "1")
        .env("TELEGRAM_API_BASE", "http://127.0.0.1:9");
    let mut act = Action::done("pried, and did my own work");
    for c in prying(&s, &env.state().join("M1.md")) {
        act = act.bash(&c);
    }
    env.scenario(&Scenario::new().step(1, act));
    env.run_ok(&["start", "g", "--step", "pry"]);
    env.assert_status(Status::Done);
    assert_eq!(read(&env, "own.txt"), "mine\n", "the step did its own work");
    for (file, secret) in [
        ("saw-ssh.txt", "SECRET-SSH-KEY"),
        ("saw-aws.txt", "SECRET-AWS-KEY"),
        ("saw-netrc.txt", "SECRET-NETRC"),
    ] {
        let saw = read(&env, file);
        assert!(!saw.contains(secret), "{file}: {saw}");
        assert!(
            !saw.is_empty(),
            "{file}: the command ran and said why it failed"
        );
    }
    let saw_env = read(&env, "saw-env.txt");
    assert!(saw_env.contains("LOOP_STEP=1"), "{saw_env}");
    assert!(
        !saw_env.contains(TOKEN) && !saw_env.contains("TELEGRAM"),
        "{saw_env}"
    );
    assert_ne!(read(&env, "wrote-other.txt").trim(), "0");
    assert_eq!(
        std::fs::read_to_string(s.other.join("notes.txt")).unwrap(),
        "untouched\n"
    );
    assert_ne!(read(&env, "wrote-m1.txt").trim(), "0");
    assert!(
        !env.log().contains("changed by hand"),
        "the agent's write to M1.md reached it:\n{}",
        env.log()
    );
    assert!(env.text().contains("SANDBOX: bwrap"), "{}", env.text());
    env.assert_no_processes();
}

#[test]
fn with_the_sandbox_off_a_step_runs_with_the_persons_authority_as_before() {
    let env = TestLoop::new();
    let s = secrets(&env);
    let env = env.env("HOME", &s.home);
    env.scenario(&Scenario::new().step(
        1,
        Action::done("pried").bash("cat $HOME/.ssh/id_test > saw-ssh.txt 2>&1"),
    ));
    env.run_ok(&["start", "g", "--step", "pry", "--sandbox", "off"]);
    assert_eq!(read(&env, "saw-ssh.txt"), "SECRET-SSH-KEY");
    assert!(env.text().contains("SANDBOX: off"), "{}", env.text());
    let status = stdout(&env.run_ok(&["status"]));
    assert!(status.contains("SANDBOX      off"), "{status}");
}

#[test]
fn a_sandboxed_reviewer_cannot_write_and_its_review_decides_without_halting_the_loop() {
    if !bwrap_here("a sandboxed reviewer …") {
        return;
    }
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("wrote").write("a.txt", "a\n"))
            .review(
                // A reviewer's shell that tries to write, as a tool call or a hook would.
                Action::approve("looks fine")
                    .bash("echo meddling > reviewer.txt")
                    .bash("touch reviewer-touched.txt; rm -f a.txt"),
            ),
    );
    let out = env.run(&["start", "g", "--step", "one", "--review"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), env.log());
    env.assert_status(Status::Done);
    assert!(!env.path().join("reviewer.txt").exists());
    assert!(!env.path().join("reviewer-touched.txt").exists());
    assert!(
        env.path().join("a.txt").exists(),
        "the reviewer removed the step's work"
    );
    let m = env.m1();
    assert!(
        matches!(m.result(1).review, Some(m1loop::m1::Review::Approved(_))),
        "{}",
        env.text()
    );
}

#[test]
fn a_stop_ends_a_sandboxed_step_and_every_process_in_it() {
    if !bwrap_here("a stop ends a sandboxed step …") {
        return;
    }
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().step(
            1,
            [
                Action::done("slow")
                    .sleep_ms(30_000)
                    .bash("setsid sleep 300 </dev/null >/dev/null 2>&1 &"),
                Action::done("fast"),
            ],
        ),
    );
    let mut runner = env.spawn(&["start", "g", "--step", "slow"]);
    env.wait_for_calls(1, 1);
    env.run_ok(&["stop"]);
    let status = runner.wait(crate::support::PATIENCE);
    assert_eq!(status.code(), Some(3));
    env.assert_no_processes();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
}

#[test]
fn loop_start_refuses_when_bubblewrap_cannot_run_and_says_what_to_do() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new());
    // A `bwrap` that cannot start a sandbox (as where user namespaces are off).
    let bin = env.path().parent().unwrap().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    crate::support::write_executable(
        &bin.join("bwrap"),
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let env = env.env("PATH", &path);
    let out = env.run_exits(2, &["start", "g", "--step", "one"]);
    let err = stderr(&out);
    assert!(
        err.contains("cannot start a sandbox here")
            && err.contains("No permissions")
            && err.contains("--sandbox off"),
        "{err}"
    );
    assert!(!env.state().join("M1.md").exists(), "nothing written");
    // Said so, it runs unconfined.
    env.run_ok(&["start", "g", "--step", "one", "--sandbox", "off"]);
    env.assert_status(Status::Done);
}

/// Tried as a new user would: `CLAUDE_SIM_SCENARIO=/elsewhere/scenario.json LOOP_AGENT=claude-sim
/// loop start …` failed every attempt with `cannot read scenario …: No such file or directory`,
/// because the confined run had neither the variable nor the file it names. The simulated agent
/// is any program to the sandbox: its variables and its directory are granted as another
/// program's would be (`--sandbox-env`, `--sandbox-write`).
#[test]
fn a_scenario_outside_the_project_is_read_by_the_confined_simulated_agent() {
    if !bwrap_here("a scenario outside the project …") {
        return;
    }
    let env = TestLoop::new();
    let nothing = env.path().parent().unwrap().join("nothing-granted");
    std::fs::create_dir_all(&nothing).unwrap();
    // Nothing of the environment grants the simulated agent's files or variables: the flags
    // of `loop start` do, as they would for any program.
    let sim = env.temp.sim_dir();
    let env = env
        .env("LOOP_SANDBOX_WRITE", &nothing)
        .env("LOOP_SANDBOX_READ", &nothing)
        .env("LOOP_SANDBOX_ENV", "NOTHING_GRANTED");
    env.scenario(&Scenario::new().step(
        1,
        [Action::failed("not yet"), Action::done("second time lucky")],
    ));
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--sandbox-env",
        "CLAUDE_SIM_*",
        "--sandbox-write",
        sim.to_str().unwrap(),
    ]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2, "{}", env.log());
    assert!(env.log().contains("second time lucky"), "{}", env.log());
    env.assert_no_processes();
}
