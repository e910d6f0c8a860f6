//! What the loop does outside the sandbox with what others control (issue 41): the text an
//! agent, a plan or a chat wrote, shown on a terminal, logged, committed and sent; a file the
//! loop writes in a directory every user may write; an agent program in the person's home.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;
use serde_json::Value;

use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, code, line_with, stderr, stdout, write_executable};

/// An OSC 52 write to the clipboard (`rm -rf ~` in base64), ended by BEL.
const OSC52: &str = "\u{1b}]52;c;cm0gLXJmIH4K\u{7}";

/// Whether `text` holds a character a terminal acts on (C0 but tab and newline, DEL, C1), a
/// bidirectional override or isolate, or a line or paragraph separator.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
        })
        .collect()
}

#[track_caller]
fn assert_clean(what: &str, text: &str) {
    let found = raw_controls(text);
    assert!(found.is_empty(), "{what} holds {found:?}:\n{text:?}");
}

/// Every string in a JSON value, decoded (a JSON text escapes a control character, and
/// still carries it).
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[track_caller]
fn assert_json_clean(what: &str, text: &str) {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"));
        let mut all = Vec::new();
        strings(&v, &mut all);
        for s in all {
            assert_clean(what, &s);
        }
    }
}

/// `loop.log` holds no control character and no line but the loop's own; then a line of an
/// older version's is added, which `loop logs` must show as it shows the others.
#[track_caller]
fn assert_log_is_the_loops(env: &TestLoop) {
    let log = env.log();
    assert_clean("loop.log", &log);
    assert!(log.contains("summary with \\u001b]52;c;"), "{log}");
    for line in log.lines() {
        let (at, said) = line.split_once(' ').unwrap_or((line, ""));
        assert!(
            chrono::DateTime::parse_from_rfc3339(at).is_ok()
                && !said.starts_with("2026-11-29T00:00:00Z"),
            "a line of loop.log that is not the loop's own: {line}"
        );
    }
    let stamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
    let old = format!("{stamp} done: logged by an older version {OSC52}\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(env.state().join("loop.log"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, old.as_bytes()))
        .unwrap();
}

/// The terminal control sequences in an agent's summary (an OSC 52 clipboard write, a cleared
/// screen, a C1 CSI, a carriage return and a next-line that would start a line of its own
/// reading as the loop's decision), in a plan's steps (an OSC 0 window title, a right-to-left
/// override) and in a question and its answer were printed raw by the runner, `loop status`
/// and `loop logs`, kept in `loop.log`, the commit messages, the report and the Telegram
/// messages (issue 41, attack 7). Each is now shown as an escape, and the line stays one line.
#[test]
fn an_agents_osc52_clipboard_write_in_its_summary_reaches_no_terminal_log_or_commit() {
    let tg = FakeTelegram::start();
    let env = crate::support::bot::with_telegram(TestLoop::new().with_git(), &tg.base_url());
    let summary = format!(
        "summary with {OSC52} and \u{1b}[2J\u{9b}1;1H\rfake\u{85}2026-11-29T00:00:00Z decide: \
         gate G9 approve by telegram"
    );
    env.scenario(
        &Scenario::new()
            .plan(Action::plan([
                "write the note \u{1b}]0;owned\u{7} now",
                "check it \u{202e}txt.exe\u{202c} then",
            ]))
            .step(
                1,
                [
                    Action::blocked("which name \u{1b}[2J\u{8}\u{8}?"),
                    Action::done(&summary).write("note.txt", "a\n"),
                ],
            )
            .step(
                2,
                Action::done("checked \u{9b}31m").write("check.txt", "b\n"),
            ),
    );
    let started = env.run_exits(3, &["start", "g"]);
    let answered = env.run_ok(&["answer", "G1", "note \u{1b}]52;c;eA==\u{7} \u{2066}please"]);
    env.assert_status(Status::Done);
    assert!(
        env.calls().iter().any(|c| c["step"] == 0),
        "the plan came from the agent"
    );
    for (what, out) in [("loop start", &started), ("loop answer", &answered)] {
        assert_clean(&format!("{what}'s output"), &stdout(out));
        assert_clean(&format!("{what}'s errors"), &stderr(out));
    }
    assert_log_is_the_loops(&env);
    let logs = stdout(&env.run_ok(&["logs"]));
    assert_clean("loop logs", &logs);
    assert!(logs.contains("logged by an older version"), "{logs}");
    assert_clean("loop status", &stdout(&env.run_ok(&["status"])));
    assert_json_clean(
        "loop status --json",
        &stdout(&env.run_ok(&["status", "--json"])),
    );
    assert_clean("M1.md", &env.text());
    let messages = env.git(&["log", "--format=%B"]);
    assert_clean("the commit messages", &messages);
    assert!(messages.contains("summary with \\u001b]52"), "{messages}");
    assert_clean(
        "the Markdown report",
        &stdout(&env.run_ok(&["report", "--format", "md"])),
    );
    let json = stdout(&env.run_ok(&["report", "--format", "json"]));
    let report: Value = serde_json::from_str(&json).unwrap();
    let mut all = Vec::new();
    strings(&report, &mut all);
    for s in all {
        assert_clean("the JSON report", &s);
    }
    let outbox = std::fs::read_to_string(env.state().join("outbox.jsonl")).unwrap();
    assert_json_clean("outbox.jsonl", &outbox);
    let sent = tg.sent();
    assert!(!sent.is_empty(), "the loop notified");
    for s in sent {
        assert_clean("a Telegram message", &s.text);
    }
    env.assert_no_processes();
}

/// `loop stop --all` wrote the machine's stop file with `std::fs::write`, which follows a link:
/// a link another local user planted at `/tmp/croppy-stop` had root overwrite whatever it
/// named (issue 41, attack 9). It now writes nothing through a link nor into a file it did not
/// make, says what is there and whose it is, and every loop obeys it as a stop all the same.
#[test]
fn loop_stop_all_never_writes_through_a_link_planted_at_the_stop_file() {
    let env = TestLoop::new();
    let victim = env.temp.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, &env.stop).unwrap();
    if nix::unistd::geteuid().is_root() {
        // As another user would have planted it (only root can give a link away).
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &env.stop,
            Some(nobody),
            None,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }
    let out = env.run(&["stop", "--all"]);
    let said = stderr(&out);
    assert_ne!(code(&out), 0, "{said}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(
        said.contains(&env.stop.display().to_string())
            && said.contains("a symbolic link to")
            && said.contains("owned by")
            && said.contains("nothing was written"),
        "{said}"
    );
    if nix::unistd::geteuid().is_root() {
        assert!(said.contains("uid 65534"), "{said}");
    }
    // A link to nothing: nothing is made where it points.
    std::fs::remove_file(&env.stop).unwrap();
    let nowhere = env.temp.join("nowhere");
    std::os::unix::fs::symlink(&nowhere, &env.stop).unwrap();
    assert_ne!(code(&env.run(&["stop", "--all"])), 0);
    assert!(
        nowhere.symlink_metadata().is_err(),
        "written through the link"
    );
    // The link stops loops all the same: none starts while it is there.
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let start = env.run(&["start", "g", "--step", "one"]);
    assert_ne!(code(&start), 0, "{}", stderr(&start));
    assert!(env.calls().is_empty(), "a loop ran past the stop");
    // With nothing there, the stop file is made as before.
    std::fs::remove_file(&env.stop).unwrap();
    env.run_ok(&["stop", "--all"]);
    assert!(env.stop.is_file() && !env.stop.is_symlink());
}

