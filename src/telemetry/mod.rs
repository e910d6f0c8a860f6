//! Traces of a loop over OTLP/HTTP, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; when neither is, nothing here is built, not
//! even a thread.
//!
//! Spans are made whole by the caller (times, attributes, events) and handed to the SDK's
//! batch processor, which exports them from its own thread: handing one over never waits, a
//! full queue drops it, and a dead collector costs the export thread its time, never the loop.
//! Ids are not drawn at random: a loop's trace id, its loop span's id and each run's span id
//! are digests of the loop's `LOOP_ID` and the run's task id, so any runner of the loop (one
//! that revives it after a `kill -9` too) emits into the same trace, and the `TRACEPARENT` an
//! agent is started with names the span its run will have.

mod config;
mod export;

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use opentelemetry::trace::{SpanContext, Status, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, TraceId};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};

pub(crate) use opentelemetry::trace::{Event, SpanKind};
pub(crate) use opentelemetry::{KeyValue, SpanId};

/// Where a loop's spans go: the batch processor of the OTLP exporter.
pub(crate) struct Tracer {
    processor: BatchSpanProcessor,
    trace_id: TraceId,
    scope: InstrumentationScope,
    /// How long the end of a runner waits for its last spans to be sent.
    flush_bound: Duration,
    /// Why the last request to the collector failed, if one did.
    failed: export::Failed,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("trace_id", &self.trace_id)
            .finish_non_exhaustive()
    }
}

/// One finished span, as the runner knows it.
#[derive(Debug)]
pub(crate) struct Span {
    /// `invoke_agent claude`, `execute_tool VERIFY`, …
    pub name: String,
    pub kind: SpanKind,
    pub id: SpanId,
    /// `None`: a root span (the loop's, unless it is a step's own loop).
    pub parent: Option<SpanId>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub attributes: Vec<KeyValue>,
    pub events: Vec<Event>,
    /// Why it failed, for a span whose work did not succeed.
    pub error: Option<String>,
}

impl Tracer {
    /// The tracer of the loop whose trace is `root`'s (the loop's own `LOOP_ID`, or the
    /// parent's for a step's own loop), as the `OTEL_*` variables say; `None` when no endpoint
    /// is set (or `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER=none`).
    ///
    /// # Errors
    /// A variable that cannot be honoured (an unknown protocol, a timeout that is no number),
    /// said so that the loop can log it and go on without traces.
    pub(crate) fn from_env(root: &str) -> Option<Result<Self, String>> {
        let cfg = match config::Config::from_env()? {
            Ok(cfg) => cfg,
            Err(e) => return Some(Err(e)),
        };
        Some(Self::with_config(&cfg, root))
    }

    fn with_config(cfg: &config::Config, root: &str) -> Result<Self, String> {
        let (exporter, failed) = export::exporter(cfg)?;
        Ok(Self {
            failed,
            processor: BatchSpanProcessor::builder(exporter)
                .with_batch_config(config::batch())
                .build(),
            trace_id: trace_id(root),
            scope: InstrumentationScope::builder("m1loop")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            flush_bound: cfg.timeout,
        })
    }

    /// The `TRACEPARENT` (W3C trace context) of span `span` of this trace: what an agent run
    /// is started with, so that its own spans are children of the run's.
    #[must_use]
    pub(crate) fn traceparent(&self, span: SpanId) -> String {
        format!("00-{}-{}-01", self.trace_id, span)
    }

    /// Hands `span` to the export thread; never waits (a full queue drops it).
    pub(crate) fn emit(&self, span: Span) {
        let parent = span.parent.unwrap_or(SpanId::INVALID);
        let mut events = SpanEvents::default();
        events.events = span.events;
        let data = SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                span.id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: span.kind,
            name: span.name.into(),
            start_time: system_time(span.start),
            end_time: system_time(span.end.max(span.start)),
            attributes: span.attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: match span.error {
                Some(why) => Status::error(why),
                None => Status::Ok,
            },
            instrumentation_scope: self.scope.clone(),
        };
        self.processor.on_end(data);
    }

    /// Sends what is queued and stops the export thread, waiting at most the exporter's
    /// timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 2 s unless set): a collector that is down or
    /// never answers loses the spans, not the loop's time. Whether they went.
    pub(crate) fn shutdown(self) -> Result<(), String> {
        self.processor
            .shutdown_with_timeout(self.flush_bound)
            .map_err(|e| e.to_string())?;
        // A collector that refused the connection is no error to the processor: its batch is
        // dropped all the same.
        match self.failed.lock().ok().and_then(|mut f| f.take()) {
            Some(why) => Err(format!("the collector could not be reached ({why})")),
            None => Ok(()),
        }
    }
}

/// `t` as the SDK keeps times.
#[must_use]
pub(crate) fn system_time(t: DateTime<Utc>) -> SystemTime {
    SystemTime::from(t)
}

/// The trace of the loop `root` (its `LOOP_ID`): the same for every runner of it.
#[must_use]
pub(crate) fn trace_id(root: &str) -> TraceId {
    TraceId::from_bytes(digest(&format!("m1loop trace {root}")).to_be_bytes())
}

/// The span id of what `label` names (`loop <LOOP_ID>`, `task <task id>`): the same for every
/// runner that emits it, and for the `TRACEPARENT` given before it exists.
#[must_use]
pub(crate) fn span_id(label: &str) -> SpanId {
    let top = u64::try_from(digest(&format!("m1loop span {label}")) >> 64).unwrap_or(1);
    SpanId::from_bytes(top.max(1).to_be_bytes())
}

/// 128 bits of `text`: FNV-1a, each half then mixed (splitmix64's finaliser) so that labels
/// that differ in their last character differ in every byte. Never zero (an invalid id).
fn digest(text: &str) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let h = text
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the two halves, on purpose"
    )]
    let (hi, lo) = (mix((h >> 64) as u64), mix(h as u64));
    let out = (u128::from(hi) << 64) | u128::from(lo);
    if out == 0 { 1 } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_same_for_the_same_loop_and_differ_between_loops_and_tasks() {
        assert_eq!(trace_id("fec06a7abaf8"), trace_id("fec06a7abaf8"));
        assert_ne!(trace_id("fec06a7abaf8"), trace_id("fec06a7abaf9"));
        let a = span_id("task task_20260301T101500_6e7379");
        let b = span_id("task task_20260301T101500_6e737a");
        assert_ne!(a, b);
        assert_ne!(a, SpanId::INVALID);
        // Every byte moves with the last character.
        let (x, y) = (a.to_bytes(), b.to_bytes());
        assert!(x.iter().zip(y).filter(|(p, q)| **p != *q).count() >= 6);
    }

    #[test]
    fn a_traceparent_is_version_00_sampled_with_lowercase_hex_ids() {
        let cfg = config::Config::for_test();
        let t = Tracer::with_config(&cfg, "loop1").unwrap();
        let tp = t.traceparent(span_id("task t1"));
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[3]), ("00", "01"));
        assert_eq!(parts[1], format!("{}", trace_id("loop1")));
        assert_eq!(parts[1].len(), 32);
        assert_eq!(parts[2].len(), 16);
        assert!(
            tp.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_lowercase())
        );
        t.shutdown().unwrap();
    }
}
