//! The simulated agent, run as a real process: its output reads like the real CLI's to the
//! adapter, and the scenario picks each call's behaviour by step and call number.

use chrono::{TimeZone, Utc};
use m1loop::agent::{Class, ExitInfo, Verdict, classify, new_session_id, parse_plan, verdict};

use crate::support::{Temp, captures, run, stderr, summary};

/// Every stdout line as JSON (the sim writes nothing else in stream-json mode).
fn events(out: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn exit_of(out: &std::process::Output) -> ExitInfo {
    ExitInfo {
        code: out.status.code(),
        ..ExitInfo::default()
    }
}

fn class_of(out: &std::process::Output) -> Class {
    let now = Utc.with_ymd_and_hms(2026, 11, 22, 2, 0, 0).unwrap();
    classify(&exit_of(out), &stderr(out), &summary(&out.stdout), now)
}

#[test]
fn without_a_scenario_every_step_succeeds_with_a_verdict() {
    let d = Temp::new();
    let id = new_session_id();
    let out = run(d.sim(3, &["--session-id", &id]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ev = events(&out);
    let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["system", "assistant", "result"]);
    assert_eq!(ev[0]["subtype"], "init");
    assert_eq!(
        ev[0]["cwd"],
        d.path().canonicalize().unwrap().display().to_string()
    );
    let s = summary(&out.stdout);
    assert_eq!(s.session_id.as_deref(), Some(id.as_str()));
    let r = s.result.clone().unwrap();
    assert_eq!(r.total_cost_usd, Some(0.01));
    assert_eq!(class_of(&out), Class::Success);
    assert_eq!(
        verdict(r.result.as_deref().unwrap()),
        Verdict::Done("simulated step 3 done".into())
    );
}

#[test]
fn the_planning_call_answers_a_plan() {
    let d = Temp::new();
    let out = run(d.sim(0, &[]));
    let text = summary(&out.stdout).result.unwrap().result.unwrap();
    assert_eq!(
        parse_plan(&text).unwrap(),
        [
            "Investigate the problem",
            "Implement the fix",
            "Test the fix"
        ]
    );
}

#[test]
fn each_call_of_a_step_takes_the_next_entry_and_the_last_repeats() {
    let d = Temp::new();
    d.scenario(
        r#"{"steps": {"2": [
            {"result": "attempt {attempt} in {session_id}\nSTEP_FAILED: not yet"},
            {"is_error": true, "api_error_status": 529, "result": "API Error: Repeated 529 Overloaded errors."},
            {"result": "STEP_DONE: third"}
        ]}, "default": {"result": "STEP_DONE: default"}}"#,
    );
    let id = new_session_id();
    let mut first = d.sim(2, &["--session-id", &id]);
    first.env("LOOP_ATTEMPT", "1");
    let out = run(first);
    assert_eq!(
        summary(&out.stdout).result.unwrap().result.unwrap(),
        format!("attempt 1 in {id}\nSTEP_FAILED: not yet")
    );
    let out = run(d.sim(2, &["--resume", &id]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        matches!(class_of(&out), Class::Transient(_)),
        "{:?}",
        class_of(&out)
    );
    assert_eq!(
        summary(&out.stdout).session_id.as_deref(),
        Some(id.as_str()),
        "resume keeps the id"
    );
    for _ in 0..2 {
        let out = run(d.sim(2, &["--resume", &id]));
        assert_eq!(
            verdict(&summary(&out.stdout).result.unwrap().result.unwrap()),
            Verdict::Done("third".into())
        );
    }
    // Other steps are counted separately and fall back to "default".
    let out = run(d.sim(1, &[]));
    assert_eq!(
        summary(&out.stdout).result.unwrap().result.unwrap(),
        "STEP_DONE: default"
    );
    let state = d.join("sim/scenario.json.state");
    assert_eq!(
        std::fs::read_to_string(state.join("step-2.calls"))
            .unwrap()
            .trim(),
        "4"
    );
    assert_eq!(
        std::fs::read_to_string(state.join("step-1.calls"))
            .unwrap()
            .trim(),
        "1"
    );
    let calls: Vec<u64> = d
        .calls()
        .iter()
        .map(|l| l["call"].as_u64().unwrap())
        .collect();
    assert_eq!(calls, [1, 2, 3, 4, 1]);
}

