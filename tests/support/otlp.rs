//! A loopback OTLP/HTTP trace receiver for tests: a hand-written HTTP/1.1 server on
//! 127.0.0.1 that takes `POST /v1/traces`, decodes the body as the exporter sent it
//! (`application/x-protobuf` or `application/json`, with the OTLP messages of
//! `opentelemetry-proto`), records every span, and answers 200. Or it plays a dead collector:
//! it accepts each connection, reads the request, and never answers.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};

/// One span as received, its ids in hex.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub id: String,
    /// Empty for a root span.
    pub parent: String,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: BTreeMap<String, Value>,
    /// Each event's name and attributes.
    pub events: Vec<(String, BTreeMap<String, Value>)>,
    /// `error` when its status says so, else empty.
    pub status: String,
    /// The `service.name` of its resource.
    pub service: String,
    /// The content type of the request that carried it.
    pub content_type: String,
}

impl Span {
    /// Attribute `key` as text (numbers too), or `""`.
    pub fn attr(&self, key: &str) -> String {
        match self.attributes.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    }
}

/// The receiver; it stops with the test process.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT`: what `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    /// Connections accepted (a dead collector counts them too).
    connections: Arc<Mutex<usize>>,
}

impl Receiver {
    /// A collector that answers.
    pub fn start() -> Self {
        Self::listen(true)
    }

    /// A collector that accepts and reads every request, and never answers.
    pub fn silent() -> Self {
        Self::listen(false)
    }

    fn listen(answers: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (s, c) = (spans.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                *c.lock().unwrap() += 1;
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s, answers));
            }
        });
        Self {
            endpoint,
            spans,
            connections,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

/// A span with no parent.
pub fn is_root(s: &Span) -> bool {
    s.parent.is_empty() || s.parent.chars().all(|c| c == '0')
}

/// The spans named `op` (`gen_ai.operation.name`).
pub fn of_op<'a>(spans: &'a [Span], op: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.attr("gen_ai.operation.name") == op)
        .collect()
}

/// What must hold of every trace of a loop: one trace id, one loop span id (emitted once
/// per runner), every other span a child of it. The loop span's id.
pub fn assert_one_trace(spans: &[Span]) -> String {
    let traces: BTreeSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "one trace: {spans:#?}");
    let loops = of_op(spans, "invoke_workflow");
    let ids: BTreeSet<&str> = loops.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), 1, "one loop span: {loops:#?}");
    assert!(loops.iter().all(|s| is_root(s)), "{loops:#?}");
    let root = loops[0].id.clone();
    for s in spans.iter().filter(|s| s.id != root) {
        assert_eq!(s.parent, root, "a child of the loop span: {s:#?}");
        assert!(s.start_ns <= s.end_ns && s.start_ns > 0, "{s:#?}");
    }
    root
}

/// An endpoint where nothing listens: each connection is refused.
pub fn refused_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    endpoint
}

/// Requests of one connection, until it closes.
fn serve(stream: TcpStream, spans: &Mutex<Vec<Span>>, answers: bool) {
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut content_type) = (0usize, String::new());
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => value.trim().clone_into(&mut content_type),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if !answers {
            // Held open, unanswered, for longer than any test waits.
            std::thread::sleep(Duration::from_secs(600));
            return;
        }
        let request = if content_type.contains("json") {
            serde_json::from_slice::<ExportTraceServiceRequest>(&body).expect("OTLP JSON")
        } else {
            ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf")
        };
        spans
            .lock()
            .unwrap()
            .extend(flatten(&request, &content_type));
        let answer: &[u8] = if content_type.contains("json") {
            b"{}"
        } else {
            b""
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            answer.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(answer).is_err() {
            return;
        }
    }
}

fn flatten(request: &ExportTraceServiceRequest, content_type: &str) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in &request.resource_spans {
        let resource = rs
            .resource
            .as_ref()
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        let service = resource
            .get("service.name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for ss in &rs.scope_spans {
            for s in &ss.spans {
                out.push(Span {
                    trace_id: hex(&s.trace_id),
                    id: hex(&s.span_id),
                    parent: hex(&s.parent_span_id),
                    name: s.name.clone(),
                    start_ns: s.start_time_unix_nano,
                    end_ns: s.end_time_unix_nano,
                    attributes: attributes(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| (e.name.clone(), attributes(&e.attributes)))
                        .collect(),
                    status: match &s.status {
                        Some(st) if st.code == 2 => "error".into(),
                        _ => String::new(),
                    },
                    service: service.clone(),
                    content_type: content_type.to_owned(),
                });
            }
        }
    }
    out
}

fn attributes(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
        .collect()
}

fn value(v: Option<&AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(n)) => json!(n),
        Some(any_value::Value::DoubleValue(n)) => json!(n),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        other => json!(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
