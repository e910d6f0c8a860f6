//! A loop and GitHub: `loop start --issue N` reads the issue with the real GitHub CLI (`gh`),
//! works on `loop/issue-N`, and at DONE pushes it and opens a pull request (`--pr`); FAILED,
//! it comments on the issue. `gh` talks to a stand-in of GitHub's API on a Unix socket
//! ([`FakeGitHub`]), and the push goes to a bare repository in the test's directory: nothing
//! reaches the network. Where `gh` is not installed, these tests say `skipped:` and pass.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};

use crate::support::github_fake::{FakeGitHub, OWNER, REPO, gh_here};
use crate::support::{PATIENCE, TestLoop, stderr, wait_until};

const TITLE: &str = "Make the widgets round";
const BODY: &str = "The widgets are square.\n\nThey should be round, like wheels.";
const BRANCH: &str = "loop/issue-5";

/// A project on `main` whose `origin` is GitHub's `OWNER/REPO` for `gh`, and whose pushes go to
/// a bare repository (`origin.git` beside the project); issue 5 exists. `None` without `gh`.
struct Project {
    env: TestLoop,
    github: FakeGitHub,
    origin: PathBuf,
}

fn project() -> Option<Project> {
    if !gh_here() {
        return None;
    }
    let env = TestLoop::new().with_git();
    env.git(&["branch", "-M", "main"]);
    let origin = env.temp.join("origin.git");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&origin)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    env.git(&[
        "remote",
        "add",
        "origin",
        &format!("https://github.com/{OWNER}/{REPO}.git"),
    ]);
    env.git(&[
        "remote",
        "set-url",
        "--push",
        "origin",
        &origin.display().to_string(),
    ]);
    let github = FakeGitHub::start(&env.temp.join("github"));
    github.issue(5, TITLE, BODY);
    let mut env = env;
    for (k, v) in github.env() {
        env = env.env(k, v);
    }
    Some(Project {
        env,
        github,
        origin,
    })
}

/// Each step writes a file of its own, which its commit holds.
fn writes_its_file() -> Action {
    Action::done("ok").bash("echo $LOOP_STEP > step-$LOOP_STEP.txt")
}

