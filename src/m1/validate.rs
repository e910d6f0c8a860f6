//! What the keys mean: the rules a syntactically fine M1.md must also meet before the runner
//! acts on it. Every error names the line and column to fix and what was expected there.
//! Unknown keys are allowed anywhere (people annotate their files); known keys must have
//! the right shape and type.

use super::document::Document;
use super::error::Error;
use super::line;
use super::steps;
use super::view::{Status, StepState, result_step};

/// The type a known scalar must read as.
#[derive(Clone, Copy)]
enum Ty {
    /// A whole number ≥ 0.
    Count,
    /// An exit code, or `(pending)`.
    Exit,
    Bool,
    /// A decimal ≥ 0 (money, seconds).
    Amount,
}

const TOP_SCALARS: &[&str] = &["CONSTRAINTS", "LAST_ACTION", "NEXT_ACTION", "VERIFY"];
const TOP_BLOCKS: &[&str] = &["PLAN", "CURRENT", "RESULTS", "LIMITS"];
const CURRENT_FIELDS: &[(&str, Ty)] = &[("CC_PID", Ty::Count), ("ATTEMPT", Ty::Count)];
const RESULT_FIELDS: &[(&str, Ty)] = &[
    ("EXIT", Ty::Exit),
    ("VERIFIED", Ty::Bool),
    ("ATTEMPTS", Ty::Count),
    ("COST_USD", Ty::Amount),
    ("DURATION_S", Ty::Amount),
];
const LIMIT_FIELDS: &[(&str, Ty)] = &[
    ("MAX_RETRIES", Ty::Count),
    ("MAX_STEPS", Ty::Count),
    ("STEP_TIMEOUT_MIN", Ty::Count),
    ("IDLE_TIMEOUT_MIN", Ty::Count),
    ("MAX_COST_USD", Ty::Amount),
];

/// All rule violations in `doc` (empty when it is valid).
pub fn check(doc: &Document) -> Vec<Error> {
    let mut c = Checker {
        doc,
        errors: Vec::new(),
    };
    if let Some(i) = doc.child(None, "STATUS")
        && let Some(v) = c.scalar(i)
        && let Err(msg) = v.parse::<Status>()
    {
        c.at_value(i, msg);
    }
    match doc.child(None, "GOAL") {
        None => c.errors.push(Error::new(
            1,
            1,
            "missing GOAL: expected a line `GOAL: what the loop should achieve`",
        )),
        Some(i) => {
            if c.scalar(i).is_none_or(|g| g.trim().is_empty()) {
                c.at_value(
                    i,
                    "empty GOAL: expected `GOAL: what the loop should achieve`",
                );
            }
        }
    }
    for key in TOP_SCALARS {
        if let Some(i) = doc.child(None, key) {
            c.scalar(i);
        }
    }
    for key in TOP_BLOCKS {
        if let Some(i) = doc.child(None, key) {
            c.block(i);
        }
    }
    c.plan();
    c.fields(&["CURRENT"], CURRENT_FIELDS);
    c.fields(&["LIMITS"], LIMIT_FIELDS);
    if let Some(r) = doc.find(&["RESULTS"]) {
        for i in doc.children(Some(r)).collect::<Vec<_>>() {
            if result_step(&doc.key_at(i).key).is_some() && c.block(i) {
                for &(key, ty) in RESULT_FIELDS {
                    if let Some(j) = doc.child(Some(i), key) {
                        c.typed(j, ty);
                    }
                }
            }
        }
    }
    c.errors
}

struct Checker<'a> {
    doc: &'a Document,
    errors: Vec<Error>,
}

