//! The manual's examples, each checked against the program, so that none can drift from it:
//!
//! - the doctor example against `loop doctor` on the simulated agent: its rows, in order, how
//!   many flags each backend is passed, and what each row says but where the program is and
//!   the bubblewrap version;
//! - the exit statuses against `loop --help`: the same codes, each about the same commands;
//! - the table of every command against `loop --help`'s commands;
//! - the chat's commands against `loop telegram --help`;
//! - the settings reference against the settings table of the code, the default tools too;
//! - the M1.md example (`loop validate` accepts it) and the `loop.yaml` example (`loop start`
//!   reads it, and what it sets is in the new M1.md).

use std::collections::BTreeSet;

use crate::support::manual::{Place, WITHIN, help, read, said};
use crate::support::markdown::{block, section, table_rows};
use crate::support::{SIM, Temp, bwrap_here, code, loop_with_file, run_within, stdout};

/// One row of `loop doctor`'s output: its mark, its check and what it says.
fn doctor_rows(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| {
            let (mark, rest) = l.split_once(' ')?;
            if !["ok", "off", "FAIL"].contains(&mark) {
                return None;
            }
            let rest = rest.trim_start();
            let (check, detail) = rest.split_once("  ").unwrap_or((rest, ""));
            Some((mark.to_owned(), check.to_owned(), detail.trim().to_owned()))
        })
        .collect()
}

/// `11` of doctor's `11 flags the loop passes, …`.
fn flag_count(detail: &str) -> u32 {
    let (n, rest) = detail.split_once(' ').unwrap_or_default();
    assert!(rest.starts_with("flags the loop passes"), "{detail}");
    n.parse().unwrap_or_else(|_| panic!("{detail}"))
}

#[test]
fn the_doctor_example_is_what_doctor_says_of_the_simulated_agent() {
    let chapter = read("docs/12-troubleshooting.md");
    let example = block(section(&chapter, "## `loop doctor`"), "console");
    let command = example.body.lines().next().unwrap();
    let args: Vec<&str> = command
        .strip_prefix("$ loop ")
        .expect("the example starts with its command")
        .split_whitespace()
        .collect();
    let place = Place::new();
    std::fs::create_dir(place.work().join("state")).unwrap();
    let mut doctor = place.loop_in(&place.work(), &args);
    doctor
        .env("LOOP_AGENT", SIM)
        .env("LOOP_AGENT_CODEX", SIM)
        .env("LOOP_AGENT_GEMINI", SIM);
    let out = run_within(doctor, WITHIN);
    let text = stdout(&out).replace(&place.stop_file().display().to_string(), "/tmp/croppy-stop");
    let (want, got) = (doctor_rows(&example.body), doctor_rows(&text));
    let checks = |rows: &[(String, String, String)]| -> Vec<String> {
        rows.iter().map(|r| r.1.clone()).collect()
    };
    assert_eq!(checks(&got), checks(&want), "the rows of doctor:\n{text}");
    if !bwrap_here() {
        // Without bubblewrap the sandbox fails here; the flags still count as shown.
        for (w, g) in want
            .iter()
            .zip(&got)
            .filter(|(w, _)| w.1.ends_with(": flags"))
        {
            assert_eq!(flag_count(&g.2), flag_count(&w.2), "{g:?}");
        }
        return;
    }
    assert_eq!(code(&out), 0, "{}", said(&out));
    for (w, g) in want.iter().zip(&got) {
        if w.1.ends_with(": program") {
            // Where the program is, and its version, are this machine's.
            assert_eq!(g.0, w.0, "{g:?}");
        } else if w.1.ends_with(": flags") {
            // How many flags the loop passes is the loop's; which of them a version hides
            // from its --help is the version's (the example's Claude Code hides one).
            assert_eq!((&g.0, flag_count(&g.2)), (&w.0, flag_count(&w.2)), "{g:?}");
        } else if w.1 == "sandbox" {
            let after = |d: &str| d.split_once("): ").map(|(_, a)| a.to_owned());
            assert_eq!((&g.0, after(&g.2)), (&w.0, after(&w.2)), "{g:?}");
        } else {
            assert_eq!(g, w, "docs/12-troubleshooting.md's doctor example");
        }
    }
    assert_eq!(
        text.lines().last(),
        example.body.lines().last(),
        "the verdict of doctor"
    );
}

/// The commands of `loop` that a sentence is about: `start/resume:` in `loop --help`,
/// `` `start`/`resume`: `` (or `` `start --plan-only`: ``) in the manual.
fn commands_named(text: &str, commands: &[String], manual: bool) -> BTreeSet<String> {
    let text = text.replace("`/`", "/");
    let mut named = BTreeSet::new();
    let mut candidates: Vec<String> = Vec::new();
    if manual {
        let parts: Vec<&str> = text.split('`').collect();
        for (i, code) in parts.iter().enumerate().skip(1).step_by(2) {
            if parts.get(i + 1).is_some_and(|after| after.starts_with(':')) {
                candidates.extend(code.split('/').map(str::to_owned));
            }
        }
    } else {
        for word in text.split([' ', ';', '(']) {
            if let Some(w) = word.strip_suffix(':') {
                candidates.extend(w.split('/').map(str::to_owned));
            }
        }
    }
    for c in candidates {
        let first = c.split_whitespace().next().unwrap_or_default();
        if commands.iter().any(|k| k == first) {
            named.insert(first.to_owned());
        }
    }
    named
}

