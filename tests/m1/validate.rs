//! Malformed files: each problem is reported as `line:column: what was expected`, `loop
//! validate` and `loop status` exit 2, and the file keeps every byte.

use std::time::Duration;

use m1loop::m1::Document;

use crate::support::{SEED, Temp, case, loop_with_file, parse_errors as errors, seed_with};

#[test]
fn unknown_status() {
    assert_eq!(
        errors(&seed_with(1, "STATUS: RUNING   # typo")),
        ["1:9: unknown STATUS `RUNING`: expected one of IDLE, RUNNING, WAITING, DONE, FAILED"]
    );
}

#[test]
fn unknown_step_state() {
    assert_eq!(
        errors(&seed_with(9, "    1: [DONNE] SIGTERMバグ調査")),
        [
            "9:9: unknown step state `DONNE`: expected one of PENDING, RUNNING, DONE, FAILED, SKIPPED"
        ]
    );
}

#[test]
fn current_step_outside_the_plan() {
    assert_eq!(
        errors(&seed_with(7, "  CURRENT_STEP: 4")),
        ["7:17: CURRENT_STEP 4 is outside the plan: expected 0 to 3"]
    );
}

/// A step added by hand also needed `TOTAL_STEPS` raised (`TOTAL_STEPS is 3 but PLAN.STEPS
/// lists 4 steps`): the count follows the list, and the runner writes it for the person. Only
/// a count over no steps at all (lost steps) is refused.
#[test]
fn total_steps_not_matching_the_steps_is_no_error() {
    for count in ["  TOTAL_STEPS: 4", "  TOTAL_STEPS: 1"] {
        let doc = Document::parse(&seed_with(6, count)).unwrap();
        assert_eq!(doc.view().plan.steps.len(), 3);
    }
}

#[test]
fn duplicate_keys() {
    assert_eq!(
        errors(&seed_with(3, "GOAL: again")),
        ["3:1: duplicate key `GOAL` (first on line 2)"]
    );
    assert_eq!(
        errors(&seed_with(16, "  CC_PID: 1")),
        ["16:3: duplicate key `CC_PID` (first on line 15)"]
    );
}

#[test]
fn bad_indentation() {
    assert_eq!(
        errors(&seed_with(6, "   TOTAL_STEPS: 3")),
        ["6:4: bad indentation: expected 2 spaces (inside `PLAN` on line 5), found 3"]
    );
    assert_eq!(
        errors(&seed_with(10, "      2: [RUNNING] x")),
        [
            "10:7: bad indentation: expected at most 4 spaces (`1` on line 9 has a value, so nothing can be nested under it), found 6"
        ]
    );
    assert_eq!(
        errors("GOAL: g\n\tX: y\nPLAN:\n\tTOTAL_STEPS: 0\n"),
        [
            "2:1: bad indentation: expected spaces, found a tab",
            "4:1: bad indentation: expected spaces, found a tab"
        ]
    );
}

#[test]
fn malformed_step_lines() {
    assert_eq!(
        errors(&seed_with(9, "    1 [DONE] x")),
        ["9:5: expected `KEY: value` (an upper-case key or a step number), or a `# comment`"]
    );
    // Meaning is checked once the lines read: a missing step shows as out of order.
    assert_eq!(
        errors(&seed_with(9, "    # 1: [DONE] x")),
        [
            "10:5: step 2 out of order: expected step 1",
            "11:5: step 3 out of order: expected step 2"
        ]
    );
    assert_eq!(
        errors(&seed_with(9, "    1: DONE x")),
        ["9:8: malformed step: expected `N: [STATE] text`"]
    );
    assert_eq!(
        errors(&seed_with(9, "    1: [DONE]x")),
        ["9:8: malformed step: expected `N: [STATE] text`"]
    );
    assert_eq!(
        errors(&seed_with(9, "    ONE: [DONE] x")),
        ["9:5: malformed step: expected `N: [STATE] text` with N a step number"]
    );
}

#[test]
fn unterminated_and_bad_quotes() {
    assert_eq!(
        errors(&seed_with(17, "  COMMAND: \"docs/修正案...")),
        ["17:12: unterminated quote: expected a closing `\"`"]
    );
    assert_eq!(
        errors(&seed_with(17, "  COMMAND: \"a\" b")),
        ["17:15: expected end of line or a comment (` # ...`) after the closing quote"]
    );
}

