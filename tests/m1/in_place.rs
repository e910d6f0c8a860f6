//! Saves in place (open, truncate, write) that meet the store's reads and writes: a text is
//! taken only once its writer is done, a save that lands in the file a write displaced never
//! replaces a newer one, and a writer that keeps the file open for good holds nothing up.

#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use m1loop::m1::{Edit, Status, Store};

use crate::support::{Case, SEED, case, save_by_rename};

/// A person's save of the seed: the goal changed, and a line typed at the end.
fn theirs() -> String {
    format!(
        "{}# typed at the end\n",
        SEED.replace("GOAL: /edit", "GOAL: /EDIT")
    )
}

/// Saves `text` in place as an editor writing in two chunks does: truncates, writes up to
/// `cut`, says so on `half`, holds the file open `pause`, writes the rest and closes.
fn save_in_place_slowly(
    path: &Path,
    text: &str,
    cut: usize,
    pause: Duration,
) -> (mpsc::Receiver<()>, std::thread::JoinHandle<()>) {
    let (half, rx) = mpsc::channel();
    let (path, text) = (path.to_path_buf(), text.to_owned());
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&text.as_bytes()[..cut]).unwrap();
        half.send(()).unwrap();
        std::thread::sleep(pause);
        f.write_all(&text.as_bytes()[cut..]).unwrap();
    });
    (rx, writer)
}

/// Where the first chunk of [`theirs`] ends: after the line that closes PLAN, so that what a
/// reader finds meanwhile is itself a valid M1.md, only without CURRENT, RESULTS and the rest.
fn at_the_end_of_the_plan(text: &str) -> usize {
    text.find("CURRENT:").unwrap()
}

/// Starts the person's save of [`theirs`] in place, cut at the end of the plan and held open
/// 400 ms, and returns once its first chunk is written: the text saved, and the writer.
fn halfway_through_their_save(file: &Path) -> (String, std::thread::JoinHandle<()>) {
    let text = theirs();
    let (half, writer) = save_in_place_slowly(
        file,
        &text,
        at_the_end_of_the_plan(&text),
        Duration::from_millis(400),
    );
    half.recv().unwrap();
    (text, writer)
}

#[cfg(target_os = "linux")]
#[test]
fn a_commit_during_a_save_in_place_takes_the_whole_save_not_its_first_half() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let (_, writer) = halfway_through_their_save(&file);
    let doc = store.commit(&[Edit::Status(Status::Done)]).unwrap();
    writer.join().unwrap();
    // What the runner acts on is the person's whole save, with its record on it.
    let rendered = doc.render();
    assert!(rendered.contains("GOAL: /EDIT"), "{rendered}");
    assert!(
        rendered.contains("LAST_ACTION:"),
        "cut at the plan:\n{rendered}"
    );
    assert!(rendered.contains("# typed at the end\n"), "{rendered}");
    assert_eq!(doc.view().status, Status::Done);
    store.reload().unwrap();
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert_eq!(on_disk, rendered);
}

#[cfg(target_os = "linux")]
#[test]
fn a_reload_during_a_save_in_place_waits_for_the_rest_of_it() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let (text, writer) = halfway_through_their_save(&file);
    let doc = store.reload().unwrap().expect("the save is seen");
    writer.join().unwrap();
    assert_eq!(doc.render(), text);
    assert!(
        store.reload().unwrap().is_none(),
        "read whole the first time"
    );
    // The wait is there for the runner to log, with who made it wait.
    let wait = store.take_wait().expect("a wait for the writer");
    assert!(!wait.gave_up, "{wait:?}");
    assert!(
        wait.writers
            .iter()
            .any(|w| w.starts_with(&format!("pid {} ", std::process::id()))),
        "{wait:?}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_runner_that_opens_the_file_during_a_save_in_place_takes_the_whole_save_not_its_first_half() {
    let Case { dir: _dir, file } = case(SEED);
    let (text, writer) = halfway_through_their_save(&file);
    let (_store, doc) = Store::open_with_history(&file).unwrap();
    writer.join().unwrap();
    assert_eq!(doc.render(), text);
}