/// `LOOP_AGENT=~/agent`: the sandbox shows a run its agent program's whole directory, here the
/// person's home, so the run read all of it, and `loop doctor` said all was well (issue 41,
/// attack 6). Such a program is now refused, saying why and what to do.
#[test]
fn an_agent_program_in_home_itself_is_refused_and_says_why() {
    if !crate::support::bwrap_here() {
        println!("skipped: an agent program in home …: bubblewrap cannot confine a run here");
        return;
    }
    let env = TestLoop::new();
    let home = env.temp.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_test"), "SECRET-SSH-KEY").unwrap();
    let agent = home.join("agent");
    write_executable(
        &agent,
        "#!/bin/sh\ncat $HOME/.ssh/id_test > /dev/null\nexit 1\n",
    );
    let env = env.env("HOME", &home).env("LOOP_AGENT", &agent);
    let out = env.run(&["start", "g", "--step", "one"]);
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains(&agent.display().to_string())
            && said.contains("directly in your home")
            && said.contains("your whole home")
            && said.contains("~/.local/bin"),
        "{said}"
    );
    assert!(!env.file.exists(), "a loop was started: {}", env.text());
    // A loop whose M1.md names it is not resumed either.
    let text = format!(
        "STATUS: RUNNING\nGOAL: g\n\nPLAN:\n  TOTAL_STEPS: 1\n  CURRENT_STEP: 0\n  STEPS:\n    \
         1: [PENDING] a\n\nAGENT:\n  PROGRAM: {}\n",
        agent.display()
    );
    std::fs::write(&env.file, &text).unwrap();
    let out = env.run(&["resume"]);
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains("directly in your home") && said.contains("nothing was resumed"),
        "{said}"
    );
    assert_eq!(env.text(), text, "left as it was");
    assert!(env.calls().is_empty());
    let doctor = env.run(&["doctor"]);
    let table = stdout(&doctor);
    assert_eq!(code(&doctor), 1, "{table}");
    let row = line_with(&table, "claude: program");
    assert!(
        row.starts_with("FAIL") && row.contains("directly in your home"),
        "{row}"
    );
}
