//! Where `loop report` writes: the page beside M1.md (by the loop itself as it ends, or by the
//! command) or where asked, Markdown and JSON to standard output; a page that needs nothing
//! from anywhere else; and a loop that is not held up by a page it cannot write.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, stderr, stdout};

#[test]
fn the_page_needs_nothing_from_anywhere_else() {
    let env = super::report::eventful_loop();
    let html = std::fs::read_to_string(env.state().join("M1.report.html")).unwrap();
    for outside in [
        "http:", "https:", "<script", "<link", "@import", "src=", "<img", "<iframe",
    ] {
        assert!(!html.contains(outside), "{outside} in the page");
    }
    let urls: Vec<&str> = html.split("url(").skip(1).collect();
    assert!(
        urls.iter().all(|u| u.starts_with('#')),
        "only the page's own patterns"
    );
    assert!(html.contains("<svg class=\"timeline\"") && html.contains("<style>"));
}

#[test]
fn the_page_goes_beside_m1_or_where_asked_and_markdown_and_json_to_stdout() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").cost(0.5)));
    let out = env.run_ok(&["start", "g", "--step", "one"]);
    let page = env.state().join("M1.report.html");
    let closing = stderr(&out).lines().last().unwrap_or_default().to_owned();
    assert!(
        closing.starts_with("loop: DONE: 1 step(s), $0.50 in ")
            && closing.ends_with(&format!("; report: {}", page.display())),
        "{closing}"
    );
    assert!(
        env.log().contains(&format!("Report: {}", page.display())),
        "the DONE message"
    );
    std::fs::remove_file(&page).unwrap();
    assert_eq!(
        stdout(&env.run_ok(&["report"])).trim(),
        page.display().to_string()
    );
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .starts_with("<!doctype html>")
    );
    let elsewhere = env.temp.join("r.md");
    let said = stdout(&env.run_ok(&[
        "report",
        "--format",
        "md",
        "--output",
        &elsewhere.display().to_string(),
    ]));
    assert_eq!(said.trim(), elsewhere.display().to_string());
    assert!(
        std::fs::read_to_string(&elsewhere)
            .unwrap()
            .starts_with("## Loop report: g")
    );
    assert!(stdout(&env.run_ok(&["report", "--output", "-"])).starts_with("<!doctype html>"));
    assert!(stdout(&env.run_ok(&["report", "--format", "md"])).starts_with("## Loop report: g"));
    let none = env.run_exits(2, &["--file", "nowhere/M1.md", "report"]);
    assert!(
        stderr(&none).contains("no loop at nowhere/M1.md"),
        "{}",
        stderr(&none)
    );
}

#[test]
fn a_report_that_cannot_be_written_is_logged_and_the_loop_ends_as_it_would_have() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    // A directory where the page would go: it cannot be written there.
    std::fs::create_dir(env.state().join("M1.report.html")).unwrap();
    let out = env.run_ok(&["start", "g", "--step", "one"]);
    env.assert_status(Status::Done);
    let closing = stderr(&out).lines().last().unwrap_or_default().to_owned();
    assert!(
        closing.starts_with("loop: DONE") && !closing.contains("report"),
        "{closing}"
    );
    assert!(env.log().contains("report: not written"), "{}", env.log());
}

#[test]
fn what_a_goal_or_a_step_says_is_shown_as_text_never_run_as_markup() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("a | b <i>c</i>")));
    let goal = "fix <script>alert(1)</script> & co";
    env.run_ok(&["start", goal, "--step", "make a | b <img src=x>"]);
    let html = std::fs::read_to_string(env.state().join("M1.report.html")).unwrap();
    assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("<i>"));
    assert!(
        html.contains("fix &lt;script&gt;alert(1)&lt;/script&gt; &amp; co"),
        "{html}"
    );
    let md = stdout(&env.run_ok(&["report", "--format", "md"]));
    let row = md.lines().find(|l| l.starts_with("| 1 |")).unwrap();
    assert!(
        row.starts_with("| 1 | make a \\| b \\<img src=x> | DONE |"),
        "{row}"
    );
    assert!(md.contains("- Summary: a \\| b \\<i>c\\</i>"), "{md}");
}
