//! Step lines: `N: [STATE] text` under `PLAN.STEPS`. The state and text share one value, so a
//! text that would be misread makes the whole value quoted: `N: "[STATE] a # b"`.

use std::collections::BTreeMap;

use super::document::Document;
use super::keys::{Key as _, PlanKey};
use super::view::{Step, StepState};

/// The steps of a `PLAN.AFTER` line's value: `2, 3`.
///
/// # Errors
/// A part that is not a step number.
pub(crate) fn parse_after(value: &str) -> Result<Vec<u32>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<u32>().map_err(|_| {
                format!("expected step numbers separated by commas (`2, 3`), found `{p}`")
            })
        })
        .collect()
}

/// `PLAN.AFTER`: for each step that waits for others, the steps it waits for. Lines that do
/// not read so are left out (validation reports them).
#[must_use]
pub(super) fn after(doc: &Document) -> BTreeMap<u32, Vec<u32>> {
    let Some(block) = doc.find(&[PlanKey::BLOCK[0], super::keys::AFTER]) else {
        return BTreeMap::new();
    };
    doc.children(Some(block))
        .filter_map(|i| {
            let k = doc.key_at(i);
            let n = k.key.parse().ok()?;
            let deps = parse_after(&k.value.as_ref()?.text).ok()?;
            Some((n, deps))
        })
        .collect()
}

/// A cycle in `after` (each step to the steps it waits for), as the steps around it from the
/// first back to itself (`[2, 4, 2]`), if there is one: no order could run those steps.
#[must_use]
pub(crate) fn cycle(after: &BTreeMap<u32, Vec<u32>>) -> Option<Vec<u32>> {
    // Depth first, with the path on a stack: a step met again on the path closes a cycle.
    fn visit(
        n: u32,
        after: &BTreeMap<u32, Vec<u32>>,
        path: &mut Vec<u32>,
        done: &mut Vec<u32>,
    ) -> Option<Vec<u32>> {
        if let Some(at) = path.iter().position(|p| *p == n) {
            let mut c = path[at..].to_vec();
            c.push(n);
            return Some(c);
        }
        if done.contains(&n) {
            return None;
        }
        path.push(n);
        for d in after.get(&n).into_iter().flatten() {
            if let Some(c) = visit(*d, after, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(n);
        None
    }
    let mut done = Vec::new();
    after
        .keys()
        .find_map(|n| visit(*n, after, &mut Vec::new(), &mut done))
}

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
    let Some(block) = doc.find(&[PlanKey::BLOCK[0], super::keys::STEPS]) else {
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

    #[test]
    fn a_cycle_of_after_is_found_with_its_steps() {
        let after: BTreeMap<u32, Vec<u32>> = [(4, vec![2, 3]), (3, vec![1])].into();
        assert_eq!(cycle(&after), None);
        let after: BTreeMap<u32, Vec<u32>> = [(2, vec![4]), (4, vec![3]), (3, vec![2])].into();
        assert_eq!(cycle(&after), Some(vec![2, 4, 3, 2]));
        assert_eq!(parse_after("2, 3"), Ok(vec![2, 3]));
        assert!(parse_after("2, x").unwrap_err().contains("`x`"));
    }
}
