//! Commands that did what nobody asked of them or said less than they should: `loop demo`,
//! the live line, `loop service`, `loop daemon`, the hooks, `loop status`, and the simulated
//! agent the demo and the tests run.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use serde_json::Value;

use crate::support::{
    Case, Guard, TestLoop, case, code, loop_with_file, stderr, stdout, wait_until, write_executable,
};

/// An exported `LOOP_FILE` made `loop demo` archive the person's own M1.md and write the demo
/// into it. Fixed in 4710110: only `--file` on its command line moves the demo's M1.md.
#[test]
fn loop_demo_leaves_the_loop_of_an_exported_loop_file_alone() {
    let env = TestLoop::new();
    let mine = "STATUS: WAITING\nGOAL: my own loop\n";
    std::fs::write(&env.file, mine).unwrap();
    let out = env.run_for(&["demo", "--quiet"], Duration::from_secs(60));
    env.assert_exit(&out, 0);
    assert_eq!(env.text(), mine, "the person's M1.md was touched");
    let beside: Vec<_> = std::fs::read_dir(env.state())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["M1.md"], "nothing archived or written beside it");
    let demos: Vec<_> = std::fs::read_dir(env.temp.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(demos.len(), 1, "{demos:?}");
    let text = std::fs::read_to_string(demos[0].join("state/M1.md")).unwrap();
    assert!(text.starts_with("STATUS: DONE"), "{text}");
}

/// A demo refused (its `--file` names a running loop) left its temporary directory behind.
/// Fixed in 4710110.
#[test]
fn a_refused_demo_leaves_nothing_behind() {
    let env = TestLoop::new();
    let running = env.temp.path().join("busy").join("M1.md");
    std::fs::create_dir_all(running.parent().unwrap()).unwrap();
    std::fs::write(&running, "STATUS: RUNNING\nGOAL: busy\n").unwrap();
    let out = env.run(&["demo", "--quiet", "--file", running.to_str().unwrap()]);
    env.assert_exit(&out, 2);
    assert_eq!(
        std::fs::read_dir(env.temp.join("tmp")).unwrap().count(),
        0,
        "the demo's temporary directory was left behind"
    );
    assert_eq!(
        std::fs::read_to_string(&running).unwrap(),
        "STATUS: RUNNING\nGOAL: busy\n"
    );
}

