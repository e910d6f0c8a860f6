//! `loop hook install|uninstall`: the loop's `SessionStart` hook in the project's
//! `.claude/settings.local.json`, for people working in the project interactively.
//!
//! The file is the person's: every other top-level key keeps its text byte for byte (each
//! value is carried over as its raw JSON), and within `hooks` only our entry is added or
//! taken out. A file that is not a JSON object is refused, never rewritten.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::Error;
use crate::exit::Status;

/// What marks our hook among the person's: its command ends with this.
const OURS: &str = " hook session-start";

/// The settings file of the project in `dir`.
fn settings_file(dir: &Path) -> PathBuf {
    dir.join(".claude").join("settings.local.json")
}

/// A JSON object's members in their order, each value as its exact text.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push((k, v));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// An object's text with `members` (name, JSON text) in order, as Claude Code writes it: two
/// spaces a level, `depth` the object's own.
fn render_object(members: &[(String, String)], depth: usize) -> String {
    if members.is_empty() {
        return "{}".into();
    }
    let inner = "  ".repeat(depth + 1);
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{inner}{}: {v}", Value::from(k.as_str())))
        .collect();
    format!("{{\n{}\n{}}}", body.join(",\n"), "  ".repeat(depth))
}

/// An array's text with `items` (JSON texts) in order, likewise.
fn render_array(items: &[String], depth: usize) -> String {
    if items.is_empty() {
        return "[]".into();
    }
    let inner = "  ".repeat(depth + 1);
    let body: Vec<String> = items.iter().map(|v| format!("{inner}{v}")).collect();
    format!("[\n{}\n{}]", body.join(",\n"), "  ".repeat(depth))
}

/// `v` pretty-printed as a value `depth` levels deep.
fn nested(v: &Value, depth: usize) -> String {
    serde_json::to_string_pretty(v)
        .unwrap_or_default()
        .replace('\n', &format!("\n{}", "  ".repeat(depth)))
}

/// An object's members in order, each as its exact text.
fn members(text: &str) -> Result<Vec<(String, String)>, serde_json::Error> {
    let Members(members) = serde_json::from_str(text)?;
    Ok(members
        .into_iter()
        .map(|(k, v)| (k, v.get().to_owned()))
        .collect())
}

fn read(file: &Path) -> crate::error::Result<Vec<(String, String)>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(anyhow::Error::from(e)
                .context(format!("while reading {}", file.display()))
                .into());
        }
    };
    members(&text).map_err(|e| {
        Error::bad_input(format!(
            "{}:{}:{}: not a JSON object ({e}); fix it, nothing was changed",
            file.display(),
            e.line(),
            e.column()
        ))
    })
}

fn is_ours(entry: &Value) -> bool {
    entry["hooks"].as_array().is_some_and(|hooks| {
        hooks
            .iter()
            .any(|h| h["command"].as_str().is_some_and(|c| c.ends_with(OURS)))
    })
}

/// The `hooks` object's text (at depth 1) with our `SessionStart` entry taken out, and put
/// back when `add`; every other event and entry keeps its text. `None` when it ends up empty.
fn edited_hooks(hooks: Option<&str>, add: Option<&str>) -> crate::error::Result<Option<String>> {
    let bad = || Error::bad_input("its `hooks` is not an object of arrays; nothing was changed");
    let mut events = match hooks {
        Some(text) => members(text).map_err(|_| bad())?,
        None => Vec::new(),
    };
    let at = events.iter().position(|(k, _)| k == "SessionStart");
    let mut entries: Vec<String> = match at {
        Some(i) => serde_json::from_str::<Vec<Box<RawValue>>>(&events[i].1)
            .map_err(|_| bad())?
            .into_iter()
            .map(|v| v.get().to_owned())
            .collect(),
        None => Vec::new(),
    };
    entries.retain(|e| !serde_json::from_str::<Value>(e).is_ok_and(|v| is_ours(&v)));
    if let Some(command) = add {
        let ours = json!({"hooks": [{"type": "command", "command": command}]});
        entries.push(nested(&ours, 3));
    }
    match (at, entries.is_empty()) {
        (Some(i), true) => {
            events.remove(i);
        }
        (Some(i), false) => events[i].1 = render_array(&entries, 2),
        (None, false) => events.push(("SessionStart".into(), render_array(&entries, 2))),
        (None, true) => {}
    }
    Ok((!events.is_empty()).then(|| render_object(&events, 1)))
}

