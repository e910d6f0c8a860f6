//! Saves that race the runner: an editor that saves an old text, saves many times a second,
//! and a valid edit the runner's record cannot go onto. Whatever a person saves, an attempt
//! is started once, a passed step is not run again, and the runner neither stalls nor spins.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, save_by_rename};

/// Every step works `ms` (saying so every 50 ms), then passes.
fn steady(ms: u64) -> Scenario {
    Scenario::new().otherwise(Action::done("ok").sleep_ms(ms).heartbeat_ms(50))
}

/// Truncates and writes in two parts, 5 ms apart, as an editor writing in chunks does: a
/// reader may find the file empty or cut in half.
fn save_in_place_slowly(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let half = text.len() / 2;
    let cut = (half..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(half);
    f.write_all(&text.as_bytes()[..cut]).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    f.write_all(&text.as_bytes()[cut..]).unwrap();
}

#[test]
fn a_stale_save_does_not_run_a_passed_step_again_or_start_a_second_agent() {
    let env = TestLoop::new();
    env.scenario(&steady(700));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b", "--step", "c"]);
    let old = env.text_while_running(2, 3);
    // The editor ignored the change on disk: step 2 RUNNING, its task in CURRENT.
    save_by_rename(&env.file, &format!("{old}# a note typed in the old text\n"));
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.assert_each_step_done_once(3, "ok");
    assert!(
        env.text().contains("# a note typed in the old text\n"),
        "the person's own change is kept"
    );
    env.assert_logged("stale save");
}

#[test]
fn a_stale_save_of_a_text_from_before_the_step_started_does_not_run_it_again() {
    let env = TestLoop::new();
    env.scenario(&steady(700));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b", "--step", "c"]);
    // Read while step 1 runs: steps 2 and 3 are PENDING in this text.
    let old = env.text_while_running(1, 3);
    save_by_rename(&env.file, &old);
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.assert_each_step_done_once(3, "ok");
}

/// Kills the runner once step 3 runs, saves the text read while step `during` ran, resumes:
/// returns the log of a loop that ended DONE with every step started once. Without the
/// `journal` (the versions runners knew: lost, or a loop of an older version), the task
/// ledger alone must repair it.
fn stale_save_while_the_runner_is_dead(during: u32, journal: bool) -> String {
    let env = TestLoop::new();
    env.scenario(&steady(900));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b", "--step", "c"]);
    let old = env.text_while_running(during, 3);
    runner.kill9();
    save_by_rename(&env.file, &old);
    if !journal {
        std::fs::remove_file(env.state().join("M1.md.versions")).unwrap();
    }
    env.run_ok(&["resume"]);
    env.assert_each_step_done_once(3, "ok");
    env.log()
}

#[test]
fn a_stale_save_while_the_runner_is_dead_is_read_against_the_versions_runners_knew() {
    for during in [1, 2] {
        let log = stale_save_while_the_runner_is_dead(during, true);
        assert!(
            log.contains("stale save: M1.md was saved from a text"),
            "{log}"
        );
    }
}

#[test]
fn a_stale_save_while_the_runner_is_dead_is_repaired_from_the_task_ledger() {
    // Step 2 RUNNING with its (since judged) task in CURRENT; step 3's task not on record.
    let log = stale_save_while_the_runner_is_dead(2, false);
    assert!(log.contains("was judged already"), "{log}");
    assert!(log.contains("taken back on record"), "{log}");
}

#[test]
fn a_stale_save_from_before_a_pass_with_the_runner_dead_does_not_rerun_the_step() {
    // Step 2 PENDING and no task of it in this text; by the kill, step 2 passed and step 3 runs.
    let log = stale_save_while_the_runner_is_dead(1, false);
    assert!(log.contains("its record is put back"), "{log}");
}

#[test]
fn a_step_set_back_to_pending_by_hand_runs_again() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    let text = env
        .text()
        .replacen("STATUS: DONE", "STATUS: RUNNING", 1)
        .replace("2: [DONE] b", "2: [PENDING] b");
    save_by_rename(&env.file, &text);
    env.run_ok(&["resume"]);
    assert_eq!(env.calls_for(1), 1);
    assert_eq!(env.calls_for(2), 2, "{}", env.log());
    env.assert_status(Status::Done);
}

/// How an editor or a script saves, many times a second.
#[derive(Clone, Copy, Debug)]
enum Save {
    Rename,
    Append,
    InPlace,
}

