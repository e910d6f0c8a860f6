//! What the keys mean: the rules a syntactically fine M1.md must also meet before the runner
//! acts on it. Every error names the line and column to fix and what was expected there.
//! Unknown keys are allowed anywhere (people annotate their files); known keys must have
//! the right shape and type.

use super::document::Document;
use super::error::Error;
use super::gates::{GateState, gate_number};
use super::hidden::{self, KNOWN_TOP};
use super::keys::Key;
use super::keys::{
    AgentKey, CurrentKey, GateKey, GithubKey, Kind, LimitKey, ParallelKey, PlanKey, Problem,
    ResultKey, RunKey, Top,
};
use super::line::{self, Kind as LineKind};
use super::steps;
use super::syntax::{self, Fenced};
use super::view::{Status, StepState, result_step};

/// The longest argument a program can be given on Linux (`MAX_ARG_STRLEN`, 128 KiB with its
/// closing NUL): `VERIFY` runs as one, so a longer command could never start.
const MAX_ARGUMENT: usize = 128 * 1024 - 1;

/// All rule violations in `doc` (empty when it is valid).
pub(super) fn check(doc: &Document) -> Vec<Error> {
    let mut c = Checker {
        doc,
        fenced: syntax::fences(&doc.lines),
        errors: Vec::new(),
    };
    // A known key that is absent may be hiding in a line that reads as text.
    c.unclosed_fence();
    c.top();
    for key in [
        "PLAN", "CURRENT", "RESULTS", "LIMITS", "AGENT", "GATES", "PARALLEL",
    ] {
        if let Some(i) = doc.child(None, key) {
            c.block(i);
        }
    }
    c.misplaced();
    c.plan();
    c.lost_plan();
    c.fields(CurrentKey::BLOCK, CurrentKey::ALL, |k| (k.name(), k.kind()));
    c.fields(LimitKey::BLOCK, LimitKey::ALL, |k| (k.name(), k.kind()));
    c.one_timeout_each();
    c.fields(AgentKey::BLOCK, AgentKey::ALL, |k| (k.name(), k.kind()));
    c.results();
    c.gates();
    c.parallel();
    c.fields(GithubKey::BLOCK, GithubKey::ALL, |k| (k.name(), k.kind()));
    c.errors
}

struct Checker<'a> {
    doc: &'a Document,
    fenced: Vec<Fenced>,
    errors: Vec<Error>,
}