#[test]
fn key_shapes_and_types() {
    assert_eq!(
        errors("STATUS:RUNNING\nGOAL: g\n"),
        ["1:8: expected a space after `STATUS:`"]
    );
    assert_eq!(
        errors("STATUS: IDLE\n"),
        ["1:1: missing GOAL: expected a line `GOAL: what the loop should achieve`"]
    );
    assert_eq!(
        errors("STATUS: IDLE\nGOAL:\n"),
        ["2:6: empty GOAL: expected `GOAL: what the loop should achieve`"]
    );
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nCURRENT: now\n"),
        ["3:10: expected a block: `CURRENT:` alone on its line, with indented keys under it"]
    );
    assert_eq!(
        errors(&seed_with(15, "  CC_PID: 九")),
        ["15:11: CC_PID: expected a whole number, found `九`"]
    );
    assert_eq!(
        errors(&seed_with(21, "    EXIT: pending")),
        ["21:11: EXIT: expected an exit code or `(pending)`, found `pending`"]
    );
    assert_eq!(
        errors(&seed_with(24, "    VERIFIED: yes")),
        ["24:15: VERIFIED: expected `true` or `false`, found `yes`"]
    );
    assert_eq!(
        errors("STATUS: IDLE\nGOAL: g\nLIMITS:\n  MAX_COST_USD: -1\n"),
        ["4:17: MAX_COST_USD: expected a number ≥ 0, found `-1`"]
    );
}

#[test]
fn bad_settings_in_limits_and_agent_are_errors_at_line_and_column() {
    let base = "STATUS: IDLE\nGOAL: g\n";
    for (body, want) in [
        (
            "LIMITS:\n  STEP_TIMEOUT: 0s\n",
            "4:17: STEP_TIMEOUT: expected a duration above zero and at most a year (8760h), such as `40s`, `15m` or `1h30m`, found `0s`",
        ),
        (
            "LIMITS:\n  IDLE_TIMEOUT: soon\n",
            "4:17: IDLE_TIMEOUT: expected a duration above zero and at most a year (8760h), such as `40s`, `15m` or `1h30m`, found `soon`",
        ),
        (
            "LIMITS:\n  STEP_TIMEOUT_MIN: 0\n",
            "4:21: STEP_TIMEOUT_MIN: expected a whole number of minutes from 1 to 525600 (a year), found `0`",
        ),
        (
            "LIMITS:\n  STEP_TIMEOUT: 3s\n  STEP_TIMEOUT_MIN: 1\n",
            "5:3: LIMITS has both STEP_TIMEOUT and STEP_TIMEOUT_MIN: expected one; keep STEP_TIMEOUT (e.g. `STEP_TIMEOUT: 90s`) and remove STEP_TIMEOUT_MIN",
        ),
        (
            "AGENT:\n  PERMISSION_MODE: yolo\n",
            "4:20: PERMISSION_MODE: expected one of acceptEdits, auto, bypassPermissions, default, manual, dontAsk, plan, found `yolo`",
        ),
        (
            "AGENT:\n  ALLOWED_TOOLS: Read,,Grep\n",
            "4:18: ALLOWED_TOOLS: expected tool names separated by commas, e.g. `Read,Grep,Bash(git:*)`, or `(none)`, found `Read,,Grep`",
        ),
        (
            "AGENT:\n  MAX_TURNS: 0\n",
            "4:14: MAX_TURNS: expected a whole number ≥ 1, found `0`",
        ),
        (
            "AGENT:\n  MAX_BUDGET_USD: lots\n",
            "4:19: MAX_BUDGET_USD: expected a number ≥ 0, found `lots`",
        ),
        (
            "AGENT:\n  PROGRAM: \"\"\n",
            "4:12: PROGRAM: expected a value, found ``",
        ),
    ] {
        assert_eq!(errors(&format!("{base}{body}")), [want], "{body}");
    }
    let err = errors(&format!("{base}AGENT:\n  EXTRA_ARGS: [\"a\", 1]\n"));
    assert!(
        err[0].starts_with("4:15: EXTRA_ARGS: expected words"),
        "{err:?}"
    );
    // Older files keep working; the new keys read back.
    let doc = Document::parse(&format!(
        "{base}LIMITS:\n  STEP_TIMEOUT_MIN: 2\n  IDLE_TIMEOUT: 40s\nAGENT:\n  PERMISSION_MODE: plan\n  \
         ALLOWED_TOOLS: Read,Bash(git log --format=%h,%s)\n  EXTRA_ARGS: [\"--append-system-prompt\", \"be brief\"]\n"
    ))
    .unwrap();
    let m = doc.view();
    assert_eq!(m.limits.step_timeout, Some(Duration::from_secs(120)));
    assert_eq!(m.limits.idle_timeout, Some(Duration::from_secs(40)));
    assert_eq!(
        m.agent.permission_mode,
        Some(m1loop::m1::PermissionMode::Plan)
    );
    assert_eq!(
        m.agent.allowed_tools.unwrap(),
        ["Read", "Bash(git log --format=%h,%s)"]
    );
    assert_eq!(
        m.agent.extra_args.unwrap(),
        ["--append-system-prompt", "be brief"]
    );
}

