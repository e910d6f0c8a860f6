//! The loopback stand-in for the model APIs that `loop doctor`'s contract check runs an agent
//! CLI against: no account, no network. It answers Anthropic's Messages API
//! (`POST /v1/messages`, streamed or not), `OpenAI`'s Responses API (`POST /v1/responses`,
//! streamed) and Google's Gemini API (`POST /v1beta/models/M:streamGenerateContent` and
//! `:generateContent`) with one text ending in a `STEP_DONE` line, as the project's scripted
//! mocks (`scripts/mock-*-api.py`) do for the tests; anything else gets a 404.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// What every answer says.
pub(crate) const ANSWER: &str = "Checked by loop doctor.\nSTEP_DONE: the contract holds";

/// A server on a free loopback port, answering until it is dropped.
#[derive(Debug)]
pub(crate) struct Mock {
    server: crate::loopback::Server,
}

impl Mock {
    /// Starts it.
    ///
    /// # Errors
    /// When no loopback port can be had.
    pub(crate) fn start() -> std::io::Result<Self> {
        let server = crate::loopback::Server::start(|ex| {
            let (status, kind, text) = answer(&ex.method, &ex.path, &ex.json());
            ex.respond(status, kind, &[("request-id", "req_doctor")], text);
        })?;
        Ok(Self { server })
    }

    /// The loopback port it answers on.
    pub(crate) fn port(&self) -> u16 {
        self.server.port()
    }
}

/// The status, the content type and the body for one request.
fn answer(method: &str, path: &str, request: &Value) -> (u16, &'static str, String) {
    const JSON: &str = "application/json";
    const SSE: &str = "text/event-stream";
    if method == "HEAD" {
        return (200, JSON, String::new());
    }
    if method != "POST" {
        return (404, JSON, r#"{"error":{"message":"not here"}}"#.into());
    }
    if path.starts_with("/v1/messages/count_tokens") {
        return (200, JSON, json!({"input_tokens": 10}).to_string());
    }
    if path.starts_with("/v1/messages") {
        let model = request["model"].as_str().unwrap_or("claude-doctor");
        if request["stream"].as_bool() == Some(true) {
            return (200, SSE, messages_stream(model));
        }
        return (200, JSON, message(model).to_string());
    }
    if path.starts_with("/v1/responses") {
        return (200, SSE, responses_stream());
    }
    if path.contains(":countTokens") {
        return (200, JSON, json!({"totalTokens": 10}).to_string());
    }
    if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        let answer = gemini_answer(request);
        if path.contains(":streamGenerateContent") {
            return (200, SSE, format!("data: {answer}\r\n\r\n"));
        }
        return (200, JSON, answer.to_string());
    }
    (404, JSON, r#"{"error":{"message":"not here"}}"#.into())
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
