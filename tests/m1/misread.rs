//! Files that look right to a person but would be read wrong: a byte order mark, a STATUS
//! key a human cannot tell from a broken one, a plan hidden behind a code fence or an odd
//! space, values that only fail once the runner acts on them. Each is either read as meant
//! or rejected at its line and column, and a rejected file keeps every byte.

use m1loop::m1::keys::ResultKey;
use m1loop::m1::{Document, Edit, Status, Store};

use crate::support::{SEED, Temp, case, loop_with_file, seed_with};

const TEMPLATE: &str = include_str!("../../templates/M1.md");
const BOM: &str = "\u{feff}";

/// The seed without lines `from..=to` (1-based).
fn seed_without(from: usize, to: usize) -> String {
    let lines: Vec<&str> = SEED.lines().collect();
    let kept: Vec<&str> = lines[..from - 1]
        .iter()
        .chain(&lines[to..])
        .copied()
        .collect();
    kept.join("\n") + "\n"
}

/// `loop validate` on `text`: exit 2, nothing on stdout, the file byte for byte as it was
/// and nothing written beside it. Returns the errors without the `path:` prefix.
fn rejected(text: &str) -> Vec<String> {
    let c = case(text.as_bytes());
    let out = loop_with_file(&["validate"], &c.file);
    assert_eq!(out.status.code(), Some(2), "accepted:\n{text}");
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&c.file).unwrap(), text.as_bytes());
    assert_eq!(
        std::fs::read_dir(c.file.parent().unwrap()).unwrap().count(),
        1
    );
    let prefix = format!("{}:", c.file.display());
    let errs: Vec<String> = String::from_utf8(out.stderr)
        .unwrap()
        .lines()
        .map(|l| {
            l.strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("no path in {l}"))
                .to_string()
        })
        .collect();
    // The library says the same.
    let lib: Vec<String> = Document::parse(text)
        .unwrap_err()
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errs, lib);
    errs
}

/// The one error `text` has, which must start with `line:column: ` and contain `says`.
fn one_error(text: &str, at: &str, says: &str) {
    let errs = rejected(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with(&format!("{at}: ")) && errs[0].contains(says),
        "expected {at}: …{says}…, got {}",
        errs[0]
    );
}

// ---- STATUS ----

#[test]
fn a_bom_before_status_is_kept_and_read() {
    let text = format!("{BOM}{SEED}");
    let doc = Document::parse(&text).unwrap();
    assert_eq!(doc.view().status, Status::Running);
    assert_eq!(doc.render(), text, "parse then render gives the same bytes");

    // An edit of line 1 keeps the BOM in front of it; nothing else moves.
    let mut edited = doc.clone();
    edited.apply(&Edit::Status(Status::Done));
    let expected = text.replacen("STATUS: RUNNING ", "STATUS: DONE    ", 1);
    assert_eq!(edited.render(), expected);

    // Errors count columns as an editor shows them, without the BOM.
    assert_eq!(
        rejected(&format!("{BOM}STATUS: RUNING\nGOAL: g\n")),
        ["1:9: unknown STATUS `RUNING`: expected one of IDLE, RUNNING, WAITING, DONE, FAILED"]
    );

    // On disk: validate and status read it, a commit keeps it.
    let c = case(text.as_bytes());
    assert_eq!(
        loop_with_file(&["validate"], &c.file).status.code(),
        Some(0)
    );
    let out = loop_with_file(&["status", "--json"], &c.file);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "RUNNING");
    let (mut store, _) = Store::open(&c.file).unwrap();
    store.commit(&[Edit::Status(Status::Done)]).unwrap();
    assert_eq!(std::fs::read_to_string(&c.file).unwrap(), expected);
}

#[test]
fn a_done_loop_with_a_bom_stays_done_on_resume() {
    let text = format!("{BOM}{}", SEED.replacen("RUNNING ", "DONE    ", 1));
    let c = case(text.as_bytes());
    let out = loop_with_file(&["resume"], &c.file);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("the loop is DONE"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&c.file).unwrap(), text.as_bytes());
}

#[test]
fn a_leading_space_before_status_is_an_error_at_its_line() {
    one_error(
        &seed_with(1, " STATUS: RUNNING"),
        "1:1",
        "expected `STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`; found `STATUS: RUNNING` after a \
         space — a top-level key starts the line",
    );
}