#[test]
fn prose_unknown_keys_and_a_goal_only_file_are_valid() {
    let text = "# Notes\nSome text: fine.\n\nSTATUS: IDLE\nGOAL: g\nMY_KEY: x\nEXTRA:\n  ANY: y  # c\n  # note\n";
    Document::parse(text).unwrap();
}

// ---- the CLI, on real files ----

#[test]
fn cli_reports_path_line_column_exits_2_and_leaves_the_file_alone() {
    let bad = seed_with(1, "STATUS: GO").replace("CURRENT_STEP: 2", "CURRENT_STEP: 9");
    let c = case(bad.as_bytes());
    let path = c.file.display().to_string();
    for args in [&["validate"][..], &["status"], &["status", "--json"]] {
        let out = loop_with_file(args, &c.file);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!(
                "{path}:1:9: unknown STATUS `GO`: expected one of IDLE, RUNNING, WAITING, DONE, FAILED\n\
                 {path}:7:17: CURRENT_STEP 9 is outside the plan: expected 0 to 3\n"
            )
        );
        assert_eq!(std::fs::read(&c.file).unwrap(), bad.as_bytes());
        assert_eq!(
            std::fs::read_dir(c.file.parent().unwrap()).unwrap().count(),
            1,
            "nothing else written"
        );
    }
}

#[test]
fn cli_reports_invalid_utf8_at_its_position() {
    let mut bytes = b"GOAL: ok\nCONSTRAINTS: ab".to_vec();
    bytes.extend([0xff, b'\n']);
    let c = case(&bytes);
    let out = loop_with_file(&["validate"], &c.file);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "{}:2:16: expected UTF-8 text: invalid byte sequence\n",
            c.file.display()
        )
    );
    assert_eq!(std::fs::read(&c.file).unwrap(), bytes);
}

#[test]
fn cli_accepts_the_seed_example_without_changing_it() {
    let c = case(SEED.as_bytes());
    let out = loop_with_file(&["validate"], &c.file);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}: ok\n", c.file.display())
    );
    assert_eq!(std::fs::read(&c.file).unwrap(), SEED.as_bytes());
}

#[test]
fn cli_missing_file_says_how_to_start() {
    let dir = Temp::new();
    let file = dir.path().join("state/M1.md");
    for args in [&["validate"][..], &["status"]] {
        let out = loop_with_file(args, &file);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("does not exist") && err.contains("loop start \"GOAL\""),
            "{err}"
        );
    }
    assert!(!file.exists());
}

#[test]
fn a_gate_with_an_unknown_kind_or_a_decision_without_its_choice() {
    let text = format!(
        "{SEED}\nGATES:\n  G1:\n    KIND: PLANN\n    STATE: PENDING\n  G2:\n    KIND: ASK\n    \
         STATE: DECIDED\n  GATE3:\n    KIND: ASK\n  G4:\n    KIND: ASK\n    STATE: LATER\n"
    );
    let base = SEED.lines().count() + 1;
    assert_eq!(
        errors(&text),
        [
            format!(
                "{}:11: unknown gate KIND `PLANN`: expected one of PLAN, ASK, DENIED, FAILED, \
                 REVIEW, MERGE, COST",
                base + 3
            ),
            format!(
                "{}:3: gate G2 is DECIDED but has no CHOICE: expected `CHOICE: …` under it",
                base + 5
            ),
            format!(
                "{}:3: GATES holds `GATE3`: expected a gate id such as `G1`",
                base + 8
            ),
            format!(
                "{}:12: unknown gate STATE `LATER`: expected one of PENDING, DECIDED",
                base + 12
            ),
        ]
    );
}

/// The seed with a `PLAN.AFTER` block of `lines` after its steps (line 12 on).
fn seed_after(lines: &str) -> String {
    SEED.replacen(
        "    3: [PENDING] 実戦テスト → /edit --steps 1\n",
        &format!("    3: [PENDING] 実戦テスト → /edit --steps 1\n  AFTER:\n{lines}"),
        1,
    )
}

