//! Saving M1.md: atomic replacement, compare-and-swap merging of hand edits, and the race
//! between a person saving the file and the runner committing its own edits.

#![cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use m1loop::m1::keys::{PlanKey, ResultKey, Top};
use m1loop::m1::{Document, Edit, Status, StepState, Store, StoreError};

use crate::support::{Case, SEED, Temp, case, save_by_rename};

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn commit_replaces_the_file_atomically_and_keeps_its_mode() {
    let Case { dir, file } = case(SEED);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let inode = std::fs::metadata(&file).unwrap().ino();
    let (mut store, _) = Store::open(&file).unwrap();
    let doc = store.commit(&[Edit::Status(Status::Done)]).unwrap();
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert_eq!(doc.render(), on_disk);
    assert!(on_disk.starts_with("STATUS: DONE "));
    let meta = std::fs::metadata(&file).unwrap();
    assert_ne!(
        meta.ino(),
        inode,
        "replaced by rename, not rewritten in place"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    // The file the swap displaced stays, watched for a late save, while the store lives.
    assert_eq!(entries(dir.path()), [".M1.md.displaced", "M1.md"]);
    assert!(store.last_merge().is_none());
    drop(store);
    assert_eq!(
        entries(dir.path()),
        ["M1.md"],
        "no temporary file left behind"
    );
}

#[test]
fn a_commit_that_changes_nothing_does_not_write() {
    let Case { dir: _dir, file } = case(SEED);
    let inode = std::fs::metadata(&file).unwrap().ino();
    let (mut store, _) = Store::open(&file).unwrap();
    store.commit(&[Edit::Status(Status::Running)]).unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().ino(), inode);
}

#[test]
fn a_hand_edit_since_the_last_read_is_merged_not_overwritten() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let hand = SEED
        .replace(
            "CONSTRAINTS: ai-media.pyのみ変更",
            "CONSTRAINTS: テストも変更してよい",
        )
        .replace("3: [PENDING] 実戦テスト", "3: [PENDING] 本番テスト")
        .replace("\nCURRENT:", "\n<!-- 人間のメモ -->\nCURRENT:");
    save_by_rename(&file, &hand);
    let doc = store
        .commit(&[
            Edit::StepState(2, StepState::Done),
            ResultKey::Exit.set(2, "0"),
            Top::LastAction.set("Step 2 verified"),
        ])
        .unwrap();
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert_eq!(doc.render(), on_disk);
    let expected = hand
        .replace("2: [RUNNING]", "2: [DONE]")
        .replace("EXIT: (pending)", "EXIT: 0")
        .replace(
            "LAST_ACTION: Step 2 spawned via exec bridge --fire",
            "LAST_ACTION: Step 2 verified",
        );
    assert_eq!(on_disk, expected);
    assert_eq!(store.last_merge().map(|m| m.rounds), Some(1));
}

#[test]
fn a_malformed_file_on_disk_is_reported_and_left_alone() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let broken = SEED.replace("  TOTAL_STEPS: 3", "   TOTAL_STEPS: 3");
    save_by_rename(&file, &broken);
    let err = store.commit(&[Edit::Status(Status::Done)]).unwrap_err();
    let StoreError::DiskInvalid(errors) = &err else {
        panic!("expected DiskInvalid, got {err:#}")
    };
    assert_eq!(errors.path(), Some(file.as_path()));
    assert!(
        errors
            .to_string()
            .starts_with(&format!("{}:6:4: bad indentation", file.display()))
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);
    // Reload reports the same until the file is fixed; then the fix is picked up.
    assert!(store.reload().is_err());
    save_by_rename(&file, &SEED.replace("RUNNING ", "WAITING "));
    let doc = store.reload().unwrap().expect("changed");
    assert_eq!(doc.view().status, Status::Waiting);
    assert!(store.reload().unwrap().is_none());
}

#[test]
fn edits_that_would_make_the_file_invalid_write_nothing() {
    let Case { dir: _dir, file } = case(SEED);
    let (mut store, _) = Store::open(&file).unwrap();
    let err = store.commit(&[PlanKey::CurrentStep.set("7")]).unwrap_err();
    assert!(
        format!("{err:#}").contains("CURRENT_STEP 7 is outside the plan"),
        "{err:#}"
    );
    assert!(matches!(err, StoreError::EditsInvalid(_)), "{err:#}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), SEED);
}

#[test]
fn create_writes_a_new_file_with_its_directories_and_refuses_invalid_text() {
    let dir = Temp::new();
    let file = dir.path().join("a/b/M1.md");
    let (mut store, doc) = Store::create(&file, "STATUS: IDLE\nGOAL: 新しい目標\n").unwrap();
    assert_eq!(doc.view().goal, "新しい目標");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "STATUS: IDLE\nGOAL: 新しい目標\n"
    );
    assert!(store.reload().unwrap().is_none());
    let other = dir.path().join("c/M1.md");
    assert!(Store::create(&other, "STATUS: IDLE\n").is_err());
    assert!(!other.exists());
}

/// How a simulated person saves the file.
#[derive(Clone, Copy)]
enum Saver {
    /// Like most editors: a temporary file, then a rename over M1.md.
    Rename,
    /// A careful tool: swaps its file in and merges whatever it displaced, like the runner.
    Exchange,
}

