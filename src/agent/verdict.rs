//! The agent's own answer: its verdict on a step, and the plan of a planning call.
//!
//! Both are read strictly. An agent that writes "I will print `STEP_DONE` when finished" in
//! prose has not finished; only the final line counts, and only in the exact form.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// The agent's verdict on its step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `STEP_DONE: <summary>`.
    Done(String),
    /// `STEP_BLOCKED: <question>`: a human must decide.
    Blocked(String),
    /// `STEP_FAILED: <reason>`.
    Failed(String),
    /// `STEP_RESTART: <reason>`: go on in a fresh session, from the handoff note the agent
    /// wrote.
    Restart(String),
    /// No valid verdict line at the end.
    Missing,
}

/// Markup an agent may wrap the line or its prefix in: `**bold**`, `__bold__`, `` `code` ``.
const MARKUP: &str = r"(?:\*\*|__|`)?";

static LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{MARKUP}(STEP_DONE|STEP_BLOCKED|STEP_FAILED|STEP_RESTART){MARKUP}:{MARKUP}[ \t]*(.*)$"
    ))
    .expect("valid regex")
});

/// The verdict in `result_text`: only the last non-empty line counts (a closing code fence
/// after it is skipped), it must start with `STEP_DONE:`, `STEP_BLOCKED:` or `STEP_FAILED:`
/// (optionally wrapped in `**` or backticks), and the text after the colon must not be empty.
#[must_use]
pub fn verdict(result_text: &str) -> Verdict {
    let Some(last) = result_text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !is_fence(l))
    else {
        return Verdict::Missing;
    };
    let Some(caps) = LINE.captures(last) else {
        return Verdict::Missing;
    };
    let text = strip_trailing_markup(&caps[2]);
    if text.is_empty() {
        return Verdict::Missing;
    }
    let text = text.to_owned();
    match &caps[1] {
        "STEP_DONE" => Verdict::Done(text),
        "STEP_BLOCKED" => Verdict::Blocked(text),
        "STEP_RESTART" => Verdict::Restart(text),
        _ => Verdict::Failed(text),
    }
}

/// What an answer ended with, for the live line: `done`, `STEP_FAILED: reason`, `asks:
/// question`, a reviewer's verdict line, or `answered` when it has no verdict line (a plan, or
/// an answer the loop then judges). A run that failed or asked is never shown as done.
#[must_use]
pub(crate) fn ended_with(result_text: &str) -> String {
    match verdict(result_text) {
        Verdict::Done(_) => "done".to_owned(),
        Verdict::Failed(why) => format!("STEP_FAILED: {why}"),
        Verdict::Blocked(question) => format!("asks: {question}"),
        Verdict::Restart(why) => format!("STEP_RESTART: {why}"),
        Verdict::Missing => result_text
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty() && !is_fence(l))
            .filter(|l| l.starts_with("REVIEW_APPROVE:") || l.starts_with("REVIEW_CHANGES:"))
            .map_or_else(|| "answered".to_owned(), str::to_owned),
    }
}

/// The answer without its verdict line (and what follows it), for a person to read what the
/// agent said; the whole text when it has no verdict line.
#[must_use]
pub fn without_verdict(result_text: &str) -> String {
    let lines: Vec<&str> = result_text.lines().collect();
    let at = lines
        .iter()
        .rposition(|l| !l.trim().is_empty() && !is_fence(l.trim()));
    match at {
        Some(i) if LINE.is_match(lines[i].trim()) => lines[..i].join("\n").trim_end().to_owned(),
        _ => result_text.trim_end().to_owned(),
    }
}

fn is_fence(line: &str) -> bool {
    line.len() >= 3 && (line.chars().all(|c| c == '`') || line.chars().all(|c| c == '~'))
}

fn strip_trailing_markup(s: &str) -> &str {
    let mut s = s.trim();
    while let Some(rest) = ["**", "__", "`"].iter().find_map(|m| s.strip_suffix(m)) {
        s = rest.trim_end();
    }
    s
}