#[test]
fn after_naming_a_step_the_plan_lacks() {
    assert_eq!(
        errors(&seed_after("    3: 4\n")),
        ["13:8: PLAN.AFTER 3: step 4 is not in the plan (PLAN.STEPS has steps 1 to 3)"]
    );
    assert_eq!(
        errors(&seed_after("    5: 1\n")),
        ["13:5: PLAN.AFTER names step 5, but PLAN.STEPS has steps 1 to 3"]
    );
    assert_eq!(
        errors(&seed_after("    3: 1, two\n")),
        ["13:8: PLAN.AFTER 3: expected step numbers separated by commas (`2, 3`), found `two`"]
    );
}

#[test]
fn after_that_makes_a_cycle() {
    assert_eq!(
        errors(&seed_after("    2: 3\n    3: 2\n")),
        [
            "13:8: PLAN.AFTER makes a cycle (2 waits for 3 waits for 2): no order can run these \
             steps; remove one of these lines"
        ]
    );
    assert_eq!(
        errors(&seed_after("    3: 3\n")),
        ["13:8: PLAN.AFTER 3: step 3 cannot come after itself"]
    );
    let m = Document::parse(&seed_after("    3: 1, 2\n"))
        .unwrap()
        .view();
    assert_eq!(m.plan.after[&3], [1, 2]);
}

#[test]
fn a_hand_written_parallel_record_with_a_bad_branch_base_or_worktree_is_refused_at_its_line() {
    let text = format!(
        "{SEED}\nPARALLEL:\n  BRANCH: loop/ok\n  BASE: 0123abcd\n  STEP_2:\n    WORKTREE: \
         relative/wt\n    BRANCH: bad..branch\n    BASE: not-a-sha\n    LOOP: /abs/M1.md\n  \
         STEP_9:\n    BRANCH: loop/x\n"
    );
    let base = SEED.lines().count() + 1;
    assert_eq!(
        errors(&text),
        [
            format!(
                "{}:15: WORKTREE: expected an absolute path, found `relative/wt`",
                base + 5
            ),
            format!(
                "{}:13: BRANCH: expected a git branch name (no spaces, `..`, `~`, `^`, `:`, \
                 `?`, `*`, `[` or `\\`, not starting with `-` or `/`), found `bad..branch`",
                base + 6
            ),
            format!(
                "{}:11: BASE: expected a git commit id (4 to 40 hex digits), found `not-a-sha`",
                base + 7
            ),
            format!(
                "{}:3: PARALLEL.STEP_9 is the record of a step the plan lacks (PLAN.STEPS has \
                 3): remove it",
                base + 9
            ),
        ]
    );
}

/// `PARALLEL.STEP_N.WORKTREE: /etc`, `BRANCH: master` and a `LOOP:` naming another loop's
/// M1.md were accepted (a resume then worked in, or removed, what was not the loop's): each
/// names the loop's own place under its `LOOP_ID`, or is refused at its line.
#[test]
fn a_parallel_record_naming_a_place_not_the_loops_own_is_refused_at_its_line() {
    let ok = format!(
        "{SEED}LOOP_ID: abc123\nPARALLEL:\n  BRANCH: loop/abc123\n  BASE: 0123abcd\n  STEP_2:\n    \
         WORKTREE: /p/state/parallel/abc123/step-2\n    BRANCH: loop/abc123-step-2.2\n    \
         BASE: 0123abcd\n    LOOP: /p/state/parallel/abc123/step-2.loop.2/M1.md\n"
    );
    assert!(
        Document::parse(&ok).is_ok(),
        "the loop's own names are fine"
    );
    let bad = format!(
        "{SEED}LOOP_ID: abc123\nPARALLEL:\n  BRANCH: master\n  BASE: 0123abcd\n  STEP_2:\n    \
         WORKTREE: /etc\n    BRANCH: master\n    BASE: 0123abcd\n    LOOP: \
         /p/state/parallel/other9/step-2.loop/M1.md\n"
    );
    let said = errors(&bad);
    for want in [
        "PARALLEL.STEP_2.WORKTREE names `/etc`",
        "PARALLEL.STEP_2.BRANCH names `master`",
        "PARALLEL.STEP_2.LOOP names `/p/state/parallel/other9/step-2.loop/M1.md`",
        "PARALLEL.BRANCH `master` is not this loop's integration branch",
    ] {
        assert!(said.iter().any(|e| e.contains(want)), "{want}: {said:?}");
    }
}
