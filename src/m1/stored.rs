//! An [`Edit`] as the task ledger stores it (`judged.json`): what a judgement wrote into
//! M1.md, kept so that it can be put back when an old text lost it.

use serde::{Deserialize, Serialize};

use super::edit::{Edit, KeyPath};
use super::view::{Status, StepState};

/// An [`Edit`] in JSON: `{"op": "set", "path": ["RESULTS", "STEP_2", "EXIT"], "value": "0"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum StoredEdit {
    Status { value: String },
    Set { path: Vec<String>, value: String },
    Remove { path: Vec<String> },
    Clear { path: Vec<String> },
    StepState { step: u32, state: String },
    StepText { step: u32, text: String },
    SetSteps { steps: Vec<(String, String)> },
}

impl StoredEdit {
    #[must_use]
    pub(crate) fn from_edit(e: &Edit) -> Self {
        let path = |p: &KeyPath| p.keys().to_vec();
        match e {
            Edit::Status(s) => Self::Status {
                value: s.as_str().into(),
            },
            Edit::Set(p, value) => Self::Set {
                path: path(p),
                value: value.clone(),
            },
            Edit::Remove(p) => Self::Remove { path: path(p) },
            Edit::Clear(p) => Self::Clear { path: path(p) },
            Edit::StepState(step, state) => Self::StepState {
                step: *step,
                state: state.as_str().into(),
            },
            Edit::StepText(step, text) => Self::StepText {
                step: *step,
                text: text.clone(),
            },
            Edit::SetSteps(list) => Self::SetSteps {
                steps: list
                    .iter()
                    .map(|(s, t)| (s.as_str().to_string(), t.clone()))
                    .collect(),
            },
        }
    }

    /// The edit back; `None` for a state name this version does not know. A path is taken as
    /// it was stored: the runner wrote it from a declared key.
    #[must_use]
    pub(crate) fn to_edit(&self) -> Option<Edit> {
        Some(match self {
            Self::Status { value } => Edit::Status(value.parse::<Status>().ok()?),
            Self::Set { path, value } => Edit::Set(KeyPath::new(path.clone()), value.clone()),
            Self::Remove { path } => Edit::Remove(KeyPath::new(path.clone())),
            Self::Clear { path } => Edit::Clear(KeyPath::new(path.clone())),
            Self::StepState { step, state } => {
                Edit::StepState(*step, state.parse::<StepState>().ok()?)
            }
            Self::StepText { step, text } => Edit::StepText(*step, text.clone()),
            Self::SetSteps { steps } => Edit::SetSteps(
                steps
                    .iter()
                    .map(|(s, t)| Some((s.parse::<StepState>().ok()?, t.clone())))
                    .collect::<Option<Vec<_>>>()?,
            ),
        })
    }

    /// The value this edit sets at `path`, if it sets that key.
    #[must_use]
    pub(crate) fn value_at(&self, path: &KeyPath) -> Option<&str> {
        match self {
            Self::Set { path: p, value } if p.as_slice() == path.keys() => Some(value),
            _ => None,
        }
    }
}