#[test]
fn a_lowercase_status_key_is_an_error_at_its_line() {
    assert_eq!(
        rejected(&seed_with(1, "status: RUNNING   # lower case")),
        [
            "1:1: expected `STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`; found `status: RUNNING` — keys are upper case"
        ]
    );
    // Further down, under a heading, it is the same mistake.
    let text = format!("# My loop\n\n{}", &seed_with(1, "Status: DONE")[..]);
    one_error(&text, "3:1", "found `Status: DONE` — keys are upper case");
}

#[test]
fn a_status_line_without_its_colon_is_an_error_at_its_line() {
    assert_eq!(
        rejected(&seed_with(1, "STATUS RUNNING")),
        [
            "1:7: expected `STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`; found `STATUS RUNNING` — a colon goes after the key"
        ]
    );
    one_error(
        &seed_with(1, "STATUS : RUNNING"),
        "1:7",
        "the colon goes right after the key",
    );
}

#[test]
fn a_missing_status_line_is_an_error() {
    assert_eq!(
        rejected(&seed_without(1, 1)),
        ["1:1: missing STATUS: expected a line `STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`"]
    );
}

#[test]
fn a_status_edit_never_adds_a_second_status_line() {
    let statuses = |t: &str| {
        t.lines()
            .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("STATUS"))
            .count()
    };
    for (broken, fixed) in [
        (" STATUS: RUNNING   # why", "STATUS: DONE       # why"),
        ("status: RUNNING", "STATUS: DONE"),
        ("STATUS RUNNING", "STATUS: DONE"),
        ("Status : RUNNING", "STATUS: DONE"),
    ] {
        let text = seed_with(1, broken);
        // The line grammar alone accepts these: they read as prose.
        let mut doc = Document::parse_syntax(&text).unwrap();
        doc.apply(&Edit::Status(Status::Done));
        let out = doc.render();
        assert_eq!(statuses(&out), 1, "{out}");
        assert_eq!(out, seed_with(1, fixed), "{broken:?}");
        assert_eq!(Document::parse(&out).unwrap().view().status, Status::Done);
    }
    // No STATUS line at all: it goes first, where the seed has it.
    let text = seed_without(1, 1);
    let mut doc = Document::parse_syntax(&text).unwrap();
    doc.apply(&Edit::Status(Status::Waiting));
    assert_eq!(doc.render(), format!("STATUS: WAITING\n{text}"));
    // A STATUS inside a closed code fence is an example, not the key: left alone.
    let text = format!("```\nSTATUS: DONE\n```\n{}", seed_without(1, 1));
    let mut doc = Document::parse_syntax(&text).unwrap();
    doc.apply(&Edit::Status(Status::Waiting));
    assert_eq!(doc.render(), format!("STATUS: WAITING\n{text}"));
}

// ---- a plan that cannot be found ----

#[test]
fn a_plan_hidden_by_an_unclosed_fence_is_an_error_not_a_new_plan() {
    assert_eq!(
        rejected(&seed_with(4, "```text")),
        [
            "5:1: `PLAN:` is inside the code fence opened on line 4, which is never closed, so it and every key after it read as text: close the fence (a line of ```) before this line"
        ]
    );
    // A fence that is closed is an example and stays prose.
    let text = format!("{SEED}\n```\nPLAN:\n  1: [DONE] an example\n```\n");
    assert_eq!(Document::parse(&text).unwrap().render(), text);
}

#[test]
fn a_no_break_space_before_a_plan_line_is_an_error_at_its_column() {
    assert_eq!(
        rejected(&seed_with(5, "\u{a0}PLAN:")),
        [
            "5:1: no-break space (U+00A0) at the start of the line: indent with ASCII spaces (anything else makes the line read as text, not as a key)"
        ]
    );
    // Inside the block, after real spaces; and a full-width space, as a Japanese IME types.
    one_error(
        &seed_with(9, "  \u{a0}\u{a0}1: [DONE] SIGTERMバグ調査"),
        "9:3",
        "no-break space (U+00A0) at the start of the line",
    );
    one_error(
        &seed_with(8, "\u{3000}STEPS:"),
        "8:1",
        "full-width space (U+3000) at the start of the line",
    );
    // A line of nothing but such spaces looks blank and reads blank: the plan goes on.
    let text = SEED.replacen("  STEPS:\n", "\u{a0}\u{3000}\n  STEPS:\n", 1);
    let doc = Document::parse(&text).unwrap();
    assert_eq!(doc.view().plan.steps.len(), 3);
    assert_eq!(doc.render(), text);
}

