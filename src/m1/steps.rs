//! Step lines: `N: [STATE] text` under `PLAN.STEPS`. The state and text share one value, so a
//! text that would be misread makes the whole value quoted: `N: "[STATE] a # b"`.

use super::document::Document;
use super::view::{Step, StepState};

/// The parts of a step value: the state as written and the text. `None` when the value is
/// not `[STATE] text`.
#[must_use]
pub(super) fn split(value: &str) -> Option<(&str, &str)> {
    let rest = value.strip_prefix('[')?;
    let close = rest.find(']')?;
    let (state, after) = (&rest[..close], &rest[close + 1..]);
    if after.is_empty() {
        return Some((state, ""));
    }
    Some((state, after.strip_prefix(' ')?))
}

/// The value of a step line.
#[must_use]
pub(super) fn value(state: StepState, text: &str) -> String {
    if text.is_empty() {
        format!("[{state}]")
    } else {
        format!("[{state}] {text}")
    }
}

/// The steps under `PLAN.STEPS`, in file order; lines that do not read as steps are skipped
/// (validation reports them).
#[must_use]
pub(super) fn list(doc: &Document) -> Vec<Step> {
    let Some(block) = doc.find(&["PLAN", "STEPS"]) else {
        return Vec::new();
    };
    doc.children(Some(block))
        .filter_map(|i| {
            let k = doc.key_at(i);
            let n = k.key.parse().ok()?;
            let (state, text) = split(&k.value.as_ref()?.text)?;
            Some(Step {
                n,
                state: state.parse().ok()?,
                text: text.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_reads_state_and_text() {
        assert_eq!(split("[DONE] a → b"), Some(("DONE", "a → b")));
        assert_eq!(split("[PENDING]"), Some(("PENDING", "")));
        assert_eq!(split("[DONE]x"), None);
        assert_eq!(split("DONE x"), None);
        assert_eq!(value(StepState::Skipped, ""), "[SKIPPED]");
    }
}
