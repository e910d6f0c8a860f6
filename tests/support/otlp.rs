//! A loopback OTLP/HTTP trace receiver for tests, on the crate's loopback HTTP server
//! (`m1loop::loopback`): it takes `POST /v1/traces`, decodes the body as the exporter sent it
//! (`application/x-protobuf` or `application/json`, with the OTLP messages of
//! `opentelemetry-proto`), records every span, and answers 200. Or it plays a dead collector:
//! it reads each request, and never answers.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use m1loop::loopback::{Exchange, Server};

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

/// The receiver; it stops when dropped.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT`: what `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    /// Requests received (a dead collector counts them too).
    requests: Arc<Mutex<usize>>,
    _server: Arc<Server>,
}

impl Receiver {
    /// A collector that answers.
    pub fn start() -> Self {
        Self::listen(true)
    }

    /// A collector that reads every request, and never answers.
    pub fn silent() -> Self {
        Self::listen(false)
    }

    fn listen(answers: bool) -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(0));
        let (s, r) = (spans.clone(), requests.clone());
        let server = Server::start(move |ex| {
            *r.lock().unwrap() += 1;
            serve(ex, &s, answers);
        })
        .expect("a loopback port");
        Self {
            endpoint: server.url(),
            spans,
            requests,
            _server: Arc::new(server),
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
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

/// One request: its spans recorded and answered, or (a dead collector) held unanswered until
/// the client gives up.
fn serve(ex: Exchange, spans: &Mutex<Vec<Span>>, answers: bool) {
    if !answers {
        let _ = ex.hold_while(|| true);
        ex.hang_up();
        return;
    }
    let content_type = ex.header("content-type").unwrap_or_default().to_owned();
    let request = if content_type.contains("json") {
        serde_json::from_slice::<ExportTraceServiceRequest>(&ex.body).expect("OTLP JSON")
    } else {
        ExportTraceServiceRequest::decode(ex.body.as_slice()).expect("OTLP protobuf")
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
    ex.respond(200, &content_type, &[], answer);
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
