//! The words of each message, made to be read on a phone: short, the goal first, one fact per
//! line. Telegram gets Bot API HTML (every piece of loop or agent text escaped, so an `<` in a
//! step summary cannot break the message); the log gets the same text without markup.

use std::fmt::Write as _;
use std::time::Duration;

use super::Event;
use crate::m1::GateKind;
use crate::m1::GateOption;
use crate::text::cut;

/// How a message is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Telegram `parse_mode: HTML`.
    Html,
    /// No markup at all (the log).
    Plain,
}

/// Goals are headlines; a paragraph-long goal is cut so the message still reads at a glance.
const GOAL_MAX: usize = 200;
/// One step summary or one reason; the full text is in M1.md and the step's report.
const LINE_MAX: usize = 400;
/// At most this many lines of a failed step's output.
const TAIL_LINES: usize = 15;
const TAIL_LINE_MAX: usize = 300;

/// The last [`TAIL_LINES`] non-empty lines of `text`, each cut to fit a phone.
fn last_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| cut(l, TAIL_LINE_MAX))
        .collect()
}

/// The message text for `event`, in Telegram HTML with proper escaping.
#[must_use]
pub fn render(event: &Event) -> String {
    render_as(event, Format::Html)
}

/// The message text for `event` in the given format.
pub(crate) fn render_as(event: &Event, format: Format) -> String {
    let mut m = Msg {
        format,
        out: String::new(),
    };
    match event {
        Event::Started {
            goal,
            steps,
            sandbox,
        } => {
            m.headline("▶️", goal);
            m.line(&format!("Loop started, {} step(s):", steps.len()));
            for (i, step) in steps.iter().enumerate() {
                m.line(&format!("{}. {}", i + 1, cut(step, LINE_MAX)));
            }
            if let Some(s) = sandbox {
                m.line(&format!("Sandbox: {s}"));
            }
        }
        Event::StepDone {
            goal,
            step,
            total,
            summary,
        } => {
            m.headline("☑️", goal);
            m.line(&format!(
                "Step {step}/{total} done: {}",
                cut(summary, LINE_MAX)
            ));
        }
        Event::Waiting {
            goal,
            reason,
            how_to_continue,
        } => {
            m.headline("⏸", goal);
            m.bold_line("WAITING: ", &cut(reason, LINE_MAX));
            m.line(&format!("To continue: {}", cut(how_to_continue, LINE_MAX)));
        }
        Event::Failed {
            goal,
            step,
            reason,
            answer,
            stderr_tail,
        } => failed(&mut m, goal, *step, reason, answer.as_deref(), stderr_tail),
        Event::Done { .. } => done(&mut m, event),
        Event::Gate(g) => gate(&mut m, g),
        Event::Text(text) => m.line(text),
    }
    m.out.trim_end().to_string()
}

/// A DONE message: the goal, the totals (and the steps left uncommitted), each step's summary.
fn done(m: &mut Msg, event: &Event) {
    let Event::Done {
        goal,
        summaries,
        cost_usd,
        tokens,
        elapsed_s,
        report,
        uncommitted,
        pull_request,
        ..
    } = event
    else {
        return;
    };
    m.headline("✅", goal);
    let time = crate::duration::human(Duration::from_secs(*elapsed_s));
    let uncommitted = match uncommitted {
        0 => String::new(),
        n => format!(" ({n} uncommitted: their work is in the work tree)"),
    };
    m.bold_line(
        "DONE: ",
        &format!(
            "{} step(s){uncommitted} in {time}, {}",
            summaries.len(),
            crate::text::spent(*cost_usd, *tokens)
        ),
    );
    for (step, summary) in summaries {
        m.line(&format!("{step}. {}", cut(summary, LINE_MAX)));
    }
    if let Some(url) = pull_request {
        m.line(&format!("Pull request: {url}"));
    }
    if let Some(page) = report {
        m.line(&format!("Report: {page}"));
    }
}

/// A FAILED message: why, the agent's last answer and the end of its stderr.
fn failed(
    m: &mut Msg,
    goal: &str,
    step: Option<u32>,
    reason: &str,
    answer: Option<&str>,
    stderr_tail: &[String],
) {
    m.headline("❌", goal);
    let at = step.map(|s| format!(" at step {s}")).unwrap_or_default();
    m.bold_line(&format!("FAILED{at}: "), &cut(reason, LINE_MAX));
    if let Some(answer) = answer.filter(|a| !a.trim().is_empty()) {
        m.line("The agent's last answer:");
        m.pre(&last_lines(answer));
    }
    let tail = last_lines(&stderr_tail.join("\n"));
    if !tail.is_empty() {
        m.line("The end of its stderr:");
        m.pre(&tail);
    }
}