#[test]
fn a_file_cut_off_after_plan_is_an_error_not_a_new_plan() {
    let cut = SEED.split_inclusive('\n').take(5).collect::<String>();
    assert!(cut.ends_with("PLAN:\n"));
    assert_eq!(
        rejected(&cut),
        [
            "5:1: the file ends at `PLAN:` with nothing under it and STATUS is RUNNING: it looks cut off, and PLAN lists no steps, so `loop resume` would plan anew; restore the rest of the file (or remove `PLAN:` to plan anew)"
        ]
    );
    // Cut inside the plan: the count says steps existed.
    let cut = SEED.split_inclusive('\n').take(8).collect::<String>();
    assert_eq!(
        rejected(&cut),
        [
            "6:16: TOTAL_STEPS is 3 but PLAN.STEPS lists no steps: the plan's steps are missing; put them back under PLAN.STEPS (or set TOTAL_STEPS: 0 to plan anew)"
        ]
    );
    // Without a count, the current step says so.
    let text = seed_without(6, 6)
        .replace("    1: [DONE]", "    # 1: [DONE]")
        .replace("    2: [RUNNING]", "    # 2: [RUNNING]")
        .replace("    3: [PENDING]", "    # 3: [PENDING]")
        .replace("  STEP_1:", "  OLD_1:")
        .replace("  STEP_2:", "  OLD_2:");
    assert_eq!(
        rejected(&text),
        [
            "6:17: CURRENT_STEP is 2 but PLAN.STEPS lists no steps: the plan's steps are missing; put them back under PLAN.STEPS (or set CURRENT_STEP: 0 to plan anew)"
        ]
    );
}

#[test]
fn results_of_steps_without_a_plan_are_an_error_not_a_new_plan() {
    assert_eq!(
        rejected(&seed_without(5, 11)),
        [
            "13:3: RESULTS holds STEP_1, but PLAN lists no steps, so `loop resume` would plan anew: the plan was lost; put the steps back under PLAN.STEPS (or remove the results of old steps to plan anew)"
        ]
    );
    // WAITING and FAILED loops too; a DONE or IDLE one never plans on its own.
    for status in ["WAITING", "FAILED"] {
        let text = seed_without(5, 11).replacen("RUNNING", status, 1);
        one_error(&text, "13:3", "RESULTS holds STEP_1");
    }
    let done = seed_without(5, 11).replacen("RUNNING", "DONE", 1);
    Document::parse(&done).unwrap();
}

#[test]
fn a_step_line_outside_the_plan_is_an_error_not_a_new_plan() {
    // A heading between PLAN and its steps ends the block; the steps read as text.
    let text = seed_with(8, "## Steps")
        .replace("  TOTAL_STEPS: 3\n", "  TOTAL_STEPS: 0\n")
        .replace("  CURRENT_STEP: 2\n", "  CURRENT_STEP: 0\n");
    let errs = rejected(&text);
    assert_eq!(
        errs[0],
        "9:1: this line looks like a step (`N: [STATE] text`) but is not under PLAN.STEPS, and PLAN lists no steps, so `loop resume` would plan anew; put it under `  STEPS:` in PLAN, indented 4 spaces"
    );
}

#[test]
fn a_new_loop_without_steps_is_valid_and_plans() {
    // What `loop start` writes without --step, and what it holds during the planning call.
    let doc = Document::parse(TEMPLATE).unwrap();
    assert!(doc.view().plan.steps.is_empty());
    let planning = TEMPLATE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_0:\n    EXIT: (pending)\n    ATTEMPTS: 1\n",
    );
    let m = Document::parse(&planning).unwrap().view();
    assert_eq!(m.status, Status::Running);
    assert!(m.plan.steps.is_empty());
    // A hand-written one: status and goal only.
    Document::parse("STATUS: RUNNING\nGOAL: g\n").unwrap();
}

// ---- values that would only fail later ----

