//! `loop report`: what a loop did, in Markdown, JSON and one self-contained HTML page, the same
//! facts in each; written beside M1.md by the loop itself when it ends.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;
use serde_json::Value;

use crate::support::{TestLoop, stderr, stdout};

/// A step's work, committed by the agent as it goes.
fn commit(file: &str, text: &str, summary: &str) -> Action {
    Action::done(summary)
        .write(file, text)
        .bash(&format!(
            "git add -A && git -c user.name=a -c user.email=a@example.invalid commit -qm '{summary}'"
        ))
        .cost(0.25)
}

/// A loop with a retry, a review that asks for changes, a skip and a gate: step 1 fails its
/// two attempts and is skipped on its FAILED gate; step 2's first attempt leaves VERIFY red,
/// its second passes and its review asks for a change; step 3 passes at once.
pub(crate) fn eventful_loop() -> TestLoop {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [
                    Action::failed("the tests do not build").cost(0.1),
                    Action::failed("still red").cost(0.1),
                ],
            )
            .step(
                2,
                [
                    Action::done("claims a fix").cost(0.25),
                    commit("step2.txt", "fixed\n", "fix written"),
                    Action::changes("step2.txt must say how").cost(0.05),
                    commit("step2.txt", "fixed: by waiting\n", "fix explained"),
                    Action::approve("clear now").cost(0.05),
                ],
            )
            .step(
                3,
                [
                    commit("step3.txt", "tested\n", "tested"),
                    Action::approve("ok"),
                ],
            ),
    );
    let start = TestLoop::start_args(
        &["one", "two", "three"],
        &[
            "--review",
            "--max-retries",
            "2",
            "--verify",
            "test -f step$LOOP_STEP.txt",
        ],
    );
    let out = env.run_exits(1, &start);
    // Ended FAILED on its gate: the page is written already, and the closing line names it.
    let page = env.state().join("M1.report.html");
    assert!(page.is_file(), "{}", stderr(&out));
    let closing = stderr(&out).lines().last().unwrap_or_default().to_owned();
    assert!(
        closing.starts_with("loop: FAILED") && closing.contains("M1.report.html"),
        "{closing}"
    );
    let json: Value = serde_json::from_str(&stdout(&env.run_ok(&["report", "--format", "json"])))
        .expect("the JSON report");
    assert_eq!(json["steps"][0]["gates"][0]["state"], "PENDING");
    let md = stdout(&env.run_ok(&["report", "--format", "md"]));
    assert!(md.contains("- G1 FAILED: pending"), "{md}");
    env.run_ok(&["skip"]);
    env.assert_status(Status::Done);
    env
}

/// The facts of `json` as the Markdown and the HTML must each say them.
fn facts(json: &Value) -> Vec<(String, Vec<String>)> {
    let mut all = Vec::new();
    for s in json["steps"].as_array().unwrap() {
        let n = s["step"].as_u64().unwrap();
        let money = s["cost_usd"]
            .as_f64()
            .map_or("—".to_owned(), |c| format!("${c:.2}"));
        let mut said = vec![
            s["status"].as_str().unwrap().to_owned(),
            s["attempts"].to_string(),
            s["reviews"].to_string(),
            s["retakes"].to_string(),
            money,
            s["verify"].as_str().unwrap_or("—").to_owned(),
            s["commit"].as_str().unwrap_or("—").to_owned(),
        ];
        for g in s["gates"].as_array().unwrap() {
            let at: chrono::DateTime<chrono::Utc> = g["at"].as_str().unwrap().parse().unwrap();
            said.push(format!(
                "{} {}: {} by {} at {}",
                g["id"].as_str().unwrap(),
                g["kind"].as_str().unwrap(),
                g["choice"].as_str().unwrap(),
                g["by"].as_str().unwrap(),
                at.format("%Y-%m-%d %H:%M:%S UTC")
            ));
        }
        all.push((format!("step {n}"), said));
    }
    let t = &json["totals"];
    all.push((
        "totals".to_owned(),
        vec![
            format!("{} of {} steps done", t["done"], t["steps"]),
            format!("{} skipped", t["skipped"]),
            format!("{} attempts", t["attempts"]),
            format!("{} reviews", t["reviews"]),
            format!("${:.2}", t["cost_usd"].as_f64().unwrap()),
        ],
    ));
    all
}

/// Step `n`'s part of a rendering: its table row, and its own section.
fn part_of(text: &str, n: u64, html: bool) -> String {
    let (row, own) = if html {
        (
            format!("<tr id=\"step-{n}\">"),
            format!("<span class=\"num\">{n}</span>"),
        )
    } else {
        (format!("\n| {n} | "), format!("\n**{n}. "))
    };
    let cut = |from: &str, to: &str| {
        let at = text
            .find(from)
            .unwrap_or_else(|| panic!("{from} in {text}"));
        let rest = &text[at..];
        rest[..rest[1..].find(to).map_or(rest.len(), |i| i + 1)].to_owned()
    };
    let end = if html { "</article>" } else { "\n\n" };
    cut(&row, "\n") + &cut(&own, end)
}

