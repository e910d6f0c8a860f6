//! A loop and GitHub: started from an issue (`loop start --issue N`), it works on a branch of
//! its own (`loop/issue-N`); DONE, it pushes that branch and opens a pull request (`--pr`,
//! which `--issue` implies) whose body is its report; FAILED, it comments its report on the
//! issue instead (unless `--no-comment`). `gh` does the talking (see [`super::github`]).
//!
//! Pushing and opening happen once, whenever the runner is killed. Before either, the intent
//! (`GITHUB.OPENING`) is written to M1.md; the pull request's URL (`GITHUB.PR`) after. Before
//! it opens one, the runner looks the pull request up by its branch: any it finds when it
//! finds the intent and no URL (its own, opened before a kill), an open one otherwise (a loop
//! of the same issue before, which the push brought up to date). Pushing a branch again is
//! harmless. The crash points `pr-after-intent`,
//! `pr-after-push` and `pr-after-create` are the moments in between.

use std::fmt::Write as _;
use std::path::Path;

use chrono::{SecondsFormat, Utc};

use super::github::{self, Issue, NewPullRequest};
use super::{Runner, crash};
use crate::error::{Error, Result};
use crate::m1::keys::GithubKey;
use crate::m1::{Edit, M1, Status, StepState};

/// The remote a loop's branch is pushed to: the person's own, as `gh` finds the repository.
const REMOTE: &str = "origin";

/// What `loop start` was told of GitHub.
#[derive(Debug, Clone, Default)]
pub(crate) struct GithubRequest {
    /// `--issue`: the issue's number or URL.
    pub issue: Option<String>,
    /// `--pr`: open a pull request at DONE (implied by `--issue`).
    pub pr: bool,
    /// `--no-comment`: a FAILED loop says nothing on its issue.
    pub no_comment: bool,
}

/// A new loop's issue, read, and the branches it works on and asks to merge into.
pub(super) struct Begun {
    pub issue: Option<Issue>,
    pub branch: Option<String>,
    pub base: Option<String>,
}

/// The branch a loop of issue `n` works on.
#[must_use]
pub(crate) fn branch_of(n: u32) -> String {
    format!("loop/issue-{n}")
}

/// Reads the issue `loop start --issue` names, in `workdir`'s repository, before anything
/// changes: a start that cannot read it changes nothing. `None` without `--issue`.
///
/// # Errors
/// A value that names no issue (bad input), or `gh` failing (what it said).
pub(super) fn read_issue(req: &GithubRequest, workdir: &Path) -> Result<Option<Issue>> {
    let Some(given) = &req.issue else {
        return Ok(None);
    };
    let which = github::issue_arg(given).map_err(Error::bad_input)?;
    let issue = github::issue(workdir, &which).map_err(|e| {
        Error::bad_input(format!(
            "--issue {given}: the issue could not be read: {e}; nothing was started"
        ))
    })?;
    if issue.title.trim().is_empty() {
        return Err(Error::bad_input(format!(
            "--issue {given}: issue #{} has no title to make the goal of; nothing was started",
            issue.number
        )));
    }
    Ok(Some(issue))
}

/// Where a loop that opens a pull request works: `loop/issue-N` for an issue's loop (made from
/// HEAD, or taken up again where a loop of the same issue left it; see [`switch`]); a `--pr`
/// loop without an issue, on the branch it is on. The branch HEAD is on becomes the pull
/// request's base. `None` for a loop that opens none.
///
/// # Errors
/// No git repository with a commit, or a `--pr` loop on a detached HEAD.
pub(super) fn begin(
    req: &GithubRequest,
    issue: Option<Issue>,
    workdir: &Path,
) -> Result<Option<Begun>> {
    if issue.is_none() && !req.pr {
        return Ok(None);
    }
    if super::git::head(workdir).is_none() {
        return Err(Error::bad_input(format!(
            "a loop that opens a pull request works on a git branch, but {} is not a git \
             repository with a commit; nothing was started",
            workdir.display()
        )));
    }
    let current = crate::git::output(workdir, &["symbolic-ref", "--short", "-q", "HEAD"])
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty());
    let Some(issue) = issue else {
        let Some(branch) = current else {
            return Err(Error::bad_input(format!(
                "--pr opens a pull request of the branch the loop works on, but HEAD in {} is \
                 detached; switch to a branch first; nothing was started",
                workdir.display()
            )));
        };
        return Ok(Some(Begun {
            issue: None,
            branch: Some(branch),
            base: None,
        }));
    };
    let branch = branch_of(issue.number);
    let base = current.filter(|b| *b != branch);
    Ok(Some(Begun {
        issue: Some(issue),
        branch: Some(branch),
        base,
    }))
}

