//! The loop's trace, when `OTEL_EXPORTER_OTLP_ENDPOINT` asks for one (see
//! [`crate::telemetry`]): one span for the loop (`invoke_workflow`), one per agent run
//! (`invoke_agent`), one per VERIFY and per merge (`execute_tool`), gates as events of the
//! loop's span, after OpenTelemetry's semantic conventions for generative AI (`gen_ai.*`). Each span is made once what it covers is
//! judged, from the records (a run's times are its task's), so a runner that takes over a
//! run from one killed `-9` emits it as that one would have. Without a tracer, each of these
//! returns at once.

use chrono::{DateTime, Utc};

use super::settings::Settings;
use super::step_io::StepIo;
use super::voice::Voice;
use crate::engine::{LedgerVerdict, RunKind, RunOnRecord};
use crate::m1::M1;
use crate::telemetry::{Event, KeyValue, Span, SpanId, SpanKind, Tracer, span_id};
use crate::verify;

/// The span of task `task_id`'s run, which its `TRACEPARENT` names before it exists.
fn task_span(task_id: &str) -> SpanId {
    span_id(&format!("task {task_id}"))
}

/// The loop span of loop `loop_id`.
fn loop_span(loop_id: &str) -> SpanId {
    span_id(&format!("loop {loop_id}"))
}

/// An `execute_tool` span of `tool` (VERIFY, a merge) under the loop span of `loop_id`, from
/// `start` to now, with `attributes` after the tool's own.
fn tool_span(
    tracer: &Tracer,
    tool: &'static str,
    id: SpanId,
    loop_id: &str,
    start: DateTime<Utc>,
    attributes: Vec<KeyValue>,
    error: Option<String>,
) {
    let mut all = vec![
        kv("gen_ai.operation.name", "execute_tool"),
        kv("gen_ai.tool.name", tool),
    ];
    all.extend(attributes);
    tracer.emit(Span {
        name: format!("execute_tool {tool}"),
        kind: SpanKind::Internal,
        id,
        parent: Some(loop_span(loop_id)),
        start,
        end: Utc::now(),
        attributes: all,
        events: Vec::new(),
        error,
    });
}

/// What kind of run a span is of.
fn run_word(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Plan => "plan",
        RunKind::Attempt => "attempt",
        RunKind::Review => "review",
    }
}

/// `name` = `value` for a span.
fn kv(name: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(name, value)
}

fn int(n: impl Into<u64>) -> i64 {
    i64::try_from(n.into()).unwrap_or(i64::MAX)
}

impl StepIo {
    /// The tracer, built as this runner starts driving the loop `m` when the `OTEL_*`
    /// variables ask for traces; one they set wrong is logged, and the loop runs on without.
    pub(super) fn open_trace(&mut self, voice: &Voice, m: &M1) {
        let root = m.parent_id.clone().unwrap_or_else(|| self.loop_id.clone());
        match Tracer::from_env(&root) {
            None => {}
            Some(Ok(tracer)) => self.tracer = Some(tracer),
            Some(Err(why)) => voice.say(&format!("trace: no traces are exported: {why}")),
        }
    }

    /// `TRACEPARENT` for the agent of task `task_id`: its run's span, in the loop's trace.
    pub(super) fn traceparent(&self, task_id: &str) -> Option<(String, String)> {
        let tracer = self.tracer.as_ref()?;
        Some(("TRACEPARENT".into(), tracer.traceparent(task_span(task_id))))
    }

