//! The typed values of M1.md, as people read and write them: `LIMITS:` durations such as `3s`
//! or `15m` (and the whole minutes of older files), times (`WAIT_UNTIL`, `STARTED_AT`), and the
//! `AGENT:` block's tool list and extra arguments. Validation and the typed view read them
//! with the same functions, and `loop start` writes them with the `format_*` ones, so what is
//! written reads back. Which key has which kind is in [`super::keys`]; the settings themselves
//! are declared in [`super::settings`].

use std::time::Duration;

/// What an empty list is written as (`ALLOWED_TOOLS: (none)`).
pub(crate) const NONE: &str = "(none)";

/// A limit's duration: `40s`, `15m`, `1h30m`, more than zero.
///
/// # Errors
/// What was expected, for an error message.
pub(crate) fn duration(v: &str) -> Result<Duration, String> {
    let d = crate::duration::parse(v)?;
    if d.is_zero() {
        return Err("expected a duration above zero, e.g. 90s, 15m, 1h30m".into());
    }
    Ok(d)
}

/// A limit in whole minutes, as older files give it (`LimitKey::StepTimeoutMin`): held to the
/// same bounds as [`duration`].
///
/// # Errors
/// What was expected, for an error message.
pub(crate) fn minutes(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a whole number of minutes, found `{v}`"));
    }
    duration(&format!("{v}m"))
}

/// A moment as the runner writes one (`WAIT_UNTIL`): RFC 3339, `2026-11-22T03:00:30Z`.
///
/// # Errors
/// What was expected, for an error message.
pub(crate) fn time(v: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(v.trim())
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|_| format!("expected a time such as `{TIME_EXAMPLE}`, found `{v}`"))
}

/// How [`time`] reads, for messages.
pub(crate) const TIME_EXAMPLE: &str = "2026-11-22T03:00:30Z";

/// `Read,Grep,Bash(git:*)` → the tool rules; commas inside parentheses belong to the rule.
/// `(none)` is the empty list.
///
/// # Errors
/// An empty entry.
pub(crate) fn tools(v: &str) -> Result<Vec<String>, String> {
    let v = v.trim();
    if v == NONE {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (i, c) in v.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(v[from..i].trim().to_string());
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(v[from..].trim().to_string());
    if out.iter().any(String::is_empty) {
        return Err(format!(
            "expected tool names separated by commas, e.g. `Read,Grep,Bash(git:*)`, or `{NONE}`; \
             found an empty one in `{v}`"
        ));
    }
    Ok(out)
}

/// The tool list as `ALLOWED_TOOLS:` holds it.
#[must_use]
pub(crate) fn format_tools(tools: &[String]) -> String {
    if tools.is_empty() {
        NONE.into()
    } else {
        tools.join(",")
    }
}

/// Extra agent arguments: words separated by spaces, or a JSON array of strings when an
/// argument holds a space (`["--append-system-prompt", "be brief"]`). `(none)` is no argument.
///
/// # Errors
/// A malformed JSON array.
pub(crate) fn args(v: &str) -> Result<Vec<String>, String> {
    let v = v.trim();
    if v == NONE {
        return Ok(Vec::new());
    }
    if v.starts_with('[') {
        return serde_json::from_str::<Vec<String>>(v).map_err(|e| {
            format!("expected words separated by spaces, or a JSON array of strings: {e}")
        });
    }
    Ok(v.split_whitespace().map(str::to_string).collect())
}

/// The arguments as `EXTRA_ARGS:` holds them (plain words when that reads back the same).
#[must_use]
pub(crate) fn format_args(args: &[String]) -> String {
    if args.is_empty() {
        return NONE.into();
    }
    let plain = args.join(" ");
    if args
        .iter()
        .all(|a| !a.is_empty() && !a.contains(char::is_whitespace))
        && !plain.starts_with('[')
        && plain != NONE
    {
        plain
    } else {
        serde_json::to_string(args).unwrap_or(plain)
    }
}

/// The items of a list separated by commas, each trimmed, empty ones left out.
fn comma_separated(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|item| !item.is_empty())
}

