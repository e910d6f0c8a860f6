//! The typed view of M1.md: what the runner and `loop status` read. Built from a validated
//! document, so every typed field here has already been checked by `validate`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::document::Document;
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
    /// Every other scalar key of CURRENT (the runner's WAIT_UNTIL, GIT_HEAD, ...), by name.
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

/// The safety limits, with the documented defaults filled in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Limits {
    pub max_retries: u32,
    pub max_steps: u32,
    pub step_timeout_min: u64,
    pub idle_timeout_min: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_retries: 3,
            max_steps: 10,
            step_timeout_min: 60,
            idle_timeout_min: None,
            max_cost_usd: None,
        }
    }
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
    pub verify: Option<String>,
}

impl M1 {
    pub(crate) fn from_document(doc: &Document) -> M1 {
        let get = |p: &[&str]| doc.get(p);
        let steps = steps::list(doc);
        let defaults = Limits::default();
        M1 {
            status: get(&["STATUS"])
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
            goal: get(&["GOAL"]).unwrap_or_default(),
            constraints: get(&["CONSTRAINTS"]),
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
                max_retries: parsed(get(&["LIMITS", "MAX_RETRIES"]))
                    .unwrap_or(defaults.max_retries),
                max_steps: parsed(get(&["LIMITS", "MAX_STEPS"])).unwrap_or(defaults.max_steps),
                step_timeout_min: parsed(get(&["LIMITS", "STEP_TIMEOUT_MIN"]))
                    .unwrap_or(defaults.step_timeout_min),
                idle_timeout_min: parsed(get(&["LIMITS", "IDLE_TIMEOUT_MIN"])),
                max_cost_usd: parsed(get(&["LIMITS", "MAX_COST_USD"])),
            },
            verify: get(&["VERIFY"]),
        }
    }
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
