//! `loop serve`: the page and API over this user's loops. Nobody without the token gets in,
//! no other site decides anything, and a decision from the page is the loop's own, made once,
//! whoever else decides at the same moment, and whenever the server is killed.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{GateState, Status};
use serde_json::Value;

use crate::support::served::{Served, http};
use crate::support::{TestLoop, stdout, wait_until};

/// The loop has ended `want`, with no runner left, as the server sees it.
#[track_caller]
fn ends(served: &Served, env: &TestLoop, want: Status) {
    let ended = wait_until(Duration::from_secs(60), || {
        let l = served.loop_of(&env.file);
        l["status"] == want.as_str() && l["runner_pid"].is_null()
    });
    assert!(
        ended,
        "not {want:?}\n{}\n--- loop.log\n{}",
        env.text(),
        env.log()
    );
}

/// The loop of a plan gate decided `choice` ends as that choice leaves it: DONE once approved,
/// WAITING once rejected.
fn ends_as_decided(served: &Served, env: &TestLoop, choice: &str) {
    let want = if choice == "approve" {
        Status::Done
    } else {
        Status::Waiting
    };
    ends(served, env, want);
}

fn gate_path(served: &Served, env: &TestLoop, gate: &str) -> String {
    let id = served.loop_of(&env.file)["id"].as_str().unwrap().to_owned();
    format!("/api/loops/{id}/gates/{gate}")
}

#[test]
fn serve_prints_its_address_with_a_token_first_and_refuses_a_request_without_it_401() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    assert!(
        served.first_line.starts_with("http://127.0.0.1:") && served.token.len() >= 32,
        "{}",
        served.first_line
    );
    for path in ["/", "/app.js", "/api/loops", "/api/events"] {
        let r = served.request("GET", path, &[], "");
        assert_eq!(r.status, 401, "{path}: {r:?}");
    }
    let wrong = served.request("GET", "/api/loops?token=0123", &[], "");
    assert_eq!(wrong.status, 401);
    // The page trades the token in its address for a cookie, and then needs nothing else.
    let traded = served.request("GET", &format!("/?token={}", served.token), &[], "");
    assert_eq!(traded.status, 303, "{traded:?}");
    let cookie = traded.header("Set-Cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let page = served.request("GET", "/", &[("Cookie", pair)], "");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&served.token),
        "the page's script sends it back"
    );
    assert_eq!(
        served
            .request("GET", "/api/loops", &[("Cookie", pair)], "")
            .status,
        200
    );
}