impl Checker<'_> {
    /// The keys at the top: STATUS and GOAL there and readable, each other key of its kind,
    /// VERIFY short enough to run.
    fn top(&mut self) {
        let doc = self.doc;
        for key in KNOWN_TOP {
            if doc.child(None, key).is_none()
                && !self.hidden(key)
                && matches!(*key, "STATUS" | "GOAL")
            {
                let msg = format!("missing {key}: expected a line {}", hidden::expected(key));
                self.errors.push(Error::new(1, 1, msg));
            }
        }
        // STATUS first, as the file's first line (the other keys follow GOAL's check).
        if let Some(i) = doc.child(None, Top::Status.name()) {
            self.typed(i, Top::Status.kind());
        }
        if let Some(i) = doc.child(None, "GOAL")
            && self.scalar(i).is_none_or(|g| g.trim().is_empty())
        {
            self.at_value(
                i,
                "empty GOAL: expected `GOAL: what the loop should achieve`",
            );
        }
        for key in Top::ALL {
            if !matches!(key, Top::Status | Top::Goal)
                && let Some(i) = doc.child(None, key.name())
            {
                self.typed(i, key.kind());
            }
        }
        // The value as it is: a VERIFY that is no value was reported with the other keys.
        if let Some(i) = doc.child(None, "VERIFY")
            && let Some(len) = doc.key_at(i).value.as_ref().map(|v| v.text.len())
            && len > MAX_ARGUMENT
        {
            self.at_value(
                i,
                format!(
                    "VERIFY: a command of {len} bytes, longer than the {MAX_ARGUMENT} one argument \
                     may be (Linux's limit, and `sh -c` takes the command as one): put it in a \
                     script, and make VERIFY run that"
                ),
            );
        }
    }

    /// An exact timeout and an older file's whole minutes for the same limit: which one counts
    /// would be a guess.
    fn one_timeout_each(&mut self) {
        let doc = self.doc;
        for (exact, minutes) in [
            (LimitKey::StepTimeout, LimitKey::StepTimeoutMin),
            (LimitKey::IdleTimeout, LimitKey::IdleTimeoutMin),
        ] {
            let (key, min) = (exact.name(), minutes.name());
            if doc.find(&["LIMITS", key]).is_some()
                && let Some(i) = doc.find(&["LIMITS", min])
            {
                self.at_key(
                    i,
                    format!(
                        "LIMITS has both {key} and {min}: expected one; keep {key} (e.g. \
                         `{key}: 90s`) and remove {min}"
                    ),
                );
            }
        }
    }

    /// A key of one block found directly under another (`STEPS:` under `RESULTS:`, a
    /// `STEP_1:` record under `PLAN:`): the block's own reading would take it as absent, and a
    /// loop whose PLAN and RESULTS headers were swapped by hand would plan anew.
    fn misplaced(&mut self) {
        let doc = self.doc;
        let belongs = |name: &str| -> Option<&'static str> {
            if PlanKey::ALL.iter().any(|k| k.name() == name)
                || [super::keys::STEPS, super::keys::AFTER].contains(&name)
            {
                Some(PlanKey::BLOCK[0])
            } else if result_step(name).is_some() {
                Some("RESULTS")
            } else if LimitKey::ALL.iter().any(|k| k.name() == name) {
                Some(LimitKey::BLOCK[0])
            } else if AgentKey::ALL.iter().any(|k| k.name() == name) {
                Some(AgentKey::BLOCK[0])
            } else {
                None
            }
        };
        for block in ["PLAN", "RESULTS", "LIMITS", "AGENT"] {
            let Some(b) = doc.child(None, block) else {
                continue;
            };
            for i in doc.children(Some(b)).collect::<Vec<_>>() {
                let key = doc.key_at(i).key.clone();
                if let Some(home) = belongs(&key).filter(|home| *home != block) {
                    let hint = if matches!((block, home), ("PLAN", "RESULTS") | ("RESULTS", "PLAN"))
                    {
                        " (are the PLAN: and RESULTS: headers swapped?)"
                    } else {
                        ""
                    };
                    self.at_key(
                        i,
                        format!(
                            "{block} holds `{key}:`, a key of {home}: move it under `{home}:`{hint}"
                        ),
                    );
                }
            }
        }
    }

    /// Each step's RESULTS block, and the kind of each of its keys.
    fn results(&mut self) {
        let doc = self.doc;
        let Some(r) = doc.find(&["RESULTS"]) else {
            return;
        };
        for i in doc.children(Some(r)).collect::<Vec<_>>() {
            if result_step(&doc.key_at(i).key).is_some() && self.block(i) {
                for key in ResultKey::ALL {
                    if let Some(j) = doc.child(Some(i), key.name()) {
                        self.typed(j, key.kind());
                    }
                }
            }
        }
    }

    /// `PARALLEL:`: the integration branch and base, and each step's record, every key of its
    /// kind (a branch git would refuse, a base that is no commit id, a relative worktree), and
    /// no record of a step the plan lacks.
    fn parallel(&mut self) {
        let doc = self.doc;
        self.fields(ParallelKey::BLOCK, ParallelKey::ALL, |k| {
            (k.name(), k.kind())
        });
        let Some(p) = doc.find(ParallelKey::BLOCK) else {
            return;
        };
        let steps = doc
            .find(&[PlanKey::BLOCK[0], super::keys::STEPS])
            .map_or(0, |s| doc.children(Some(s)).count());
        for i in doc.children(Some(p)).collect::<Vec<_>>() {
            let Some(n) = result_step(&doc.key_at(i).key) else {
                continue;
            };
            if !self.block(i) {
                continue;
            }
            if n == 0 || usize::try_from(n).is_ok_and(|n| n > steps) {
                self.at_key(
                    i,
                    format!(
                        "PARALLEL.STEP_{n} is the record of a step the plan lacks (PLAN.STEPS \
                         has {steps}): remove it"
                    ),
                );
                continue;
            }
            for key in RunKey::ALL {
                if let Some(j) = doc.child(Some(i), key.name())
                    && let Some(v) = self.typed(j, key.kind())
                {
                    self.owned(j, *key, n, &v);
                }
            }
        }
        if let (Some(id), Some(b)) = (
            doc.get(&[super::keys::Top::LoopId.name()]),
            doc.child(Some(p), ParallelKey::Branch.name()),
        ) && let Some(v) = doc.key_at(b).value.as_ref().map(|v| v.text.clone())
            && v != format!("loop/{id}")
        {
            self.at_value(
                b,
                format!(
                    "PARALLEL.BRANCH `{v}` is not this loop's integration branch: a loop that runs \
                     its steps at once merges them on `loop/{id}` alone, never on a branch of \
                     yours; fix or remove it"
                ),
            );
        }
    }

    /// A key of step `n`'s record that names a place: the loop's own, under its id (its
    /// worktree and loop under `parallel/<LOOP_ID>/`, its branch `loop/<LOOP_ID>-step-N`),
    /// never another loop's or a place of the person's (`/etc`, `master`), which the runner
    /// would otherwise work in or remove.
    fn owned(&mut self, idx: usize, key: RunKey, n: u32, v: &str) {
        let Some(id) = self.doc.get(&[super::keys::Top::LoopId.name()]) else {
            return;
        };
        let numbered = |s: &str, stem: &str| {
            s == stem
                || s.strip_prefix(stem)
                    .and_then(|k| k.strip_prefix('.'))
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        };
        let path = std::path::Path::new(v);
        let names = |p: &std::path::Path| -> Vec<String> {
            p.components()
                .rev()
                .take(3)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect()
        };
        let (fine, want) = match key {
            RunKey::Worktree => {
                let c = names(path);
                (
                    c.len() == 3
                        && numbered(&c[0], &format!("step-{n}"))
                        && c[1] == id
                        && c[2] == "parallel",
                    format!("a worktree of this loop's own, `…/parallel/{id}/step-{n}`"),
                )
            }
            RunKey::Loop => {
                let dir = path.parent().map(names).unwrap_or_default();
                (
                    dir.len() == 3
                        && numbered(&dir[0], &format!("step-{n}.loop"))
                        && dir[1] == id
                        && dir[2] == "parallel",
                    format!("this loop's own step loop, `…/parallel/{id}/step-{n}.loop/M1.md`"),
                )
            }
            RunKey::Branch => (
                numbered(v, &format!("loop/{id}-step-{n}")),
                format!("this loop's own branch, `loop/{id}-step-{n}`"),
            ),
            _ => return,
        };
        if !fine {
            self.at_value(
                idx,
                format!(
                    "PARALLEL.STEP_{n}.{} names `{v}`, not {want}: fix or remove the record",
                    key.name()
                ),
            );
        }
    }

    /// Each gate's block: a `G<n>` key, KIND and STATE present, each key of its kind, and a
    /// DECIDED gate with its CHOICE.
    fn gates(&mut self) {
        let doc = self.doc;
        let Some(g) = doc.find(GateKey::BLOCK) else {
            return;
        };
        for i in doc.children(Some(g)).collect::<Vec<_>>() {
            let key = doc.key_at(i).key.clone();
            if gate_number(&key).is_none() {
                self.at_key(
                    i,
                    format!("GATES holds `{key}`: expected a gate id such as `G1`"),
                );
                continue;
            }
            if !self.block(i) {
                continue;
            }
            for k in GateKey::ALL {
                if let Some(j) = doc.child(Some(i), k.name()) {
                    self.typed(j, k.kind());
                }
            }
            for k in [GateKey::Kind, GateKey::State] {
                if doc.child(Some(i), k.name()).is_none() {
                    self.at_key(
                        i,
                        format!(
                            "gate {key} has no {}: expected `{}: …` under it",
                            k.name(),
                            k.name()
                        ),
                    );
                }
            }
            let decided = doc
                .child(Some(i), GateKey::State.name())
                .and_then(|j| doc.key_at(j).value.as_ref())
                .is_some_and(|v| v.text.trim() == GateState::Decided.as_str());
            if decided && doc.child(Some(i), GateKey::Choice.name()).is_none() {
                self.at_key(
                    i,
                    format!(
                        "gate {key} is DECIDED but has no CHOICE: expected `CHOICE: …` under it"
                    ),
                );
            }
        }
    }

    /// A code fence that is never closed turns the rest of the file into text: reported once,
    /// at the first key or step line it hides (a fence that hides only prose is fine).
    fn unclosed_fence(&mut self) {
        let doc = self.doc;
        let Some(i) = (0..doc.lines.len()).find(|&i| {
            matches!(self.fenced[i], Fenced::Unclosed { .. }) && {
                let t = &doc.lines[i].text;
                hidden::step_like(t)
                    || hidden::lookalike(t).is_some()
                    || syntax::top_key_len(t).is_some_and(|n| KNOWN_TOP.contains(&&t[..n]))
            }
        }) else {
            return;
        };
        let Fenced::Unclosed { opened } = self.fenced[i] else {
            return;
        };
        let t = &doc.lines[i].text;
        let what = match syntax::top_key_len(t) {
            Some(n) if !hidden::step_like(t) => format!("`{}`", &t[..=n]),
            _ => "this line".to_string(),
        };
        self.errors.push(Error::new(
            i + 1,
            1,
            format!(
                "{what} is inside the code fence opened on line {}, which is never closed, so \
                 it and every key after it read as text: close the fence (a line of ```) \
                 before this line",
                opened + 1
            ),
        ));
    }

    /// Reports the line that hides the absent top-level key `key` (a lookalike, or a key
    /// inside a code fence that is never closed, which [`Self::unclosed_fence`] reports);
    /// whether there was one.
    fn hidden(&mut self, key: &str) -> bool {
        let doc = self.doc;
        let Some((i, fence, look)) = hidden::candidates(&doc.lines, &self.fenced, key).next()
        else {
            return false;
        };
        if let (Fenced::No, Some(lk)) = (fence, look) {
            self.errors.push(Error::new(i + 1, lk.column, lk.why));
        }
        true
    }

    /// A RUNNING, WAITING or FAILED loop with no steps plans anew; that is right for a new
    /// loop, and wrong when the file shows that a plan existed and can no longer be read.
    fn lost_plan(&mut self) {
        let doc = self.doc;
        let status = doc.get(&["STATUS"]).and_then(|s| s.parse::<Status>().ok());
        if !matches!(
            status,
            Some(Status::Running | Status::Waiting | Status::Failed)
        ) || !steps::list(doc).is_empty()
        {
            return;
        }
        let anew = "PLAN lists no steps, so `loop resume` would plan anew";
        if let Some(r) = doc.find(&["RESULTS"])
            && let Some(i) = doc
                .children(Some(r))
                .find(|&i| result_step(&doc.key_at(i).key).is_some_and(|n| n >= 1))
        {
            let k = &doc.key_at(i).key;
            self.at_key(
                i,
                format!(
                    "RESULTS holds {k}, but {anew}: the plan was lost; put the steps back under \
                     PLAN.STEPS (or remove the results of old steps to plan anew)"
                ),
            );
        }
        // Steps in a fence that is never closed are reported with the fence.
        if let Some(i) = (0..doc.lines.len()).find(|&i| {
            let l = &doc.lines[i];
            l.kind == LineKind::Prose && self.fenced[i] == Fenced::No && hidden::step_like(&l.text)
        }) {
            self.errors.push(Error::new(
                i + 1,
                1,
                format!(
                    "this line looks like a step (`N: [STATE] text`) but is not under \
                     PLAN.STEPS, and {anew}; put it under `  STEPS:` in PLAN, indented 4 spaces"
                ),
            ));
        }
        if let Some(p) = doc.find(&["PLAN"])
            && doc.key_at(p).value.is_none()
            && doc.lines[p + 1..].iter().all(|l| l.kind == LineKind::Blank)
        {
            self.at_key(
                p,
                format!(
                    "the file ends at `PLAN:` with nothing under it and STATUS is {}: it looks \
                     cut off, and {anew}; restore the rest of the file (or remove `PLAN:` to \
                     plan anew)",
                    status.map_or("", Status::as_str)
                ),
            );
        }
    }

    fn at_value(&mut self, idx: usize, msg: impl Into<String>) {
        let (line, column) = self.doc.value_position(idx);
        self.errors.push(Error::new(line, column, msg));
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

    fn typed(&mut self, idx: usize, kind: Kind) -> Option<String> {
        let key = self.doc.key_at(idx).key.clone();
        let Some(v) = self.scalar(idx) else {
            // `PARALLEL:` with nothing after it, and nothing under it: an empty value, not
            // an absent key, where the key's kind needs one.
            if self.doc.children(Some(idx)).next().is_none()
                && let Err(problem) = kind.check("")
            {
                let expected = match problem {
                    Problem::Expected(e) => format!("expected {e}"),
                    Problem::Said(said) => said,
                };
                self.at_value(
                    idx,
                    format!("{key}: empty: {expected}, or remove the line for the default"),
                );
            }
            return None;
        };
        match kind.check(&v) {
            Ok(()) => Some(v),
            Err(Problem::Expected(expected)) => {
                self.at_value(idx, format!("{key}: expected {expected}, found `{v}`"));
                None
            }
            Err(Problem::Said(msg)) => {
                self.at_value(idx, msg);
                None
            }
        }
    }

    /// Checks the keys of the block at `path` that are declared (`all`, each with its name and
    /// kind).
    fn fields<K: Copy>(&mut self, path: &[&str], all: &[K], def: fn(K) -> (&'static str, Kind)) {
        let Some(b) = self.doc.find(path) else { return };
        for k in all {
            let (key, kind) = def(*k);
            if let Some(i) = self.doc.child(Some(b), key) {
                self.typed(i, kind);
            }
        }
    }

    fn plan(&mut self) {
        let doc = self.doc;
        let Some(plan) = doc.find(PlanKey::BLOCK) else {
            return;
        };
        let mut count_of = |key: PlanKey| {
            let i = doc.child(Some(plan), key.name())?;
            Some((i, self.typed(i, key.kind())?.parse::<u64>().ok()?))
        };
        let total = count_of(PlanKey::TotalSteps);
        let current = count_of(PlanKey::CurrentStep);
        let mut count = 0u64;
        if let Some(s) = doc.child(Some(plan), super::keys::STEPS)
            && self.block(s)
        {
            for i in doc.children(Some(s)).collect::<Vec<_>>() {
                count += 1;
                self.step(i, count);
            }
        }
        // The count follows the list: a step added or removed by hand is not an error, and
        // the runner writes the count with its next write. No steps at all under a count are
        // steps that were lost, and setting the count to 0 would plan anew.
        if let Some((i, t)) = total
            && t > 0
            && count == 0
        {
            self.at_value(
                i,
                format!(
                    "TOTAL_STEPS is {t} but PLAN.STEPS lists no steps: the plan's steps are \
                     missing; put them back under PLAN.STEPS (or set TOTAL_STEPS: 0 to plan anew)"
                ),
            );
        }
        if let Some(a) = doc.child(Some(plan), super::keys::AFTER)
            && self.block(a)
        {
            self.after(a, count);
        }
        let total = if count > 0 {
            count
        } else {
            total.map_or(count, |(_, t)| t)
        };
        if let Some((i, c)) = current
            && c > total
        {
            let msg = if total == 0 && count == 0 {
                format!(
                    "CURRENT_STEP is {c} but PLAN.STEPS lists no steps: the plan's steps are \
                     missing; put them back under PLAN.STEPS (or set CURRENT_STEP: 0 to plan anew)"
                )
            } else {
                format!("CURRENT_STEP {c} is outside the plan: expected 0 to {total}")
            };
            self.at_value(i, msg);
        }
    }

    /// `PLAN.AFTER`'s lines, `N: M, K`: each names steps of the plan (`count` of them), none
    /// itself, and together no cycle.
    fn after(&mut self, block: usize, count: u64) {
        let doc = self.doc;
        let mut lines: Vec<(usize, u32)> = Vec::new();
        let mut edges = std::collections::BTreeMap::new();
        for i in doc.children(Some(block)).collect::<Vec<_>>() {
            let k = doc.key_at(i);
            let Ok(n) = k.key.parse::<u32>() else {
                self.at_key(
                    i,
                    "malformed PLAN.AFTER line: expected `N: M, K` (step N starts after steps M \
                     and K)",
                );
                continue;
            };
            if n == 0 || u64::from(n) > count {
                self.at_key(
                    i,
                    format!("PLAN.AFTER names step {n}, but PLAN.STEPS has steps 1 to {count}"),
                );
                continue;
            }
            let Some(v) = self.scalar(i) else {
                self.at_value(
                    i,
                    format!("PLAN.AFTER {n}: expected the steps it comes after"),
                );
                continue;
            };
            let deps = match super::steps::parse_after(&v) {
                Ok(d) => d,
                Err(msg) => {
                    self.at_value(i, format!("PLAN.AFTER {n}: {msg}"));
                    continue;
                }
            };
            if let Some(d) = deps.iter().find(|d| **d == n) {
                self.at_value(
                    i,
                    format!("PLAN.AFTER {n}: step {d} cannot come after itself"),
                );
                continue;
            }
            if let Some(d) = deps.iter().find(|d| **d == 0 || u64::from(**d) > count) {
                self.at_value(
                    i,
                    format!(
                        "PLAN.AFTER {n}: step {d} is not in the plan (PLAN.STEPS has steps 1 to \
                         {count})"
                    ),
                );
                continue;
            }
            lines.push((i, n));
            edges.insert(n, deps);
        }
        if let Some(c) = super::steps::cycle(&edges)
            && let Some((i, _)) = lines.iter().find(|(_, n)| *n == c[0])
        {
            let around: Vec<String> = c.iter().map(u32::to_string).collect();
            self.at_value(
                *i,
                format!(
                    "PLAN.AFTER makes a cycle ({}): no order can run these steps; remove one of \
                     these lines",
                    around.join(" waits for ")
                ),
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
        let Some((state, step_text)) = steps::split(&v.text) else {
            self.at_value(idx, "malformed step: expected `N: [STATE] text`");
            return;
        };
        let text = &self.doc.lines[idx].text;
        let at = v.start + 1 + usize::from(v.quoted);
        if let Err(msg) = state.parse::<StepState>() {
            self.errors
                .push(Error::new(idx + 1, line::column(text, at), msg));
        } else if step_text.trim().is_empty() {
            // Right after the `]`, where the text belongs.
            self.errors.push(Error::new(
                idx + 1,
                line::column(text, at + state.len() + 1),
                format!(
                    "empty step {n}: expected `N: [STATE] text`, with a text that says what \
                     the step does"
                ),
            ));
        }
    }
}
