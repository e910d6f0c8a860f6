//! The requests `loop serve` answers: the page and its two files, the JSON API the page uses
//! (and a script may), the live stream, and each loop's report page. Every request is checked
//! first ([`super::auth`]); every decision is the loop's own command ([`super::decide`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::auth::{self, Verdict};
use super::decide::{self, Ran};
use super::{events, page, view};
use crate::layout::Layout;

/// The most of a POST's body read: a choice or an answer, not a file.
const MAX_BODY: u64 = 64 * 1024;

/// The most of a loop's log the page gets at first: its end.
const MAX_LOG: u64 = 512 * 1024;

/// What every request handler shares.
#[derive(Debug)]
pub(super) struct Server {
    /// The loop of `--file` (listed too, when it is one).
    pub here: PathBuf,
    pub gate: auth::Gate,
    pub hub: Arc<events::Hub>,
    pub program: decide::Loop,
}

/// An answer, before it goes out.
#[derive(Debug)]
pub(super) struct Reply {
    pub status: u16,
    pub kind: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
    /// The Content-Security-Policy it goes with.
    pub csp: &'static str,
}

impl Reply {
    fn new(status: u16, kind: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            kind,
            body: body.into(),
            headers: Vec::new(),
            csp: page::CSP,
        }
    }

    fn json(status: u16, value: &impl Serialize) -> Self {
        Self::new(status, "application/json", view::json(value))
    }

    /// `{"error": why}`.
    fn error(status: u16, why: &str) -> Self {
        Self::json(status, &json!({ "error": why }))
    }

    fn with(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }
}

fn header<'a>(req: &'a tiny_http::Request, name: &str) -> Option<&'a str> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// Answers `req`, whatever it is.
pub(super) fn handle(s: &Server, mut req: tiny_http::Request) {
    let url = req.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let post = *req.method() == tiny_http::Method::Post;
    let get = matches!(
        req.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let verdict = s.gate.check(&auth::Seen {
        post,
        host: header(&req, "Host"),
        origin: header(&req, "Origin"),
        cookie: header(&req, "Cookie"),
        authorization: header(&req, "Authorization"),
        csrf: header(&req, auth::CSRF_HEADER),
        query_token: auth::query_value(query, "token"),
    });
    let reply = match verdict {
        Verdict::WrongHost => Reply::error(
            403,
            "this server answers only to its own address or localhost",
        ),
        Verdict::NoToken => Reply::error(
            401,
            "no token: open the address `loop serve` printed (…/?token=…), or send the token \
             as `Authorization: Bearer TOKEN`",
        ),
        Verdict::NoCsrf => Reply::error(
            403,
            "a request that changes something is a POST from this server's page, with the \
             token in its X-Loop-CSRF header",
        ),
        Verdict::Allowed if get && path == "/api/events" => match s.hub.join() {
            Some(ticket) => return s.hub.stream(&ticket, req.into_writer()),
            None => Reply::error(
                503,
                &format!(
                    "the live stream has {} clients already",
                    events::MAX_CLIENTS
                ),
            ),
        },
        Verdict::Allowed if get => answer_get(s, path, query),
        Verdict::Allowed if post => {
            let mut body = String::new();
            let read = req
                .as_reader()
                .take(MAX_BODY)
                .read_to_string(&mut body)
                .is_ok();
            let peer = req.remote_addr().map(std::net::SocketAddr::ip);
            if read {
                answer_post(s, path, &body, peer)
            } else {
                Reply::error(400, "the body is not UTF-8 text")
            }
        }
        Verdict::Allowed => {
            Reply::error(405, "only GET and POST").with("Allow", "GET, POST".into())
        }
    };
    send(req, reply);
}

/// Writes `reply` with the headers every answer has.
fn send(req: tiny_http::Request, reply: Reply) {
    let mut r = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    let mut headers = vec![
        ("Content-Type", reply.kind.to_owned()),
        ("Content-Security-Policy", reply.csp.to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        ("Referrer-Policy", "no-referrer".to_owned()),
        ("Cache-Control", "no-store".to_owned()),
    ];
    headers.extend(reply.headers);
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            r.add_header(h);
        }
    }
    let _ = req.respond(r);
}

