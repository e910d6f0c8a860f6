//! `loop start --plan FILE.md`: a Markdown checklist (`- [ ] item`) becomes the plan, and
//! each step that is DONE ticks its box in that file, changing one byte.

use std::ops::Range;
use std::path::Path;

use anyhow::Context;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::error::Error;

/// One task-list item: its text, whether it is ticked, and where its `[ ]` marker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub text: String,
    pub checked: bool,
    /// Byte range of the marker, `[ ]` or `[x]`.
    pub marker: Range<usize>,
}

/// Every task-list item of a Markdown text, in order (nested ones too).
#[must_use]
pub(crate) fn items(markdown: &str) -> Vec<Item> {
    let parser = Parser::new_ext(markdown, Options::ENABLE_TASKLISTS).into_offset_iter();
    let mut out: Vec<Item> = Vec::new();
    // Depth of items we are inside, and whether the innermost one is a task we collect text for.
    let mut collecting: Vec<Option<usize>> = Vec::new();
    for (event, range) in parser {
        match event {
            Event::Start(Tag::Item) => collecting.push(None),
            Event::End(TagEnd::Item) => {
                collecting.pop();
            }
            Event::TaskListMarker(checked) => {
                if let Some(slot) = collecting.last_mut() {
                    out.push(Item {
                        text: String::new(),
                        checked,
                        marker: range,
                    });
                    *slot = Some(out.len() - 1);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(Some(i)) = collecting.last() {
                    out[*i].text.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(Some(i)) = collecting.last() {
                    out[*i].text.push(' ');
                }
            }
            // A nested list ends the parent item's own text.
            Event::Start(Tag::List(_)) => {
                if let Some(slot) = collecting.last_mut() {
                    *slot = None;
                }
            }
            _ => {}
        }
    }
    for it in &mut out {
        it.text = crate::text::fold(&it.text);
    }
    out
}

/// The plan's text. Only a regular file is read (a FIFO would hold `loop start` for ever), and
/// no more than an M1.md may hold, which its steps go into.
fn read_text(path: &Path) -> Result<String, crate::named_file::ReadError> {
    let (bytes, _) = crate::named_file::read(path, crate::m1::MAX_BYTES)?;
    String::from_utf8(bytes).map_err(|_| {
        crate::named_file::ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// Reads a checklist file into steps: `(done, text)` per item.
///
/// # Errors
/// The file cannot be read or holds no `- [ ]` items (bad input, exit 2).
pub(crate) fn read(path: &Path) -> crate::error::Result<Vec<(bool, String)>> {
    // A plan that cannot be read is the user's input, not the machine's failure.
    let text = read_text(path)
        .map_err(|e| Error::bad_input(format!("cannot read the plan {}: {e}", path.display())))?;
    let found = items(&text);
    if found.is_empty() {
        return Err(Error::bad_input(format!(
            "{}: no task-list items found; expected lines like `- [ ] do this`",
            path.display()
        )));
    }
    if let Some((i, _)) = found.iter().enumerate().find(|(_, it)| it.text.is_empty()) {
        return Err(Error::bad_input(format!(
            "{}: task-list item {} is empty",
            path.display(),
            i + 1
        )));
    }
    Ok(found.into_iter().map(|it| (it.checked, it.text)).collect())
}

/// Ticks the box of step `n` (the n-th item, 1-based) in `path`, changing one byte.
///
/// # Errors
/// The file cannot be read or written, or has fewer than `n` items.
pub(crate) fn tick(path: &Path, n: u32) -> anyhow::Result<()> {
    let text = read_text(path).with_context(|| format!("while reading {}", path.display()))?;
    let found = items(&text);
    let idx = usize::try_from(n).unwrap_or(usize::MAX).saturating_sub(1);
    let item = found
        .get(idx)
        .with_context(|| format!("{} has {} items, no item {n}", path.display(), found.len()))?;
    if item.checked {
        return Ok(());
    }
    let mut bytes = text.into_bytes();
    // The marker is `[ ]`: the byte between the brackets becomes `x`.
    let pos = item.marker.start + 1;
    anyhow::ensure!(
        bytes.get(pos) == Some(&b' '),
        "unexpected task marker at byte {pos}"
    );
    bytes[pos] = b'x';
    let mut f = atomic_write_file::AtomicWriteFile::open(path)?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "# Plan\n\nSome prose.\n\n- [ ] Investigate the bug\n- [x] Already done\n  with more text\n- [ ] Fix it → src/x.rs\n  - [ ] nested sub-step\n- plain bullet\n";

    #[test]
    fn reads_items_in_order_with_state_and_text() {
        let got: Vec<(bool, String)> = items(PLAN)
            .into_iter()
            .map(|i| (i.checked, i.text))
            .collect();
        assert_eq!(
            got,
            vec![
                (false, "Investigate the bug".to_string()),
                (true, "Already done with more text".to_string()),
                (false, "Fix it → src/x.rs".to_string()),
                (false, "nested sub-step".to_string()),
            ]
        );
    }

    #[test]
    fn tick_changes_exactly_one_byte() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.md");
        std::fs::write(&p, PLAN).unwrap();
        tick(&p, 3).unwrap();
        let after = std::fs::read(&p).unwrap();
        let before = PLAN.as_bytes();
        assert_eq!(after.len(), before.len());
        let diffs: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .collect();
        assert_eq!(diffs.len(), 1);
        assert_eq!(after[diffs[0]], b'x');
        assert!(String::from_utf8(after).unwrap().contains("- [x] Fix it"));
        // Ticking a ticked item changes nothing.
        tick(&p, 2).unwrap();
        tick(&p, 3).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches("[x]").count(), 2);
        assert_eq!(text.len(), PLAN.len());
    }

    #[test]
    fn a_file_without_tasks_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.md");
        std::fs::write(&p, "# nothing\n- plain\n").unwrap();
        let err = read(&p).unwrap_err();
        assert_eq!(err.code(), crate::exit::Status::BadInput);
        assert!(err.to_string().contains("no task-list items"), "{err}");
    }
}