/// Switches `workdir` to the loop's branch, once nothing else can refuse its start: made from
/// HEAD when it is new, taken up as it is when a loop of the same issue made it before.
///
/// # Errors
/// git refusing the switch (changes of the work tree in the way): what git said.
pub(super) fn switch(begun: Option<&Begun>, workdir: &Path) -> Result<()> {
    let Some(Begun {
        issue: Some(_),
        branch: Some(branch),
        ..
    }) = begun
    else {
        return Ok(());
    };
    let current = crate::git::output(workdir, &["symbolic-ref", "--short", "-q", "HEAD"]);
    if current.as_deref().map(str::trim) == Some(branch.as_str()) {
        return Ok(());
    }
    let exists = crate::git::output(
        workdir,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_some();
    let args: Vec<&str> = if exists {
        vec!["switch", branch.as_str()]
    } else {
        vec!["switch", "-c", branch.as_str()]
    };
    crate::git::run(workdir, &args)
        .map(|_| ())
        .map_err(|e| Error::bad_input(format!("{e}; nothing was started")))
}

/// The `GITHUB:` block of a new loop (none for a loop that opens no pull request).
pub(super) fn edits(req: &GithubRequest, begun: Option<&Begun>) -> Vec<Edit> {
    let mut out = Vec::new();
    let Some(begun) = begun else {
        return out;
    };
    if let Some(i) = &begun.issue {
        out.push(GithubKey::Issue.set(i.number.to_string()));
        if !i.url.is_empty() {
            out.push(GithubKey::IssueUrl.set(i.url.clone()));
        }
        if !i.body.trim().is_empty() {
            out.push(GithubKey::IssueBody.set(i.body.trim_end().to_owned()));
        }
    }
    if let Some(b) = &begun.branch {
        out.push(GithubKey::Branch.set(b.clone()));
    }
    if let Some(b) = &begun.base {
        out.push(GithubKey::Base.set(b.clone()));
    }
    out.push(GithubKey::PullRequest.set("on"));
    if begun.issue.is_some() {
        out.push(GithubKey::Comment.set(if req.no_comment { "off" } else { "on" }));
    }
    out
}

/// The goal of an issue's loop: the issue's title, and its number.
pub(super) fn goal_of(issue: &Issue) -> String {
    format!("{} (#{})", issue.title.trim(), issue.number)
}

/// The loop's Markdown report, as it reads once the loop has ended `as_status` (at DONE, the
/// pull request is opened just before DONE is written, so that its message can name it).
fn report(file: &Path, as_status: Status) -> std::result::Result<String, String> {
    crate::report::markdown_as(file, as_status).map_err(|e| format!("{e:#}"))
}

impl Runner {
    fn github_dir(&self) -> &Path {
        &self.workdir
    }

    /// At DONE, before DONE is written and told: pushes the loop's branch and opens its pull
    /// request, once (see the module's comment). Its URL goes into M1.md (`GITHUB.PR`); a
    /// failure goes into `GITHUB.PR_ERROR` and the log, and the loop ends DONE all the same
    /// (`loop resume` tries again).
    pub(super) fn open_pull_request(&mut self) {
        let m = self.view();
        let g = &m.github;
        if !g.pull_request || g.pr.is_some() || m.parent_id.is_some() {
            return;
        }
        let Some(branch) = g.branch.clone() else {
            self.pr_failed("GITHUB.BRANCH is not set, so there is no branch to push");
            return;
        };
        let resumed = g.opening.is_some();
        if !resumed {
            let at = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
            if let Err(e) = self.commit(&[GithubKey::Opening.set(at)]) {
                self.voice.say(&format!(
                    "pr: the intent to open a pull request could not be written ({e}); none \
                     is opened"
                ));
                return;
            }
        }
        crash::point("pr-after-intent");
        let dir = self.github_dir().to_path_buf();
        if let Err(e) = crate::git::push(&dir, REMOTE, &branch) {
            self.pr_failed(&format!("the push failed: {e}"));
            return;
        }
        self.voice.say(&format!("pr: pushed {branch} to {REMOTE}"));
        crash::point("pr-after-push");
        // The pull request this loop opened before its runner was killed (whatever became of
        // it since), or one open already for the branch (a loop of the same issue before),
        // which the push has just brought up to date.
        let found = match github::pull_request_of(&dir, &branch, resumed) {
            Ok(found) => found,
            Err(e) => {
                self.pr_failed(&format!(
                    "whether a pull request of {branch} is open already could not be told: {e}"
                ));
                return;
            }
        };
        let url = if let Some(url) = found {
            self.voice.say(&format!(
                "pr: the pull request of {branch} was opened already: {url}"
            ));
            url
        } else {
            match self.create_pull_request(&m, &dir, &branch) {
                Ok(url) => url,
                Err(e) => {
                    self.pr_failed(&e);
                    return;
                }
            }
        };
        crash::point("pr-after-create");
        let edits = [GithubKey::Pr.set(url.clone()), GithubKey::PrError.remove()];
        if let Err(e) = self.commit(&edits) {
            // The pull request is open; the next runner finds it by its branch.
            self.voice
                .say(&format!("pr: {url} could not be written into M1.md: {e}"));
            return;
        }
        self.voice.say(&format!("pr: opened {url}"));
    }

    fn create_pull_request(&self, m: &M1, dir: &Path, branch: &str) -> Result<String, String> {
        let mut body = report(&self.file, Status::Done)?;
        if let Some(n) = m.github.issue {
            let _ = write!(body, "\nCloses #{n}\n");
        }
        let draft = m.plan.steps.iter().any(|s| s.state == StepState::Skipped);
        github::create_pull_request(
            dir,
            &NewPullRequest {
                branch,
                base: m.github.base.as_deref(),
                title: &m.goal,
                body: &body,
                draft,
            },
        )
    }

    fn pr_failed(&mut self, why: &str) {
        let line = crate::text::one_line(why, 400);
        let _ = self.commit(&[GithubKey::PrError.set(line.clone())]);
        self.voice
            .say(&format!("pr: no pull request was opened: {line}"));
    }

    /// A loop of an issue that ended FAILED comments its report on the issue, once (unless
    /// started with `--no-comment`): right after FAILED is written, or, by a runner killed
    /// before it could, when the loop is resumed (`before-issue-comment`).
    pub(super) fn comment_on_issue(&mut self) {
        let m = self.view();
        let g = &m.github;
        if m.status != Status::Failed
            || !g.comment
            || g.commented.is_some()
            || m.parent_id.is_some()
        {
            return;
        }
        crash::point("before-issue-comment");
        let Some(which) = g
            .issue_url
            .clone()
            .or_else(|| g.issue.map(|n| n.to_string()))
        else {
            return;
        };
        let body = match report(&self.file, Status::Failed) {
            Ok(b) => b,
            Err(e) => {
                self.voice.say(&format!(
                    "issue: no comment: the report could not be made: {e}"
                ));
                return;
            }
        };
        match github::comment(self.github_dir(), &which, &body) {
            Ok(url) => {
                let _ = self.commit(&[GithubKey::Commented.set(url.clone())]);
                self.voice
                    .say(&format!("issue: commented the report on {which}: {url}"));
            }
            Err(e) => self
                .voice
                .say(&format!("issue: no comment on {which}: {e}")),
        }
    }
}