/// One hand edit: `CONSTRAINTS: hand i` and step 3's text, applied onto `text`.
fn hand_edit(text: &str, i: u64) -> String {
    let doc = Document::parse(text).expect("every read sees a whole, valid file");
    let constraints = doc.get(&["CONSTRAINTS"]).unwrap();
    let step3 = doc.view().plan.steps[2].text.clone();
    text.replace(
        &format!("CONSTRAINTS: {constraints}"),
        &format!("CONSTRAINTS: hand {i}"),
    )
    .replace(
        &format!("3: [PENDING] {step3}"),
        &format!("3: [PENDING] テスト {i}"),
    )
}

fn save(how: Saver, file: &Path, i: u64) {
    let tmp = file.with_extension("md.hand~");
    let mut base = std::fs::read_to_string(file).unwrap();
    let mut expected = base.clone();
    loop {
        let text = hand_edit(&base, i);
        std::fs::write(&tmp, &text).unwrap();
        match how {
            Saver::Rename => return std::fs::rename(&tmp, file).unwrap(),
            #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
            Saver::Exchange => unreachable!("exchange needs Linux"),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Saver::Exchange => {
                use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
                renameat2(AT_FDCWD, &tmp, AT_FDCWD, file, RenameFlags::RENAME_EXCHANGE).unwrap();
                let displaced = std::fs::read_to_string(&tmp).unwrap();
                std::fs::remove_file(&tmp).unwrap();
                if displaced == expected {
                    return;
                }
                base = displaced;
                expected = text;
            }
        }
    }
}

/// A person saving the file while the runner commits: each save lands at whatever point of a
/// commit the scheduler picks (before its read, during its write, just before its swap).
/// Checked: every read sees a whole file, every commit is based on a text that has every
/// hand save made before the commit started, and the final file has the last hand edit —
/// and, when the person's tool does not itself overwrite what it did not read (`Exchange`),
/// the runner's last commit. A plain-rename save computed from a text read before the
/// runner's write replaces that write; that is the editor's race, not one the runner can close.
fn race(how: Saver) {
    const COMMITS: u64 = 40;
    let Case { dir, file } = case(SEED);
    let started = Arc::new(AtomicU64::new(0));
    let saved = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let hand = {
        let (file, started, saved, stop) =
            (file.clone(), started.clone(), saved.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            // One save per commit, as soon as that commit has started.
            while !stop.load(Ordering::SeqCst) {
                if started.load(Ordering::SeqCst) > i {
                    i += 1;
                    save(how, &file, i);
                    saved.store(i, Ordering::SeqCst);
                } else {
                    std::thread::yield_now();
                }
            }
            i
        })
    };
    let (mut store, _) = Store::open(&file).unwrap();
    let mut merged = 0;
    for k in 1..=COMMITS {
        let hand_before = saved.load(Ordering::SeqCst);
        started.store(k, Ordering::SeqCst);
        // The runner writes its whole intended state each time (as it does for the current
        // step), so a runner edit replaced by a person's stale save comes back on the next.
        let mut edits: Vec<Edit> = (1..=k)
            .map(|j| ResultKey::Exit.set(100 + u32::try_from(j).unwrap(), "0"))
            .collect();
        edits.push(Top::LastAction.set(format!("runner {k}")));
        let doc = store.commit(&edits).unwrap();
        let c = doc.get(&["CONSTRAINTS"]).unwrap();
        let seen: u64 = c.strip_prefix("hand ").map_or(0, |n| n.parse().unwrap());
        assert!(
            seen >= hand_before,
            "commit {k} has hand {seen}, but hand {hand_before} was saved before it"
        );
        merged += usize::from(store.last_merge().is_some());
    }
    // Let the last save land, then stop the person.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while saved.load(Ordering::SeqCst) < COMMITS {
        assert!(
            std::time::Instant::now() < deadline,
            "the hand thread stalled"
        );
        std::thread::yield_now();
    }
    stop.store(true, Ordering::SeqCst);
    let last_hand = hand.join().unwrap();
    let final_doc = Document::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        final_doc.get(&["CONSTRAINTS"]),
        Some(format!("hand {last_hand}"))
    );
    assert_eq!(
        final_doc.view().plan.steps[2].text,
        format!("テスト {last_hand}")
    );
    if matches!(how, Saver::Exchange) {
        for k in 1..=COMMITS {
            let got = final_doc.get(&["RESULTS", &format!("STEP_{}", 100 + k), "EXIT"]);
            assert_eq!(got.as_deref(), Some("0"), "runner edit {k} lost");
        }
        assert_eq!(
            final_doc.get(&["LAST_ACTION"]),
            Some(format!("runner {COMMITS}"))
        );
    }
    drop(store);
    assert_eq!(
        entries(dir.path()),
        ["M1.md"],
        "no temporary file left behind"
    );
    eprintln!("{COMMITS} commits, {last_hand} hand saves, {merged} commits merged a hand edit");
}

// Without an atomic exchange (not Linux) a save in the instant before the rename can be lost,
// as documented in the store; the race is only asserted where the guarantee holds.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn race_with_a_person_saving_by_rename_never_loses_their_edit() {
    race(Saver::Rename);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn race_with_a_careful_tool_loses_nothing_on_either_side() {
    race(Saver::Exchange);
}