fn save_storm(how: Save) {
    let env = TestLoop::new();
    env.scenario(&steady(150));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b", "--step", "c"]);
    env.wait_for_calls(1, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let saves = Arc::new(AtomicUsize::new(0));
    let saver = {
        let (file, stop, saves) = (env.file.clone(), stop.clone(), saves.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(90);
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                n += 1;
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                if text.contains("STATUS: DONE") {
                    break;
                }
                match how {
                    Save::Rename => save_by_rename(&file, &format!("{text}# save {n}\n")),
                    Save::Append => {
                        use std::io::Write;
                        let mut f = std::fs::OpenOptions::new()
                            .append(true)
                            .open(&file)
                            .unwrap();
                        writeln!(f, "# save {n}").unwrap();
                    }
                    Save::InPlace => save_in_place_slowly(&file, &format!("{text}# save {n}\n")),
                }
                saves.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // The loop ends while the saving goes on: events never keep it from judging a step.
    let status = runner.wait(Duration::from_secs(80));
    let still_saving = !saver.is_finished();
    stop.store(true, Ordering::SeqCst);
    saver.join().unwrap();
    assert!(status.success(), "{how:?}: {status:?}\n{}", env.log());
    if env.m1().status != Status::Done {
        // The one race no runner can win: a save made from the text read just before its
        // last write, landing after it exited. The next resume puts the record back from
        // the task ledger, and starts nothing.
        env.run_ok(&["resume"]);
    }
    assert!(
        still_saving || env.text().contains("STATUS: DONE"),
        "{how:?}: the loop only ended after the saving stopped ({} saves)\n{}",
        saves.load(Ordering::SeqCst),
        env.log()
    );
    env.assert_each_step_done_once(3, "ok");
    // Every save is in the text: none was lost to a write of the runner's, however they
    // overlapped (an in-place save or an append can land in the file a swap displaced).
    let text = env.text();
    let made = saves.load(Ordering::SeqCst);
    let lost: Vec<usize> = (1..=made)
        .filter(|n| !text.contains(&format!("# save {n}\n")))
        .collect();
    assert!(
        lost.is_empty(),
        "{how:?}: saves lost {lost:?} of {made}\n{text}"
    );
    // Not a speed target (that is `cargo bench --bench loop -- storm`): a stall detector,
    // with room for a loaded machine. Stalled, a step waited for the saving to pause.
    let gaps = exit_to_next_spawn(&env);
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert!(
        gaps.iter().all(|g| *g < Duration::from_secs(5)),
        "{how:?}: a step was judged late: agent exit → next spawn {gaps:?}\n{}",
        env.log()
    );
}

/// For each task but the last: the time from its agent's exit to the next task's spawn.
fn exit_to_next_spawn(env: &TestLoop) -> Vec<Duration> {
    let time = |p: std::path::PathBuf, k: &str| {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
        chrono::DateTime::parse_from_rfc3339(v[k].as_str()?).ok()
    };
    let mut t: Vec<_> = std::fs::read_dir(env.state().join("tasks"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            Some((
                time(e.path().join("spec.json"), "created_at")?,
                time(e.path().join("exit.json"), "ended_at")?,
            ))
        })
        .collect();
    t.sort();
    t.windows(2)
        .map(|w| (w[1].0 - w[0].1).to_std().unwrap_or_default())
        .collect()
}

#[test]
fn frequent_saves_by_rename_do_not_stall_the_runner() {
    save_storm(Save::Rename);
}

#[test]
fn frequent_appends_do_not_stall_the_runner() {
    save_storm(Save::Append);
}

#[test]
fn frequent_saves_in_place_do_not_stall_the_runner() {
    save_storm(Save::InPlace);
}

#[test]
fn a_valid_edit_the_runner_cannot_record_onto_halts_waiting_instead_of_spinning() {
    let env = TestLoop::new();
    env.scenario(&steady(1500));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    // A valid file with an empty plan, saved while step 1 runs: the runner's record of step
    // 1 cannot go onto it.
    let text = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  TOTAL_STEPS: 0\n  CURRENT_STEP: 0\n  STEPS:\nCURRENT:\n";
    save_by_rename(&env.file, text);
    let status = runner.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "{}\n{}", env.text(), env.log());
    env.assert_status(Status::Waiting);
    assert!(
        env.m1()
            .next_action
            .as_deref()
            .unwrap_or("")
            .contains("fix M1.md"),
        "{}",
        env.text()
    );
    env.assert_logged("would make it invalid");
}
