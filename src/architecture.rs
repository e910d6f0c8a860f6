//! The layers of `lib.rs`, checked: a module uses only modules of its own layer or below, so
//! the data layer never reaches up into the loop, nor the loop into the command line.
//!
//! The sources are read as Rust is written, not line by line: comments and literals are set
//! aside, a `use crate::{…}` group is followed across the lines it spans, and a `super::`
//! that climbs out of its top module counts as the `crate::` path it reaches.

/// Each top-level module and its layer, lowest first (as `lib.rs` lists them).
const LAYERS: &[(&str, u8)] = &[
    ("decision_log", 0),
    ("dirs", 0),
    ("duration", 0),
    ("error", 0),
    ("exit", 0),
    ("full_disk", 0),
    ("git", 0),
    ("layout", 0),
    ("lease", 0),
    ("lockfile", 0),
    ("loopback", 0),
    ("named_file", 0),
    ("output", 0),
    ("text", 0),
    ("m1", 1),
    ("agent", 2),
    ("bridge", 2),
    ("notifier", 2),
    ("sandbox", 2),
    ("telemetry", 2),
    ("verify", 2),
    ("engine", 3),
    ("runner", 4),
    ("report", 4),
    ("schedule", 4),
    ("cli", 5),
];

/// The `output` macros, which live at the crate root.
const MACROS: &[&str] = &["outln", "out", "errln"];

fn layer(module: &str) -> Option<u8> {
    let module = if MACROS.contains(&module) {
        "output"
    } else {
        module
    };
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// The source with comments, string and character literals blanked out (newlines kept, so
/// positions still count lines).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |s: &[u8], out: &mut String| {
        for c in s {
            out.push(if *c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|c| *c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            block_comment_len(rest)
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") {
            raw_string_len(rest)
        } else if rest[0] == b'"' {
            string_len(rest)
        } else if rest[0] == b'\'' && is_char_literal(rest) {
            char_literal_len(rest)
        } else {
            out.push(char::from(rest[0]));
            i += 1;
            continue;
        };
        blank(&rest[..end], &mut out);
        i += end;
    }
    out
}

fn block_comment_len(s: &[u8]) -> usize {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < s.len() {
        if s[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if s[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    s.len()
}

fn raw_string_len(s: &[u8]) -> usize {
    let hashes = s[1..].iter().take_while(|c| **c == b'#').count();
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let start = 2 + hashes;
    s[start..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(s.len(), |p| start + p + close.len())
}

fn string_len(s: &[u8]) -> usize {
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    s.len()
}

/// `'x'`, `'\n'`, `'\''` are literals; `'a` in `&'a str` is a lifetime.
fn is_char_literal(s: &[u8]) -> bool {
    matches!(s.get(1), Some(b'\\')) || matches!(s.get(2), Some(b'\''))
}

fn char_literal_len(s: &[u8]) -> usize {
    s[1..]
        .iter()
        .enumerate()
        .skip(usize::from(s.get(1) == Some(&b'\\')) + 1)
        .find(|(_, c)| **c == b'\'')
        .map_or(s.len(), |(i, _)| i + 2)
}

/// The top-level module of every `crate::` path in `code`, and of every `super::` path that
/// climbs `depth` levels or more (`depth`: how deep the file's module is below its top one).
fn referred(code: &str, depth: usize) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `m1loop_crate::`, say
        }
        names.extend(first_segments(&code[at + "crate::".len()..]));
    }
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue; // counted with the chain it belongs to
        }
        let mut rest = &code[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r.trim_start();
        }
        if ups > depth {
            names.extend(first_segments(rest));
        }
    }
    names
}

/// The first segment of the path at the start of `rest`, or of each path of a `{…}` group.
fn first_segments(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1usize;
        let mut end = group.len();
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        return top_level_items(&group[..end])
            .into_iter()
            .filter_map(|item| ident(item.trim()))
            .collect();
    }
    ident(rest).into_iter().collect()
}

/// The items of a group, split at its top-level commas.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut from) = (Vec::new(), 0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[from..]);
    items
}