/// `/api/loops/ID/REST` as `(ID, REST)` (`REST` empty for the loop itself).
fn loop_path<'a>(path: &'a str, prefix: &str) -> Option<(&'a str, &'a str)> {
    let rest = path.strip_prefix(prefix)?;
    let (id, more) = rest.split_once('/').unwrap_or((rest, ""));
    (!id.is_empty()).then_some((id, more))
}

fn answer_get(s: &Server, path: &str, query: &str) -> Reply {
    match path {
        "/" => {
            if auth::query_value(query, "token").is_some() {
                // The token leaves the address bar, kept in the page's cookie instead.
                return Reply::new(303, "text/plain", "to the page")
                    .with("Location", "/".into())
                    .with("Set-Cookie", s.gate.set_cookie());
            }
            Reply::new(200, "text/html; charset=utf-8", page::html(s.gate.token()))
        }
        "/app.js" => Reply::new(200, "text/javascript; charset=utf-8", page::JS),
        "/app.css" => Reply::new(200, "text/css; charset=utf-8", page::CSS),
        "/api/loops" => Reply::json(200, &json!({ "loops": view::all(&s.here) })),
        _ => {
            if let Some((id, rest)) = loop_path(path, "/api/loops/") {
                return loop_get(s, id, rest, query);
            }
            if let Some((id, "report")) = loop_path(path, "/loops/") {
                return report(s, id);
            }
            Reply::error(404, &format!("nothing at {path}"))
        }
    }
}

fn loop_get(s: &Server, id: &str, rest: &str, query: &str) -> Reply {
    let Some(file) = view::find(&s.here, id) else {
        return no_loop(id);
    };
    match rest {
        "" => match view::one(&file) {
            Some(v) => Reply::json(200, &v),
            None => no_loop(id),
        },
        "log" => {
            let from = auth::query_value(query, "from").and_then(|f| f.parse().ok());
            Reply::json(200, &log(&file, from))
        }
        _ => Reply::error(404, &format!("nothing at /api/loops/{id}/{rest}")),
    }
}

fn no_loop(id: &str) -> Reply {
    Reply::error(
        404,
        &format!("no loop {id} (`GET /api/loops` lists this user's loops)"),
    )
}

/// The loop's part of `loop.log` from byte `from` on (at first, its end), whole lines only:
/// `{from, to, text}`, `to` being where the next read starts.
fn log(file: &Path, from: Option<u64>) -> Value {
    let path = Layout::of(file).log();
    let Ok(mut f) = std::fs::File::open(&path) else {
        return json!({ "from": 0, "to": 0, "text": "" });
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let start = match from {
        Some(n) if n <= len => n,
        _ => len.saturating_sub(MAX_LOG),
    };
    let mut bytes = Vec::new();
    let _ = std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(start));
    let _ = f.take(len - start).read_to_end(&mut bytes);
    // Whole lines only: the rest is read next time.
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(end);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    let mut first = start;
    if from.is_none() {
        // A cut line at the start of the end, and the part of the loops before this one.
        if start > 0
            && let Some(nl) = text.find('\n')
        {
            text.drain(..=nl);
            first += nl as u64 + 1;
        }
        let started = crate::m1::load(file).ok().and_then(|d| d.view().started_at);
        let part = crate::decision_log::this_loops_part(&text, started);
        text.drain(..part);
        first += part as u64;
    }
    json!({ "from": first, "to": start + end as u64, "text": text })
}

