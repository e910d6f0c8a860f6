//! Claude Code's permission rules, for what a person allows on a DENIED gate: the narrowest
//! rule that lets one refused call run, so that allowing one command never allows every
//! command of its tool.

use serde_json::Value;

/// The narrowest rule that allows the call of `tool` with `input` the permission settings
/// refused: `Bash(COMMAND)` for a command (an exact match: `Bash(chmod +x tool.sh)` lets that
/// command run and no other, checked against the real CLI 2.1.330), else the tool's name. A
/// command that such a rule cannot hold whole (several lines, unbalanced parentheses) falls
/// back to its program's prefix rule, `Bash(PROGRAM:*)`, and to the tool when it has none.
#[must_use]
pub(crate) fn narrowest(tool: &str, input: &Value) -> String {
    let command = input
        .get("command")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|c| !c.is_empty());
    match (tool, command) {
        ("Bash", Some(c)) if holds_whole(c) => format!("Bash({c})"),
        ("Bash", Some(c)) => match c.split_whitespace().next().filter(|p| holds_whole(p)) {
            Some(program) => format!("Bash({program}:*)"),
            None => tool.to_owned(),
        },
        _ => tool.to_owned(),
    }
}

/// The tool a rule is about: `Bash` of `Bash(make:*)`.
#[must_use]
pub(crate) fn tool_of(rule: &str) -> &str {
    rule.split_once('(').map_or(rule, |(tool, _)| tool).trim()
}

/// Whether `Bash(TEXT)` reads back as one rule with `TEXT` in it: one line, and parentheses
/// that close in order (an `ALLOWED_TOOLS` line and the CLI split rules at the parentheses).
fn holds_whole(text: &str) -> bool {
    if text.contains(['\n', '\r']) {
        return false;
    }
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => {}
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_denied_command_is_allowed_by_itself_never_by_the_whole_tool() {
        let cmd = |c: &str| json!({"command": c, "description": "x"});
        assert_eq!(
            narrowest("Bash", &cmd("chmod +x tool.sh")),
            "Bash(chmod +x tool.sh)"
        );
        assert_eq!(
            narrowest("Bash", &cmd("git log --format=%h,%s")),
            "Bash(git log --format=%h,%s)"
        );
        assert_eq!(
            narrowest("Bash", &cmd("cat <<EOF > a\nx\nEOF")),
            "Bash(cat:*)"
        );
        assert_eq!(narrowest("Bash", &cmd("echo )")), "Bash(echo:*)");
        assert_eq!(narrowest("Bash", &json!({})), "Bash");
        assert_eq!(
            narrowest("Write", &json!({"file_path": "/x", "content": ""})),
            "Write"
        );
        assert_eq!(tool_of("Bash(make:*)"), "Bash");
        assert_eq!(tool_of("Write"), "Write");
    }
}
