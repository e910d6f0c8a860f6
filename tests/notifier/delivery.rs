//! `loop notify` against a loopback Bot API: delivery, retries, the outbox, splitting, and
//! keeping the token secret. Every test has its own temp dir and its own fake server.

use std::process::Output;

use crate::support::telegram_fake::{FakeTelegram, Reply};
use crate::support::{TestLoop, files, run, stderr};

const TOKEN: &str = "123456789:AAHsecretSECRETsecret0123456789abcd";
const CHAT: &str = "4242";

/// `loop --file state/M1.md ARGS` with Telegram pointed at `base` (None: not configured).
fn loop_cmd(env: &TestLoop, base: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = env.cmd(&["--file", "state/M1.md"]);
    cmd.args(args);
    if let Some(base) = base {
        cmd.env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_CHAT_ID", CHAT)
            .env("TELEGRAM_API_BASE", base);
    }
    run(cmd)
}

/// Messages in the outbox not yet settled (sent or rejected).
fn pending(env: &TestLoop) -> usize {
    let text = std::fs::read_to_string(env.state().join("outbox.jsonl")).unwrap_or_default();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let settled: Vec<&str> = lines
        .iter()
        .filter(|v| v["kind"] != "message")
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    lines
        .iter()
        .filter(|v| v["kind"] == "message" && !settled.contains(&v["id"].as_str().unwrap()))
        .count()
}

#[test]
fn a_message_arrives_in_the_configured_chat_as_escaped_html() {
    let env = TestLoop::new();
    let tg = FakeTelegram::start();
    let out = loop_cmd(
        &env,
        Some(&tg.base_url()),
        &["notify", "build <ok> & tests green"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = tg.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].chat_id, CHAT);
    assert_eq!(sent[0].text, "build &lt;ok&gt; &amp; tests green");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert!(tg.requests().iter().all(|r| r.token == TOKEN));
    assert_eq!(pending(&env), 0);
}

#[test]
fn two_429s_with_retry_after_then_accepted_arrives_once() {
    let env = TestLoop::new();
    let tg = FakeTelegram::start();
    tg.script_send([Reply::RetryAfter(1), Reply::RetryAfter(1)]);
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(tg.count("sendMessage"), 3);
    assert_eq!(tg.sent().len(), 1);
    assert_eq!(tg.sent()[0].text, "once");
    assert_eq!(pending(&env), 0);
}

#[test]
fn server_down_loses_nothing_and_the_next_flush_delivers_each_message_once() {
    let env = TestLoop::new();
    let down = FakeTelegram::down_base_url();
    for msg in ["first", "second"] {
        let out = loop_cmd(&env, Some(&down), &["notify", msg]);
        assert_eq!(out.status.code(), Some(1), "not delivered is exit 1");
        assert!(
            stderr(&out).contains("not delivered yet"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(pending(&env), 2);

    let tg = FakeTelegram::start();
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "--flush"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "sent 2, still pending 0, rejected 0"
    );
    let texts: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    assert_eq!(texts, ["first", "second"]);

    // Settled: a later command sends only its own message.
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "third"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let texts: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    assert_eq!(texts, ["first", "second", "third"]);
}

#[test]
fn a_new_message_sends_the_backlog_first() {
    let env = TestLoop::new();
    let tg = FakeTelegram::start();
    tg.script_send([Reply::ServerError, Reply::ServerError, Reply::ServerError]);
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "old"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("500"), "{}", stderr(&out));
    assert_eq!(
        tg.count("sendMessage"),
        3,
        "3 tries, then it waits in the outbox"
    );
    assert_eq!(pending(&env), 1);

    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "new"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let texts: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    assert_eq!(texts, ["old", "new"]);
}

#[test]
fn a_5000_character_message_arrives_as_two_messages_in_order() {
    let env = TestLoop::new();
    let tg = FakeTelegram::start();
    let lines: Vec<String> = (0..50)
        .map(|i| format!("{i:02} {}", "y".repeat(97)))
        .collect();
    let text = lines.join("\n");
    assert!(text.chars().count() >= 5000);
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", &text]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sent: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|s| s.encode_utf16().count() <= 4096));
    assert_eq!(
        sent.join("\n"),
        text,
        "split at a line boundary, nothing lost, in order"
    );
}

#[test]
fn a_400_is_reported_once_with_the_apis_description_and_not_retried() {
    let env = TestLoop::new();
    let tg = FakeTelegram::start();
    tg.script_send([Reply::BadRequest("Bad Request: chat not found".into())]);
    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Bad Request: chat not found"),
        "{}",
        stderr(&out)
    );
    assert_eq!(tg.count("sendMessage"), 1);

    let out = loop_cmd(&env, Some(&tg.base_url()), &["notify", "--flush"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        tg.count("sendMessage"),
        1,
        "a rejected message is not sent again"
    );
    assert_eq!(
        env.log().matches("chat not found").count(),
        1,
        "{}",
        env.log()
    );
}

#[test]
fn the_token_appears_in_no_state_file_and_no_output() {
    let env = TestLoop::new();
    let secret = TOKEN.split_once(':').unwrap().1;
    let tg = FakeTelegram::start();
    // An API that quotes the URL back, as error pages and clients do.
    tg.script_send([Reply::BadRequest(format!(
        "Bad Request: in POST /bot{TOKEN}/sendMessage"
    ))]);
    let mut outputs = vec![
        loop_cmd(
            &env,
            Some(&FakeTelegram::down_base_url()),
            &["notify", "unreachable"],
        ),
        loop_cmd(&env, Some("http://bad host:1/"), &["notify", "bad url"]),
        loop_cmd(&env, Some(&tg.base_url()), &["notify", "rejected"]),
        loop_cmd(
            &env,
            Some(&FakeTelegram::down_base_url()),
            &["notify", "--flush"],
        ),
    ];
    outputs.push(loop_cmd(&env, Some("ftp://x"), &["notify", "bad base"]));
    for o in &outputs {
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(o));
        assert!(!all.contains(secret), "token in output: {all}");
    }
    assert!(
        stderr(&outputs[0]).contains("not delivered yet"),
        "the failure is still told"
    );
    assert!(
        stderr(&outputs[2]).contains("bot<redacted>"),
        "{}",
        stderr(&outputs[2])
    );
    assert!(
        stderr(&outputs[4]).contains("TELEGRAM_API_BASE"),
        "{}",
        stderr(&outputs[4])
    );
    for f in files(&env.state()) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "token in {}",
            f.display()
        );
    }
}