/// The loop's report page, as `loop report` writes it, made afresh (and not written).
fn report(s: &Server, id: &str) -> Reply {
    let Some(file) = view::find(&s.here, id) else {
        return no_loop(id);
    };
    match crate::report::gather(&file) {
        Ok(r) => {
            let mut reply = Reply::new(
                200,
                "text/html; charset=utf-8",
                crate::report::render(&r, crate::report::Format::Html),
            );
            reply.csp = page::REPORT_CSP;
            reply
        }
        Err(e) => Reply::error(500, &format!("no report of {}: {e}", file.display())),
    }
}

/// What a decision's body may hold.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    choice: Option<String>,
    /// The fingerprint of the gate as the page showed it: a decision on a gate that changed
    /// since is refused.
    shown: Option<String>,
    step: Option<u32>,
}

fn answer_post(s: &Server, path: &str, body: &str, peer: Option<std::net::IpAddr>) -> Reply {
    let Some((id, rest)) = loop_path(path, "/api/loops/") else {
        return Reply::error(404, &format!("nothing to POST at {path}"));
    };
    let body: Body = if body.trim().is_empty() {
        Body::default()
    } else {
        match serde_json::from_str(body) {
            Ok(b) => b,
            Err(e) => return Reply::error(400, &format!("the body is not what {path} takes: {e}")),
        }
    };
    let Some(file) = view::find(&s.here, id) else {
        return no_loop(id);
    };
    let project = view::one(&file).map_or_else(
        || Layout::of(&file).state_dir().join(".."),
        |v| PathBuf::from(v.project),
    );
    let by = decide::who(peer);
    let step = body.step.map(|n| n.to_string());
    let run = |args: Vec<String>| s.program.run(&file, &project, &args);
    match rest.split_once('/') {
        Some(("gates", gate)) => {
            let Some(choice) = body.choice.as_deref().filter(|c| !c.trim().is_empty()) else {
                return Reply::error(400, "a decision needs {\"choice\": …}");
            };
            let known = crate::m1::load(&file)
                .ok()
                .is_some_and(|d| d.view().gate(gate).is_some());
            if !known {
                return Reply::error(404, &format!("the loop {id} has no gate {gate}"));
            }
            decided(&run(decide::answer_args(
                gate,
                choice,
                body.shown.as_deref(),
                &by,
            )))
        }
        None => match rest {
            "stop" => done(&run(vec!["stop".into()])),
            "resume" => done(&run(vec!["resume".into(), "--detach".into()])),
            "retry" => done(&run(["retry".to_owned(), "--detach".to_owned()]
                .into_iter()
                .chain(step)
                .collect())),
            "skip" => decided(&run(["skip".to_owned()]
                .into_iter()
                .chain(step)
                .chain(["--by".into(), by, "--detach".into(), "--json".into()])
                .collect())),
            _ => Reply::error(404, &format!("nothing to POST at {path}")),
        },
        Some(_) => Reply::error(404, &format!("nothing to POST at {path}")),
    }
}

/// A decision's answer: 200 once, 409 with what was decided (by whom, when) for every other,
/// 409 too when what the page showed has changed since; 422 when it does not fit the gate.
fn decided(ran: &Ran) -> Reply {
    let Some(out) = ran.outcome() else {
        return failed(ran);
    };
    let status = match out["outcome"].as_str() {
        Some("decided") => 200,
        Some("already" | "stale") => 409,
        Some("refused") => 422,
        _ => 500,
    };
    Reply::json(status, &out)
}

/// A loop command's answer: 200 when it did it, 409 with what it said when it did not.
fn done(ran: &Ran) -> Reply {
    match ran.code {
        Some(0) => Reply::json(200, &json!({ "outcome": "done", "message": ran.output })),
        Some(code) => Reply::json(
            409,
            &json!({ "outcome": "not done", "exit": code, "message": ran.output }),
        ),
        None => failed(ran),
    }
}

fn failed(ran: &Ran) -> Reply {
    Reply::json(
        500,
        &json!({ "outcome": "error", "exit": ran.code, "message": ran.output }),
    )
}
