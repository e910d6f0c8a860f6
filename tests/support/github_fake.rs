//! A stand-in of GitHub's GraphQL API for the real GitHub CLI (`gh`), for tests. `gh` is
//! pointed at it by its own `http_unix_socket` setting (in a `GH_CONFIG_DIR` of the test's):
//! every request of `gh` then goes, as plain HTTP, over a Unix socket in the test's directory,
//! whatever host it names, so no TLS certificate is needed and nothing can reach the network.
//! A fake token (`GH_TOKEN`) makes `gh` count as logged in to github.com.
//!
//! It answers the queries of the `gh` commands the loop runs (`issue view`, `pr list`,
//! `pr create`, `issue comment`) from what the test gave it (its issues), keeps the pull
//! requests and comments made, and records every operation, so a test can say what was opened
//! and how often.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// The repository `gh` finds in the tests' remote (`https://github.com/OWNER/REPO.git`).
pub const OWNER: &str = "octo";
pub const REPO: &str = "widgets";

/// A pull request the stand-in was asked to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u32,
    pub url: String,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
}

/// A comment made on an issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The issue's number.
    pub issue: u32,
    pub body: String,
}

#[derive(Default)]
struct State {
    issues: BTreeMap<u32, (String, String)>,
    prs: Vec<PullRequest>,
    comments: Vec<Comment>,
    /// Each GraphQL operation's name, in order.
    ops: Vec<String>,
    /// Operations answered with an error instead.
    failing: Vec<String>,
}

/// The running stand-in; it stops when dropped.
pub struct FakeGitHub {
    dir: PathBuf,
    http: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    state: Arc<Mutex<State>>,
}

/// Whether the GitHub CLI is installed here. Where it is not, says `skipped:` (once); CI
/// installs it (`.ci/run`).
pub fn gh_here() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        let ok = Command::new("gh")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            println!(
                "skipped: the GitHub CLI (`gh`) is not installed here, so the tests of \
                 --issue and --pr do not run"
            );
        }
        ok
    })
}