#[test]
fn the_state_dir_can_be_named() {
    let d = Temp::new();
    d.scenario("{}");
    let state = d.path().join("elsewhere");
    let mut cmd = d.sim(5, &[]);
    cmd.env("CLAUDE_SIM_STATE", &state);
    assert!(run(cmd).status.success());
    assert_eq!(
        std::fs::read_to_string(state.join("step-5.calls"))
            .unwrap()
            .trim(),
        "1"
    );
}

#[test]
fn the_log_line_tells_how_the_runner_called() {
    let d = Temp::new();
    let id = new_session_id();
    let mut cmd = d.sim(2, &["--session-id", &id, "--model", "opus"]);
    cmd.env("LOOP_ATTEMPT", "1")
        .env("LOOP_TASK_ID", "task_1")
        .env("LOOP_FILE", "/x/M1.md")
        .env("CLAUDE_CODE_STARTUP_FAILURE_RESULTS", "1");
    let out = run(cmd);
    assert!(out.status.success());
    let log = d.calls();
    assert_eq!(log.len(), 1);
    let l = &log[0];
    assert_eq!(l["argv"][0], "-p");
    assert_eq!(l["argv"][1], "do the step");
    assert_eq!(l["prompt"], "do the step");
    assert_eq!(l["step"], 2);
    assert_eq!(l["attempt"], 1);
    assert_eq!(l["task_id"], "task_1");
    assert_eq!(l["loop_file"], "/x/M1.md");
    assert_eq!(l["session_id"], id.as_str());
    assert_eq!(l["resume"], serde_json::Value::Null);
    assert_eq!(l["claudecode_env"], false);
    assert_eq!(l["entrypoint_env"], false);
    assert_eq!(l["startup_failure_results"], "1");
    assert_eq!(l["stdin_tty_or_pipe"], false, "stdin was /dev/null");
    assert_eq!(l["call"], 1);
    assert!(l["pid"].as_u64().unwrap() > 0);
    assert_eq!(
        l["cwd"],
        d.path().canonicalize().unwrap().display().to_string()
    );
}

#[test]
fn the_prompt_can_come_from_a_stdin_file_and_a_pipe_is_noticed() {
    let d = Temp::new();
    let prompt = d.path().join("prompt.txt");
    std::fs::write(&prompt, "the step's prompt").unwrap();
    let mut cmd2 = d.sim_raw(1, &["-p", "--output-format", "stream-json", "--verbose"]);
    cmd2.stdin(std::fs::File::open(&prompt).unwrap());
    let out = cmd2.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(d.calls()[0]["stdin_tty_or_pipe"], false);
    assert_eq!(d.calls()[0]["prompt"], "the step's prompt");

    // No prompt and nothing on stdin: the real CLI's error.
    cmd2.stdin(std::process::Stdio::null());
    let out = cmd2.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("Input must be provided either through stdin or as a prompt argument")
    );

    // A pipe is reported (a runner must never give one), and read to its end.
    let mut cmd = d.sim(1, &[]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(d.calls()[2]["stdin_tty_or_pipe"], true);

    // Both: the argument, then standard input on the next line, as the real CLI joins them.
    let mut both = d.sim(1, &[]);
    both.stdin(std::fs::File::open(&prompt).unwrap());
    assert!(run(both).status.success());
    assert_eq!(d.calls()[3]["prompt"], "do the step\nthe step's prompt");
}