    /// Task `task_id` (`entry` in the ledger) of the loop `m`, just judged `verdict`: its
    /// run's `invoke_agent` span.
    pub(super) fn trace_judged(
        &self,
        settings: &Settings,
        m: &M1,
        entry: Option<&crate::engine::ledger::Entry>,
        task_id: &str,
        verdict: LedgerVerdict,
    ) {
        let (Some(tracer), Some(entry)) = (&self.tracer, entry) else {
            return;
        };
        let kind = RunKind::of(entry.step, entry.review);
        let backend = settings.backend_of(m, kind, entry.step);
        let agent = crate::agent::backend_for(backend);
        let report = crate::bridge::check(&self.state_dir, task_id).ok();
        let now = Utc::now();
        let (start, end) = report.as_ref().map_or((now, now), |r| {
            (r.started_at.unwrap_or(now), r.ended_at.unwrap_or(now))
        });
        let stream = report
            .as_ref()
            .and_then(|r| agent.read_output(&r.stdout_path).ok())
            .unwrap_or_default();
        let model = kind.agent_config(settings.agent_on(m, backend), m).model;
        let mut attributes = vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.provider.name", agent.provider()),
            kv("gen_ai.agent.name", backend.as_str()),
            kv("m1loop.task_id", task_id.to_owned()),
            kv("m1loop.run", run_word(kind)),
            kv("m1loop.step", int(entry.step)),
            kv("m1loop.attempt", int(entry.attempt)),
            kv("m1loop.verdict", verdict.to_string()),
        ];
        let session = stream
            .session_id
            .clone()
            .or_else(|| entry.session_id.clone());
        attributes.extend(session.map(|s| kv("gen_ai.conversation.id", s)));
        attributes.extend(model.map(|s| kv("gen_ai.request.model", s)));
        let answered_by = stream.model_windows.first().map(|(name, _)| name.clone());
        attributes.extend(answered_by.map(|s| kv("gen_ai.response.model", s)));
        if let Some((input, output)) = stream.usage_tokens {
            attributes.push(kv("gen_ai.usage.input_tokens", int(input)));
            attributes.push(kv("gen_ai.usage.output_tokens", int(output)));
        }
        attributes.extend(stream.cost_usd.map(|c| kv("m1loop.cost_usd", c)));
        let failed = matches!(
            verdict,
            LedgerVerdict::Retry
                | LedgerVerdict::Failed
                | LedgerVerdict::Halt
                | LedgerVerdict::Blocked
                | LedgerVerdict::Backoff
                | LedgerVerdict::UsageWait
        );
        tracer.emit(Span {
            name: format!("invoke_agent {}", backend.as_str()),
            kind: SpanKind::Client,
            id: task_span(task_id),
            parent: Some(loop_span(&self.loop_id)),
            start,
            end,
            attributes,
            events: Vec::new(),
            error: failed.then(|| format!("judged {verdict}")),
        });
    }

    /// VERIFY of `run`, begun at `start`, ended as `outcome`: an `execute_tool` span.
    pub(super) fn trace_verify(
        &self,
        run: &RunOnRecord,
        start: DateTime<Utc>,
        outcome: &crate::error::Result<verify::Outcome>,
    ) {
        let Some(tracer) = &self.tracer else {
            return;
        };
        let (word, error) = match outcome {
            Ok(verify::Outcome::Passed) => ("passed", None),
            Ok(verify::Outcome::Failed { code, .. } | verify::Outcome::Refused { code, .. }) => (
                "failed",
                Some(code.map_or("killed by a signal".into(), |c| format!("exit {c}"))),
            ),
            Ok(verify::Outcome::TimedOut { .. }) => ("timed_out", Some("timed out".into())),
            Ok(verify::Outcome::Stopped) => ("stopped", None),
            Err(e) => ("not_run", Some(format!("{e:#}"))),
        };
        let id = span_id(&format!(
            "verify {} {}",
            run.task_id,
            start.timestamp_micros()
        ));
        let attributes = vec![
            kv("m1loop.task_id", run.task_id.clone()),
            kv("m1loop.step", int(run.step)),
            kv("m1loop.attempt", int(run.number)),
            kv("m1loop.verdict", word),
        ];
        tool_span(
            tracer,
            "VERIFY",
            id,
            &self.loop_id,
            start,
            attributes,
            error,
        );
    }

    /// The merge of step `n` of the loop `m` (steps at once), begun at `start`: an
    /// `execute_tool` span.
    pub(super) fn trace_merge(&self, m: &M1, n: u32, start: DateTime<Utc>, failed: Option<String>) {
        let Some(tracer) = &self.tracer else {
            return;
        };
        let merged = m
            .plan
            .steps
            .iter()
            .any(|s| s.n == n && s.state == crate::m1::StepState::Done);
        let word = match (&failed, merged) {
            (Some(_), _) => "error",
            (None, true) => "merged",
            (None, false) => "not_merged",
        };
        let id = span_id(&format!(
            "merge {} {n} {}",
            self.loop_id,
            start.timestamp_micros()
        ));
        let attributes = vec![kv("m1loop.step", int(n)), kv("m1loop.verdict", word)];
        tool_span(
            tracer,
            "merge",
            id,
            &self.loop_id,
            start,
            attributes,
            failed,
        );
    }

    /// This runner stops driving the loop `m`, whose figures (its steps' loops' included) are
    /// `figures`: the loop's span, from its start to now, with its gates as events; then what
    /// is queued goes, within the exporter's timeout. Every runner of a loop emits it (the
    /// same span id), the last one covering the whole loop, so that one killed `-9` leaves it
    /// to the runner that takes over.
    pub(super) fn end_trace(
        &mut self,
        voice: &Voice,
        m: &M1,
        figures: &crate::engine::figures::Figures,
    ) {
        let Some(tracer) = self.tracer.take() else {
            return;
        };
        let now = Utc::now();
        let mut attributes = vec![
            kv("gen_ai.operation.name", "invoke_workflow"),
            kv("m1loop.loop_id", self.loop_id.clone()),
            kv("m1loop.goal", crate::text::one_line(&m.goal, 200)),
            kv("m1loop.status", m.status.as_str()),
            kv(
                "m1loop.steps",
                int(u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX)),
            ),
            kv("m1loop.attempts", int(figures.attempts)),
            kv("m1loop.cost_usd", figures.cost_usd),
        ];
        if figures.tokens > 0 {
            attributes.push(kv("m1loop.tokens", int(figures.tokens)));
        }
        tracer.emit(Span {
            name: "invoke_workflow m1loop".into(),
            kind: SpanKind::Internal,
            id: loop_span(&self.loop_id),
            parent: m.parent_id.as_deref().map(loop_span),
            start: m.started_at.unwrap_or(now),
            end: now,
            attributes,
            events: gate_events(m, now),
            error: (m.status == crate::m1::Status::Failed).then(|| "the loop FAILED".into()),
        });
        if let Err(why) = tracer.shutdown() {
            voice.log(&format!("trace: spans not all sent: {why}"));
        }
    }
}

/// Each gate of the loop, as an event: `m1loop.gate.decided` at its decision, or
/// `m1loop.gate.pending` (at `now`) while it waits.
fn gate_events(m: &crate::m1::M1, now: DateTime<Utc>) -> Vec<Event> {
    m.gates
        .iter()
        .map(|g| {
            let mut attributes = vec![
                kv("m1loop.gate.id", g.id.clone()),
                kv(
                    "m1loop.gate.kind",
                    format!("{:?}", g.kind).to_ascii_uppercase(),
                ),
                kv("m1loop.step", int(g.step)),
            ];
            attributes.extend(g.choice.clone().map(|c| kv("m1loop.gate.choice", c)));
            attributes.extend(g.by.clone().map(|b| kv("m1loop.gate.by", b)));
            let (name, at) = if g.is_pending() {
                ("m1loop.gate.pending", now)
            } else {
                ("m1loop.gate.decided", g.at.unwrap_or(now))
            };
            Event::new(name, crate::telemetry::system_time(at), attributes, 0)
        })
        .collect()
}