#[test]
fn without_a_token_the_message_goes_to_the_log_with_one_hint() {
    let env = TestLoop::new();
    let out = loop_cmd(&env, None, &["notify", "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("TELEGRAM_BOT_TOKEN"),
        "{}",
        stderr(&out)
    );
    let log = env.log();
    assert!(log.contains("notify (text): hello"), "{log}");
    assert_eq!(
        log.matches("set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID")
            .count(),
        1,
        "{log}"
    );

    let out = loop_cmd(&env, None, &["notify", "--flush"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "flush without Telegram is a usage error"
    );
    let out = loop_cmd(&env, None, &["notify", "  "]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
}

#[test]
fn a_bad_chat_id_is_named_in_the_error() {
    let env = TestLoop::new();
    let out = run(env
        .cmd(&["notify", "x"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", "my chat")
        .env("TELEGRAM_API_BASE", FakeTelegram::down_base_url()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("TELEGRAM_CHAT_ID=\"my chat\" is not a chat id"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn notify_behind_a_sender_stuck_on_a_silent_telegram_gives_up_in_bounded_time_and_the_message_still_arrives()
 {
    use claude_sim::scenario::{Action, Scenario};

    let tg = FakeTelegram::start();
    tg.hang();
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let with_tg = |cmd: &mut std::process::Command| {
        cmd.env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_CHAT_ID", CHAT)
            .env("TELEGRAM_API_BASE", tg.base_url());
    };
    let mut start = env.cmd(&["start", "g", "--step", "one"]);
    with_tg(&mut start);
    assert!(run(start).status.success());
    // A delivery process holds the turn, its request to Telegram unanswered.
    assert!(crate::support::wait_until(crate::support::PATIENCE, || tg
        .held()
        >= 1));

    let mut notify = env.cmd(&["--file", "state/M1.md", "notify", "from the shell"]);
    with_tg(&mut notify);
    let out = crate::support::run_within(notify, std::time::Duration::from_secs(40));
    assert_eq!(out.status.code(), Some(1), "not sent: exit 1");
    assert!(
        stderr(&out).contains("had not finished after 10s"),
        "{}",
        stderr(&out)
    );
    assert_eq!(pending(&env), 3);

    // Telegram answers again: all three arrive, in order, once.
    tg.answer_again();
    assert!(crate::support::wait_until(crate::support::PATIENCE, || {
        pending(&env) == 0 && tg.sent().len() == 3
    }));
    let texts: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    assert!(
        texts[0].contains("started") && texts[1].contains("DONE") && texts[2] == "from the shell",
        "{texts:?}"
    );
    env.assert_no_processes();
    assert_eq!(tg.sent().len(), 3);
}