/// A gate's message: what it asks, and what each answer does.
fn gate(m: &mut Msg, g: &super::GateMessage) {
    let question = g.question.as_deref().unwrap_or_default();
    match g.kind {
        GateKind::Plan => {
            m.headline(icon(g.kind), &g.goal);
            m.bold_line(
                "Approve the plan? ",
                &format!("({} step(s), gate {})", g.steps.len(), g.id),
            );
            for (i, step) in g.steps.iter().enumerate() {
                m.line(&format!("{}. {}", i + 1, cut(step, LINE_MAX)));
            }
            m.line("Approve runs it. Reject runs nothing: edit the plan in M1.md, then resume.");
        }
        GateKind::Ask => {
            m.headline(icon(g.kind), &g.goal);
            m.bold_line(
                &format!("Step {} asks (gate {}): ", g.step, g.id),
                &cut(question, LINE_MAX),
            );
            if g.options.is_empty() {
                m.line(
                    "Reply to this message with your answer: the step resumes in its own \
                     session with it.",
                );
            } else {
                m.line("Tap an answer: the step resumes in its own session with it.");
            }
        }
        GateKind::Denied
        | GateKind::Failed
        | GateKind::Review
        | GateKind::Merge
        | GateKind::Cost => {
            let head = match g.kind {
                GateKind::Denied => "Step {} was denied tools (gate {}): ",
                GateKind::Failed => "FAILED at step {} (gate {}): ",
                GateKind::Merge => "Step {} does not merge (gate {}): ",
                GateKind::Cost => "The cost cap stops step {} (gate {}): ",
                GateKind::Review => "Step {}: the review still asks for changes (gate {}): ",
                // Asked above, with their own words.
                GateKind::Plan | GateKind::Ask => "Step {} (gate {}): ",
            };
            m.headline(icon(g.kind), &g.goal);
            let head = head
                .replacen("{}", &g.step.to_string(), 1)
                .replacen("{}", &g.id, 1);
            m.bold_line(&head, &cut(question, LINE_MAX));
            if let Some(answer) = g.answer.as_deref().filter(|a| !a.trim().is_empty()) {
                m.line("The agent's last answer:");
                m.pre(&last_lines(answer));
            }
            let tail = last_lines(&g.stderr_tail.join("\n"));
            if !tail.is_empty() {
                m.line("The end of its stderr:");
                m.pre(&tail);
            }
            for o in &g.options {
                m.line(&format!(
                    "{}: {}.",
                    button_label(g.kind, o),
                    crate::m1::gates::what_it_does(g.kind, o)
                ));
            }
            if g.kind == GateKind::Cost {
                m.line("Or reply with an amount in US dollars: the loop's new cap.");
            }
        }
    }
    m.line(&format!("Or from a shell: {}", cut(&g.how, LINE_MAX)));
}

/// The icon a gate's message begins with.
fn icon(kind: GateKind) -> &'static str {
    match kind {
        GateKind::Plan => "🗳",
        GateKind::Ask => "❓",
        GateKind::Denied => "🔒",
        GateKind::Failed => "❌",
        GateKind::Review => "🔍",
        GateKind::Merge => "🔀",
        GateKind::Cost => "💰",
    }
}

/// The label of a gate's button for `option`.
#[must_use]
pub(crate) fn button_label(kind: GateKind, option: &str) -> String {
    let Some(o) = crate::m1::gates::option_of(kind, option) else {
        return cut(option, 60);
    };
    match o {
        GateOption::Approve => "✅ Approve".into(),
        GateOption::Reject => "✖️ Reject".into(),
        GateOption::Allow => "🔓 Allow".into(),
        GateOption::AllowAll => "🔓 Allow all".into(),
        GateOption::Retry => "🔁 Retry".into(),
        GateOption::Accept => "✅ Accept".into(),
        GateOption::Raise => "➕ Raise the cap".into(),
        GateOption::Skip => "⏭ Skip".into(),
        GateOption::Stop => "⏹ Stop".into(),
    }
}

/// Builds one message line by line; all text passed in is the loop's or the agent's, so it is
/// escaped here and nowhere else.
struct Msg {
    format: Format,
    out: String,
}