#[test]
fn the_three_formats_give_the_same_facts_of_a_loop_with_a_retry_a_review_a_skip_and_a_gate() {
    let env = eventful_loop();
    let json: Value = serde_json::from_str(&stdout(
        &env.run_ok(&["report", "--format", "json", "-o", "-"]),
    ))
    .unwrap();
    let steps = json["steps"].as_array().unwrap();
    // What the loop did, as the records have it.
    assert_eq!(steps[0]["status"], "SKIPPED");
    assert_eq!(steps[0]["attempts"], 2);
    assert_eq!(steps[0]["gates"][0]["choice"], "skip");
    assert_eq!(steps[1]["status"], "DONE");
    assert_eq!(
        (steps[1]["attempts"].as_u64(), steps[1]["reviews"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(steps[1]["retakes"], 1);
    assert_eq!(steps[1]["verify"], "passed");
    let outcomes: Vec<&str> = steps[1]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] != "verify")
        .map(|s| s["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["failed", "passed", "changes", "passed", "approved"]
    );
    let diff = &steps[1]["diff"];
    assert!(
        diff["files"][0].as_str().unwrap().starts_with("step2.txt"),
        "{diff}"
    );
    assert_eq!(json["totals"]["skipped"], 1);
    let each: f64 = steps.iter().filter_map(|s| s["cost_usd"].as_f64()).sum();
    let total = json["totals"]["cost_usd"].as_f64().unwrap();
    assert!(total > 1.0 && (total - each).abs() < 1e-6, "{total} {each}");

    let md = stdout(&env.run_ok(&["report", "--format", "md"]));
    let html = std::fs::read_to_string(stdout(&env.run_ok(&["report"])).trim()).unwrap();
    for (what, said) in facts(&json) {
        let n = what.strip_prefix("step ").map(|n| n.parse().unwrap());
        let (md_part, html_part) = match n {
            Some(n) => (part_of(&md, n, false), part_of(&html, n, true)),
            None => (md.clone(), html.clone()),
        };
        for fact in said {
            assert!(
                md_part.contains(&fact),
                "{what}: {fact:?} in the Markdown:\n{md_part}"
            );
            let escaped = fact
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('\'', "&#39;");
            assert!(
                html_part.contains(&escaped),
                "{what}: {fact:?} in the HTML:\n{html_part}"
            );
        }
    }
    // The page has the picture: a bar for every run on record, coloured by how it ended.
    let bars = |kind: &str| html.matches(&format!("class=\"bar k-{kind}\"")).count();
    assert_eq!(
        bars("attempt"),
        6,
        "two of step 1, three of step 2, one of step 3"
    );
    assert_eq!(bars("review"), 3);
    assert_eq!(bars("gate"), 1);
    assert!(bars("verify") >= 4);
    assert!(html.contains("<svg class=\"costs\""));
}

#[test]
fn a_loop_that_ran_its_steps_at_once_has_a_lane_per_worktree_and_one_for_its_merges() {
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .step(1, [Action::done("a").write("a.txt", "a\n")])
            .step(
                2,
                [
                    Action::failed("not yet"),
                    Action::done("b").write("b.txt", "b\n"),
                ],
            ),
    );
    env.run_ok(&TestLoop::start_args(&["a", "b"], &["--parallel", "2"]));
    let json: Value =
        serde_json::from_str(&stdout(&env.run_ok(&["report", "--format", "json"]))).unwrap();
    assert_eq!(json["parallel"], true);
    for (i, (attempts, file)) in [(1, "a.txt"), (2, "b.txt")].into_iter().enumerate() {
        let s = &json["steps"][i];
        assert_eq!(s["attempts"], attempts, "{s}");
        let lanes: Vec<(&str, &str, &str)> = s["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let get = |k: &str| x[k].as_str().unwrap();
                (get("kind"), get("lane"), get("outcome"))
            })
            .collect();
        let worktree = format!("step-{}", i + 1);
        assert!(
            lanes.contains(&("attempt", worktree.as_str(), "passed")),
            "{lanes:?}"
        );
        assert!(
            lanes.contains(&("merge", "merge queue", "merged")),
            "{lanes:?}"
        );
        assert!(
            s["diff"]["files"][0].as_str().unwrap().starts_with(file),
            "{s}"
        );
    }
    let html = std::fs::read_to_string(env.state().join("M1.report.html")).unwrap();
    assert!(
        html.contains(">step-2 · b<") && html.contains(">merge queue<"),
        "{html}"
    );
    assert!(html.contains("a lane per worktree"));
}