fn ident(s: &str) -> Option<String> {
    let name: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// How many module levels `rel` (a path below `src/`) is below its top module: 0 for
/// `m1/mod.rs` and `m1.rs`, 1 for `m1/store.rs`, 2 for `engine/tests/review.rs`.
fn depth_below_top(rel: &std::path::Path) -> usize {
    let parts = rel.iter().count();
    let file = rel.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    if file == "mod.rs" {
        parts.saturating_sub(2)
    } else {
        parts.saturating_sub(1)
    }
}

#[test]
fn no_module_uses_a_module_of_a_higher_layer() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy();
        let top = top.trim_end_matches(".rs");
        let Some(own) = layer(top) else {
            continue;
        };
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for name in referred(&code, depth_below_top(rel)) {
            if layer(&name).is_some_and(|l| l > own) {
                upward.push(format!("{}: {top} uses {name}", rel.display()));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

/// Outside `m1`, M1.md is read through its typed view, never by a key's name. Writes are held
/// by the compiler: an edit names its key by a [`crate::m1::KeyPath`], which only the key
/// declarations make. So are `Document`'s lookups by name (`child`, `find`) and the views'
/// maps of unknown keys (`extra`), which are `m1`'s own. What it cannot hold is a call of the
/// public reads that take a path of names (`get`, `position`, `contains`, `keys`, there for
/// the tests of the document itself), looked for here in every module but `m1`'s (tests
/// aside): outside `m1` a declared key is read with `get_at` and its `path()`.
#[test]
fn no_module_outside_m1_reads_an_m1_key_by_its_name() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut reads = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        if rel.starts_with("m1") || rel.starts_with("architecture.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let by_name = [".get(&[", ".position(&[", ".contains(&[", ".keys(&["]
                .iter()
                .any(|read| line.contains(read));
            if by_name {
                reads.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        reads.is_empty(),
        "M1.md read by key name:\n{}",
        reads.join("\n")
    );
}

/// A backend is one folder of `agent/`: what it is and does is asked of it through the
/// `Backend` trait, so no module outside `agent/` picks behaviour by matching on the kind
/// (`AgentKind::Codex => …`), and adding a backend touches no module outside `agent/` but the
/// list of names in `m1/settings.rs`.
#[test]
fn no_module_outside_agent_matches_on_the_backend() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut matches = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        if rel.starts_with("agent") {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for (n, line) in code.lines().enumerate() {
            let arm = line.split("AgentKind::").skip(1).any(|rest| {
                let after = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
                let after = after.trim_start();
                after.starts_with("=>") || after.starts_with('|') || after.starts_with("if ")
            });
            if arm {
                matches.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        matches.is_empty(),
        "matched on the backend outside agent/ (ask its Backend instead):\n{}",
        matches.join("\n")
    );
}

/// What backends share lives beside the trait (`agent/*.rs`), never in one backend's folder
/// for another to import: no backend's folder names another's.
#[test]
fn no_backend_uses_another_backends_folder() {
    let agent = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/agent");
    let folders: Vec<String> = std::fs::read_dir(&agent)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(folders.len() >= 2, "{folders:?}");
    let mut crossings = Vec::new();
    for own in &folders {
        let mut files = Vec::new();
        sources(&agent.join(own), &mut files);
        for file in files {
            let code = code_only(&std::fs::read_to_string(&file).unwrap());
            for other in folders.iter().filter(|f| *f != own) {
                for path in [format!("agent::{other}::"), format!("super::{other}::")] {
                    if code.contains(&path) {
                        crossings.push(format!("{}: uses {path}", file.display()));
                    }
                }
            }
        }
    }
    assert!(crossings.is_empty(), "{}", crossings.join("\n"));
}

/// The runner's parts with their own state (ARCHITECTURE.md, "The runner's parts"): the
/// runner calls them and they never call it back. Each names, of the runner, only the parts
/// listed beside it, and never `Runner` itself.
const RUNNER_PARTS: &[(&str, &[&str])] = &[
    ("voice.rs", &["progress"]),
    ("record.rs", &[]),
    ("watch.rs", &["stopfile"]),
    ("progress.rs", &[]),
    ("stopfile.rs", &[]),
    ("unwritable.rs", &["voice", "watch"]),
    (
        "step_io.rs",
        &[
            "crash",
            "confine",
            "ledger",
            "lock",
            "revive",
            "settings",
            "unwritable",
            "voice",
        ],
    ),
    ("confine.rs", &["settings", "step_io", "stopfile"]),
    (
        "observe.rs",
        &["confine", "git", "settings", "step_io", "tree", "voice"],
    ),
    ("step_commit.rs", &["crash", "step_io", "voice"]),
    ("traces.rs", &["settings", "step_io", "voice"]),
    // The parallel driver: `at_once`, `git`, `steps`, `merge` and `tell` are its own files.
    ("parallel/at_once.rs", &["steps"]),
    (
        "parallel/steps.rs",
        &[
            "at_once", "git", "voice", "crash", "lock", "start", "stop", "detach",
        ],
    ),
    (
        "parallel/merge.rs",
        &["at_once", "git", "steps", "tell", "voice", "crash"],
    ),
    ("parallel/observe.rs", &["at_once", "lock"]),
    (
        "parallel/tell.rs",
        &[
            "at_once",
            "steps",
            "voice",
            "RunOptions",
            "gates",
            "lock",
            "retry",
            "stop",
        ],
    ),
    (
        "parallel/catch_up.rs",
        &["at_once", "git", "voice", "revive"],
    ),
    ("parallel/git.rs", &[]),
];

#[test]
fn the_runners_parts_never_reach_back_into_the_runner() {
    let runner = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runner");
    let mut reaches = Vec::new();
    for (part, allowed) in RUNNER_PARTS {
        let src = std::fs::read_to_string(runner.join(part)).unwrap();
        // Its tests may use what they like.
        let code = code_only(src.split("#[cfg(test)]").next().unwrap_or_default());
        let words = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        if words.into_iter().any(|w| w == "Runner") {
            reaches.push(format!("runner/{part}: names Runner"));
        }
        let mut used = Vec::new();
        for prefix in ["crate::runner::", "super::"] {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                used.extend(first_segments(&code[at + prefix.len()..]));
            }
        }
        for name in used {
            if !allowed.contains(&name.as_str()) {
                reaches.push(format!("runner/{part}: uses the runner's {name}"));
            }
        }
    }
    reaches.sort();
    reaches.dedup();
    assert!(reaches.is_empty(), "{}", reaches.join("\n"));
}

#[test]
fn every_module_of_lib_rs_has_a_layer() {
    let lib = include_str!("lib.rs");
    for line in lib.lines() {
        let m = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .or_else(|| line.strip_prefix("pub(crate) mod "));
        if let Some(m) = m {
            let m = m.trim_end_matches(';');
            assert!(
                m == "architecture" || layer(m).is_some(),
                "{m} has no layer in architecture.rs"
            );
        }
    }
}

/// ARCHITECTURE.md's table of layers says what [`LAYERS`] says: every module, in its layer,
/// and no other.
#[test]
fn architecture_md_names_every_layer_as_this_test_checks_it() {
    let doc = include_str!("../ARCHITECTURE.md");
    let mut named: Vec<(String, u8)> = Vec::new();
    for row in doc.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(layer) = cells[1].parse::<u8>() else {
            continue;
        };
        for m in cells[2].split(',') {
            named.push((m.trim().trim_matches('`').to_owned(), layer));
        }
        // What the layer may import: every layer up to its own.
        let may = if layer == 0 {
            "layer 0".to_owned()
        } else {
            format!("layers 0–{layer}")
        };
        assert_eq!(cells[3], may, "ARCHITECTURE.md, layer {layer}");
    }
    let mut checked: Vec<(String, u8)> =
        LAYERS.iter().map(|(m, l)| ((*m).to_owned(), *l)).collect();
    named.sort();
    checked.sort();
    assert_eq!(
        named, checked,
        "ARCHITECTURE.md's layers and LAYERS disagree"
    );
}

#[test]
fn groups_across_lines_comments_and_strings_are_read_as_rust_reads_them() {
    let src = "use crate::{\n    error::Error,\n    runner::{lock, stop},\n};\n\
               // crate::cli in a comment\nlet s = \"crate::engine\"; let c = '{';\n\
               fn f<'a>(x: &'a str) { crate::outln!(\"x\"); }\n";
    assert_eq!(
        referred(&code_only(src), 0),
        ["error", "runner", "outln"],
        "{}",
        code_only(src)
    );
    // `super::super::x` from engine/tests/mod.rs reaches the crate root (depth 1).
    assert_eq!(referred("use super::super::cli::run;", 1), ["cli"]);
    assert!(referred("use super::judge;", 1).is_empty());
}

#[test]
fn no_comment_names_a_file_the_repository_lacks() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "crates", "benches", "examples"] {
        sources(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(root).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            // The project's design notes and seeds are not in the repository.
            for gone in ["DESIGN §", "seed 00", "seeds/"] {
                if line.contains(gone) && !line.contains("for gone in") {
                    missing.push(format!("{rel}:{}: names {gone}", n + 1));
                }
            }
            for path in line.split('`').skip(1).step_by(2) {
                let repo_path = [
                    "src/",
                    "tests/",
                    "crates/",
                    "benches/",
                    "examples/",
                    "templates/",
                    "scripts/",
                ]
                .iter()
                .any(|p| path.starts_with(p));
                if repo_path && !path.contains(['*', '<', '{', ' ']) && !root.join(path).exists() {
                    missing.push(format!("{rel}:{}: `{path}` does not exist", n + 1));
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Every file ARCHITECTURE.md names (`m1/settings.rs`, `runner/settings/layer.rs`,
/// `tests/loops/backends.rs`, …) is in the tree: a recipe of "where to add" that names a file
/// moved away is wrong, and fails here.
#[test]
fn every_file_architecture_md_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = include_str!("../ARCHITECTURE.md");
    let mut missing = Vec::new();
    let mut named = 0;
    for (n, line) in doc.lines().enumerate() {
        for path in line.split('`').skip(1).step_by(2) {
            let path = path.trim_end_matches(['.', ',', ':']);
            // A bare name (`view.rs`) is read in its sentence's folder; a path is checked.
            let rust = std::path::Path::new(path)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("rs"));
            if !rust || !path.contains('/') || path.contains(['*', '<', '{', ' ', '(']) {
                continue;
            }
            named += 1;
            let found = [root.join(path), root.join("src").join(path)]
                .iter()
                .any(|p| p.is_file());
            if !found {
                missing.push(format!(
                    "ARCHITECTURE.md:{}: `{path}` is not in the tree",
                    n + 1
                ));
            }
        }
    }
    assert!(
        named > 20,
        "only {named} files named: is this the right text?"
    );
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The pairs of top-level modules that import each other, directly or around a circle, that
/// ARCHITECTURE.md owns to: the runner writes the report page when a loop ends, and the
/// report reads the runner's task ledger and its steps' loops. No other: a new one is a
/// module that should be split, or a layer that is wrong.
const CIRCLES: &[(&str, &str)] = &[("report", "runner")];

#[test]
fn no_two_top_level_modules_import_each_other_but_those_architecture_md_owns_to() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let index = |m: &str| LAYERS.iter().position(|(name, _)| *name == m);
    let n = LAYERS.len();
    let mut reach = vec![vec![false; n]; n];
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let name = rel.file_name().unwrap().to_string_lossy();
        // Tests may use what they like.
        if name.ends_with("tests.rs") || rel.iter().any(|p| p == "tests") {
            continue;
        }
        let top = rel.iter().next().unwrap().to_string_lossy();
        let Some(from) = index(top.trim_end_matches(".rs")) else {
            continue;
        };
        let src = std::fs::read_to_string(&file).unwrap();
        let code = code_only(src.split("#[cfg(test)]").next().unwrap_or_default());
        for used in referred(&code, depth_below_top(rel)) {
            let used = if MACROS.contains(&used.as_str()) {
                "output"
            } else {
                used.as_str()
            };
            if let Some(to) = index(used).filter(|to| *to != from) {
                reach[from][to] = true;
            }
        }
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if reach[i][k] && reach[k][j] {
                    reach[i][j] = true;
                }
            }
        }
    }
    let mut circles = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if reach[i][j] && reach[j][i] {
                let (a, b) = (LAYERS[i].0, LAYERS[j].0);
                circles.push(if a < b { (a, b) } else { (b, a) });
            }
        }
    }
    circles.sort_unstable();
    let mut owned = CIRCLES.to_vec();
    owned.sort_unstable();
    assert_eq!(
        circles, owned,
        "the pairs of top-level modules that reach each other"
    );
    let doc = include_str!("../ARCHITECTURE.md");
    for (a, b) in CIRCLES {
        assert!(
            doc.contains(&format!("`{a}` and `{b}` import each other")),
            "ARCHITECTURE.md does not own to {a} and {b} importing each other"
        );
    }
}
