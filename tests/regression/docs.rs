//! The README and the manual (`docs/`) held to the program, so that neither drifts from it (the
//! README once showed a doctor with 10 flags when the loop passed 11):
//!
//! - the README's quick start, run as written in a fresh directory with the built `loop` and
//!   `claude-sim` first on `PATH`: its loop ends DONE, and `loop status` then prints what the
//!   reports chapter shows; getting started repeats its lines as they are;
//! - every `loop COMMAND` a page shows is a command `loop` has;
//! - the README's length, every relative link (its file, and its anchor where it has one), and
//!   every chapter in the contents.
//!
//! The manual's examples are checked in `doc_examples`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use m1loop::m1::{Document, Status, StepState};

use crate::support::manual::{Place, WITHIN, chapters, pages, read, root, said};
use crate::support::markdown::{self, anchors, block, blocks, section};
use crate::support::{bwrap_here, code, files, run_within, stdout};

#[test]
fn the_readme_quick_start_runs_as_written_and_its_loop_ends_done() {
    let readme = read("README.md");
    let quick = block(section(&readme, "## Quick start"), "sh");
    let place = Place::new();
    // Line by line as a shell reads them, stopping at the first that fails (-e) and naming
    // each as it runs (-x).
    let out = run_within(
        place
            .cmd("sh", &place.work())
            .args(["-ex", "-c", &quick.body]),
        WITHIN,
    );
    assert_eq!(code(&out), 0, "the quick start failed:\n{}", said(&out));

    let loops: Vec<PathBuf> = files(&place.work())
        .into_iter()
        .filter(|p| p.ends_with("state/M1.md"))
        .collect();
    assert_eq!(loops.len(), 1, "{loops:?}");
    let text = std::fs::read_to_string(&loops[0]).unwrap();
    let m = Document::parse(&text).unwrap().view();
    assert_eq!(m.status, Status::Done, "{text}");
    assert!(
        m.plan.steps.iter().all(|s| s.state == StepState::Done),
        "{text}"
    );

    // The reports chapter shows this loop's `loop status` (its hint about Telegram was shown
    // once already, by the quick start's own `loop status`).
    let project = loops[0].parent().unwrap().parent().unwrap();
    let status = run_within(place.loop_in(project, &["status"]), WITHIN);
    assert_eq!(code(&status), 0, "{}", said(&status));
    let reports = read("docs/11-reports-and-traces.md");
    let shown = block(section(&reports, "## `loop status`"), "console");
    let mut shown_lines = shown.body.lines();
    assert_eq!(shown_lines.next(), Some("$ loop status"));
    let sandbox_here = |l: &&str| bwrap_here() || !l.starts_with("SANDBOX");
    // A step's commit has an id of its own each run: any id stands for any other.
    let commit = regex::Regex::new(r"\(exit (\d+), [0-9a-f]{7,40}, ").unwrap();
    // What a run is granted names this machine's paths and toolchains.
    let mask = |l: &str| {
        if l.starts_with("GRANTED") {
            "GRANTED      …".to_owned()
        } else {
            commit.replace(l, "(exit $1, COMMIT, ").into_owned()
        }
    };
    let want: Vec<String> = shown_lines.filter(sandbox_here).map(mask).collect();
    let got_text = stdout(&status);
    let got: Vec<String> = got_text.lines().filter(sandbox_here).map(mask).collect();
    assert_eq!(got, want, "docs/11-reports-and-traces.md's `loop status`");

    // Getting started walks through the same commands.
    let start = read("docs/01-getting-started.md");
    let copy = blocks(&start)
        .into_iter()
        .find(|b| b.body.starts_with("mkdir hello"))
        .expect("getting started repeats the quick start");
    assert!(
        quick.body.starts_with(&copy.body),
        "getting started's copy of the quick start differs:\n{}",
        copy.body
    );
}

/// Every `loop COMMAND [SUBCOMMAND]` a page shows: in a code span that starts with it (after
/// `VAR=value` words), or anywhere in a line of a shell block (`$ ` lines of a console one).
fn loop_commands(text: &str) -> BTreeSet<(String, Option<String>)> {
    let word = |w: Option<&&str>| {
        w.filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .filter(|w| !w.starts_with('-') && !w.is_empty())
            .map(|w| (*w).to_owned())
    };
    let mut found = BTreeSet::new();
    let mut take = |words: &[&str], anywhere: bool| {
        for (i, w) in words.iter().enumerate() {
            let w = w.trim_start_matches("$(").trim_start_matches('(');
            if w == "loop"
                && (anywhere || i == 0)
                && let Some(c) = word(words.get(i + 1))
            {
                found.insert((c, word(words.get(i + 2))));
            }
        }
    };
    for b in blocks(text) {
        for line in b.body.lines() {
            let line = match b.lang.as_str() {
                "sh" => line,
                "console" => match line.strip_prefix("$ ") {
                    Some(l) => l,
                    None => continue,
                },
                _ => continue,
            };
            let code = line
                .split(" #")
                .next()
                .unwrap_or_default()
                .replace('`', " ");
            take(&code.split_whitespace().collect::<Vec<_>>(), true);
        }
    }
    for span in markdown::code_spans(text) {
        let words: Vec<&str> = span
            .split_whitespace()
            .skip_while(|w| w.contains('='))
            .collect();
        take(&words, false);
    }
    found
}

#[test]
fn every_loop_command_the_pages_show_is_one_loop_has() {
    let mut shown = BTreeSet::new();
    for page in pages() {
        shown.extend(loop_commands(&read(&page)));
    }
    assert!(shown.len() > 30, "{shown:?}");
    let place = Place::new();
    let mut unknown = Vec::new();
    for (command, sub) in &shown {
        let out = run_within(place.loop_in(&place.work(), &[command, "--help"]), WITHIN);
        if code(&out) != 0 {
            unknown.push(format!("loop {command}"));
            continue;
        }
        let help = stdout(&out);
        let Some(list) = help.split("Commands:\n").nth(1) else {
            continue; // no subcommands: what follows is an argument
        };
        let subs: Vec<&str> = list
            .lines()
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        // `loop service` names the group; `loop service start` would be no command.
        if let Some(sub) = sub.as_deref().filter(|s| !subs.contains(s)) {
            unknown.push(format!("loop {command} {sub}"));
        }
    }
    assert!(unknown.is_empty(), "not commands of loop: {unknown:?}");
}

#[test]
fn the_readme_is_a_front_page_of_at_most_1600_words() {
    let words = read("README.md").split_whitespace().count();
    assert!(words <= 1600, "README.md has {words} words");
}

#[test]
fn every_relative_link_of_the_pages_leads_to_a_file_and_an_anchor_there() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        let dir = Path::new(&page).parent().unwrap();
        for link in markdown::links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                PathBuf::from(&page)
            } else {
                dir.join(path)
            };
            let full = root().join(&target);
            if !full.exists() {
                broken.push(format!("{page}: {link}: no {}", target.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let there = std::fs::read_to_string(&full).unwrap_or_default();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{page}: {link}: no #{anchor} there"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn every_chapter_is_in_the_manuals_contents_and_the_readmes() {
    let contents = read("docs/README.md");
    let readme = read("README.md");
    for chapter in chapters() {
        let name = chapter.strip_prefix("docs/").unwrap();
        if name == "README.md" {
            continue;
        }
        assert!(
            contents.contains(&format!("]({name})")),
            "docs/README.md lacks {name}"
        );
        assert!(
            readme.contains(&format!("]({chapter})")),
            "README.md lacks {chapter}"
        );
    }
}
