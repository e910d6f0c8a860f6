//! The typed view of M1.md: what the runner and `loop status` read. Built from a validated
//! document, so every typed field here has already been checked by `validate`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use super::document::Document;
use super::setting;
use super::steps;

/// The loop's state, as in `STATUS:`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    #[default]
    Idle,
    Running,
    Waiting,
    Done,
    Failed,
}

/// A step's state, as in `N: [STATE] text`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum StepState {
    #[default]
    Pending,
    Running,
    Done,
    Failed,
    Skipped,
}

macro_rules! upper_enum {
    ($ty:ident, $what:literal, $($v:ident = $s:literal),+) => {
        impl $ty {
            /// The name as written in M1.md.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
            /// Every value, in the order the file's comment lists them.
            pub const ALL: &'static [$ty] = &[$($ty::$v),+];
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($ty::$v),)+
                    _ => Err(format!(
                        concat!("unknown ", $what, " `{}`: expected one of {}"),
                        s,
                        [$($s),+].join(", ")
                    )),
                }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

upper_enum!(
    Status,
    "STATUS",
    Idle = "IDLE",
    Running = "RUNNING",
    Waiting = "WAITING",
    Done = "DONE",
    Failed = "FAILED"
);
upper_enum!(
    StepState,
    "step state",
    Pending = "PENDING",
    Running = "RUNNING",
    Done = "DONE",
    Failed = "FAILED",
    Skipped = "SKIPPED"
);

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Step {
    pub n: u32,
    pub state: StepState,
    pub text: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Plan {
    /// `TOTAL_STEPS`, or the number of steps when the file leaves it out.
    pub total_steps: u32,
    /// 0 while planning / not started.
    pub current_step: u32,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Current {
    pub task_id: Option<String>,
    pub cc_pid: Option<u32>,
    pub spawn_time: Option<String>,
    pub command: Option<String>,
    pub session_id: Option<String>,
    pub attempt: Option<u32>,
    /// Every other scalar key of CURRENT (the runner's `WAIT_UNTIL`, `GIT_HEAD`, ...), by name.
    pub extra: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepResult {
    /// `None` when absent or `(pending)`.
    pub exit: Option<i32>,
    pub commit: Option<String>,
    pub summary: Option<String>,
    pub verified: Option<bool>,
    pub attempts: Option<u32>,
    pub cost_usd: Option<f64>,
    pub duration_s: Option<f64>,
    pub session_id: Option<String>,
    pub error: Option<String>,
    /// Every other scalar key of the block (TRANSIENT, BLOCKED, ...), by name.
    pub extra: BTreeMap<String, String>,
    pub report: Option<String>,
}

/// The safety limits as M1.md states them: `None` where the file leaves a limit out (the
/// runner then takes `loop.yaml`'s, else the default). Shown by `loop status --json` with the
/// documented defaults filled in and durations as M1.md writes them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    pub max_retries: Option<u32>,
    pub max_steps: Option<u32>,
    /// `STEP_TIMEOUT` (exact), or `STEP_TIMEOUT_MIN` of an older file.
    pub step_timeout: Option<Duration>,
    /// `IDLE_TIMEOUT` (exact), or `IDLE_TIMEOUT_MIN` of an older file.
    pub idle_timeout: Option<Duration>,
    pub max_cost_usd: Option<f64>,
    /// Fresh sessions a step may ask for with `STEP_RESTART` (default 3).
    pub max_restarts: Option<u32>,
    /// Percent of the model's context window past which a retry starts a fresh session with
    /// a handoff instead of resuming (default 70).
    pub context_threshold: Option<u32>,
    /// Time in one session past which a retry starts a fresh one with a handoff.
    pub max_session: Option<Duration>,
    /// Reviews that may ask a step for changes before a human decides (default 3).
    pub max_retakes: Option<u32>,
}

impl Limits {
    pub const DEFAULT_MAX_RETRIES: u32 = 3;
    pub const DEFAULT_MAX_STEPS: u32 = 10;
    pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60 * 60);
}

impl Serialize for Limits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let exact = crate::duration::exact;
        let mut st = s.serialize_struct("Limits", 5)?;
        st.serialize_field(
            "max_retries",
            &self.max_retries.unwrap_or(Self::DEFAULT_MAX_RETRIES),
        )?;
        st.serialize_field(
            "max_steps",
            &self.max_steps.unwrap_or(Self::DEFAULT_MAX_STEPS),
        )?;
        st.serialize_field(
            "step_timeout",
            &exact(self.step_timeout.unwrap_or(Self::DEFAULT_STEP_TIMEOUT)),
        )?;
        st.serialize_field("idle_timeout", &self.idle_timeout.map(exact))?;
        st.serialize_field("max_cost_usd", &self.max_cost_usd)?;
        // The session limits only where the file sets them.
        if let Some(n) = self.max_restarts {
            st.serialize_field("max_restarts", &n)?;
        }
        if let Some(p) = self.context_threshold {
            st.serialize_field("context_threshold", &p)?;
        }
        if let Some(d) = self.max_session {
            st.serialize_field("max_session", &exact(d))?;
        }
        st.end()
    }
}