/// The steps of a planning call's answer: a JSON object `{"steps": ["...", ...]}`, bare or in a
/// ```` ```json ```` fence, anywhere in the text. When several objects have `steps`, the last
/// one is the answer (an agent may show an example first). In step texts every run of
/// whitespace, line breaks included, becomes one space, since a step is one line of M1.md.
///
/// # Errors
/// A message saying what is wrong: no such object, `steps` not a list, an entry that is not a
/// string or is empty, or an empty list.
pub fn parse_plan(result_text: &str) -> Result<Vec<String>, String> {
    let Some(steps) = last_steps_value(result_text) else {
        return Err(
            "the planning answer holds no JSON object with a \"steps\" list \
             (expected {\"steps\": [\"first step\", \"second step\", ...]})"
                .to_owned(),
        );
    };
    let Value::Array(items) = steps else {
        return Err(format!(
            "\"steps\" must be a list of strings, but it is {}",
            kind_of(&steps)
        ));
    };
    if items.is_empty() {
        return Err("the plan has no steps (\"steps\" is an empty list)".to_owned());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let n = i + 1;
            let Value::String(text) = item else {
                return Err(format!(
                    "step {n} must be a string, but it is {}",
                    kind_of(item)
                ));
            };
            let folded = crate::text::fold(text);
            if folded.is_empty() {
                return Err(format!("step {n} is empty"));
            }
            Ok(folded)
        })
        .collect()
}

/// The `steps` value of the last JSON object in `text` that has one, searching every `{`
/// (which also finds objects inside code fences).
fn last_steps_value(text: &str) -> Option<Value> {
    last_plan_object(text).and_then(|mut o| o.remove("steps"))
}

/// The plan's optional `"after": {"4": [2, 3]}` (step 4 starts once steps 2 and 3 are done),
/// from the same JSON object as its steps; each number a step of the `count` planned, none
/// waiting for itself, and no cycle.
///
/// # Errors
/// What is wrong with it, for the planning call's next attempt.
pub fn parse_plan_after(
    result_text: &str,
    count: usize,
) -> Result<std::collections::BTreeMap<u32, Vec<u32>>, String> {
    let mut after = std::collections::BTreeMap::new();
    let Some(value) = last_plan_object(result_text).and_then(|mut o| o.remove("after")) else {
        return Ok(after);
    };
    let Value::Object(map) = value else {
        return Err(format!(
            "\"after\" must be an object such as {{\"3\": [1, 2]}}, but it is {}",
            kind_of(&value)
        ));
    };
    let in_plan = |n: u64| n >= 1 && usize::try_from(n).is_ok_and(|n| n <= count);
    for (key, deps) in map {
        let n: u32 = key
            .trim()
            .parse()
            .ok()
            .filter(|n| in_plan(u64::from(*n)))
            .ok_or_else(|| {
                format!("\"after\" names step {key:?}, which is not one of the {count} steps")
            })?;
        let list = deps
            .as_array()
            .ok_or_else(|| format!("\"after\" of step {n} must be a list of step numbers"))?
            .iter()
            .map(|d| {
                d.as_u64()
                    .filter(|d| in_plan(*d) && *d != u64::from(n))
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or_else(|| format!("step {n} cannot come after {d}"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        after.insert(n, list);
    }
    if let Some(c) = crate::m1::steps::cycle(&after) {
        let around: Vec<String> = c.iter().map(u32::to_string).collect();
        return Err(format!(
            "\"after\" makes a cycle ({}): no order can run these steps",
            around.join(" waits for ")
        ));
    }
    Ok(after)
}

/// The last JSON object in `text` that has a `steps` key.
fn last_plan_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    let mut found = None;
    let mut skip_to = 0;
    for (at, _) in text.match_indices('{') {
        if at < skip_to {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        let Some(Ok(Value::Object(obj))) = values.next() else {
            continue;
        };
        if obj.contains_key("steps") {
            found = Some(obj);
            // Objects nested inside this one are part of it, not separate answers.
            skip_to = at + values.byte_offset();
        }
    }
    found
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