#[cfg(target_os = "linux")]
#[test]
fn a_runner_that_opens_the_file_right_after_a_save_in_place_truncated_it_does_not_refuse_it() {
    let Case { dir: _dir, file } = case(SEED);
    let text = theirs();
    // Truncated, nothing written yet: an empty file, which no M1.md is.
    let (half, writer) = save_in_place_slowly(&file, &text, 0, Duration::from_millis(400));
    half.recv().unwrap();
    let (_store, doc) = Store::open_with_history(&file).unwrap();
    writer.join().unwrap();
    assert_eq!(doc.render(), text);
}

/// The file a write of the store displaced, named where the store keeps it open.
fn displaced(file: &Path) -> PathBuf {
    m1loop::layout::Layout::displaced(file)
}

#[test]
fn a_late_save_found_after_a_newer_save_does_not_replace_it() {
    let Case { dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let ours = store
        .commit(&[Edit::Status(Status::Done)])
        .unwrap()
        .render();
    // An editor that had opened the file just before that write writes its save (made from
    // the seed) into the file the write displaced...
    let late = format!(
        "{}# the late save\n",
        SEED.replace("GOAL: /edit", "GOAL: /LATE")
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(displaced(&file))
        .unwrap();
    f.write_all(late.as_bytes()).unwrap();
    drop(f);
    // ...and, before the runner looks, a person saves the runner's text with a line of theirs.
    save_by_rename(&file, &format!("{ours}# the newer save\n"));
    store.reload().unwrap().expect("the newer save is seen");
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert!(on_disk.contains("# the newer save\n"), "{on_disk}");
    assert!(on_disk.starts_with("STATUS: DONE"), "{on_disk}");
    // The late one is kept beside the file, and said where.
    let aside = store.take_set_aside().expect("the late save is kept");
    assert_eq!(aside.parent(), Some(dir.path()));
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), late);
}

/// `cmd >> M1.md`, twice, each opening the file just before one of the store's swaps and
/// writing after it: the first line lands in the file a write displaced, and once it is put
/// back on the path, the second lands in the file that this displaced in turn. Each was taken
/// as a whole text, so the second, which never held the first line, replaced it: a soak lost
/// one append of 176 this way. An append is put onto the file as it is now, and both arrive.
#[test]
fn two_appends_into_files_the_store_displaced_both_arrive() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let ours = store
        .commit(&[Edit::Status(Status::Done)])
        .unwrap()
        .render();
    let append = |line: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(displaced(&file))
            .unwrap();
        f.write_all(line.as_bytes()).unwrap();
    };
    append("# save 1\n");
    store.reload().unwrap();
    append("# save 2\n");
    store.reload().unwrap();
    // What a runner does next: its next write, onto the file as it is.
    store.commit(&[]).unwrap();
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert_eq!(on_disk, format!("{ours}# save 1\n# save 2\n"));
    assert!(store.take_set_aside().is_none(), "nothing kept aside");
}

#[cfg(target_os = "linux")]
#[test]
fn a_process_that_keeps_m1_open_for_writing_does_not_hold_the_store_up() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    // A shell's `exec 3>>M1.md`: open for writing, and never closed while the store works.
    let mut held = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    held.write_all(b"# appended by the holder\n").unwrap();
    let doc = store.reload().unwrap().expect("the append is read");
    assert!(doc.render().ends_with("# appended by the holder\n"));
    let wait = store.take_wait().expect("the writer was waited for");
    assert!(wait.gave_up, "{wait:?}");
    // Once known to hold the file for good, it is not waited for again.
    assert!(store.reload().unwrap().is_none());
    let saved = store
        .commit(&[Edit::Status(Status::Done)])
        .unwrap()
        .render();
    assert!(store.take_wait().is_none());
    assert!(saved.starts_with("STATUS: DONE"), "{saved}");
    assert!(saved.ends_with("# appended by the holder\n"), "{saved}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), saved);
}
