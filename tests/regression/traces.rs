//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, one trace per loop over
//! OTLP/HTTP, after the semantic conventions for generative AI, across runners; without it, nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::otlp::{Receiver, Span, assert_one_trace, is_root, of_op};
use crate::support::{PATIENCE, TestLoop, wait_until};

/// A loop whose spans go to `rx`.
pub fn traced(rx: &Receiver) -> TestLoop {
    TestLoop::new().env("OTEL_EXPORTER_OTLP_ENDPOINT", &rx.endpoint)
}

/// Each agent call of the loop had a `TRACEPARENT` naming its run's span in the loop's trace.
fn assert_calls_traced(env: &TestLoop, spans: &[Span]) {
    let agents = of_op(spans, "invoke_agent");
    let calls = env.calls();
    assert_eq!(calls.len(), agents.len(), "a span per run: {agents:#?}");
    for call in &calls {
        let tp = call["traceparent"].as_str().unwrap_or_default();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "TRACEPARENT {tp:?}");
        let span = agents
            .iter()
            .find(|s| s.id == parts[2])
            .unwrap_or_else(|| panic!("no span for TRACEPARENT {tp}: {agents:#?}"));
        assert_eq!(
            (parts[0], parts[1], parts[3]),
            ("00", span.trace_id.as_str(), "01")
        );
        assert_eq!(
            span.attr("m1loop.task_id"),
            call["task_id"].as_str().unwrap()
        );
        assert_eq!(
            span.attr("gen_ai.conversation.id"),
            call["session_id"].as_str().unwrap_or_default()
        );
    }
}

#[test]
fn a_loop_is_one_trace_with_a_span_per_agent_run_and_verify_under_the_loop_span() {
    let rx = Receiver::start();
    let env = traced(&rx);
    env.scenario(&crate::support::answers::passing());
    env.run_ok(&[
        "start", "g", "--step", "one", "--step", "two", "--verify", "true",
    ]);
    env.assert_status(Status::Done);
    let spans = rx.spans();
    assert_one_trace(&spans);
    assert_calls_traced(&env, &spans);
    // The agent has the collector too, for its own spans.
    let names = &env.calls()[0]["env_names"];
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "OTEL_EXPORTER_OTLP_ENDPOINT")
    );
    assert!(spans.iter().all(|s| s.service == "m1loop"
        && s.content_type == "application/x-protobuf"
        && s.status.is_empty()));
    let lp = of_op(&spans, "invoke_workflow")[0];
    assert_eq!(lp.attr("m1loop.status"), "DONE");
    assert_eq!(lp.attr("m1loop.steps"), "2");
    let m = env.m1();
    assert_eq!(lp.attr("m1loop.loop_id"), m.loop_id.clone().unwrap());
    let agents = of_op(&spans, "invoke_agent");
    for (n, s) in agents.iter().enumerate() {
        assert_eq!(s.name, "invoke_agent claude");
        assert_eq!(s.attr("gen_ai.agent.name"), "claude");
        assert_eq!(s.attr("gen_ai.provider.name"), "anthropic");
        assert_eq!(s.attr("m1loop.step"), (n + 1).to_string());
        assert_eq!(
            (s.attr("m1loop.attempt"), s.attr("m1loop.run")),
            ("1".into(), "attempt".into())
        );
        assert_eq!(s.attr("m1loop.verdict"), "pass");
        // What the simulated CLI's result says it used.
        assert_eq!(s.attr("gen_ai.usage.input_tokens"), "10");
        assert_eq!(s.attr("gen_ai.usage.output_tokens"), "5");
        assert!(!s.attr("gen_ai.response.model").is_empty(), "{s:#?}");
    }
    let tools = of_op(&spans, "execute_tool");
    assert_eq!(tools.len(), 2, "a VERIFY span per step: {tools:#?}");
    for (n, s) in tools.iter().enumerate() {
        assert_eq!(
            (s.name.as_str(), s.attr("gen_ai.tool.name")),
            ("execute_tool VERIFY", "VERIFY".into())
        );
        assert_eq!(s.attr("m1loop.step"), (n + 1).to_string());
        assert_eq!(s.attr("m1loop.verdict"), "passed");
    }
}

#[test]
fn http_json_carries_the_same_trace_when_the_protocol_asks_for_it() {
    let rx = Receiver::start();
    let env = traced(&rx).env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    env.scenario(&crate::support::answers::passing());
    env.run_ok(&["start", "g", "--step", "one", "--model", "claude-opus-4-1"]);
    let spans = rx.spans();
    assert!(!spans.is_empty() && spans.iter().all(|s| s.content_type == "application/json"));
    assert_one_trace(&spans);
    assert_calls_traced(&env, &spans);
    let run = of_op(&spans, "invoke_agent")[0];
    assert_eq!(run.attr("m1loop.step"), "1");
    assert_eq!(run.attr("gen_ai.request.model"), "claude-opus-4-1");
}

#[test]
fn a_loop_paused_on_a_gate_and_carried_on_by_another_runner_stays_one_trace_with_its_gate() {
    let rx = Receiver::start();
    let env = traced(&rx).env("OTEL_SERVICE_NAME", "nightly");
    env.start_waiting_for_approval();
    let first = rx.spans();
    assert_eq!(
        first.len(),
        1,
        "the loop span of the runner that paused: {first:#?}"
    );
    assert_eq!(first[0].attr("m1loop.status"), "WAITING");
    assert_eq!(first[0].events[0].0, "m1loop.gate.pending");
    env.run_ok(&["approve"]);
    let spans = rx.spans();
    assert_one_trace(&spans);
    assert_calls_traced(&env, &spans);
    assert!(spans.iter().all(|s| s.service == "nightly"));
    let last = of_op(&spans, "invoke_workflow").pop().unwrap().clone();
    assert_eq!(last.attr("m1loop.status"), "DONE");
    let (name, gate) = &last.events[0];
    assert_eq!(name, "m1loop.gate.decided");
    assert_eq!(gate["m1loop.gate.id"], "G1");
    assert_eq!(gate["m1loop.gate.kind"], "PLAN");
    assert_eq!(gate["m1loop.gate.choice"], "approve");
}