/// `loop demo --help` said its M1.md went to `state/M1.md` (or `LOOP_FILE`), where it did not.
/// Fixed in 4710110.
#[test]
fn loop_demo_help_shows_where_the_demo_really_goes() {
    let env = TestLoop::new();
    let text = stdout(&env.run(&["demo", "--help"]));
    let file = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--file"))
        .take_while(|l| !l.trim_start().starts_with("-q") && !l.trim_start().starts_with("-h"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(file.contains("temporary directory"), "{text}");
    assert!(
        !file.contains("default: state/M1.md") && !file.contains("LOOP_FILE="),
        "{text}"
    );
}

/// While a backoff was waited out, the live line showed nothing, which looked like a hang.
/// Fixed in e66f08f: it says what the loop waits for and how long is left (counting down on a
/// terminal; once per wait into a pipe).
#[test]
fn the_live_line_shows_a_backoff_and_the_time_left() {
    let env = TestLoop::new();
    let overloaded = Action::api_error(529, "API Error: 529 Overloaded");
    env.scenario(&Scenario::new().step(1, [overloaded, Action::done("ok")]));
    let out = env.run_ok(&["start", "g", "--step", "one"]);
    let text = stdout(&out);
    let waits: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  … step 1 waits "))
        .collect();
    assert_eq!(waits.len(), 1, "{text}");
    assert!(
        waits[0].contains(" left · ") && waits[0].contains("529"),
        "{text}"
    );
}

/// Without a user bus (`systemctl --user` cannot reach a systemd), `service install` wrote a
/// unit nobody would run, printed tmux and cron lines without the environment the unit
/// carries, and exited 1, a code the table did not list; `status` and `uninstall` exited 0 on
/// the same error. Fixed in 20ff20f.
#[test]
fn service_without_a_user_bus_writes_no_unit_and_its_fallbacks_carry_the_units_environment() {
    let env = TestLoop::new().env("LOOP_AGENT", "/opt/agents/my agent");
    std::fs::write(&env.file, "STATUS: IDLE\nGOAL: g\n").unwrap();
    let config = env.temp.join("config");
    let working = env.temp.join("systemctl");
    write_executable(&working, "#!/bin/sh\nexit 0\n");
    let no_bus = env.temp.join("systemctl-no-bus");
    write_executable(
        &no_bus,
        "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n",
    );
    let run = |args: &[&str], ctl: &std::path::Path| {
        let mut c = env.cmd(args);
        c.env("XDG_CONFIG_HOME", &config).env("LOOP_SYSTEMCTL", ctl);
        crate::support::run(c)
    };
    let unit = config.join("systemd/user/m1loop.service");
    let out = run(&["service", "install"], &no_bus);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(!unit.exists(), "a unit was written that no systemd runs");
    assert!(
        stderr(&out).contains("Failed to connect to bus"),
        "{}",
        stderr(&out)
    );
    let said = stdout(&out);
    let tmux = said
        .lines()
        .find(|l| l.contains("tmux new-session"))
        .unwrap();
    let cron = said.lines().find(|l| l.contains("@reboot")).unwrap();
    for line in [tmux, cron] {
        for var in ["PATH=", "LOOP_STOP_FILE=", "XDG_STATE_HOME="] {
            assert!(line.contains(var), "{var} missing: {line}");
        }
        assert!(line.contains("LOOP_AGENT="), "{line}");
        assert!(line.contains("my agent"), "{line}");
    }
    // Installed where the bus worked, then asked where it does not: both say they could not.
    assert_eq!(code(&run(&["service", "install"], &working)), 0);
    assert!(unit.exists());
    let out = run(&["service", "status"], &no_bus);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let out = run(&["service", "uninstall"], &no_bus);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("Failed to connect to bus"),
        "{}",
        stderr(&out)
    );
}

/// `loop daemon` took both `--file` and `--loop` without saying how they differ, and ignored
/// `--file`. Fixed in 8459cdb: it keeps the loop `--file` (or `LOOP_FILE`) names as one of
/// its loops, and its help says so.
#[test]
fn daemon_keeps_the_loop_of_file_beside_those_of_loop_and_its_help_says_so() {
    let env = TestLoop::new();
    let text = stdout(&env.run(&["daemon", "--help"]));
    let file_help = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--file"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(file_help.contains("as --loop"), "{text}");
    assert!(!file_help.contains("default: state/M1.md"), "{text}");

    std::fs::write(&env.file, "STATUS: IDLE\nGOAL: g\n").unwrap();
    let other = env.temp.path().join("other").join("M1.md");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "STATUS: IDLE\nGOAL: h\n").unwrap();
    let said = env.temp.path().join("daemon.out");
    let mut daemon = env.cmd(&["daemon", "--loop", other.to_str().unwrap(), "--every", "1s"]);
    daemon.stdout(std::fs::File::create(&said).unwrap());
    let _daemon = Guard::spawn(&mut daemon);
    let want = format!(
        "keeping 2 loop(s) running: {}, {}",
        env.file.display(),
        other.display()
    );
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::read_to_string(&said)
            .is_ok_and(|t| t.contains(&want))),
        "{}",
        std::fs::read_to_string(&said).unwrap_or_default()
    );
}

/// The hook `loop hook install` puts in a person's own sessions told them the headless agent's
/// orders ("Your answer's LAST line must be…", "Do this step, and only this step"). Fixed in
/// 6c0adb1: a person's session (no `LOOP_STEP`) gets the loop's state, and none of that.
#[test]
fn a_persons_session_gets_the_loops_state_not_the_step_agents_orders() {
    let env = TestLoop::new();
    std::fs::write(
        &env.file,
        "STATUS: RUNNING\nGOAL: ship it\nPLAN:\n  CURRENT_STEP: 1\n  STEPS:\n    1: [RUNNING] \
         write\n    2: [PENDING] test\nNEXT_ACTION: check the task\n",
    )
    .unwrap();
    let v: Value = serde_json::from_str(&stdout(&env.run(&["hook", "session-start"]))).unwrap();
    let context = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    for said in [
        "GOAL: ship it",
        "1: [RUNNING] write",
        "step 1: write",
        "check the task",
    ] {
        assert!(context.contains(said), "{said:?} missing: {context}");
    }
    for order in ["LAST line", "STEP_DONE", "YOUR STEP", "only this step"] {
        assert!(
            !context.contains(order),
            "{order:?} told to a person: {context}"
        );
    }
}

