//! A fake Telegram Bot API on 127.0.0.1, for tests, on the crate's loopback HTTP server
//! (`m1loop::loopback`): it records every request and answers `sendMessage` and `getUpdates` the way the
//! real API does, or with scripted failures (429 with `retry_after`, 5xx, 400, 409, a dropped
//! connection), or plays hung: it accepts every connection and reads every request, then holds
//! it unanswered until told to answer again (as a hung proxy or a stalled server does).
//! Nothing here touches the real network.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use m1loop::loopback::{Exchange, Server};

use serde_json::{Value, json};

/// A scripted answer to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Do what the real API would.
    #[expect(
        dead_code,
        reason = "what an unscripted request gets; no test scripts it yet"
    )]
    Ok,
    /// 429 with `parameters.retry_after` seconds.
    RetryAfter(u64),
    /// 500 Internal Server Error.
    ServerError,
    /// 400 with this description.
    BadRequest(String),
    /// 409: another getUpdates poller.
    Conflict,
    /// Close the connection without answering.
    Drop,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The API method, e.g. `sendMessage`.
    pub method: String,
    /// The token from the `/bot<token>/` path segment.
    pub token: String,
    pub body: Value,
}

/// A message the server accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub chat_id: String,
    pub text: String,
    pub parse_mode: Option<String>,
    /// Its buttons (`reply_markup`), if any.
    pub markup: Option<Value>,
}

impl Sent {
    /// The `callback_data` of its buttons, in order.
    pub fn buttons(&self) -> Vec<String> {
        self.markup
            .as_ref()
            .and_then(|m| m["inline_keyboard"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
            .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
            .collect()
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    send_script: VecDeque<Reply>,
    updates_script: VecDeque<Reply>,
    updates: Vec<Value>,
    sent: Vec<Sent>,
    /// Playing hung: requests are read, then held unanswered.
    hung: bool,
    /// Requests held now, their connections still open.
    held: usize,
    /// Held requests whose client gave up (closed the connection) before an answer.
    abandoned: usize,
}

/// The running fake; it stops when dropped.
pub struct FakeTelegram {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl FakeTelegram {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let server = Server::start(move |ex| serve(ex, &st)).expect("a loopback port");
        Self { server, state }
    }

    /// The value for `TELEGRAM_API_BASE`.
    pub fn base_url(&self) -> String {
        self.server.url()
    }

    /// A base URL where nothing listens: a server that is down.
    pub fn down_base_url() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}")
    }

    /// From now on, holds every request unanswered (its connection open) until
    /// [`FakeTelegram::answer_again`].
    pub fn hang(&self) {
        self.state.lock().unwrap().hung = true;
    }

    /// Answers the requests held (those whose client still waits) and every later one.
    pub fn answer_again(&self) {
        self.state.lock().unwrap().hung = false;
    }

    /// Requests held unanswered right now, their clients still waiting on open connections.
    pub fn held(&self) -> usize {
        self.state.lock().unwrap().held
    }

    /// Held requests whose client gave up waiting (closed the connection) before an answer.
    pub fn abandoned(&self) -> usize {
        self.state.lock().unwrap().abandoned
    }

    /// Answers for the next `sendMessage` requests, in order; after them, [`Reply::Ok`].
    pub fn script_send(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().send_script.extend(replies);
    }

    /// Answers for the next `getUpdates` requests, in order; after them, the real behaviour.
    pub fn script_updates(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().updates_script.extend(replies);
    }

    /// Queues the update `make` builds from its id (and what the server holds); returns the id.
    fn push(&self, make: impl FnOnce(i64, &State) -> Value) -> i64 {
        let mut s = self.state.lock().unwrap();
        let id = 1000 + i64::try_from(s.updates.len()).unwrap();
        let update = make(id, &s);
        s.updates.push(update);
        id
    }

    /// Queues a text message from `chat_id`; returns its update id.
    pub fn push_message(&self, chat_id: i64, text: &str) -> i64 {
        self.push(|id, _| json!({ "update_id": id, "message": message(id, chat_id, text) }))
    }

    /// Queues a tap by user `from` on a button of message `message_id` (as sent by this
    /// server, in chat `chat_id`), with `data`; returns its update id.
    pub fn push_tap(&self, chat_id: i64, from: i64, message_id: usize, data: &str) -> i64 {
        self.push(|id, s| {
            let text = message_id
                .checked_sub(1)
                .and_then(|i| s.sent.get(i))
                .map(|m| m.text.clone())
                .unwrap_or_default();
            json!({
                "update_id": id,
                "callback_query": {
                    "id": format!("cb{id}"),
                    "from": { "id": from, "is_bot": false, "first_name": "T", "username": format!("user{from}") },
                    "chat_instance": "1",
                    "data": data,
                    "message": {
                        "message_id": message_id, "date": 0, "text": text,
                        "chat": { "id": chat_id, "type": "private" },
                    },
                }
            })
        })
    }

    /// Queues a text message from `chat_id` replying to message `reply_to`; returns its
    /// update id.
    pub fn push_reply(&self, chat_id: i64, text: &str, reply_to: usize) -> i64 {
        self.push(|id, _| {
            let mut m = message(id, chat_id, text);
            m["reply_to_message"] = json!({
                "message_id": reply_to, "date": 0, "chat": { "id": chat_id, "type": "private" },
            });
            json!({ "update_id": id, "message": m })
        })
    }

    /// The bodies of the requests of `method`, in order.
    pub fn bodies(&self, method: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method)
            .map(|r| r.body)
            .collect()
    }