#[test]
fn heartbeats_tick_while_working_then_the_result_comes() {
    let d = Temp::new();
    d.scenario(r#"{"default": {"sleep_ms": 300, "heartbeat_ms": 50}}"#);
    let out = run(d.sim(1, &[]));
    let ev = events(&out);
    let assistants = ev.iter().filter(|e| e["type"] == "assistant").count();
    assert_eq!(
        assistants,
        5 + 1,
        "300/50 = 6 intervals: 5 heartbeats, then the answer"
    );
    assert_eq!(ev.last().unwrap()["type"], "result");
    assert!(ev.last().unwrap()["duration_ms"].as_u64().unwrap() >= 300);
}

#[test]
fn files_are_touched_and_written_in_the_working_directory() {
    let d = Temp::new();
    d.scenario(
        r#"{"default": {"touch": ["out/made-{step}.txt"],
            "write": [{"path": "notes.md", "text": "step {step}\n"},
                      {"path": "notes.md", "text": "more\n", "append": true}]}}"#,
    );
    assert!(run(d.sim(4, &[])).status.success());
    assert!(d.path().join("out/made-4.txt").is_file());
    assert_eq!(
        std::fs::read_to_string(d.path().join("notes.md")).unwrap(),
        "step 4\nmore\n"
    );
}

#[test]
fn limits_denials_and_missing_results_are_emitted_as_the_cli_does() {
    let d = Temp::new();
    d.scenario(
        r#"{"steps": {
            "1": {"is_error": true, "api_error_status": 429,
                  "result": "You've hit your session limit · resets 5:06am (UTC)",
                  "rate_limit": {"status": "rejected", "resetsAt": 1795324010}},
            "2": {"permission_denials": ["Write", "Bash"]},
            "3": {"no_result": true, "exit": 1},
            "4": {"subtype": "error_max_turns", "is_error": true, "result": "Reached maximum number of turns (3)"}
        }}"#,
    );
    let out = run(d.sim(1, &[]));
    assert_eq!(
        class_of(&out),
        Class::UsageLimit {
            resets_at: Some(Utc.timestamp_opt(1_795_324_010, 0).unwrap()),
            guess: None,
            message: "You've hit your session limit · resets 5:06am (UTC) (API status 429)".into(),
        }
    );
    let out = run(d.sim(2, &[]));
    assert_eq!(class_of(&out), Class::Success);
    assert_eq!(
        summary(&out.stdout).result.unwrap().permission_denials,
        ["Write", "Bash"]
    );
    let out = run(d.sim(3, &[]));
    assert!(summary(&out.stdout).result.is_none());
    assert!(matches!(class_of(&out), Class::Other(_)));
    let out = run(d.sim(4, &[]));
    let r = summary(&out.stdout).result.unwrap();
    assert_eq!(
        (r.result, r.errors),
        (None, vec!["Reached maximum number of turns (3)".to_owned()])
    );
}

#[test]
fn a_real_capture_is_replayed_verbatim() {
    let d = Temp::new();
    let stem = captures().join("resume-no-conversation-startup-results");
    d.scenario(&format!(
        r#"{{"default": {{"fixture": {:?}}}}}"#,
        stem.display().to_string()
    ));
    let out = run(d.sim(1, &["--resume", "11111111-2222-3333-4444-555555555555"]));
    let mut want = stem.clone().into_os_string();
    want.push(".stdout.jsonl");
    assert_eq!(out.stdout, std::fs::read(&want).unwrap());
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error result exits 1, as the CLI did"
    );
    assert!(matches!(
        class_of(&out),
        Class::InvocationBug {
            kind: m1loop::agent::BugKind::UnknownSession,
            ..
        }
    ));
}

#[test]
fn json_and_text_formats_print_only_the_outcome() {
    let d = Temp::new();
    let out = run(d.sim_raw(1, &["-p", "x", "--output-format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "result");
    assert_eq!(v["is_error"], false);
    let out = run(d.sim_raw(1, &["-p", "x"]));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Simulated work on step 1.\nSTEP_DONE: simulated step 1 done\n"
    );
}
