//! What traces never cost: a collector that is dead loses spans, not the loop's time; a setting
//! the exporter cannot honour is said, and the loop runs without; with no endpoint, nothing.

use std::time::Duration;

use m1loop::m1::Status;

use super::traces::traced;
use crate::support::otlp::{Receiver, assert_one_trace, refused_endpoint};
use crate::support::{PATIENCE, TestLoop, wait_until};

/// A loop of one step with its spans going to `endpoint` ends DONE, and in bounded time: were
/// its end to wait on the collector, it would not end within the deadline.
fn ends_in_time_with(endpoint: &str) -> TestLoop {
    let env = TestLoop::new()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    env.scenario(&crate::support::answers::passing());
    let out = env.run_for(&["start", "g", "--step", "one"], Duration::from_secs(30));
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    env
}

/// A collector that refused the connection lost the spans with nothing said (the manual
/// promises a `trace:` line, which came only for one that never answered): the log says it.
#[test]
fn a_collector_that_refuses_connections_loses_the_spans_not_the_loop() {
    let env = ends_in_time_with(&refused_endpoint());
    env.assert_logged("trace: spans not all sent: the collector could not be reached");
}

#[test]
fn a_collector_that_never_answers_loses_the_spans_not_the_loop() {
    let rx = Receiver::silent();
    ends_in_time_with(&rx.endpoint);
    assert!(rx.requests() > 0, "the exporter did try");
}

#[test]
fn a_setting_the_exporter_cannot_honour_is_logged_and_the_loop_runs_without_traces() {
    for (var, value, said) in [
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "trace: no traces are exported: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: loop sends traces \
             over http/protobuf or http/json only",
        ),
        (
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "soon",
            "trace: no traces are exported: OTEL_EXPORTER_OTLP_TIMEOUT=soon: not a number of \
             milliseconds",
        ),
    ] {
        let rx = Receiver::start();
        let env = traced(&rx).env(var, value);
        env.scenario(&crate::support::answers::passing());
        env.run_ok(&["start", "g", "--step", "one"]);
        env.assert_logged(said);
        assert!(rx.spans().is_empty(), "{var}={value}");
        assert!(env.calls()[0]["traceparent"].is_null(), "{var}={value}");
    }
    // Compression is not built in: the spans go uncompressed, as the receiver decodes them.
    let rx = Receiver::start();
    let env = traced(&rx).env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip");
    env.scenario(&crate::support::answers::passing());
    env.run_ok(&["start", "g", "--step", "one"]);
    assert_one_trace(&rx.spans());
}

/// The threads of the runner `pid`, while its step runs.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count)
}

/// The runner's threads while a step runs, with the environment `env` gives it.
fn runner_threads(env: &TestLoop) -> usize {
    env.scenario(&crate::support::answers::steady(1500));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    assert!(wait_until(PATIENCE, || env.calls().len() == 1));
    std::thread::sleep(Duration::from_millis(200));
    let n = threads(runner.pid());
    runner.wait(PATIENCE);
    n
}

#[test]
fn without_an_endpoint_the_runner_starts_no_thread_and_the_agent_gets_no_traceparent() {
    let rx = Receiver::start();
    let plain = TestLoop::new();
    let without = runner_threads(&plain);
    assert!(without > 0);
    assert!(
        plain.calls()[0]["traceparent"].is_null(),
        "{:?}",
        plain.calls()
    );
    let with = runner_threads(&traced(&rx));
    assert_eq!(
        with,
        without + 1,
        "the export thread, and only with the variable"
    );
}
