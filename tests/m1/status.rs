//! `loop status` on the seed's example: the human view, the JSON view, and no writes.

use std::path::Path;

use serde_json::json;

use crate::support::{Case, Temp, case, loop_on_file, run};

const SEED: &str = include_str!("../../examples/M1.md");

/// `loop status` as one user, whose per-user state (where the Telegram hint, once shown, is
/// remembered) is the directory `user` (none: a fresh one, so the hint shows).
fn status_as(file: &Path, json: bool, user: Option<&Path>) -> String {
    let fresh = Temp::new();
    let args: &[&str] = if json {
        &["status", "--json"]
    } else {
        &["status"]
    };
    let out = run(loop_on_file(args, file).env("XDG_STATE_HOME", user.unwrap_or(fresh.path())));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
    let text = String::from_utf8(out.stdout).unwrap();
    // What a run is granted names this machine's toolchains (tests/loops/toolchains.rs
    // checks it): the view of the file is the rest.
    if json {
        return text;
    }
    let granted = text.lines().filter(|l| l.starts_with("GRANTED ")).count();
    assert!(granted <= 1, "{text}");
    let mut kept = String::new();
    for l in text.lines().filter(|l| !l.starts_with("GRANTED ")) {
        kept.push_str(l);
        kept.push('\n');
    }
    kept
}

fn status(file: &Path, json: bool) -> String {
    status_as(file, json, None)
}

/// With no Telegram settings, the human view ends with how to set them up.
const HINT: &str = "Telegram notifications are off: set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID (see docs/05-telegram.md)";

fn untouched(dir: &Path, file: &Path) {
    assert_eq!(std::fs::read_to_string(file).unwrap(), SEED);
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        1,
        "status wrote nothing beside M1.md"
    );
}

#[test]
fn human_view_of_the_seed_example() {
    let Case { dir, file } = case(SEED);
    assert_eq!(
        status(&file, false),
        "\
GOAL         /editのSIGTERMバグを修正
STATUS       RUNNING  step 2/3
CONSTRAINTS  ai-media.pyのみ変更、media-commands.ts触るな
   1 DONE      SIGTERMバグ調査 → docs/edit-sigterm-analysis.md  (exit 0, a690fb3, verified)
>  2 RUNNING   Fix1-5実装 → ai-media.py
   3 PENDING   実戦テスト → /edit --steps 1
CURRENT      task task_xxx, pid 99356, since 2026-02-17T05:30:00
SANDBOX      bwrap (the default)
LAST_ACTION  Step 2 spawned via exec bridge --fire
NEXT_ACTION  --check TASK_ID で完了確認 → 結果検証 → Step 3へ
RUNNER       none: `loop resume` carries the loop on from this file
{HINT}
"
        .replace("{HINT}", HINT)
    );
    untouched(dir.path(), &file);
}