/// Whether the settings in `members` hold our hook.
fn has_ours(members: &[(String, String)]) -> bool {
    members
        .iter()
        .find(|(k, _)| k == "hooks")
        .and_then(|(_, h)| serde_json::from_str::<Value>(h).ok())
        .and_then(|h| h["SessionStart"].as_array().cloned())
        .is_some_and(|entries| entries.iter().any(is_ours))
}

/// Puts our hook in (`command`), or takes it out (`None`); the file, and whether our hook was
/// in it before.
fn edit(dir: &Path, command: Option<&str>) -> crate::error::Result<(PathBuf, bool)> {
    let file = settings_file(dir);
    let mut members = read(&file)?;
    let had = has_ours(&members);
    if command.is_none() && !had {
        // Nothing of ours to take out: the file is not touched.
        return Ok((file, had));
    }
    let at = members.iter().position(|(k, _)| k == "hooks");
    let hooks = edited_hooks(at.map(|i| members[i].1.as_str()), command)?;
    match (at, hooks) {
        (Some(i), Some(h)) => members[i].1 = h,
        (Some(i), None) => {
            members.remove(i);
        }
        (None, Some(h)) => members.push(("hooks".into(), h)),
        (None, None) => return Ok((file, had)),
    }
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("while creating {}", parent.display()))?;
    }
    std::fs::write(&file, format!("{}\n", render_object(&members, 0)))
        .with_context(|| format!("while writing {}", file.display()))?;
    Ok((file, had))
}

/// `loop hook install`: the hook in the settings of the project in `dir`.
///
/// # Errors
/// A settings file that is not a JSON object (left as it is), or one that cannot be written.
pub(super) fn install(dir: &Path) -> crate::error::Result<Status> {
    let exe = std::env::current_exe().context("while finding the loop binary")?;
    let command = format!("{}{OURS}", exe.display());
    let (file, had) = edit(dir, Some(&command))?;
    crate::outln!(
        "loop hook: a Claude Code session in this project {} starts with the loop's state \
         (SessionStart hook in {})",
        if had { "already" } else { "now" },
        file.display()
    );
    Ok(Status::Ok)
}

/// `loop hook uninstall`: our hook out of the project's settings, nothing else.
///
/// # Errors
/// As [`install`].
pub(super) fn uninstall(dir: &Path) -> crate::error::Result<Status> {
    let (file, had) = edit(dir, None)?;
    // Not there (a second uninstall, or none ever): said so, and the file was not touched.
    if !had {
        crate::outln!(
            "loop hook: {} holds no loop SessionStart hook; nothing to remove",
            file.display()
        );
        return Ok(Status::Ok);
    }
    crate::outln!(
        "loop hook: removed the loop's SessionStart hook from {}",
        file.display()
    );
    Ok(Status::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THEIRS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm run test:*)"
    ],
    "deny": []
  },
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Edit",
        "hooks": [
          {
            "type": "command",
            "command": "prettier --write"
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;

    #[test]
    fn install_then_uninstall_gives_the_person_s_file_back_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let file = settings_file(dir.path());
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, THEIRS).unwrap();
        edit(dir.path(), Some("/usr/bin/loop hook session-start")).unwrap();
        let with: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let mut want: Value = serde_json::from_str(THEIRS).unwrap();
        want["hooks"]["SessionStart"] = json!([{"hooks": [{"type": "command",
            "command": "/usr/bin/loop hook session-start"}]}]);
        assert_eq!(with, want);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("{\n  \"permissions\": {\n    \"allow\": [\n"),
            "{text}"
        );
        // Installed twice is installed once.
        edit(dir.path(), Some("/usr/bin/loop hook session-start")).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        edit(dir.path(), None).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), THEIRS);
    }

    #[test]
    fn a_missing_file_is_created_and_emptied_again_and_a_broken_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = settings_file(dir.path());
        edit(dir.path(), Some("loop hook session-start")).unwrap();
        assert!(
            std::fs::read_to_string(&file)
                .unwrap()
                .contains("SessionStart")
        );
        edit(dir.path(), None).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}\n");
        std::fs::write(&file, "{ \"a\": 1,\n  oops }").unwrap();
        let err = edit(dir.path(), Some("loop hook session-start")).unwrap_err();
        assert!(err.to_string().contains("settings.local.json:2:"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{ \"a\": 1,\n  oops }"
        );
    }
}