/// `~/.cargo, /opt/cache` → the paths, each absolute or from `~/` (`~` is the home of the
/// user a run is for, filled in when it runs).
///
/// # Errors
/// A path that is neither, said with the path.
pub(crate) fn paths(v: &str) -> Result<Vec<String>, String> {
    let list: Vec<String> = comma_separated(v).map(str::to_owned).collect();
    if let Some(bad) = list
        .iter()
        .find(|p| !(p.starts_with('/') || p.starts_with("~/") || *p == "~"))
    {
        return Err(format!(
            "`{bad}` is neither an absolute path nor one from `~/`: expected paths separated by \
             commas, such as `~/.cargo, /opt/cache`"
        ));
    }
    Ok(list)
}

/// `codex, gemini` → the backends, in order (a fallback chain); one backend alone is a chain of
/// one, so a file written before chains reads as it did. A backend named twice is kept once.
///
/// # Errors
/// An empty list, or the first name that is not a backend, said with the backends there are.
pub(crate) fn backends(v: &str) -> Result<Vec<super::settings::AgentKind>, String> {
    let mut list = Vec::new();
    for name in comma_separated(v) {
        let kind = name
            .parse::<super::settings::AgentKind>()
            .map_err(|e| format!("{e}, or several separated by commas (`codex, gemini`)"))?;
        if !list.contains(&kind) {
            list.push(kind);
        }
    }
    if list.is_empty() {
        return Err("expected a backend, or several separated by commas (`codex, gemini`)".into());
    }
    Ok(list)
}

/// `[codex, gemini]` → `codex, gemini`, as [`backends`] reads it back.
#[must_use]
pub(crate) fn format_backends(list: &[super::settings::AgentKind]) -> String {
    list.iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Names of environment variables separated by commas (`JAVA_HOME, AWS_*`): each a name of
/// letters, digits and `_` not starting with a digit, or such a start followed by `*`.
///
/// # Errors
/// What is wrong with the first name that is not one.
pub(crate) fn env_names(v: &str) -> Result<Vec<String>, String> {
    let list: Vec<String> = comma_separated(v).map(str::to_owned).collect();
    let good = |n: &str| {
        let stem = n.strip_suffix('*').unwrap_or(n);
        !stem.is_empty()
            && !stem.starts_with(|c: char| c.is_ascii_digit())
            && stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if let Some(bad) = list.iter().find(|n| !good(n)) {
        return Err(format!(
            "`{bad}` is not the name of a variable: expected names separated by commas, each \
             of letters, digits and `_`, or a start of names followed by `*`, such as \
             `JAVA_HOME, AWS_*`"
        ));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_split_at_commas_outside_parentheses() {
        assert_eq!(
            tools("Read, Grep,Bash(git log --format=%h,%s)").unwrap(),
            ["Read", "Grep", "Bash(git log --format=%h,%s)"]
        );
        assert_eq!(tools("(none)").unwrap(), Vec::<String>::new());
        assert!(tools("Read,,Grep").is_err());
        let t: Vec<String> = vec!["Read".into(), "Bash(a,b)".into()];
        assert_eq!(tools(&format_tools(&t)).unwrap(), t);
    }

    #[test]
    fn args_read_back_as_written() {
        for a in [
            vec!["--add-dir", "../lib"],
            vec!["--append-system-prompt", "be brief"],
            vec!["[x]"],
            vec![""],
            vec![],
        ] {
            let a: Vec<String> = a.into_iter().map(str::to_string).collect();
            assert_eq!(args(&format_args(&a)).unwrap(), a, "{}", format_args(&a));
        }
        assert!(args("[1, 2]").is_err());
    }

    #[test]
    fn zero_and_garbage_durations_are_refused() {
        assert_eq!(duration("3s"), Ok(Duration::from_secs(3)));
        assert!(duration("0s").is_err());
        assert!(duration("soon").is_err());
    }
}