    /// Messages accepted so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.state.lock().unwrap().sent.clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many requests of `method` arrived.
    pub fn count(&self, method: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }
}

/// A text message `id` from the person of the private chat `chat_id`.
fn message(id: i64, chat_id: i64, text: &str) -> Value {
    json!({
        "message_id": id, "date": 0, "text": text,
        "chat": { "id": chat_id, "type": "private" },
        "from": { "id": chat_id, "is_bot": false, "first_name": "T" },
    })
}

fn serve(ex: Exchange, state: &Mutex<State>) {
    let rest = ex.path.strip_prefix("/bot").unwrap_or_default();
    let (token, method) = rest.rsplit_once('/').unwrap_or((rest, ""));
    let req = Request {
        method: method.to_string(),
        token: token.to_string(),
        body: ex.json(),
    };
    if !held_until_answered(&ex, state) {
        state.lock().unwrap().requests.push(req);
        ex.hang_up();
        return;
    }
    let answer = answer(&req, state);
    state.lock().unwrap().requests.push(req);
    match answer {
        Answer::Respond(status, json) => {
            ex.respond(status, "application/json", &[], json.to_string());
        }
        Answer::HangUp => ex.hang_up(),
    }
}

/// While the server plays hung, holds a request unanswered until it answers again; false if
/// the client gave up first (closed the connection: nothing is answered or recorded as sent)
/// or the server is stopping.
fn held_until_answered(ex: &Exchange, state: &Mutex<State>) -> bool {
    {
        let mut s = state.lock().unwrap();
        if !s.hung {
            return true;
        }
        s.held += 1;
    }
    let answered = ex.hold_while(|| state.lock().unwrap().hung);
    let mut s = state.lock().unwrap();
    s.held -= 1;
    if !answered {
        s.abandoned += 1;
    }
    answered
}

/// What the server does with a request.
enum Answer {
    /// An HTTP status and a JSON body.
    Respond(u16, Value),
    /// Close the connection without answering.
    HangUp,
}

fn error(status: u16, description: &str) -> Answer {
    Answer::Respond(
        status,
        json!({"ok": false, "error_code": status, "description": description}),
    )
}

/// The scripted answer; `None` for [`Reply::Ok`], which is what the real API would do.
fn scripted(reply: Reply) -> Option<Answer> {
    match reply {
        Reply::Ok => None,
        Reply::RetryAfter(s) => Some(Answer::Respond(
            429,
            json!({"ok": false, "error_code": 429,
                   "description": format!("Too Many Requests: retry after {s}"),
                   "parameters": {"retry_after": s}}),
        )),
        Reply::ServerError => Some(error(500, "Internal Server Error")),
        Reply::BadRequest(d) => Some(error(400, &d)),
        Reply::Conflict => Some(error(
            409,
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        )),
        Reply::Drop => Some(Answer::HangUp),
    }
}

fn answer(req: &Request, state: &Mutex<State>) -> Answer {
    match req.method.as_str() {
        "sendMessage" => {
            let mut s = state.lock().unwrap();
            if let Some(r) = s.send_script.pop_front().and_then(scripted) {
                return r;
            }
            let chat_id = match &req.body["chat_id"] {
                Value::String(c) => c.clone(),
                other => other.to_string(),
            };
            let text = req.body["text"].as_str().unwrap_or_default().to_string();
            if text.is_empty() || text.encode_utf16().count() > 4096 {
                return error(400, "Bad Request: message text is empty or too long");
            }
            let parse_mode = req.body["parse_mode"].as_str().map(str::to_string);
            s.sent.push(Sent {
                chat_id,
                text: text.clone(),
                parse_mode,
                markup: req.body.get("reply_markup").cloned(),
            });
            let id = s.sent.len();
            Answer::Respond(
                200,
                json!({"ok": true, "result": {"message_id": id, "text": text}}),
            )
        }
        "getUpdates" => {
            if let Some(r) = state
                .lock()
                .unwrap()
                .updates_script
                .pop_front()
                .and_then(scripted)
            {
                return r;
            }
            let offset = req.body["offset"].as_i64().unwrap_or(0);
            // A short long-poll: answer as soon as there is something, else after 200 ms.
            let deadline = Instant::now() + Duration::from_millis(200);
            loop {
                let found: Vec<Value> = state
                    .lock()
                    .unwrap()
                    .updates
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .cloned()
                    .collect();
                if !found.is_empty() || Instant::now() > deadline {
                    return Answer::Respond(200, json!({"ok": true, "result": found}));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        "answerCallbackQuery" => Answer::Respond(200, json!({"ok": true, "result": true})),
        "getMe" => Answer::Respond(
            200,
            json!({"ok": true, "result": {"id": 4242, "is_bot": true, "first_name": "Loop",
                   "username": "fake_loop_bot"}}),
        ),
        "editMessageText" => Answer::Respond(
            200,
            json!({"ok": true, "result": {"message_id": req.body["message_id"], "text": req.body["text"]}}),
        ),
        _ => error(404, "Not Found"),
    }
}