#[test]
fn json_view_of_the_seed_example() {
    let Case { dir, file } = case(SEED);
    let out = status(&file, true);
    assert_eq!(out.lines().count(), 1, "one object on one line");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "RUNNING");
    assert_eq!(v["goal"], "/editのSIGTERMバグを修正");
    assert_eq!(
        v["constraints"],
        "ai-media.pyのみ変更、media-commands.ts触るな"
    );
    assert_eq!(v["plan"]["total_steps"], 3);
    assert_eq!(v["plan"]["current_step"], 2);
    assert_eq!(
        v["plan"]["steps"],
        json!([
            {"n": 1, "state": "DONE", "text": "SIGTERMバグ調査 → docs/edit-sigterm-analysis.md"},
            {"n": 2, "state": "RUNNING", "text": "Fix1-5実装 → ai-media.py"},
            {"n": 3, "state": "PENDING", "text": "実戦テスト → /edit --steps 1"},
        ])
    );
    assert_eq!(v["current"]["task_id"], "task_xxx");
    assert_eq!(v["current"]["cc_pid"], 99356);
    assert_eq!(v["current"]["spawn_time"], "2026-02-17T05:30:00");
    assert_eq!(
        v["current"]["command"],
        "docs/edit-sigterm-analysis.mdの修正案Fix1-5を全て..."
    );
    assert_eq!(v["results"]["1"]["exit"], 0);
    assert_eq!(v["results"]["1"]["commit"], "a690fb3");
    assert_eq!(
        v["results"]["1"]["summary"],
        "分析レポート作成完了。5つの修正案。"
    );
    assert_eq!(v["results"]["1"]["verified"], true);
    assert_eq!(
        v["results"]["2"]["exit"],
        serde_json::Value::Null,
        "(pending) is no exit yet"
    );
    assert_eq!(v["last_action"], "Step 2 spawned via exec bridge --fire");
    assert_eq!(
        v["next_action"],
        "--check TASK_ID で完了確認 → 結果検証 → Step 3へ"
    );
    assert_eq!(
        v["limits"],
        json!({"max_retries": 3, "max_steps": 10, "step_timeout": "1h", "idle_timeout": null, "max_cost_usd": null})
    );
    assert_eq!(v["verify"], serde_json::Value::Null);
    assert_eq!(v["task"], serde_json::Value::Null);
    untouched(dir.path(), &file);
}

#[test]
fn a_status_and_goal_only_file_shows_no_plan_and_runner_keys_show_up() {
    let Case { dir: _dir, file } = case("STATUS: IDLE\nGOAL: ship\n");
    assert_eq!(
        status(&file, false),
        format!(
            "GOAL         ship\nSTATUS       IDLE\nPLAN         (no steps yet)\nSANDBOX      bwrap \
             (the default)\n{HINT}\n"
        )
    );
    std::fs::write(
        &file,
        "STATUS: WAITING\nGOAL: ship\nVERIFY: cargo test\nLIMITS:\n  MAX_RETRIES: 5\n  MAX_COST_USD: 2.5\nPLAN:\n  CURRENT_STEP: 1\n  STEPS:\n    1: [FAILED] build\nCURRENT:\n  ATTEMPT: 2\nRESULTS:\n  STEP_1:\n    EXIT: 1\n    ATTEMPTS: 2\n    COST_USD: 0.5\n    ERROR: verify failed\n",
    )
    .unwrap();
    assert_eq!(
        status(&file, false),
        format!(
            "GOAL         ship\nSTATUS       WAITING  step 1/1\n>  1 FAILED    build  (exit 1, 2 attempts, $0.50, error: verify failed)\nCURRENT      attempt 2\nSANDBOX      bwrap (the default)\nCOST         $0.50\n{HINT}\n"
        )
    );
    let v: serde_json::Value = serde_json::from_str(&status(&file, true)).unwrap();
    assert_eq!(v["verify"], "cargo test");
    assert_eq!(v["limits"]["max_retries"], 5);
    assert_eq!(v["limits"]["max_cost_usd"], 2.5);
    assert_eq!(
        v["plan"]["total_steps"], 1,
        "TOTAL_STEPS left out: the number of steps"
    );
    assert_eq!(v["current"]["attempt"], 2);
    assert_eq!(v["results"]["1"]["attempts"], 2);
    assert_eq!(v["results"]["1"]["cost_usd"], 0.5);
    assert_eq!(v["results"]["1"]["error"], "verify failed");
}

#[test]
fn the_telegram_hint_is_shown_once_per_user_not_on_every_call() {
    let Case { dir: _dir, file } = case("STATUS: IDLE\nGOAL: ship\n");
    let user = Temp::new();
    let first = status_as(&file, false, Some(user.path()));
    assert!(first.ends_with(&format!("{HINT}\n")), "{first}");
    let second = status_as(&file, false, Some(user.path()));
    assert!(!second.contains("Telegram"), "{second}");
    assert_eq!(
        status_as(&file, false, None),
        first,
        "another user is told too"
    );
}