impl Project {
    /// The commit `branch` is at in the bare repository, if it is there.
    fn pushed(&self, branch: &str) -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&self.origin)
            .args([
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

#[test]
fn an_issue_is_the_goal_its_loop_works_on_a_branch_of_its_own_and_opens_one_pull_request() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    let out = env.run_ok(&[
        "start", "--issue", "5", "--step", "a", "--step", "b", "--verify", "true",
    ]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.goal, format!("{TITLE} (#5)"));
    assert_eq!(m.github.issue, Some(5));
    // Every run is shown the issue's text, which the one line of GOAL cannot hold.
    let prompt = env.prompt(0);
    assert!(
        prompt.contains("They should be round, like wheels."),
        "{prompt}"
    );
    assert!(prompt.contains("issue #5"), "{prompt}");
    // The work is on the loop's own branch, pushed as it is.
    assert_eq!(env.git(&["branch", "--show-current"]).trim(), BRANCH);
    let head = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    assert_eq!(p.pushed(BRANCH).as_deref(), Some(head.as_str()));
    assert_eq!(p.pushed("main"), None, "only the loop's branch is pushed");
    let prs = p.github.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    let pr = &prs[0];
    assert_eq!(
        (
            pr.head.as_str(),
            pr.base.as_str(),
            pr.title.as_str(),
            pr.draft
        ),
        (BRANCH, "main", m.goal.as_str(), false)
    );
    assert!(pr.body.contains("## Loop report:"), "{}", pr.body);
    assert!(pr.body.contains("**DONE"), "{}", pr.body);
    assert!(pr.body.trim_end().ends_with("Closes #5"), "{}", pr.body);
    // Its URL is in M1.md, the closing line and the report.
    assert_eq!(m.github.pr.as_deref(), Some(pr.url.as_str()));
    assert!(
        stderr(&out).contains(&format!("pull request: {}", pr.url)),
        "{}",
        stderr(&out)
    );
    let status = env.run_ok(&["status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(&pr.url),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let report = env.run_ok(&["report", "--format", "md"]);
    assert!(
        String::from_utf8_lossy(&report.stdout).contains(&format!("Pull request: {}", pr.url)),
        "{}",
        String::from_utf8_lossy(&report.stdout)
    );
    // The page written when the loop ended, which its DONE message names.
    let page = std::fs::read_to_string(env.state().join("M1.report.html")).unwrap();
    assert!(
        page.contains(&pr.url),
        "the report page names the pull request"
    );
}

#[test]
fn a_runner_killed_while_opening_the_pull_request_opens_it_once_when_resumed() {
    for point in ["pr-after-intent", "pr-after-push", "pr-after-create"] {
        let Some(p) = project() else { return };
        let env = &p.env;
        env.scenario(&Scenario::new().otherwise(writes_its_file()));
        let mut c = env.cmd(&["start", "--issue", "5", "--step", "a"]);
        c.env("LOOP_CRASH_AT", point);
        let status = c.status().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "{point}: the runner did not crash there: {status:?}"
        );
        env.run_ok(&["resume"]);
        env.assert_status(Status::Done);
        let prs = p.github.pull_requests();
        assert_eq!(prs.len(), 1, "{point}: {prs:?}\n{}", env.log());
        let m = env.m1();
        assert_eq!(m.github.pr.as_deref(), Some(prs[0].url.as_str()), "{point}");
        let head = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
        assert_eq!(p.pushed(BRANCH).as_deref(), Some(head.as_str()), "{point}");
        assert_eq!(env.calls_for(1), 1, "{point}: the step ran once");
        let ops = p.github.ops();
        let created = ops.iter().filter(|o| *o == "PullRequestCreate").count();
        assert_eq!(created, 1, "{point}: {ops:?}");
    }
}

#[test]
fn a_failed_loop_comments_its_report_on_the_issue_and_a_skipped_step_makes_the_pull_request_a_draft()
 {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(
        &Scenario::new()
            .otherwise(writes_its_file())
            .step(2, Action::failed("could not finish")),
    );
    let args = [
        "start",
        "--issue",
        "5",
        "--step",
        "a",
        "--step",
        "b",
        "--max-retries",
        "1",
    ];
    env.run_exits(1, &args);
    env.assert_status(Status::Failed);
    let comments = p.github.comments();
    assert_eq!(comments.len(), 1, "{comments:?}\n{}", env.log());
    assert_eq!(comments[0].issue, 5);
    assert!(
        comments[0].body.contains("## Loop report:") && comments[0].body.contains("FAILED"),
        "{}",
        comments[0].body
    );
    assert!(env.m1().github.commented.is_some());
    assert!(p.github.pull_requests().is_empty());
    env.run_ok(&["skip", "2"]);
    let m = env.m1();
    assert_eq!(
        (m.status, m.plan.steps[1].state),
        (Status::Done, StepState::Skipped)
    );
    let prs = p.github.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert!(prs[0].draft, "a loop with a skipped step opens a draft");
    assert_eq!(p.github.comments().len(), 1, "the issue is told once");
}

#[test]
fn a_runner_killed_before_its_comment_on_the_issue_makes_it_when_the_failed_loop_is_resumed() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(Action::failed("could not finish")));
    let mut c = env.cmd(&["start", "--issue", "5", "--step", "a", "--max-retries", "1"]);
    c.env("LOOP_CRASH_AT", "before-issue-comment");
    let status = c.status().unwrap();
    assert_eq!(status.signal(), Some(9), "the runner did not crash there");
    env.assert_status(Status::Failed);
    assert!(p.github.comments().is_empty());
    env.run_exits(1, &["resume"]);
    assert_eq!(p.github.comments().len(), 1, "{}", env.log());
    env.run_exits(1, &["resume"]);
    assert_eq!(p.github.comments().len(), 1, "the issue is told once");
}

