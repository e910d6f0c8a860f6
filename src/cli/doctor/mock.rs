//! The loopback stand-in for the model APIs that `loop doctor`'s contract check runs an agent
//! CLI against: no account, no network. It answers Anthropic's Messages API
//! (`POST /v1/messages`, streamed or not), `OpenAI`'s Responses API (`POST /v1/responses`,
//! streamed) and Google's Gemini API (`POST /v1beta/models/M:streamGenerateContent` and
//! `:generateContent`) with one text ending in a `STEP_DONE` line, as the project's scripted
//! mocks (`scripts/mock-*-api.py`) do for the tests; anything else gets a 404.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::{Value, json};

/// What every answer says.
pub(crate) const ANSWER: &str = "Checked by loop doctor.\nSTEP_DONE: the contract holds";

/// A server on a free loopback port, answering until the process ends.
#[derive(Debug)]
pub(crate) struct Mock {
    pub port: u16,
}

impl Mock {
    /// Starts it.
    ///
    /// # Errors
    /// When no loopback port can be had.
    pub(crate) fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || serve(conn));
            }
        });
        Ok(Self { port })
    }
}

/// Answers the requests of one connection (kept alive) until it closes.
fn serve(conn: TcpStream) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut input = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        );
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if input.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if input.read_exact(&mut body).is_err() {
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, kind, text) = answer(&method, &path, &request);
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
             request-id: req_doctor\r\nConnection: keep-alive\r\n\r\n",
            text.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(text.as_bytes()).is_err() {
            return;
        }
    }
}

/// The status line's tail, the content type and the body for one request.
fn answer(method: &str, path: &str, request: &Value) -> (&'static str, &'static str, String) {
    const JSON: &str = "application/json";
    const SSE: &str = "text/event-stream";
    if method == "HEAD" {
        return ("200 OK", JSON, String::new());
    }
    if method != "POST" {
        return (
            "404 Not Found",
            JSON,
            r#"{"error":{"message":"not here"}}"#.into(),
        );
    }
    if path.starts_with("/v1/messages/count_tokens") {
        return ("200 OK", JSON, json!({"input_tokens": 10}).to_string());
    }
    if path.starts_with("/v1/messages") {
        let model = request["model"].as_str().unwrap_or("claude-doctor");
        if request["stream"].as_bool() == Some(true) {
            return ("200 OK", SSE, messages_stream(model));
        }
        return ("200 OK", JSON, message(model).to_string());
    }
    if path.starts_with("/v1/responses") {
        return ("200 OK", SSE, responses_stream());
    }
    if path.contains(":countTokens") {
        return ("200 OK", JSON, json!({"totalTokens": 10}).to_string());
    }
    if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        let answer = gemini_answer(request);
        if path.contains(":streamGenerateContent") {
            return ("200 OK", SSE, format!("data: {answer}\r\n\r\n"));
        }
        return ("200 OK", JSON, answer.to_string());
    }
    (
        "404 Not Found",
        JSON,
        r#"{"error":{"message":"not here"}}"#.into(),
    )
}

fn usage() -> Value {
    json!({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0})
}

fn message(model: &str) -> Value {
    json!({"id": "msg_doctor", "type": "message", "role": "assistant", "model": model,
           "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn",
           "stop_sequence": null, "usage": usage()})
}

fn sse(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
    }
    out
}

fn messages_stream(model: &str) -> String {
    let mut start = message(model);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": ANSWER}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                   "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

/// A Gemini API answer: the text, with its usage. A request that offers no tools is one of the
/// CLI's own side calls (choosing a model, a check), which want a JSON object: it gets one
/// with the fields 0.61.0's ask for, or its retries of an unreadable answer would take
/// minutes.
fn gemini_answer(request: &Value) -> Value {
    let offers_tools = request["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|d| d["functionDeclarations"].is_array()));
    let text = if offers_tools {
        ANSWER.to_owned()
    } else {
        json!({"reasoning": "doctor", "model_choice": "flash",
               "complexity_reasoning": "doctor", "complexity_score": 1,
               "next_speaker": "user"})
        .to_string()
    };
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                           "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                             "totalTokenCount": 15},
           "modelVersion": "gemini-doctor"})
}

fn responses_stream() -> String {
    let item = json!({"type": "message", "role": "assistant", "id": "msg_doctor",
        "status": "completed",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]});
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_doctor"}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_doctor",
                   "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                             "total_tokens": 15}}}),
        ),
    ];
    sse(&events)
}
