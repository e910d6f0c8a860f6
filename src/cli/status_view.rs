//! What `loop status` prints: a compact human view, or one JSON object whose keys are the
//! lower-case M1.md names.

use std::fmt::Write;

use crate::m1::{M1, Status, StepResult, StepState};

/// The human view. `task` is the exec bridge's line about the running task, when known;
/// `chat`: a chat is set up where gates can be decided too.
#[must_use]
pub(super) fn human(m: &M1, task: Option<&str>, chat: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "GOAL         {}", m.goal);
    let at_once = m.parallel.branch.is_some() || !m.parallel.runs.is_empty();
    let status = status_line(m, at_once);
    let _ = writeln!(out, "STATUS       {status}");
    if let Some(c) = &m.constraints {
        let _ = writeln!(out, "CONSTRAINTS  {c}");
    }
    github_lines(m, &mut out);
    if m.plan.steps.is_empty() {
        let _ = writeln!(out, "PLAN         (no steps yet)");
    }
    steps(m, at_once, &mut out);
    let c = &m.current;
    let mut current = Vec::new();
    if let Some(t) = &c.task_id {
        current.push(format!("task {t}"));
    }
    if let Some(p) = c.cc_pid {
        current.push(format!("pid {p}"));
    }
    if let Some(a) = c.attempt {
        current.push(format!("attempt {a}"));
    }
    if let Some(t) = &c.spawn_time {
        current.push(format!("since {t}"));
    }
    if !current.is_empty() {
        let _ = writeln!(out, "CURRENT      {}", current.join(", "));
    }
    if let Some(t) = task {
        let _ = writeln!(out, "TASK         {t}");
    }
    let _ = writeln!(out, "SANDBOX      {}", sandbox_line(m));
    parallel_runs(m, &mut out);
    // The loop's figures, with what the loops of its steps that run at once spent so far.
    let t = crate::engine::figures::totals(m, &crate::runner::step_loops(m));
    if t.cost_usd > 0.0 {
        let _ = writeln!(out, "COST         ${:.2}", t.cost_usd);
    }
    if t.tokens > 0 {
        let _ = writeln!(out, "TOKENS       {}", crate::text::thousands(t.tokens));
    }
    if let Some(a) = &m.last_action {
        let _ = writeln!(out, "LAST_ACTION  {a}");
    }
    if let Some(a) = &m.next_action {
        let _ = writeln!(out, "NEXT_ACTION  {a}");
    }
    gates(m, chat, &mut out);
    out
}

/// One line per step: its number (`>` at the current one, none when steps run at once), state,
/// text, what it waits for, and what its results say.
/// The loop's issue and pull request (`GITHUB:`), when it has them.
fn github_lines(m: &M1, out: &mut String) {
    let g = &m.github;
    if let Some(n) = g.issue {
        let url = g
            .issue_url
            .as_deref()
            .map_or_else(String::new, |u| format!(" {u}"));
        let _ = writeln!(out, "ISSUE        #{n}{url}");
    }
    if !g.pull_request {
        return;
    }
    let branch = g.branch.as_deref().unwrap_or("(no branch)");
    let pr = match (&g.pr, &g.pr_error) {
        (Some(url), _) => url.clone(),
        (None, Some(why)) => format!("not opened ({why}); `loop resume` tries again"),
        (None, None) => format!("opened from {branch} at DONE"),
    };
    let _ = writeln!(out, "PULL REQUEST {pr}");
}

fn steps(m: &M1, at_once: bool, out: &mut String) {
    for s in &m.plan.steps {
        let marker = if s.n == m.plan.current_step && !at_once {
            '>'
        } else {
            ' '
        };
        let _ = write!(
            out,
            "{marker} {:>2} {:<9} {}",
            s.n,
            s.state.as_str(),
            s.text
        );
        if let Some(deps) = m.plan.after.get(&s.n) {
            let deps: Vec<String> = deps.iter().map(u32::to_string).collect();
            let _ = write!(out, "  [after {}]", deps.join(", "));
        }
        if let Some(words) = crate::engine::by_hand::done_by_hand_words(m, s.n) {
            let _ = write!(out, "  ({words})");
        } else if let Some(r) = m.results.get(&s.n) {
            let facts = result_facts(r);
            if !facts.is_empty() {
                let _ = write!(out, "  ({facts})");
            }
        }
        out.push('\n');
    }
}

/// Each pending gate, with how to decide it: from the shell, and in the chat when one is set
/// up (`chat`).
fn gates(m: &M1, chat: bool, out: &mut String) {
    for g in m.pending_gates() {
        let what = crate::engine::gate::about(m, g);
        let _ = writeln!(out, "GATE {:<7} {} PENDING: {what}", g.id, g.kind);
        let how = crate::engine::gate::how(g);
        if chat {
            let _ = writeln!(
                out,
                "             {how}, or {}",
                crate::engine::gate::chat_way(g)
            );
        } else {
            let _ = writeln!(out, "             {how}");
        }
    }
}

/// How the loop's runs are confined, as M1.md says (`AGENT.SANDBOX`).
fn sandbox_line(m: &M1) -> &'static str {
    match m.agent.sandbox {
        None => "bwrap (the default)",
        Some(crate::m1::SandboxMode::Bwrap) => "bwrap",
        Some(crate::m1::SandboxMode::Off) => {
            "off: the agent runs with the person's whole authority"
        }
    }
}