#[test]
fn no_comment_keeps_a_failed_loop_quiet_on_its_issue() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(Action::failed("could not finish")));
    env.run_exits(
        1,
        &[
            "start",
            "--issue",
            "5",
            "--no-comment",
            "--step",
            "a",
            "--max-retries",
            "1",
        ],
    );
    env.assert_status(Status::Failed);
    assert!(p.github.comments().is_empty());
    assert!(!p.github.ops().iter().any(|o| o == "CommentCreate"));
}

#[test]
fn pr_without_an_issue_opens_the_pull_request_of_the_branch_the_loop_is_on() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.git(&["switch", "-q", "-c", "feature"]);
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    env.run_ok(&["start", "tidy the widgets", "--pr", "--step", "a"]);
    env.assert_status(Status::Done);
    assert_eq!(env.git(&["branch", "--show-current"]).trim(), "feature");
    let prs = p.github.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(
        (prs[0].head.as_str(), prs[0].title.as_str()),
        ("feature", "tidy the widgets")
    );
    assert!(!prs[0].body.contains("Closes #"), "{}", prs[0].body);
    assert!(p.pushed("feature").is_some());
}

#[test]
fn an_issue_named_by_its_url_starts_a_detached_loop_that_opens_its_pull_request() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    let url = format!("https://github.com/{OWNER}/{REPO}/issues/5");
    // As the chat's `/issue` starts it: in the background.
    env.run_ok(&["start", "--detach", "--issue", &url, "--step", "a"]);
    assert!(
        wait_until(PATIENCE, || !p.github.pull_requests().is_empty()
            && env.m1().status == Status::Done
            && env.m1().github.pr.is_some()),
        "{}\n{}",
        env.text(),
        env.log()
    );
    let m = env.m1();
    assert_eq!(m.goal, format!("{TITLE} (#5)"));
    assert_eq!(m.github.issue_url.as_deref(), Some(url.as_str()));
    assert_eq!(p.github.pull_requests().len(), 1);
}

#[test]
fn a_second_loop_of_the_same_issue_updates_the_pull_request_still_open() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    env.run_ok(&["start", "--issue", "5", "--step", "a"]);
    let first = env.m1().github.pr.clone().unwrap();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").bash("echo again > again.txt")));
    env.run_ok(&["start", "--issue", "5", "--step", "b"]);
    env.assert_status(Status::Done);
    assert_eq!(env.m1().github.pr.as_deref(), Some(first.as_str()));
    assert_eq!(p.github.pull_requests().len(), 1);
    let head = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    assert_eq!(p.pushed(BRANCH).as_deref(), Some(head.as_str()));
    assert_eq!(env.git(&["rev-list", "--count", "main..HEAD"]).trim(), "2");
}

#[test]
fn an_issue_that_cannot_be_read_starts_nothing() {
    let Some(p) = project() else { return };
    let env = &p.env;
    let out = env.run_exits(2, &["start", "--issue", "6", "--step", "a"]);
    assert!(
        stderr(&out).contains("--issue 6: the issue could not be read"),
        "{}",
        stderr(&out)
    );
    assert!(!env.file.exists(), "no M1.md is written");
    assert_eq!(env.git(&["branch", "--show-current"]).trim(), "main");
    assert_eq!(env.calls().len(), 0);
}

#[test]
fn a_pull_request_that_cannot_be_opened_leaves_the_loop_done_saying_why_and_resume_opens_it() {
    let Some(p) = project() else { return };
    let env = &p.env;
    env.scenario(&Scenario::new().otherwise(writes_its_file()));
    p.github.fail("PullRequestCreate");
    env.run_ok(&["start", "--issue", "5", "--step", "a"]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.github.pr, None);
    let why = m.github.pr_error.unwrap_or_default();
    assert!(why.contains("gh pr create"), "{why}");
    env.assert_logged("pr: no pull request was opened");
    assert!(p.github.pull_requests().is_empty());
    p.github.stop_failing();
    env.run_ok(&["resume"]);
    let prs = p.github.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}\n{}", env.log());
    assert_eq!(env.m1().github.pr.as_deref(), Some(prs[0].url.as_str()));
}
