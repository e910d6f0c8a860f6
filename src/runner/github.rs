//! The GitHub CLI (`gh`), as the loop uses it: to read the issue a loop starts from
//! (`--issue`), to find or open the pull request of a DONE loop (`--pr`), and to comment on
//! the issue of a FAILED one. `gh` runs as the person runs it, in the project, with their own
//! login and configuration (`gh auth login`): the loop handles no token of its own. Each call
//! is the runner's (never a run's, in its sandbox), and each is cut off after [`PATIENCE`].

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `gh` call may take before it is killed and counted as failed.
const PATIENCE: Duration = Duration::from_secs(120);

/// How much of what a failed `gh` said is kept.
const SAID_CAP: usize = 400;

/// An issue, as `gh issue view --json` gives it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct Issue {
    pub number: u32,
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub url: String,
}

/// `gh ARGS` in `dir`, `input` on its standard input: its standard output when it succeeded.
///
/// # Errors
/// `gh` could not be started (not installed), took longer than [`PATIENCE`], or failed: the
/// command and what it said.
fn gh(dir: &Path, args: &[&str], input: Option<&str>) -> Result<String, String> {
    let shown = format!("gh {}", args.join(" "));
    let mut child = Command::new("gh")
        .args(args)
        .current_dir(dir)
        // Nothing asks a question nobody is there to answer, and nothing else is printed.
        .env("GH_PROMPT_DISABLED", "1")
        .env("GH_NO_UPDATE_NOTIFIER", "1")
        .env("NO_COLOR", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{shown}: the GitHub CLI `gh` is not installed (https://cli.github.com), or \
                 not on PATH"
            ),
            _ => format!("{shown} could not be started in {}: {e}", dir.display()),
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        // A gh that fails before reading all of it says why on stderr.
        let _ = stdin.write_all(text.as_bytes());
    }
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{shown} took longer than {}s in {}, and was stopped",
                    PATIENCE.as_secs(),
                    dir.display()
                ));
            }
            Err(e) => return Err(format!("{shown} could not be waited for: {e}")),
        }
    };
    let out = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if status.success() {
        return Ok(out);
    }
    let said = format!("{} {}", err.trim(), out.trim());
    Err(format!(
        "{shown} in {} failed ({status}): {}",
        dir.display(),
        crate::text::one_line(said.trim(), SAID_CAP)
    ))
}

/// The issue `which` names (its number, or its URL), read in `dir`'s repository.
///
/// # Errors
/// As [`gh`], or an answer that is not the issue's JSON.
pub(crate) fn issue(dir: &Path, which: &str) -> Result<Issue, String> {
    let out = gh(
        dir,
        &["issue", "view", which, "--json", "number,title,body,url"],
        None,
    )?;
    serde_json::from_str(&out).map_err(|e| {
        format!(
            "gh issue view {which} answered what is not an issue's JSON ({e}): {}",
            crate::text::one_line(&out, SAID_CAP)
        )
    })
}

/// The URL of the newest pull request of `branch` that is open (`any_state`: or closed or
/// merged); `None` when there is none.
///
/// # Errors
/// As [`gh`], or an answer that is not a list of pull requests.
pub(crate) fn pull_request_of(
    dir: &Path,
    branch: &str,
    any_state: bool,
) -> Result<Option<String>, String> {
    #[derive(serde::Deserialize)]
    struct Pr {
        url: String,
    }
    let out = gh(
        dir,
        &[
            "pr",
            "list",
            "--head",
            branch,
            "--state",
            if any_state { "all" } else { "open" },
            "--json",
            "url",
            "--limit",
            "1",
        ],
        None,
    )?;
    let prs: Vec<Pr> = serde_json::from_str(&out).map_err(|e| {
        format!(
            "gh pr list --head {branch} answered what is not a list of pull requests ({e}): {}",
            crate::text::one_line(&out, SAID_CAP)
        )
    })?;
    Ok(prs.into_iter().next().map(|p| p.url))
}

/// What a new pull request says.
pub(crate) struct NewPullRequest<'a> {
    pub branch: &'a str,
    /// The branch to merge into; `None`: the repository's default.
    pub base: Option<&'a str>,
    pub title: &'a str,
    pub body: &'a str,
    pub draft: bool,
}

/// Opens the pull request of an already pushed branch: its URL.
///
/// # Errors
/// As [`gh`], or no URL in what it printed.
pub(crate) fn create_pull_request(dir: &Path, pr: &NewPullRequest<'_>) -> Result<String, String> {
    let mut args = vec![
        "pr",
        "create",
        "--head",
        pr.branch,
        "--title",
        pr.title,
        "--body-file",
        "-",
    ];
    if let Some(base) = pr.base {
        args.extend(["--base", base]);
    }
    if pr.draft {
        args.push("--draft");
    }
    let out = gh(dir, &args, Some(pr.body))?;
    url_in(&out).ok_or_else(|| {
        format!(
            "gh pr create printed no pull request's URL: {}",
            crate::text::one_line(&out, SAID_CAP)
        )
    })
}

/// Comments `body` on the issue `which` (its number or URL): the comment's URL, as `gh` printed
/// it.
///
/// # Errors
/// As [`gh`].
pub(crate) fn comment(dir: &Path, which: &str, body: &str) -> Result<String, String> {
    let out = gh(
        dir,
        &["issue", "comment", which, "--body-file", "-"],
        Some(body),
    )?;
    Ok(url_in(&out).unwrap_or_else(|| format!("a comment on issue {which}")))
}

/// The last line of `out` that is a URL.
fn url_in(out: &str) -> Option<String> {
    out.lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with("https://") || l.starts_with("http://"))
        .map(str::to_owned)
}

/// `--issue`'s value as `gh` takes it: a number (`#` allowed before it) or a URL.
///
/// # Errors
/// Neither.
pub(crate) fn issue_arg(given: &str) -> Result<String, String> {
    let g = given.trim();
    let n = g.strip_prefix('#').unwrap_or(g);
    if n.parse::<u32>().is_ok_and(|n| n > 0) {
        return Ok(n.to_owned());
    }
    if (g.starts_with("https://") || g.starts_with("http://")) && g.contains("/issues/") {
        return Ok(g.to_owned());
    }
    Err(format!(
        "--issue {given}: expected an issue's number (42) or its URL \
         (https://github.com/OWNER/REPO/issues/42)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_is_named_by_its_number_or_its_url() {
        assert_eq!(issue_arg("42").unwrap(), "42");
        assert_eq!(issue_arg("#42").unwrap(), "42");
        assert_eq!(
            issue_arg("https://github.com/o/r/issues/7").unwrap(),
            "https://github.com/o/r/issues/7"
        );
        assert!(issue_arg("0").is_err());
        assert!(issue_arg("fix it").is_err());
        assert!(issue_arg("https://github.com/o/r/pull/7").is_err());
    }

    #[test]
    fn the_url_gh_printed_is_its_last_line_that_is_one() {
        assert_eq!(
            url_in("Creating pull request\nhttps://github.com/o/r/pull/3\n").as_deref(),
            Some("https://github.com/o/r/pull/3")
        );
        assert_eq!(url_in("nothing here"), None);
    }
}