/// The `AGENT:` block: how each step's agent is called. `None` where the file leaves a key
/// out (the runner then takes `loop.yaml`, `LOOP_AGENT`, or the default).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgentKeys {
    pub program: Option<String>,
    pub permission_mode: Option<String>,
    pub allowed_tools: Option<Vec<String>>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub extra_args: Option<Vec<String>>,
    /// The reviewer's model (`REVIEW_MODEL`), when not the steps' own.
    pub review_model: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct M1 {
    pub status: Status,
    pub goal: String,
    pub constraints: Option<String>,
    pub plan: Plan,
    pub current: Current,
    pub results: BTreeMap<u32, StepResult>,
    pub last_action: Option<String>,
    pub next_action: Option<String>,
    pub limits: Limits,
    pub agent: AgentKeys,
    pub verify: Option<String>,
    /// `REVIEW: on`: every step that passes is reviewed by a separate, read-only agent run.
    pub review: bool,
}

impl M1 {
    /// A counter the runner keeps in `RESULTS.STEP_n` (`RETAKES`, `TRANSIENT`, …); 0 when the
    /// step has none or it is not a number.
    #[must_use]
    pub fn count(&self, step: u32, key: &str) -> u32 {
        self.results
            .get(&step)
            .and_then(|r| r.extra.get(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub(crate) fn from_document(doc: &Document) -> M1 {
        let get = |p: &[&str]| doc.get(p);
        let steps = steps::list(doc);
        M1 {
            status: get(&["STATUS"])
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
            goal: get(&["GOAL"]).unwrap_or_default(),
            // `(none)` is what a new loop without constraints is written with: no constraints.
            constraints: get(&["CONSTRAINTS"])
                .filter(|c| !c.trim().is_empty() && c.trim() != setting::NONE),
            plan: Plan {
                total_steps: parsed(get(&["PLAN", "TOTAL_STEPS"]))
                    .unwrap_or(u32::try_from(steps.len()).unwrap_or(u32::MAX)),
                current_step: parsed(get(&["PLAN", "CURRENT_STEP"])).unwrap_or(0),
                steps,
            },
            current: Current {
                task_id: get(&["CURRENT", "TASK_ID"]),
                cc_pid: parsed(get(&["CURRENT", "CC_PID"])),
                spawn_time: get(&["CURRENT", "SPAWN_TIME"]),
                command: get(&["CURRENT", "COMMAND"]),
                session_id: get(&["CURRENT", "SESSION_ID"]),
                attempt: parsed(get(&["CURRENT", "ATTEMPT"])),
                extra: extra(doc, doc.find(&["CURRENT"]), CURRENT_KEYS),
            },
            results: results(doc),
            last_action: get(&["LAST_ACTION"]),
            next_action: get(&["NEXT_ACTION"]),
            limits: Limits {
                max_retries: parsed(get(&["LIMITS", "MAX_RETRIES"])),
                max_steps: parsed(get(&["LIMITS", "MAX_STEPS"])),
                step_timeout: timeout(doc, "STEP_TIMEOUT"),
                idle_timeout: timeout(doc, "IDLE_TIMEOUT"),
                max_cost_usd: parsed(get(&["LIMITS", "MAX_COST_USD"])),
                max_restarts: parsed(get(&["LIMITS", "MAX_RESTARTS"])),
                context_threshold: parsed(get(&["LIMITS", "CONTEXT_THRESHOLD"])),
                max_session: get(&["LIMITS", "MAX_SESSION"])
                    .and_then(|v| setting::duration(&v).ok()),
                max_retakes: parsed(get(&["LIMITS", "MAX_RETAKES"])),
            },
            agent: AgentKeys {
                program: get(&["AGENT", "PROGRAM"]).filter(|p| !p.trim().is_empty()),
                permission_mode: get(&["AGENT", "PERMISSION_MODE"]),
                allowed_tools: get(&["AGENT", "ALLOWED_TOOLS"])
                    .and_then(|v| setting::tools(&v).ok()),
                model: get(&["AGENT", "MODEL"]),
                max_turns: parsed(get(&["AGENT", "MAX_TURNS"])),
                max_budget_usd: parsed(get(&["AGENT", "MAX_BUDGET_USD"])),
                extra_args: get(&["AGENT", "EXTRA_ARGS"]).and_then(|v| setting::args(&v).ok()),
                review_model: get(&["AGENT", "REVIEW_MODEL"]),
            },
            verify: get(&["VERIFY"]),
            review: get(&["REVIEW"]).is_some_and(|v| matches!(v.trim(), "on" | "true" | "yes")),
        }
    }
}

/// `LIMITS.<KEY>` as an exact duration, else `LIMITS.<KEY>_MIN` in minutes (older files).
fn timeout(doc: &Document, key: &str) -> Option<Duration> {
    doc.get(&["LIMITS", key])
        .and_then(|v| setting::duration(&v).ok())
        .or_else(|| {
            doc.get(&["LIMITS", &format!("{key}_MIN")])
                .and_then(|v| setting::minutes(&v).ok())
        })
}

/// `RESULTS.STEP_N` blocks by step number; other keys under RESULTS are not results.
fn results(doc: &Document) -> BTreeMap<u32, StepResult> {
    let mut out = BTreeMap::new();
    let Some(block) = doc.find(&["RESULTS"]) else {
        return out;
    };
    for i in doc.children(Some(block)) {
        let Some(n) = result_step(&doc.key_at(i).key) else {
            continue;
        };
        let field = |k: &str| {
            doc.child(Some(i), k)
                .and_then(|j| doc.key_at(j).value.as_ref().map(|v| v.text.clone()))
        };
        out.insert(
            n,
            StepResult {
                exit: parsed(field("EXIT")),
                commit: field("COMMIT"),
                summary: field("SUMMARY"),
                verified: parsed(field("VERIFIED")),
                attempts: parsed(field("ATTEMPTS")),
                cost_usd: parsed(field("COST_USD")),
                duration_s: parsed(field("DURATION_S")),
                session_id: field("SESSION_ID"),
                error: field("ERROR"),
                report: field("REPORT"),
                extra: extra(doc, Some(i), RESULT_KEYS),
            },
        );
    }
    out
}

const CURRENT_KEYS: &[&str] = &[
    "TASK_ID",
    "CC_PID",
    "SPAWN_TIME",
    "COMMAND",
    "SESSION_ID",
    "ATTEMPT",
];
const RESULT_KEYS: &[&str] = &[
    "EXIT",
    "COMMIT",
    "SUMMARY",
    "VERIFIED",
    "ATTEMPTS",
    "COST_USD",
    "DURATION_S",
    "SESSION_ID",
    "ERROR",
    "REPORT",
];

/// The scalar children of `block` whose keys the typed fields do not cover.
fn extra(doc: &Document, block: Option<usize>, known: &[&str]) -> BTreeMap<String, String> {
    let Some(block) = block else {
        return BTreeMap::new();
    };
    doc.children(Some(block))
        .filter_map(|j| {
            let k = doc.key_at(j);
            let v = k.value.as_ref()?;
            (!known.contains(&k.key.as_str())).then(|| (k.key.clone(), v.text.clone()))
        })
        .collect()
}

fn parsed<T: FromStr>(v: Option<String>) -> Option<T> {
    v.and_then(|v| v.parse().ok())
}

/// `STEP_12` → 12.
pub(crate) fn result_step(key: &str) -> Option<u32> {
    key.strip_prefix("STEP_")?.parse().ok()
}