#[test]
fn a_runner_killed_minus_nine_mid_step_and_resumed_leaves_one_trace() {
    let rx = Receiver::start();
    let env = traced(&rx);
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(1500).heartbeat_ms(100)));
    let mut runner = env.spawn(&["start", "g", "--step", "one", "--step", "two"]);
    // Step 1's span is out, and step 2 runs: the runner dies.
    assert!(wait_until(PATIENCE, || {
        of_op(&rx.spans(), "invoke_agent").len() == 1 && env.calls().len() == 2
    }));
    runner.kill9();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    let spans = rx.spans();
    let root = assert_one_trace(&spans);
    assert_calls_traced(&env, &spans);
    let agents = of_op(&spans, "invoke_agent");
    assert_eq!(agents.len(), 2, "each run once: {agents:#?}");
    // Step 2's run, judged by the runner that took over, keeps the time it started.
    let two = agents
        .iter()
        .find(|s| s.attr("m1loop.step") == "2")
        .unwrap();
    let ran = Duration::from_nanos(two.end_ns - two.start_ns);
    assert!(ran >= Duration::from_millis(1400), "{ran:?} {two:#?}");
    // The loop span, which the killed runner never sent, came from the one that resumed.
    let loops = of_op(&spans, "invoke_workflow");
    assert_eq!((loops.len(), loops[0].id.as_str()), (1, root.as_str()));
    assert_eq!(loops[0].attr("m1loop.status"), "DONE");
}

#[test]
fn a_runner_killed_minus_nine_and_revived_by_its_step_continues_the_same_trace() {
    let rx = Receiver::start();
    let env = traced(&rx).env("LOOP_REVIVE", "on");
    env.scenario(&crate::support::answers::steady(1500));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    // The step's end brings a runner back, which drives the loop to its end and says so.
    let done = |spans: &[Span]| {
        of_op(spans, "invoke_workflow")
            .iter()
            .any(|s| s.attr("m1loop.status") == "DONE")
    };
    assert!(
        wait_until(Duration::from_secs(60), || done(&rx.spans())),
        "{}",
        env.log()
    );
    env.assert_logged("resumed by itself (revived by the supervisor of task");
    let spans = rx.spans();
    assert_one_trace(&spans);
    assert_calls_traced(&env, &spans);
    assert_eq!(of_op(&spans, "invoke_agent").len(), 2, "{spans:#?}");
}

#[test]
fn steps_run_at_once_are_in_their_loops_trace_with_a_span_per_merge() {
    let rx = Receiver::start();
    let env = traced(&rx).with_git();
    env.plan_parallel(&[("a", 300), ("b", 300)], &[]);
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    let spans = rx.spans();
    let traces: BTreeSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "one trace: {spans:#?}");
    let loops = of_op(&spans, "invoke_workflow");
    let root = env.m1().loop_id.unwrap();
    let (parent, steps): (Vec<&Span>, Vec<&Span>) =
        loops.iter().partition(|s| s.attr("m1loop.loop_id") == root);
    let root_id = &parent[0].id;
    assert!(parent.iter().all(|s| is_root(s)), "{parent:#?}");
    // Each step's own loop is a child of the loop that ran it, and its run a child of it.
    let step_loops: BTreeSet<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(step_loops.len(), 2, "{steps:#?}");
    assert!(steps.iter().all(|s| &s.parent == root_id), "{steps:#?}");
    let agents = of_op(&spans, "invoke_agent");
    assert_eq!(agents.len(), 2, "{agents:#?}");
    assert!(
        agents
            .iter()
            .all(|s| step_loops.contains(s.parent.as_str())),
        "{agents:#?}"
    );
    let merges: Vec<&Span> = of_op(&spans, "execute_tool")
        .into_iter()
        .filter(|s| s.attr("gen_ai.tool.name") == "merge")
        .collect();
    assert_eq!(merges.len(), 2, "a span per merge: {spans:#?}");
    assert!(
        merges
            .iter()
            .all(|s| &s.parent == root_id && s.attr("m1loop.verdict") == "merged")
    );
}

#[test]
fn a_red_verify_and_the_attempts_it_fails_are_errors_in_the_trace() {
    let rx = Receiver::start();
    let env = traced(&rx);
    env.scenario(&crate::support::answers::passing());
    let out = env.run(&[
        "start",
        "g",
        "--step",
        "one",
        "--verify",
        "false",
        "--max-retries",
        "2",
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", env.log());
    let spans = rx.spans();
    assert_one_trace(&spans);
    let verdicts: Vec<(String, String)> = of_op(&spans, "invoke_agent")
        .iter()
        .map(|s| (s.attr("m1loop.verdict"), s.status.clone()))
        .collect();
    assert!(!verdicts.is_empty(), "{spans:#?}");
    assert!(
        verdicts
            .iter()
            .all(|(v, status)| v != "pass" && status == "error"),
        "{verdicts:?}"
    );
    let verifies = of_op(&spans, "execute_tool");
    assert_eq!(verifies.len(), verdicts.len(), "{spans:#?}");
    assert!(
        verifies
            .iter()
            .all(|s| s.attr("m1loop.verdict") == "failed" && s.status == "error")
    );
}
