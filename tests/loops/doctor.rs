//! `loop doctor` against stand-ins of an agent CLI that lack what the loop needs: a flag the
//! loop passes, the permission mode in force; and the stop file. (Its passing run against the
//! real Claude Code and Codex CLIs is in `regression::real_cli`.)

use serde_json::Value;

use crate::support::bot::with_telegram;
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, code, line_with, run, stdout, write_executable};

/// A `claude` that knows neither `--permission-prompt-tool` nor the mode `default` (only its
/// newer name, `manual`), and refuses the flag as Commander does.
const STUB: &str = r#"#!/bin/sh
case "$1" in
  --version) echo "9.9.9 (Claude Code)"; exit 0 ;;
  --help) cat <<'HELP'
Usage: claude [options] [command] [prompt]

Options:
  -p, --print                       Print response and exit
  --output-format <format>          Output format (only works with --print)
  --verbose                         Override the verbose setting
  --mcp-config <configs...>         Load MCP servers from JSON files or strings
  --settings <file-or-json>         Settings file or JSON string
  --allowedTools, --allowed-tools <tools...>  Tools to allow
  --tools <tools...>                Built-in tools to make available
  --session-id <uuid>               Use a specific session ID
  -r, --resume [value]              Resume a conversation
  --permission-mode <mode>          Permission mode to use for the session
                                    (choices: "acceptEdits", "manual", "plan")
HELP
  exit 0 ;;
esac
for a in "$@"; do
  if [ "$a" = "--permission-prompt-tool" ]; then
    echo "error: unknown option '--permission-prompt-tool'" >&2
    exit 1
  fi
done
exit 1
"#;

fn with_stub() -> TestLoop {
    let env = TestLoop::new();
    let stub = env.temp.join("claude");
    write_executable(&stub, STUB);
    let config = env.temp.join("config");
    env.env("LOOP_AGENT", &stub).env("XDG_CONFIG_HOME", config)
}

#[test]
fn doctor_names_the_flag_this_version_of_the_agent_does_not_know() {
    let env = with_stub();
    let out = env.run(&["doctor"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}");
    let line = line_with(&text, "claude: flags");
    assert!(
        line.starts_with("FAIL")
            && line.contains("--permission-prompt-tool not in")
            && line.contains("error: unknown option '--permission-prompt-tool'"),
        "{line}"
    );
    assert!(text.contains("FAIL  claude: contract"), "{text}");
    assert!(text.contains("check(s) failed"), "{text}");
}

#[test]
fn doctor_tells_the_name_this_version_gives_the_permission_mode_in_force() {
    let env = with_stub();
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--plan-only",
        "--permission-mode",
        "default",
    ]);
    let text = stdout(&env.run_exits(1, &["doctor"]));
    let line = line_with(&text, "claude: permission modes");
    assert!(
        line.starts_with("FAIL")
            && line.contains("AGENT.PERMISSION_MODE default is unknown to this version")
            && line.contains("this version calls it `manual`"),
        "{line}"
    );
}

#[test]
fn doctor_fails_on_a_stop_file_and_says_so_in_json() {
    let env = with_stub();
    std::fs::write(&env.stop, "").unwrap();
    let out = env.run_exits(1, &["doctor", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let stop = rows
        .iter()
        .find(|r| r["check"] == "stop file")
        .expect("a stop file row");
    assert_eq!(stop["status"], "fail", "{stop}");
    assert!(stop["detail"].as_str().unwrap().contains("remove it"));
    let telegram = rows.iter().find(|r| r["check"] == "telegram").unwrap();
    assert_eq!(telegram["status"], "off", "not set is not a failure");
}

#[test]
fn doctor_asks_telegram_who_the_bot_is_and_sends_nothing() {
    let tg = FakeTelegram::start();
    let env = with_telegram(with_stub(), &tg.base_url());
    let out = env.run(&["doctor"]);
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("telegram") && l.contains("@fake_loop_bot")),
        "{text}"
    );
    assert_eq!(tg.count("getMe"), 1);
    assert_eq!(tg.count("sendMessage"), 0, "nothing sent");
}

/// `loop doctor` before the first loop (as the manual advises) made an empty `state/` without
/// its `.gitignore`: the loop then kept it as it was, and the agent's `git add -A` committed
/// the loop's state. Doctor looks; it creates nothing in the project.
#[test]
fn doctor_in_a_fresh_git_project_creates_nothing_there() {
    let env = with_stub().without_state().with_git();
    let out = run(env.cmd(&["doctor"]).env_remove("LOOP_FILE"));
    let text = stdout(&out);
    let line = line_with(&text, "state directory");
    assert!(line.starts_with("ok"), "{line}");
    assert!(
        !env.state().exists(),
        "doctor made {}",
        env.state().display()
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "", "{text}");
}

/// `loop doctor --backend codex` ignored `LOOP_AGENT` where `loop start --backend codex` takes
/// it: with no loop here, the backend asked for is a new loop's, and its program comes from
/// where a new loop's would.
#[test]
fn doctor_backend_codex_with_no_loop_takes_loop_agent_as_loop_start_does() {
    let env = TestLoop::new().without_state();
    let out = env.run(&["doctor", "--backend", "codex", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let program = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"] == "codex: program")
        .unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(program["status"], "ok", "{program}");
    let detail = program["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("LOOP_AGENT: ") && detail.contains("claude-sim"),
        "{detail}"
    );
}