impl Checker<'_> {
    fn at_value(&mut self, idx: usize, msg: impl Into<String>) {
        let l = &self.doc.lines[idx];
        let k = self.doc.key_at(idx);
        let at = k.value.as_ref().map_or(k.colon + 1, |v| v.start);
        self.errors
            .push(Error::new(idx + 1, line::column(&l.text, at), msg));
    }

    fn at_key(&mut self, idx: usize, msg: impl Into<String>) {
        let k = self.doc.key_at(idx);
        self.errors.push(Error::new(idx + 1, k.indent + 1, msg));
    }

    /// The value of a key that must be a scalar; `None` (with an error if it has nested keys)
    /// when it has no value.
    fn scalar(&mut self, idx: usize) -> Option<String> {
        let k = self.doc.key_at(idx);
        if let Some(v) = &k.value {
            return Some(v.text.clone());
        }
        if self.doc.children(Some(idx)).next().is_some() {
            let msg = format!("expected a value after `{}:`, not nested keys", k.key);
            self.at_value(idx, msg);
        }
        None
    }

    /// Whether the key is a block (reports it when it has a value instead).
    fn block(&mut self, idx: usize) -> bool {
        let k = self.doc.key_at(idx);
        if k.value.is_none() {
            return true;
        }
        let msg = format!(
            "expected a block: `{}:` alone on its line, with indented keys under it",
            k.key
        );
        self.at_value(idx, msg);
        false
    }

    fn typed(&mut self, idx: usize, ty: Ty) -> Option<String> {
        let v = self.scalar(idx)?;
        let key = self.doc.key_at(idx).key.clone();
        let ok = match ty {
            Ty::Count => v.parse::<u64>().is_ok(),
            Ty::Exit => v == "(pending)" || v.parse::<i32>().is_ok(),
            Ty::Bool => v == "true" || v == "false",
            Ty::Amount => v.parse::<f64>().is_ok_and(|x| x.is_finite() && x >= 0.0),
        };
        if !ok {
            let expected = match ty {
                Ty::Count => "a whole number",
                Ty::Exit => "an exit code or `(pending)`",
                Ty::Bool => "`true` or `false`",
                Ty::Amount => "a number ≥ 0",
            };
            self.at_value(idx, format!("{key}: expected {expected}, found `{v}`"));
            return None;
        }
        Some(v)
    }

    fn fields(&mut self, path: &[&str], fields: &[(&str, Ty)]) {
        let Some(b) = self.doc.find(path) else { return };
        for &(key, ty) in fields {
            if let Some(i) = self.doc.child(Some(b), key) {
                self.typed(i, ty);
            }
        }
    }

    fn plan(&mut self) {
        let doc = self.doc;
        let Some(plan) = doc.find(&["PLAN"]) else {
            return;
        };
        let total = doc
            .child(Some(plan), "TOTAL_STEPS")
            .and_then(|i| Some((i, self.typed(i, Ty::Count)?.parse::<u64>().ok()?)));
        let current = doc
            .child(Some(plan), "CURRENT_STEP")
            .and_then(|i| Some((i, self.typed(i, Ty::Count)?.parse::<u64>().ok()?)));
        let mut count = 0u64;
        if let Some(s) = doc.child(Some(plan), "STEPS")
            && self.block(s)
        {
            for i in doc.children(Some(s)).collect::<Vec<_>>() {
                count += 1;
                self.step(i, count);
            }
        }
        if let Some((i, t)) = total
            && t != count
        {
            self.at_value(
                i,
                format!("TOTAL_STEPS is {t} but PLAN.STEPS lists {count} steps: expected {count}"),
            );
        }
        let total = total.map_or(count, |(_, t)| t);
        if let Some((i, c)) = current
            && c > total
        {
            self.at_value(
                i,
                format!("CURRENT_STEP {c} is outside the plan: expected 0 to {total}"),
            );
        }
    }

    /// One line under PLAN.STEPS, expected to be step number `expect`.
    fn step(&mut self, idx: usize, expect: u64) {
        let k = self.doc.key_at(idx);
        let Ok(n) = k.key.parse::<u64>() else {
            self.at_key(
                idx,
                "malformed step: expected `N: [STATE] text` with N a step number",
            );
            return;
        };
        if n != expect {
            self.at_key(
                idx,
                format!("step {n} out of order: expected step {expect}"),
            );
        }
        let Some(v) = &k.value else {
            self.at_value(
                idx,
                "malformed step: expected `[STATE] text` after the step number",
            );
            return;
        };
        let Some((state, _)) = steps::split(&v.text) else {
            self.at_value(idx, "malformed step: expected `N: [STATE] text`");
            return;
        };
        if let Err(msg) = state.parse::<StepState>() {
            let text = &self.doc.lines[idx].text;
            let at = v.start + 1 + usize::from(v.quoted);
            self.errors
                .push(Error::new(idx + 1, line::column(text, at), msg));
        }
    }
}