#[test]
fn zero_max_retries_is_an_error_at_its_value() {
    let text = format!("{SEED}LIMITS:\n  MAX_RETRIES: 0\n");
    assert_eq!(
        rejected(&text),
        ["31:16: MAX_RETRIES: expected a whole number ≥ 1, found `0`"]
    );
    Document::parse(&text.replace("MAX_RETRIES: 0", "MAX_RETRIES: 1")).unwrap();
    // `loop start` refuses to write one.
    let dir = Temp::new();
    let file = dir.path().join("M1.md");
    let out = loop_with_file(&["start", "g", "--step", "a", "--max-retries", "0"], &file);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-retries"));
    assert!(!file.exists());
}

#[test]
fn a_task_id_that_leaves_the_task_directory_is_an_error_at_its_value() {
    assert_eq!(
        rejected(&seed_with(14, "  TASK_ID: ../../x   # edited")),
        [
            "14:12: invalid task id \"../../x\": '/' is not allowed; use letters, digits, '_', '-' and '.' (ids look like task_20260217T053000_a1b2c3)"
        ]
    );
    one_error(
        &seed_with(14, "  TASK_ID: a..b"),
        "14:12",
        "must not contain \"..\"",
    );
}

#[test]
fn a_nul_byte_in_a_value_is_an_error_at_its_column() {
    one_error(
        &seed_with(22, "    COMMIT: a69\0fb3"),
        "22:16",
        "unexpected NUL byte",
    );
    // The runner never writes one raw: it is escaped in a quoted value, and reads back.
    let mut doc = Document::parse(SEED).unwrap();
    doc.apply(&ResultKey::Summary.set(1, "a\0b"));
    let out = doc.render();
    assert!(out.contains("    SUMMARY: \"a\\0b\"\n"), "{out}");
    assert_eq!(
        Document::parse(&out)
            .unwrap()
            .get(&["RESULTS", "STEP_1", "SUMMARY"]),
        Some("a\0b".to_string())
    );
}

#[test]
fn an_empty_step_text_is_an_error_at_its_column() {
    assert_eq!(
        rejected(&seed_with(11, "    3: [PENDING]")),
        [
            "11:17: empty step 3: expected `N: [STATE] text`, with a text that says what the step does"
        ]
    );
    one_error(
        &seed_with(11, "    3: \"[PENDING]  \""),
        "11:18",
        "empty step 3",
    );
}

#[test]
fn cr_only_line_endings_are_named_not_reported_as_a_missing_goal() {
    assert_eq!(
        rejected(&SEED.replace('\n', "\r")),
        ["1:72: line endings are CR only (old Mac style); save with LF or CRLF"]
    );
    // One stray CR in an LF file: at its column.
    one_error(
        &seed_with(2, "GOAL: a\rb"),
        "2:8",
        "carriage return (CR) inside the line",
    );
    // CRLF is fine.
    Document::parse(&SEED.replace('\n', "\r\n")).unwrap();
}

// ---- end to end: resume never acts on, or writes, a misread file ----

#[test]
fn resume_exits_2_on_a_misread_file_and_writes_nothing() {
    let cases = [
        ("status: RUNNING", 1, "1:1: expected `STATUS"),
        (" STATUS: DONE", 1, "1:1: expected `STATUS"),
        ("STATUS DONE", 1, "1:7: expected `STATUS"),
        ("```", 4, "5:1: `PLAN:` is inside the code fence"),
        ("\u{a0}PLAN:", 5, "5:1: no-break space"),
        ("  TASK_ID: ../../x", 14, "14:12: invalid task id"),
        ("    3: [PENDING]", 11, "11:17: empty step 3"),
    ];
    for (line, n, says) in cases {
        let text = seed_with(n, line);
        let c = case(text.as_bytes());
        for args in [&["validate"][..], &["status"], &["resume"]] {
            let out = loop_with_file(args, &c.file);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {line:?}: {err}");
            assert!(
                err.contains(&format!("{}:{says}", c.file.display())),
                "{args:?} {line:?}: {err}"
            );
            assert_eq!(std::fs::read(&c.file).unwrap(), text.as_bytes(), "{args:?}");
        }
    }
    // No STATUS at all: resume used to append one and run the loop again.
    let text = seed_without(1, 1);
    let c = case(text.as_bytes());
    let out = loop_with_file(&["resume"], &c.file);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":1:1: missing STATUS"));
    assert_eq!(std::fs::read(&c.file).unwrap(), text.as_bytes());
}
