//! The layers of `lib.rs`, checked: a module uses only modules of its own layer or below, so
//! the data layer never reaches up into the loop, nor the loop into the command line.

/// Each top-level module and its layer, lowest first (as `lib.rs` lists them).
const LAYERS: &[(&str, u8)] = &[
    ("decision_log", 0),
    ("dirs", 0),
    ("duration", 0),
    ("error", 0),
    ("exit", 0),
    ("layout", 0),
    ("lockfile", 0),
    ("named_file", 0),
    ("output", 0),
    ("text", 0),
    ("m1", 1),
    ("agent", 2),
    ("bridge", 2),
    ("notifier", 2),
    ("verify", 2),
    ("engine", 3),
    ("runner", 4),
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

/// Every `crate::name` a line refers to, including `crate::{a, b::c}` groups.
fn referred(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            for item in inner.split(',') {
                let first = item.trim().split("::").next().unwrap_or_default();
                names.push(first.trim().to_owned());
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.push(name);
        }
    }
    names
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
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for name in referred(line) {
                if layer(&name).is_some_and(|l| l > own) {
                    upward.push(format!("{}:{}: {top} uses {name}", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn every_module_of_lib_rs_has_a_layer() {
    let lib = include_str!("lib.rs");
    for line in lib.lines() {
        if let Some(m) = line.strip_prefix("pub mod ") {
            let m = m.trim_end_matches(';');
            assert!(layer(m).is_some(), "{m} has no layer in architecture.rs");
        }
    }
}

#[test]
fn groups_and_paths_are_read_as_the_modules_they_name() {
    assert_eq!(
        referred("use crate::{error::Error, runner::lock}; crate::outln!(\"x\");"),
        ["error", "runner", "outln"]
    );
}