impl Msg {
    fn headline(&mut self, icon: &str, goal: &str) {
        let goal = cut(goal.trim(), GOAL_MAX);
        match self.format {
            Format::Html => {
                let _ = writeln!(self.out, "{icon} <b>{}</b>", escape(&goal));
            }
            Format::Plain => {
                let _ = writeln!(self.out, "{icon} {goal}");
            }
        }
    }

    fn bold_line(&mut self, label: &str, rest: &str) {
        match self.format {
            Format::Html => {
                let _ = writeln!(
                    self.out,
                    "<b>{}</b>{}",
                    escape(label.trim_end()),
                    escape(&format!(" {rest}"))
                );
            }
            Format::Plain => {
                let _ = writeln!(self.out, "{label}{rest}");
            }
        }
    }

    fn line(&mut self, text: &str) {
        match self.format {
            Format::Html => self.out.push_str(&escape(text)),
            Format::Plain => self.out.push_str(text),
        }
        self.out.push('\n');
    }

    fn pre(&mut self, lines: &[String]) {
        let body = lines.join("\n");
        match self.format {
            Format::Html => {
                let _ = writeln!(self.out, "<pre>{}</pre>", escape(&body));
            }
            Format::Plain => {
                let _ = writeln!(self.out, "{body}");
            }
        }
    }
}

/// Escapes text for Bot API HTML: the three characters its parser treats specially.
#[must_use]
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_text_is_escaped_and_markup_is_ours() {
        let e = Event::Failed {
            goal: "fix <edit> & co".into(),
            step: Some(2),
            reason: "verify: a < b".into(),
            answer: Some("I changed a.rs.\nThe build still fails on <eof>.".into()),
            stderr_tail: vec!["error: <eof>".into(), "exit 1".into()],
        };
        let html = render(&e);
        assert_eq!(
            html,
            "❌ <b>fix &lt;edit&gt; &amp; co</b>\n\
             <b>FAILED at step 2:</b> verify: a &lt; b\n\
             The agent's last answer:\n\
             <pre>I changed a.rs.\nThe build still fails on &lt;eof&gt;.</pre>\n\
             The end of its stderr:\n\
             <pre>error: &lt;eof&gt;\nexit 1</pre>"
        );
        let plain = render_as(&e, Format::Plain);
        assert!(plain.starts_with("❌ fix <edit> & co\nFAILED at step 2: verify: a < b"));
    }

    #[test]
    fn done_has_goal_first_then_totals_and_each_step() {
        let e = Event::Done {
            goal: "SIGTERMバグを修正".into(),
            summaries: vec![(1, "調査".into()), (2, "実装".into())],
            cost_usd: 1.234,
            tokens: 0,
            elapsed_s: 723,
            report: Some("/p/state/M1.report.html".into()),
            once: None,
            uncommitted: 0,
            pull_request: None,
        };
        assert_eq!(
            render(&e),
            "✅ <b>SIGTERMバグを修正</b>\n<b>DONE:</b> 2 step(s) in 12m03s, $1.23\n1. 調査\n2. 実装\n\
             Report: /p/state/M1.report.html"
        );
    }

    #[test]
    fn done_names_the_pull_request_the_loop_opened() {
        let e = Event::Done {
            goal: "Make the widgets round (#5)".into(),
            summaries: vec![(1, "rounded".into())],
            cost_usd: 0.5,
            tokens: 0,
            elapsed_s: 60,
            report: None,
            once: None,
            uncommitted: 0,
            pull_request: Some("https://github.com/o/r/pull/7".into()),
        };
        assert!(
            render(&e).ends_with("1. rounded\nPull request: https://github.com/o/r/pull/7"),
            "{}",
            render(&e)
        );
    }

    #[test]
    fn waiting_says_why_and_how_to_continue() {
        let e = Event::Waiting {
            goal: "g".into(),
            reason: "which database?".into(),
            how_to_continue: "edit CONSTRAINTS in M1.md, then `loop resume`".into(),
        };
        let text = render_as(&e, Format::Plain);
        assert_eq!(
            text,
            "⏸ g\nWAITING: which database?\nTo continue: edit CONSTRAINTS in M1.md, then `loop resume`"
        );
    }

    #[test]
    fn long_goals_are_cut() {
        let goal = "x".repeat(1000);
        let text = render_as(
            &Event::StepDone {
                goal,
                step: 1,
                total: 2,
                summary: "s".into(),
            },
            Format::Plain,
        );
        let first = text.lines().next().unwrap();
        assert_eq!(first.chars().count(), "☑️ ".chars().count() + GOAL_MAX);
        assert!(first.ends_with('…'));
    }
}