#[test]
fn the_exit_statuses_of_the_manual_are_those_of_loop_help() {
    let (help, commands) = help();
    let mut in_help: Vec<(u8, String)> = Vec::new();
    for line in help
        .split("Exit status:\n")
        .nth(1)
        .expect("exit statuses")
        .lines()
    {
        let first = line.split_whitespace().next().unwrap_or_default();
        match first.parse::<u8>() {
            Ok(code) => in_help.push((code, line.to_owned())),
            Err(_) => in_help.last_mut().expect("a code first").1.push_str(line),
        }
    }
    let chapter = read("docs/03-commands.md");
    let rows = table_rows(section(&chapter, "## Exit status"));
    let in_manual: Vec<(u8, String)> = rows
        .iter()
        .map(|r| (r[0].parse().expect("a code"), r[1].clone()))
        .collect();
    let codes = |v: &[(u8, String)]| v.iter().map(|(c, _)| *c).collect::<Vec<_>>();
    assert_eq!(codes(&in_manual), codes(&in_help), "{help}");
    for ((code, doc), (_, said)) in in_manual.iter().zip(&in_help) {
        assert_eq!(
            commands_named(doc, &commands, true),
            commands_named(said, &commands, false),
            "exit {code}: the manual says `{doc}`, loop --help `{said}`"
        );
    }
}

#[test]
fn the_table_of_commands_lists_every_command_of_loop_help() {
    let (_, commands) = help();
    let chapter = read("docs/03-commands.md");
    let listed: BTreeSet<String> = table_rows(section(&chapter, "## Every command"))
        .iter()
        .map(|r| r[0].trim_matches('`').to_owned())
        .collect();
    let commands: BTreeSet<String> = commands.into_iter().collect();
    assert_eq!(listed, commands, "docs/03-commands.md's table of commands");
}

#[test]
fn the_chat_commands_of_the_telegram_chapter_are_those_the_bot_takes() {
    let place = Place::new();
    let out = run_within(
        place.loop_in(&place.work(), &["telegram", "--help"]),
        WITHIN,
    );
    let summary = stdout(&out).lines().next().unwrap_or_default().to_owned();
    let slash = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_lowercase() || c == '/'))
            .filter(|w| w.len() > 1 && w.starts_with('/') && !w[1..].contains('/'))
            .map(str::to_owned)
            .collect()
    };
    let takes = slash(&summary);
    assert!(takes.len() >= 10, "{summary}");
    let chapter = read("docs/05-telegram.md");
    let table = table_rows(section(
        &chapter,
        "## Drive loops from the chat: `loop telegram`",
    ));
    let listed: BTreeSet<String> = table.iter().flat_map(|r| slash(&r[0])).collect();
    assert_eq!(listed, takes, "docs/05-telegram.md's chat commands");
}

/// A cell of the settings reference: `—` is none.
fn cell(text: &str) -> Option<String> {
    let text = text.trim();
    (text != "—").then(|| text.trim_matches('`').to_owned())
}

#[test]
fn the_settings_reference_is_the_settings_table_of_the_code() {
    let chapter = read("docs/14-settings.md");
    let tools = block(section(&chapter, "## The default tools"), "");
    let mut listed: Vec<[Option<String>; 5]> = table_rows(section(&chapter, "## Every setting"))
        .iter()
        .map(|r| {
            let default = if r[4] == "[below](#the-default-tools)" {
                Some(tools.body.trim().to_owned())
            } else {
                cell(&r[4])
            };
            [cell(&r[0]), cell(&r[1]), cell(&r[2]), cell(&r[3]), default]
        })
        .collect();
    let mut table: Vec<[Option<String>; 5]> = m1loop::m1::settings_reference()
        .into_iter()
        .map(|s| {
            let owned = |s: Option<&str>| s.map(str::to_owned);
            [s.m1, s.flag, owned(s.env), owned(s.yaml), s.default]
        })
        .collect();
    listed.sort();
    table.sort();
    assert_eq!(listed, table, "docs/14-settings.md and src/m1/settings.rs");
}

#[test]
fn the_m1_md_example_is_valid() {
    let chapter = read("docs/02-m1-md.md");
    let example = block(section(&chapter, "## The file"), "");
    let temp = Temp::new();
    let file = temp.write("M1.md", &example.body);
    let out = loop_with_file(&["validate"], &file);
    assert_eq!(code(&out), 0, "{}", said(&out));
}

#[test]
fn the_loop_yaml_example_is_read_into_a_new_loop() {
    let chapter = read("docs/14-settings.md");
    let yaml = block(section(&chapter, "## loop.yaml"), "yaml");
    let place = Place::new();
    let state = place.work().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("loop.yaml"), &yaml.body).unwrap();
    let mut start = place.loop_in(
        &place.work(),
        &["start", "g", "--step", "one", "--plan-only"],
    );
    start.env("LOOP_AGENT", SIM).env("LOOP_AGENT_CODEX", SIM);
    let out = run_within(start, WITHIN);
    assert_eq!(code(&out), 0, "{}", said(&out));
    let m1 = std::fs::read_to_string(state.join("M1.md")).unwrap();
    for line in [
        "  MAX_COST_USD: 20",
        "  IDLE_TIMEOUT: 15m",
        "  MAX_TURNS: 50",
        "  REVIEW_MODEL: sonnet",
        "VERIFY: cargo test",
        "REVIEW: on",
    ] {
        assert!(
            m1.lines().any(|l| l.starts_with(line)),
            "no `{line}` in:\n{m1}"
        );
    }
}