#[test]
fn serve_refuses_a_request_whose_host_is_not_its_address_403_dns_rebinding() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let bearer = format!("Bearer {}", served.token);
    let port = served.addr.port();
    for host in [
        format!("rebound.example:{port}"),
        format!("127.0.0.1:{}", port + 1),
        "localhost".to_owned(),
    ] {
        let r = served.request(
            "GET",
            "/api/loops",
            &[("Host", &host), ("Authorization", &bearer)],
            "",
        );
        assert_eq!(r.status, 403, "{host}: {r:?}");
    }
    let local = format!("localhost:{port}");
    let r = served.request(
        "GET",
        "/api/loops",
        &[("Host", &local), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn a_post_without_the_token_in_its_csrf_header_is_refused_403_and_decides_nothing() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let path = gate_path(&served, &env, "G1");
    let before = env.text();
    let cookie = format!("loop_serve_{}={}", served.addr.port(), served.token);
    let bearer = format!("Bearer {}", served.token);
    let body = r#"{"choice":"approve"}"#;
    // What a form of another site sends (the browser adds the cookie), and a script's token
    // in the wrong place.
    for headers in [
        vec![("Cookie", cookie.as_str())],
        vec![
            ("Cookie", cookie.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        vec![("Authorization", bearer.as_str())],
    ] {
        let r = served.request("POST", &path, &headers, body);
        assert_eq!(r.status, 403, "{headers:?}: {r:?}");
    }
    // The header from a page of another origin.
    let r = served.request(
        "POST",
        &path,
        &[
            ("X-Loop-CSRF", served.token.as_str()),
            ("Origin", "http://127.0.0.1:9"),
        ],
        body,
    );
    assert_eq!(r.status, 403, "{r:?}");
    // Nor does a GET change anything.
    assert_eq!(served.get(&path).status, 404);
    assert_eq!(env.text(), before, "nothing was decided");
    assert!(env.m1().gate("G1").unwrap().is_pending());
    assert_eq!(env.calls().len(), 0);
}

#[test]
fn get_api_loops_lists_each_loop_with_its_status_steps_cost_and_gates() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let r = served.get("/api/loops");
    assert_eq!(r.status, 200);
    assert!(
        r.header("Content-Type")
            .unwrap()
            .starts_with("application/json"),
        "{r:?}"
    );
    let l = served.loop_of(&env.file);
    assert_eq!(l["goal"], "g");
    assert_eq!(l["status"], "WAITING");
    assert_eq!(
        l["project"],
        std::fs::canonicalize(env.path())
            .unwrap()
            .display()
            .to_string()
    );
    assert_eq!(l["steps"].as_array().unwrap().len(), 2);
    assert_eq!(l["steps"][0]["text"], "one");
    assert!(l["cost_usd"].is_number(), "{l}");
    assert_eq!(l["pending_gates"], 1);
    let g = &l["gates"][0];
    assert_eq!(
        (&g["id"], &g["kind"], &g["state"]),
        (
            &Value::from("G1"),
            &Value::from("PLAN"),
            &Value::from("PENDING")
        )
    );
    assert_eq!(g["options"], serde_json::json!(["approve", "reject"]));
    let id = l["id"].as_str().unwrap();
    let one = served.get(&format!("/api/loops/{id}"));
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["gates"][0]["id"], "G1");
    assert_eq!(served.get("/api/loops/nosuch").status, 404);
}

#[test]
fn a_gate_decided_over_the_api_is_200_once_and_409_naming_the_decision_after() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let path = gate_path(&served, &env, "G1");
    let first = served.post(&path, r#"{"choice":"approve"}"#);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.json()["outcome"], "decided");
    let second = served.post(&path, r#"{"choice":"reject"}"#);
    assert_eq!(second.status, 409, "{second:?}");
    let said = second.json();
    assert_eq!(said["gate"]["choice"], "approve");
    let by = said["gate"]["by"].as_str().unwrap();
    assert!(by.contains("web"), "{said}");
    assert!(said["gate"]["at"].is_string(), "{said}");
    let message = said["message"].as_str().unwrap();
    assert!(
        message.starts_with("gate G1 was already decided: approve by") && message.contains(" at "),
        "{message}"
    );
    // The loop carries on by itself, as from the shell.
    ends(&served, &env, Status::Done);
    env.assert_each_step_started_once(2, "after one approval from the page");
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(
        (g.state, g.choice.as_deref(), g.by.as_deref()),
        (GateState::Decided, Some("approve"), Some(by))
    );
    env.assert_logged("decide: gate G1 (PLAN): approve by");
}

#[test]
fn a_click_and_a_shell_answer_at_once_make_one_decision_and_the_other_is_told_it() {
    for round in 0..4 {
        let env = TestLoop::new();
        env.start_waiting_for_approval();
        let served = Served::start(&env, &[]);
        let path = gate_path(&served, &env, "G1");
        let (web, shell) = std::thread::scope(|s| {
            let web = s.spawn(|| served.post(&path, r#"{"choice":"approve"}"#));
            let shell = s.spawn(|| env.run(&["reject", "G1", "--json", "--detach"]));
            (web.join().unwrap(), shell.join().unwrap())
        });
        let shell_said: Value = serde_json::from_str(
            stdout(&shell)
                .lines()
                .find(|l| l.starts_with('{'))
                .unwrap_or_else(|| panic!("round {round}: {shell:?}")),
        )
        .unwrap();
        let outcomes = (web.status, shell_said["outcome"].as_str().unwrap());
        let choice = match outcomes {
            (200, "already") => "approve",
            (409, "decided") => "reject",
            _ => panic!("round {round}: one decision and one `already`: {web:?}\n{shell_said}"),
        };
        assert_eq!(env.m1().gate("G1").unwrap().choice.as_deref(), Some(choice));
        if web.status == 409 {
            let told = web.json()["message"].as_str().unwrap().to_owned();
            assert!(
                told.starts_with("gate G1 was already decided: reject by"),
                "round {round}: {told}"
            );
        }
        ends_as_decided(&served, &env, choice);
        assert_eq!(
            env.calls().len(),
            if choice == "approve" { 2 } else { 0 },
            "round {round}"
        );
    }
}

#[test]
fn the_event_stream_sends_a_loop_as_soon_as_its_m1_md_changes() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let id = served.loop_of(&env.file)["id"].as_str().unwrap().to_owned();
    let mut events = served.events();
    // A person's edit of the goal, by hand.
    let text = env.text().replace("GOAL: g", "GOAL: a new goal");
    std::fs::write(&env.file, text).unwrap();
    let got = events.next_where(Duration::from_secs(20), |name, data| {
        name == "loop" && data.contains(&id) && data.contains("a new goal")
    });
    assert!(got.is_some(), "no event for the edit");
    // And a decision's, made from the shell.
    env.run_exits(3, &["reject", "G1", "--detach"]);
    let got = events.next_where(Duration::from_secs(20), |name, data| {
        name == "loop" && data.contains(&id) && data.contains("\"choice\":\"reject\"")
    });
    assert!(got.is_some(), "no event for the decision");
}

#[test]
fn agent_text_is_escaped_everywhere_the_server_shows_it_and_the_page_runs_no_inline_script() {
    let env = TestLoop::new();
    let goal = "fix </script><script>alert(1)</script> & <b>more</b>";
    env.scenario(&Scenario::new().step(1, [Action::blocked("<img src=x onerror=alert(2)>?")]));
    env.run_exits(3, &["start", goal, "--step", "<i>one</i>"]);
    let served = Served::start(&env, &[]);
    let listed = served.get("/api/loops");
    assert!(!listed.body.contains('<'), "{}", listed.body);
    assert!(
        listed.body.contains("\\u003cscript\\u003e"),
        "{}",
        listed.body
    );
    let l = served.loop_of(&env.file);
    assert_eq!(l["goal"], goal, "escaped, not changed");
    assert_eq!(
        l["gates"][0]["question"], "<img src=x onerror=alert(2)>?",
        "{l}"
    );
    // The page holds no agent text (its script writes it as text) and allows no inline script.
    let page = served.get("/");
    assert!(!page.body.contains("alert("), "{}", page.body);
    let csp = page.header("Content-Security-Policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let id = l["id"].as_str().unwrap();
    let report = served.get(&format!("/loops/{id}/report"));
    assert_eq!(report.status, 200);
    assert!(!report.body.contains("<script"), "{}", report.body);
    assert!(report.body.contains("&lt;script&gt;"), "{}", report.body);
    let csp = report.header("Content-Security-Policy").unwrap();
    assert!(!csp.contains("script-src"), "no script at all: {csp}");
    let events = served.events();
    drop(events);
}

#[test]
fn serve_killed_with_sigkill_mid_decision_decides_nothing_twice() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let mut served = Served::start(&env, &[]);
    let path = gate_path(&served, &env, "G1");
    let (addr, token) = (served.addr, served.token.clone());
    // The click is sent, and the server killed while it is being decided.
    let click = std::thread::spawn(move || {
        std::panic::catch_unwind(|| {
            http(
                addr,
                "POST",
                &path,
                &[("X-Loop-CSRF", &token)],
                r#"{"choice":"approve"}"#,
            )
        })
    });
    assert!(wait_until(Duration::from_secs(30), || {
        !env.m1().gate("G1").unwrap().is_pending()
            || crate::support::procs::child_of(served.pid().cast_signed(), &[]).is_some()
    }));
    served.kill9();
    let _ = click.join();
    // A new server, and the same click again: the decision stands, made once.
    let again = Served::start(&env, &[]);
    let path = gate_path(&again, &env, "G1");
    let wait = wait_until(Duration::from_secs(30), || {
        !env.m1().gate("G1").unwrap().is_pending()
    });
    let r = again.post(&path, r#"{"choice":"approve"}"#);
    if wait {
        assert_eq!(r.status, 409, "{r:?}");
    } else {
        // The first never reached the loop: this one is the decision.
        assert_eq!(r.status, 200, "{r:?}");
    }
    ends(&again, &env, Status::Done);
    env.assert_each_step_started_once(2, "after a server killed mid-decision");
    assert_eq!(
        env.log().matches("decide: gate G1 (PLAN)").count(),
        1,
        "{}",
        env.log()
    );
}

#[test]
fn the_loop_is_stopped_and_resumed_over_the_api() {
    let env = TestLoop::new();
    env.scenario(&crate::support::answers::steady(1500));
    env.run_ok(&["start", "g", "--step", "one", "--step", "two", "--detach"]);
    let served = Served::start(&env, &[]);
    assert!(wait_until(Duration::from_secs(30), || env.calls().len() == 1));
    let id = served.loop_of(&env.file)["id"].as_str().unwrap().to_owned();
    let stop = served.post(&format!("/api/loops/{id}/stop"), "");
    assert_eq!(stop.status, 200, "{stop:?}");
    ends(&served, &env, Status::Waiting);
    let resume = served.post(&format!("/api/loops/{id}/resume"), "");
    assert_eq!(resume.status, 200, "{resume:?}");
    ends(&served, &env, Status::Done);
}

#[test]
fn serve_refuses_an_address_other_than_loopback_without_expose_saying_what_it_would_expose() {
    let env = TestLoop::new();
    let out = env.run_exits(2, &["serve", "--addr", "0.0.0.0:0"]);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("--expose") && err.contains("decide their gates"),
        "{err}"
    );
}

#[test]
fn a_click_and_a_telegram_tap_at_once_make_one_decision_and_each_loser_is_told_by_whom() {
    use crate::support::bot::{CHAT, DEADLINE, start_real_bot, with_telegram};
    use crate::support::telegram_fake::FakeTelegram;
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.start_waiting_for_approval();
    let message = |tg: &FakeTelegram| {
        tg.sent()
            .iter()
            .rposition(|s| s.buttons().iter().any(|b| b.starts_with("G1 ")))
    };
    assert!(wait_until(DEADLINE, || message(&tg).is_some()));
    let n = message(&tg).unwrap();
    let approve = tg.sent()[n].buttons()[0].clone();
    let _bot = start_real_bot(&env, &tg.base_url());
    let served = Served::start(&env, &[]);
    let path = gate_path(&served, &env, "G1");
    // The tap approves, the click rejects: whichever comes first is the decision.
    tg.push_tap(CHAT, CHAT, n + 1, &approve);
    let web = served.post(&path, r#"{"choice":"reject"}"#);
    assert!(wait_until(DEADLINE, || tg.count("answerCallbackQuery") == 1));
    let tapped = tg.bodies("answerCallbackQuery")[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let choice = env.m1().gate("G1").unwrap().choice.clone().unwrap();
    if choice == "approve" {
        assert_eq!(web.status, 409, "{web:?}");
        let told = web.json()["message"].as_str().unwrap().to_owned();
        assert!(
            told.starts_with(&format!(
                "gate G1 was already decided: approve by telegram {CHAT}"
            )),
            "{told}"
        );
    } else {
        assert_eq!((choice.as_str(), web.status), ("reject", 200), "{web:?}");
        assert!(tapped.contains("already answered: reject"), "{tapped}");
        // Its message says by whom: the page.
        assert!(wait_until(DEADLINE, || tg
            .bodies("editMessageText")
            .iter()
            .any(|e| e["text"]
                .as_str()
                .unwrap_or_default()
                .contains("web"))));
    }
    ends_as_decided(&served, &env, &choice);
    assert_eq!(
        env.log().matches("decide: gate G1 (PLAN)").count(),
        1,
        "{}",
        env.log()
    );
}

/// Context switches of every thread of `pid` so far.
fn switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|t| std::fs::read_to_string(t.path().join("status")).unwrap_or_default())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| {
                    l.strip_prefix("voluntary_ctxt_switches:")
                        .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                })
                .collect::<Vec<_>>()
        })
        .sum()
}

