//! `loop telegram` against a loopback Bot API: who is obeyed, which child commands run, that
//! no command runs twice across a restart, and that outages and 409 do not stop the bot.
//! Child `loop` commands go to a recording script (`LOOP_BOT_EXEC`), so these tests need
//! neither `start` nor `resume` to exist.

use crate::support::bot::{CHAT, DEADLINE, TOKEN, record, replies, setup, start_bot};
use crate::support::telegram_fake::{FakeTelegram, Reply};
use crate::support::{run, wait_until};

#[test]
fn loop_status_and_resume_run_the_exact_child_commands() {
    let s = setup();
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    let f = s.file.display().to_string();

    tg.push_message(CHAT, "/loop fix the SIGTERM bug");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    assert_eq!(
        record(&s)[0],
        format!("--file|{f}|start|--detach|fix the SIGTERM bug|")
    );
    assert!(wait_until(DEADLINE, || replies(&tg)
        .iter()
        .any(|t| t.contains("fake loop: --file"))));

    tg.push_message(CHAT, "/status@m1loop_bot");
    assert!(wait_until(DEADLINE, || record(&s).len() == 2));
    assert_eq!(record(&s)[1], format!("--file|{f}|status|"));

    // The machine-wide stop file is a person's emergency brake: /resume runs `resume`, which
    // refuses and says how to clear it, and leaves it in place.
    std::fs::write(&s.stop, "stop").unwrap();
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 3));
    assert_eq!(record(&s)[2], format!("--file|{f}|resume|--detach|"));
    assert!(
        s.stop.exists(),
        "/resume removed the machine-wide stop file"
    );
}

#[test]
fn a_restarted_bot_runs_no_command_twice() {
    let s = setup();
    let tg = FakeTelegram::start();
    let bot = start_bot(&s, &tg.base_url());
    let id = tg.push_message(CHAT, "/loop once only");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    let offset_file = s.state().join("telegram.offset");
    assert_eq!(
        std::fs::read_to_string(&offset_file).unwrap().trim(),
        (id + 1).to_string()
    );
    drop(bot);

    let before = tg.count("getUpdates");
    let _bot = start_bot(&s, &tg.base_url());
    assert!(wait_until(DEADLINE, || tg.count("getUpdates") >= before + 3));
    let later: Vec<_> = tg
        .requests()
        .into_iter()
        .filter(|r| r.method == "getUpdates")
        .skip(before)
        .collect();
    assert!(
        later.iter().all(|r| r.body["offset"] == id + 1),
        "{later:?}"
    );
    assert_eq!(
        record(&s).len(),
        1,
        "the command ran again after the restart"
    );
}

#[test]
fn outages_and_a_409_do_not_stop_the_bot() {
    let s = setup();
    let tg = FakeTelegram::start();
    tg.script_updates([
        Reply::Drop,
        Reply::ServerError,
        Reply::Conflict,
        Reply::Drop,
    ]);
    let mut bot = start_bot(&s, &tg.base_url());
    assert!(
        wait_until(DEADLINE, || bot
            .stderr()
            .contains("another client is reading")),
        "{}",
        bot.stderr()
    );
    tg.push_message(CHAT, "/stop");
    assert!(
        wait_until(DEADLINE, || record(&s).len() == 1),
        "{}",
        bot.stderr()
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "the bot exited");
    assert!(bot.stderr().contains("500"), "{}", bot.stderr());
}

#[test]
fn an_unreachable_server_is_waited_out_and_the_token_never_shows() {
    let s = setup();
    let mut bot = start_bot(&s, &FakeTelegram::down_base_url());
    assert!(
        wait_until(DEADLINE, || bot.stderr().contains("getUpdates failed")),
        "{}",
        bot.stderr()
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "the bot exited");
    let secret = TOKEN.split_once(':').unwrap().1;
    assert!(!bot.stderr().contains(secret));
    assert!(!s.log().contains(secret));
}

#[test]
fn without_settings_the_bot_says_what_is_missing() {
    let s = setup();
    let out = run(s
        .cmd(&["telegram"])
        .env_remove("TELEGRAM_BOT_TOKEN")
        .env("TELEGRAM_CHAT_ID", "1"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TELEGRAM_BOT_TOKEN is not"), "{err}");
}

#[test]
fn a_second_bot_for_the_same_loop_is_a_loop_in_the_way_not_an_internal_error() {
    let s = setup();
    let tg = FakeTelegram::start();
    let mut first = start_bot(&s, &tg.base_url());
    assert!(
        wait_until(DEADLINE, || s.log().contains("polling for commands")),
        "{}{}",
        s.log(),
        first.stderr()
    );
    let file = s.file.display().to_string();
    let out = run(s
        .cmd(&["--file", &file, "telegram", "--poll-timeout", "1s"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", tg.base_url()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("already running"), "{err}");
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "the first bot exited"
    );
}
