//! The page of `loop serve` in a real browser: headless Chromium, driven through the `DevTools`
//! protocol, opens the page with the printed address, sees a loop's gate, clicks its button,
//! and watches the loop carry on to DONE on the page itself, with no reload. A page of another
//! origin (a second loopback server, on another port) in the same browser, which holds the
//! page's cookie, tries to decide and to read: its requests are refused and the gate stays
//! pending. Where Chromium is not installed, the test says `skipped:` and passes.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use headless_chrome::{Browser, LaunchOptions, Tab};
use m1loop::m1::Status;

use super::report_browser::{chromium, decode};
use crate::support::served::Served;
use crate::support::{TestLoop, wait_until};

/// A goal an agent could have written, which must show as the text it is.
const GOAL: &str = "ship it <img src=x onerror=\"document.title='pwned'\"> & <b>now</b>";

/// What `expr` evaluates to in the tab, as JSON.
fn eval(tab: &Tab, expr: &str) -> serde_json::Value {
    tab.evaluate(expr, false)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .value
        .unwrap_or_default()
}

/// Waits (up to 30 s) until `expr` is true in the tab.
#[track_caller]
fn until(tab: &Tab, expr: &str) {
    let ok = wait_until(Duration::from_secs(30), || eval(tab, expr) == true);
    let body = eval(tab, "document.body ? document.body.innerText : ''");
    assert!(ok, "never true: {expr}\n--- the page says\n{body}");
}

/// A page of another origin: a loopback server of its own, whose one page tries to decide the
/// gate at `target` and to read the loops, and says in its title what became of each.
fn other_origin(
    serve: std::net::SocketAddr,
    id: &str,
) -> (String, Arc<tiny_http::Server>, std::thread::JoinHandle<()>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let addr = server.server_addr().to_ip().unwrap();
    let page = format!(
        r#"<!doctype html><title>trying</title><script>
const base = "http://{serve}";
const gate = base + "/api/loops/{id}/gates/G1";
const body = JSON.stringify({{choice: "approve"}});
const said = [];
const tell = (what, p) => p.then(r => said.push(what + ": " + (r.type === "opaque" ? "sent blind" : r.status)),
                                 e => said.push(what + ": refused " + e.name));
Promise.all([
  tell("decide", fetch(gate, {{method: "POST", credentials: "include",
        headers: {{"X-Loop-CSRF": "guess", "Content-Type": "application/json"}}, body}})),
  tell("blind", fetch(gate, {{method: "POST", mode: "no-cors", credentials: "include", body}})),
  tell("read", fetch(base + "/api/loops", {{credentials: "include"}}).then(r => r.json())),
]).then(() => {{ document.title = "done " + said.sort().join("; "); }});
</script>"#
    );
    let serving = Arc::clone(&server);
    let handle = std::thread::spawn(move || {
        // It serves its page until the test unblocks it.
        while let Ok(req) = serving.recv() {
            let header =
                tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"text/html"[..]).unwrap();
            let _ = req.respond(tiny_http::Response::from_string(page.clone()).with_header(header));
        }
    });
    (format!("http://{addr}/"), server, handle)
}

/// Headless Chromium at `path`, with a profile of its own under `profile`.
fn launch(path: std::path::PathBuf, profile: std::path::PathBuf) -> Browser {
    Browser::new(
        LaunchOptions::default_builder()
            .path(Some(path))
            .headless(true)
            .sandbox(false)
            .user_data_dir(Some(profile))
            .window_size(Some((420, 900)))
            .idle_browser_timeout(Duration::from_secs(300))
            .args(vec![
                OsStr::new("--disable-gpu"),
                OsStr::new("--disable-dev-shm-usage"),
                OsStr::new("--no-first-run"),
            ])
            .build()
            .unwrap(),
    )
    .expect("chromium starts")
}