/// The server read the loops' files in directories it watches, and took its own reads for
/// changes: idle, it read them again ten times a second.
#[test]
fn an_idle_server_is_not_woken_by_its_own_reads_of_the_loops() {
    let env = TestLoop::new();
    env.start_waiting_for_approval();
    let served = Served::start(&env, &[]);
    let _events = served.events();
    for _ in 0..3 {
        assert_eq!(served.get("/api/loops").status, 200);
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = switches(served.pid());
    std::thread::sleep(Duration::from_secs(2));
    let woken = switches(served.pid()) - before;
    assert!(
        woken < 30,
        "woken {woken} times in 2 s while nothing happened"
    );
}

#[test]
fn a_question_answered_in_the_pages_box_resumes_its_step_with_the_answer_as_written() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new().step(1, [Action::blocked("which port?"), Action::done("used it")]),
    );
    env.run_exits(3, &["start", "g", "--step", "one"]);
    let served = Served::start(&env, &[]);
    let g = &served.loop_of(&env.file)["gates"][0];
    assert_eq!(
        (&g["kind"], &g["free_text"]),
        (&Value::from("ASK"), &Value::from(true))
    );
    let path = gate_path(&served, &env, "G1");
    // What the page was shown has changed since: nothing is decided.
    let stale = served.post(&path, r#"{"choice":"8080","shown":"0000000000000000"}"#);
    assert_eq!(stale.status, 409, "{stale:?}");
    assert_eq!(stale.json()["outcome"], "stale");
    assert!(env.m1().gate("G1").unwrap().is_pending());
    // An answer that looks like a flag is an answer all the same.
    let shown = g["shown"].as_str().unwrap();
    let body = serde_json::json!({ "choice": "--port 8080", "shown": shown }).to_string();
    let r = served.post(&path, &body);
    assert_eq!(r.status, 200, "{r:?}");
    ends(&served, &env, Status::Done);
    let prompt = env.prompt(1);
    assert!(
        prompt.contains("The human answered: --port 8080"),
        "{prompt}"
    );
}