/// `loop hook uninstall` run twice said "removed" twice. Fixed in 6c0adb1.
#[test]
fn hook_uninstall_twice_says_the_second_time_that_there_was_nothing_to_remove() {
    let env = TestLoop::new();
    let settings = env.path().join(".claude/settings.local.json");
    env.run_ok(&["hook", "install"]);
    let first = stdout(&env.run(&["hook", "uninstall"]));
    assert!(first.contains("removed"), "{first}");
    let text = std::fs::read_to_string(&settings).unwrap();
    let second = stdout(&env.run(&["hook", "uninstall"]));
    assert!(
        !second.contains("removed") && second.contains("nothing to remove"),
        "{second}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
}

/// `loop status` printed an EXIT it does not know as "pending", which reads as a step's state,
/// and `--json` gave the placeholder `"constraints": "(none)"` instead of null. Fixed in
/// 4d4b92e.
#[test]
fn status_prints_no_exit_it_does_not_know_and_no_constraints_as_null() {
    let Case { dir: _dir, file } = case(
        "STATUS: RUNNING\nGOAL: ship\nCONSTRAINTS: (none)\nPLAN:\n  CURRENT_STEP: 1\n  STEPS:\n    \
         1: [RUNNING] build\nRESULTS:\n  STEP_1:\n    EXIT: (pending)\n    ATTEMPTS: 1\n",
    );
    let status = |args: &[&str]| {
        let out = loop_with_file(args, &file);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
        stdout(&out)
    };
    let human = status(&["status"]);
    assert!(
        human.contains(">  1 RUNNING   build  (1 attempt)\n"),
        "{human}"
    );
    assert!(
        !human.contains("pending") && !human.contains("CONSTRAINTS"),
        "{human}"
    );
    let v: Value = serde_json::from_str(&status(&["status", "--json"])).unwrap();
    assert_eq!(v["constraints"], Value::Null, "{v}");
    assert_eq!(v["results"]["1"]["exit"], Value::Null, "{v}");
}

/// The simulated agent counted its calls per scenario, so a second loop run with the same
/// scenario found its scripted failure used up and silently passed. Fixed in 7cf74e3: a
/// loop's calls are counted apart from every other loop's (by `LOOP_ID`).
#[test]
fn a_second_loop_of_the_same_scenario_meets_its_scripted_failure_again() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().step(1, [Action::failed("scripted failure"), Action::done("ok")]),
    );
    for n in 1..=2 {
        env.run_ok(&["start", "g", "--step", "a"]);
        let m = env.m1();
        assert_eq!(m.results[&1].attempts, Some(2), "loop {n}: {}", env.text());
    }
    assert_eq!(env.calls_for(1), 4);
}

/// `loop start` right after a loop ended was refused ("a runner (pid N) is driving M1.md; stop
/// it first") while the finished loop's runner had not let go of its lock yet (it writes the
/// report and queues the last messages after DONE): the parallel soak's second loop in the same
/// project then never started. A start now waits a moment for the runner of a finished loop.
#[test]
fn a_start_just_after_a_loop_ended_waits_for_its_runner_to_let_go() {
    use std::io::Write;
    let env = TestLoop::new();
    env.scenario(&crate::support::answers::passing());
    let out = env.run_for(
        &["start", "first goal", "--step", "a"],
        Duration::from_secs(60),
    );
    env.assert_exit(&out, 0);
    assert!(env.text().starts_with("STATUS: DONE"), "{}", env.text());
    // The first loop's runner, still holding its lock a moment after DONE.
    let lock_path = env.state().join("M1.md.lock");
    let mut lock = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&lock_path)
        .unwrap();
    lock.try_lock().unwrap();
    write!(lock, "{}", std::process::id()).unwrap();
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        drop(lock);
    });
    let out = env.run_for(
        &["start", "second goal", "--step", "b"],
        Duration::from_secs(60),
    );
    holder.join().unwrap();
    env.assert_exit(&out, 0);
    let text = env.text();
    assert!(text.contains("GOAL: second goal"), "{text}");
    assert!(text.starts_with("STATUS: DONE"), "{text}");
}

/// `loop skip 1` on a stopped loop whose step 1 no gate was about said only "no gate waits
/// for such a decision": a person who wants a step skipped was not told how. It says now, and
/// what it says works.
#[test]
fn loop_skip_of_a_step_no_gate_waits_on_says_how_to_skip_it_by_hand() {
    let env = TestLoop::new();
    env.scenario(&crate::support::answers::passing());
    let out = env.run_for(
        &TestLoop::start_args(&["one", "two"], &["--plan-only"]),
        Duration::from_secs(60),
    );
    env.assert_exit(&out, 0);
    let out = env.run(&["skip", "1"]);
    let said = stderr(&out);
    assert_ne!(code(&out), 0, "{said}");
    assert!(said.contains("set it `[SKIPPED]` in PLAN.STEPS"), "{said}");
    let text = env.text().replace("[PENDING] one", "[SKIPPED] one");
    std::fs::write(&env.file, text).unwrap();
    let out = env.run_for(&["resume"], Duration::from_secs(60));
    env.assert_exit(&out, 0);
    assert_eq!(env.calls_for(1), 0, "the skipped step ran");
    assert_eq!(env.calls_for(2), 1);
}