#[test]
fn a_gate_clicked_in_a_real_browser_carries_the_loop_on_and_another_origin_decides_nothing() {
    let Some(browser_path) = chromium() else {
        eprintln!("skipped: chromium not installed (the browser test of `loop serve`)");
        return;
    };
    let env = TestLoop::new();
    env.scenario(&crate::support::answers::passing());
    let start = ["start", GOAL, "--step", "one", "--step", "two"];
    env.run_exits(3, &[&start[..], &["--approve-plan"]].concat());
    let served = Served::start(&env, &[]);
    let id = served.loop_of(&env.file)["id"].as_str().unwrap().to_owned();
    let browser = launch(browser_path, env.temp.join("chromium"));
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));

    // The printed address: the token becomes the page's cookie, and the page lists the loop.
    tab.navigate_to(&served.first_line)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    until(&tab, "location.search === '' && location.pathname === '/'");
    until(
        &tab,
        &format!("document.querySelector('li[data-loop=\"{id}\"]') !== null"),
    );
    until(
        &tab,
        "document.getElementById('live').textContent === 'live'",
    );
    another_origin_decides_nothing(&tab, &env, &served, &id);
    click_and_watch(&tab, &env, &served, &id);
}

/// A page of another origin, in the browser that holds the page's cookie, tries to decide and
/// to read: refused, and the loop's file is as it was.
fn another_origin_decides_nothing(tab: &Tab, env: &TestLoop, served: &Served, id: &str) {
    let before = env.text();
    let (evil, evil_server, evil_thread) = other_origin(served.addr, id);
    tab.navigate_to(&evil)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    until(tab, "document.title.startsWith('done')");
    let title = eval(tab, "document.title");
    let title = title.as_str().unwrap();
    assert!(
        title.contains("decide: refused TypeError") && title.contains("read: refused TypeError"),
        "{title}"
    );
    assert_eq!(
        env.text(),
        before,
        "another origin decided something: {title}"
    );
    assert!(env.m1().gate("G1").unwrap().is_pending());
    evil_server.unblock();
    evil_thread.join().unwrap();
}

/// The loop's own view: its goal as text, its gate's buttons; a click, and the page shows the
/// loop carry on to DONE, the gate decided by the page, with no reload.
fn click_and_watch(tab: &Tab, env: &TestLoop, served: &Served, id: &str) {
    tab.navigate_to(&format!("http://{}/#/loops/{id}", served.addr))
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    until(tab, "document.querySelector('h1') !== null");
    assert_eq!(eval(tab, "document.querySelector('h1').textContent"), GOAL);
    assert_eq!(eval(tab, "document.querySelector('h1').children.length"), 0);
    assert_eq!(eval(tab, "document.querySelectorAll('img').length"), 0);
    let button = "button[data-gate=\"G1\"][data-choice=\"approve\"]";
    until(tab, &format!("document.querySelector('{button}') !== null"));
    tab.find_element(button).unwrap().click().unwrap();
    until(
        tab,
        "document.getElementById('flash').textContent === 'gate G1: approve'",
    );
    until(
        tab,
        "document.querySelector('[data-status=\"DONE\"]') !== null",
    );
    until(
        tab,
        "document.querySelector('li.gate.decided[data-gate=\"G1\"]') !== null \
         && document.querySelector('li.gate.decided').textContent.includes('web')",
    );
    until(
        tab,
        "document.getElementById('d-log').textContent.includes('decide: gate G1')",
    );
    assert_ne!(eval(tab, "document.title"), "pwned");
    env.assert_status(Status::Done);
    env.assert_each_step_started_once(2, "after one click");
    let g = env.m1().gate("G1").cloned().unwrap();
    assert_eq!(g.choice.as_deref(), Some("approve"));
    assert!(g.by.as_deref().unwrap_or_default().contains("web"), "{g:?}");
    // And it was drawn: a page, not a blank.
    let shot = tab
        .capture_screenshot(
            headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption::Png,
            None,
            None,
            true,
        )
        .unwrap();
    let png = env.temp.join("serve.png");
    std::fs::write(&png, &shot).unwrap();
    let (_, _, pixels) = decode(&png);
    let colours: std::collections::HashSet<&[u8]> = pixels.chunks_exact(3).collect();
    assert!(
        colours.len() > 50,
        "{} colours: a blank page",
        colours.len()
    );
}