impl FakeGitHub {
    /// Listens on a socket in `dir` (made if missing), where `gh`'s configuration goes too.
    pub fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("gh-config")).unwrap();
        let socket = dir.join("github.sock");
        std::fs::write(
            dir.join("gh-config/config.yml"),
            format!("http_unix_socket: {}\n", socket.display()),
        )
        .unwrap();
        let http = Arc::new(tiny_http::Server::http_unix(&socket).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let (h, st, s) = (http.clone(), stop.clone(), state.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok(Some(mut request)) = h.recv_timeout(Duration::from_millis(50)) else {
                    continue;
                };
                let mut body = String::new();
                let _ = request.as_reader().read_to_string(&mut body);
                let answer = answer(&s, &body);
                let response = tiny_http::Response::from_string(answer.to_string()).with_header(
                    "Content-Type: application/json"
                        .parse::<tiny_http::Header>()
                        .unwrap(),
                );
                let _ = request.respond(response);
            }
        });
        Self {
            dir: dir.to_path_buf(),
            http,
            stop,
            thread: Some(thread),
            state,
        }
    }

    /// Issue `n` exists, with this title and text.
    pub fn issue(&self, n: u32, title: &str, body: &str) {
        self.state
            .lock()
            .unwrap()
            .issues
            .insert(n, (title.to_owned(), body.to_owned()));
    }

    /// The GraphQL operation `op` (`PullRequestCreate`, …) is answered with an error.
    pub fn fail(&self, op: &str) {
        self.state.lock().unwrap().failing.push(op.to_owned());
    }

    /// Every operation is answered again as GitHub would.
    pub fn stop_failing(&self) {
        self.state.lock().unwrap().failing.clear();
    }

    /// The variables that point `gh` here, for a `loop` run.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "GH_CONFIG_DIR",
                self.dir.join("gh-config").display().to_string(),
            ),
            ("GH_TOKEN", "gho_stand_in_token".to_owned()),
            // Nothing of the machine's own `gh` set-up.
            ("GH_HOST", "github.com".to_owned()),
            ("GH_ENTERPRISE_TOKEN", String::new()),
            ("GH_REPO", String::new()),
        ]
    }

    pub fn pull_requests(&self) -> Vec<PullRequest> {
        self.state.lock().unwrap().prs.clone()
    }

    pub fn comments(&self) -> Vec<Comment> {
        self.state.lock().unwrap().comments.clone()
    }

    /// Every GraphQL operation `gh` asked for, in order.
    pub fn ops(&self) -> Vec<String> {
        self.state.lock().unwrap().ops.clone()
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The name of the operation in a GraphQL document (`query IssueByNumber(…)`).
fn operation(query: &str) -> String {
    let at = ["query ", "mutation "]
        .iter()
        .filter_map(|k| query.find(k).map(|i| i + k.len()))
        .min();
    at.map(|i| {
        query[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    })
    .unwrap_or_default()
}

fn issue_url(n: u32) -> String {
    format!("https://github.com/{OWNER}/{REPO}/issues/{n}")
}

fn pr_node(p: &PullRequest) -> Value {
    json!({
        "url": p.url, "id": format!("PR_{}", p.number), "number": p.number, "state": "OPEN",
        "baseRefName": p.base, "headRefName": p.head, "isCrossRepository": false,
        "isDraft": p.draft, "title": p.title,
        "headRepositoryOwner": {"id": "U_1", "login": OWNER},
    })
}

/// What GitHub would answer the GraphQL request `body`.
fn answer(state: &Mutex<State>, body: &str) -> Value {
    let req: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let op = operation(req["query"].as_str().unwrap_or_default());
    let vars = &req["variables"];
    let mut s = state.lock().unwrap();
    s.ops.push(op.clone());
    if s.failing.contains(&op) {
        return json!({"errors": [{"message": format!("the stand-in fails {op}")}]});
    }
    match op.as_str() {
        "IssueByNumber" => {
            let n = u32::try_from(vars["number"].as_u64().unwrap_or(0)).unwrap_or(0);
            match s.issues.get(&n) {
                Some((title, text)) => json!({"data": {"repository": {
                    "hasIssuesEnabled": true,
                    "issue": {
                        "__typename": "Issue", "id": format!("I_{n}"), "number": n,
                        "title": title, "body": text, "url": issue_url(n),
                    },
                }}}),
                None => json!({"errors": [{
                    "type": "NOT_FOUND",
                    "path": ["repository", "issue"],
                    "message": format!(
                        "Could not resolve to an issue or pull request with the number of {n}."
                    ),
                }]}),
            }
        }
        "RepositoryInfo" => json!({"data": {"repository": {
            "id": "R_1", "name": REPO, "owner": {"login": OWNER}, "hasIssuesEnabled": true,
            "description": "", "hasWikiEnabled": false, "viewerPermission": "WRITE",
            "defaultBranchRef": {"name": "main"}, "parent": null,
            "mergeCommitAllowed": true, "rebaseMergeAllowed": true, "squashMergeAllowed": true,
        }}}),
        "PullRequestForBranch" | "PullRequestList" => {
            let head = vars["headRefName"]
                .as_str()
                .or_else(|| vars["headBranch"].as_str())
                .unwrap_or_default();
            let nodes: Vec<Value> = s
                .prs
                .iter()
                .rev()
                .filter(|p| p.head == head)
                .map(pr_node)
                .collect();
            json!({"data": {"repository": {
                "defaultBranchRef": {"name": "main"},
                "pullRequests": {
                    "totalCount": nodes.len(), "nodes": nodes,
                    "pageInfo": {"hasNextPage": false, "endCursor": ""},
                },
            }}})
        }
        "PullRequestCreate" => create_pull_request(&mut s, &vars["input"]),
        "CommentCreate" => add_comment(&mut s, &vars["input"]),
        _ => json!({"errors": [{"message": format!("the stand-in does not know {op}")}]}),
    }
}

/// `createPullRequest`: the pull request is kept, and its URL answered.
fn create_pull_request(s: &mut State, input: &Value) -> Value {
    let number = u32::try_from(100 + s.prs.len()).unwrap();
    let pr = PullRequest {
        number,
        url: format!("https://github.com/{OWNER}/{REPO}/pull/{number}"),
        head: input["headRefName"].as_str().unwrap_or_default().to_owned(),
        base: input["baseRefName"].as_str().unwrap_or_default().to_owned(),
        title: input["title"].as_str().unwrap_or_default().to_owned(),
        body: input["body"].as_str().unwrap_or_default().to_owned(),
        draft: input["draft"].as_bool().unwrap_or(false),
    };
    let url = pr.url.clone();
    s.prs.push(pr);
    json!({"data": {"createPullRequest": {"pullRequest": {
        "id": format!("PR_{number}"), "url": url,
    }}}})
}

/// `addComment`: the comment is kept, on the issue whose id (`I_N`) it names.
fn add_comment(s: &mut State, input: &Value) -> Value {
    let issue = input["subjectId"]
        .as_str()
        .and_then(|id| id.strip_prefix("I_"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let n = s.comments.len() + 1;
    s.comments.push(Comment {
        issue,
        body: input["body"].as_str().unwrap_or_default().to_owned(),
    });
    json!({"data": {"addComment": {"commentEdge": {"node": {
        "url": format!("{}#issuecomment-{n}", issue_url(issue)),
    }}}}})
}