/// `2 of 3 steps done, 1 skipped`: a skipped step is closed, not done.
fn closed_words(m: &M1) -> String {
    let count = |state: StepState| m.plan.steps.iter().filter(|s| s.state == state).count();
    let (done, skipped) = (count(StepState::Done), count(StepState::Skipped));
    let mut out = format!("{done} of {} steps done", m.plan.steps.len());
    if skipped > 0 {
        let _ = write!(out, ", {skipped} skipped");
    }
    out
}

/// `RUNNING  step 2/3`, or for a loop that runs its steps at once, how many are done and how
/// many run.
fn status_line(m: &M1, at_once: bool) -> String {
    let mut status = m.status.as_str().to_string();
    if at_once {
        // Steps at once: no one step is current; how many are closed, and how many run.
        let _ = write!(
            status,
            "  {}, {} at once",
            closed_words(m),
            m.parallel.runs.len()
        );
    } else if m.plan.total_steps > 0 && m.plan.current_step == 0 && !m.plan.steps.is_empty() {
        // No step is current (a loop that ran its steps at once, ended).
        let _ = write!(status, "  {}", closed_words(m));
    } else {
        // The count the steps make (TOTAL_STEPS follows them, and a hand edit may not have yet).
        let total = match m.plan.steps.len() {
            0 => m.plan.total_steps,
            n => u32::try_from(n).unwrap_or(u32::MAX),
        };
        if total > 0 {
            let _ = write!(status, "  step {}/{total}", m.plan.current_step);
        }
    }
    status
}

/// Each step running at once (a loop of its own), how it stands in this loop's words, and
/// where.
fn parallel_runs(m: &M1, out: &mut String) {
    for (n, run) in &m.parallel.runs {
        let child = run
            .loop_file
            .as_deref()
            .and_then(|f| crate::m1::load(std::path::Path::new(f)).ok())
            .map(|d| d.view());
        let how = match (&run.merged, &child) {
            (Some(c), _) => format!("merged as {}", c.get(..7).unwrap_or(c)),
            (None, Some(c)) => step_words(m, *n, c),
            (None, None) => "starting".to_owned(),
        };
        let _ = writeln!(
            out,
            "STEP {n:<7} {how}; in {} on {}",
            run.worktree.as_deref().unwrap_or("?"),
            run.branch.as_deref().unwrap_or("?")
        );
    }
}

/// How step `n`, run by its own loop `c`, stands, in the words of the loop `m` that runs it
/// (never its own loop's view of the plan, whose other steps it has SKIPPED).
fn step_words(m: &M1, n: u32, c: &M1) -> String {
    let gate_here = |kind: Option<crate::m1::GateKind>| {
        m.pending_gates()
            .find(|g| g.step == n && kind.is_none_or(|k| g.kind == k))
            .map(|g| format!("waits on gate {} ({}) here", g.id, g.kind))
    };
    let step = c.plan.steps.iter().find(|s| s.n == n).map(|s| s.state);
    match c.status {
        Status::Done if step == Some(StepState::Skipped) => "SKIPPED in its own loop".to_owned(),
        Status::Done => gate_here(Some(crate::m1::GateKind::Merge)).map_or_else(
            || "DONE in its own loop, for the merge queue".to_owned(),
            |g| format!("does not merge: {g}"),
        ),
        Status::Running => {
            let attempt = c.current.attempt.unwrap_or(1);
            if c.current.review {
                format!("RUNNING: review {attempt}")
            } else {
                format!("RUNNING: attempt {attempt}")
            }
        }
        _ => gate_here(None).unwrap_or_else(|| {
            format!(
                "{}: {}",
                c.status.as_str(),
                c.last_action.clone().unwrap_or_default()
            )
        }),
    }
}

/// `exit 0, a690fb3, verified, 2 attempts, $0.42` for one step's result.
fn result_facts(r: &StepResult) -> String {
    let mut f = Vec::new();
    // An exit not known yet (`EXIT: (pending)`, or none) is left out: "pending" read as the
    // step's state, which the line shows already.
    if let Some(code) = r.exit {
        f.push(format!("exit {code}"));
    }
    if let Some(c) = &r.commit {
        f.push(c.clone());
    }
    if let Some(u) = &r.uncommitted {
        f.push(format!("uncommitted: {u}"));
    }
    match r.verified {
        Some(true) => f.push("verified".into()),
        Some(false) => f.push("not verified".into()),
        None => {}
    }
    if let Some(a) = r.attempts {
        f.push(format!("{a} attempt{}", if a == 1 { "" } else { "s" }));
    }
    if let Some(c) = r.cost_usd.filter(|c| *c > 0.0 || r.tokens.is_none()) {
        f.push(format!("${c:.2}"));
    }
    if let Some(t) = r.tokens {
        f.push(format!("{} tokens", crate::text::thousands(t)));
    }
    if let Some(e) = &r.error {
        f.push(format!("error: {e}"));
    }
    if let Some(review) = &r.review {
        f.push(format!("review {review}"));
    }
    if let Some(i) = &r.interrupted {
        f.push(format!("interrupted: {i}"));
    }
    f.join(", ")
}

/// The JSON view: `M1` with lower-case names, plus `task` (the bridge's report, or null).
#[must_use]
pub(super) fn json(m: &M1, task: Option<&str>) -> serde_json::Value {
    let mut v = serde_json::to_value(m).expect("M1 serializes");
    v["task"] = task.map_or(serde_json::Value::Null, Into::into);
    v
}
