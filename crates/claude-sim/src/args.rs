//! The simulated agent's command line: the real CLI's headless flags, its parser's errors, and
//! its refusals, with the real texts (from the captures), so that a runner which builds a call
//! wrong fails against the simulation the way it would against Claude Code.

/// The flags of one call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is a flag of the command line, set independently of the others"
)]
pub(crate) struct SimArgs {
    /// Called as the Codex CLI (`claude-sim exec …`): `permission_mode` holds the sandbox,
    /// `resume` the thread, `settings` the last `-c`, `skip_permissions` the bypass.
    pub codex: bool,
    /// Called as Gemini CLI (with `--approval-mode`): `permission_mode` holds the approval
    /// mode, `settings` the last `--policy`.
    pub gemini: bool,
    pub print: bool,
    pub prompt: Option<String>,
    pub output_format: Option<String>,
    pub verbose: bool,
    pub session_id: Option<String>,
    pub resume: Option<String>,
    pub permission_mode: Option<String>,
    pub allowed_tools: Vec<String>,
    /// `--tools A,B` (or several values): the only tools offered, when given.
    pub tools: Option<Vec<String>>,
    pub max_turns: Option<String>,
    pub max_budget_usd: Option<String>,
    pub model: Option<String>,
    pub skip_permissions: bool,
    /// `--settings FILE-OR-JSON`: settings for this run.
    pub settings: Option<String>,
    /// `--mcp-config CONFIG...`: MCP servers for this run.
    pub mcp_config: Vec<String>,
    /// `--permission-prompt-tool NAME`: the MCP tool asked for permissions; with one, `-p`
    /// offers `AskUserQuestion` (captures `ask-user-question-*`).
    pub permission_prompt_tool: Option<String>,
}

/// A refusal: the text for stderr and the exit code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub message: String,
    pub code: i32,
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal {
        message: message.into(),
        code: 1,
    }
}

/// The output formats the CLI accepts.
pub(crate) const FORMATS: [&str; 3] = ["text", "json", "stream-json"];

/// Parses `argv` (without the program name). The flags read before an error are returned
/// with it, so the call log can still show them.
#[must_use]
pub(crate) fn parse(argv: &[String]) -> (SimArgs, Option<Refusal>) {
    let mut a = SimArgs::default();
    let mut positionals: Vec<String> = Vec::new();
    let mut i = 0;
    let mut options_ended = false;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        if options_ended || !arg.starts_with('-') || arg == "-" {
            positionals.push(arg.clone());
            continue;
        }
        if arg == "--" {
            options_ended = true;
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let slot: &mut Option<String> = match name {
            "-p" | "--print" => {
                a.print = true;
                continue;
            }
            "--verbose" => {
                a.verbose = true;
                continue;
            }
            "--dangerously-skip-permissions" => {
                a.skip_permissions = true;
                continue;
            }
            "--allowedTools" | "--allowed-tools" => {
                a.allowed_tools.extend(variadic(argv, &mut i, inline));
                continue;
            }
            "--tools" => {
                let values = variadic(argv, &mut i, inline);
                a.tools.get_or_insert_with(Vec::new).extend(
                    values
                        .iter()
                        .flat_map(|v| v.split(','))
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned),
                );
                continue;
            }
            "--mcp-config" => {
                a.mcp_config.extend(variadic(argv, &mut i, inline));
                continue;
            }
            "--permission-prompt-tool" => &mut a.permission_prompt_tool,
            "--output-format" => &mut a.output_format,
            "--session-id" => &mut a.session_id,
            "-r" | "--resume" => &mut a.resume,
            "--permission-mode" => &mut a.permission_mode,
            "--max-turns" => &mut a.max_turns,
            "--max-budget-usd" => &mut a.max_budget_usd,
            "--model" => &mut a.model,
            "--settings" => &mut a.settings,
            _ => return (a, Some(refuse(format!("error: unknown option '{name}'")))),
        };
        let value = match inline {
            Some(v) => v,
            None if i < argv.len() => {
                i += 1;
                argv[i - 1].clone()
            }
            None => {
                let msg = format!("error: option '{name} <value>' argument missing");
                return (a, Some(refuse(msg)));
            }
        };
        *slot = Some(value);
    }
    finish(a, positionals)
}

/// The values of a flag that takes several (`--tools A B`, `--allowedTools=A`): the inline
/// one, then each argument up to the next flag.
fn variadic(argv: &[String], i: &mut usize, inline: Option<String>) -> Vec<String> {
    let mut values: Vec<String> = inline.into_iter().collect();
    while *i < argv.len() && !argv[*i].starts_with('-') {
        values.push(argv[*i].clone());
        *i += 1;
    }
    values
}

/// The checks made once every flag is read: one prompt at most, a known output format.
fn finish(mut a: SimArgs, mut positionals: Vec<String>) -> (SimArgs, Option<Refusal>) {
    if positionals.len() > 1 {
        let msg = format!(
            "error: too many arguments. Expected 1 argument but got {}.",
            positionals.len()
        );
        return (a, Some(refuse(msg)));
    }
    a.prompt = positionals.pop();
    if let Some(f) = a.output_format.as_deref().filter(|f| !FORMATS.contains(f)) {
        let msg = format!(
            "error: option '--output-format <format>' argument '{f}' is invalid. \
             Allowed choices are text, json, stream-json."
        );
        return (a, Some(refuse(msg)));
    }
    (a, None)
}

/// The refusals that come after parsing, in the CLI's words. `nested` is whether
/// `CLAUDECODE` is set in the environment.
///
/// # Errors
/// The refusal, when the call is one the CLI would not run.
pub(crate) fn check(a: &SimArgs, nested: bool) -> Result<(), Refusal> {
    if a.codex || a.gemini {
        return Ok(());
    }
    if nested {
        return Err(refuse(
            "Error: Claude Code cannot be launched inside another Claude Code session.\n\
             Nested sessions share runtime resources and will crash all active sessions.\n\
             To bypass this check, unset the CLAUDECODE environment variable.",
        ));
    }
    if !a.print {
        return Err(refuse(
            "claude-sim: only headless mode (-p/--print) is simulated",
        ));
    }
    if a.output_format.as_deref() == Some("stream-json") && !a.verbose {
        return Err(refuse(
            "Error: When using --print, --output-format=stream-json requires --verbose",
        ));
    }
    if a.session_id.is_some() && a.resume.is_some() {
        return Err(refuse(
            "Error: --session-id can only be used with --continue or --resume if \
             --fork-session is also specified.",
        ));
    }
    if let Some(id) = &a.session_id
        && !is_uuid(id)
    {
        return Err(refuse("Error: Invalid session ID. Must be a valid UUID."));
    }
    Ok(())
}

/// The hyphenated 8-4-4-4-12 form the CLI requires.
#[must_use]
pub(crate) fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn allowed_tools_stop_at_the_next_flag() {
        let (a, err) = parse(&argv(&[
            "-p",
            "hi",
            "--allowedTools",
            "Bash(git:*)",
            "Edit",
            "--model",
            "m",
        ]));
        assert_eq!(err, None);
        assert_eq!(a.allowed_tools, ["Bash(git:*)", "Edit"]);
        assert_eq!(a.model.as_deref(), Some("m"));
        assert_eq!(a.prompt.as_deref(), Some("hi"));
    }

    #[test]
    fn parser_errors_name_the_flag() {
        let (_, err) = parse(&argv(&["-p", "x", "--bogus"]));
        assert_eq!(err.unwrap().message, "error: unknown option '--bogus'");
        let (_, err) = parse(&argv(&["-p", "x", "--model"]));
        assert!(
            err.unwrap()
                .message
                .contains("'--model <value>' argument missing")
        );
        let (_, err) = parse(&argv(&["-p", "x", "--output-format", "yaml"]));
        assert!(err.unwrap().message.contains("'yaml' is invalid"));
        let (_, err) = parse(&argv(&["-p", "x", "y"]));
        assert!(err.unwrap().message.contains("too many arguments"));
    }

    #[test]
    fn uuid_form() {
        assert!(is_uuid("9dd8e594-fe17-4343-93ca-15b29fa04abb"));
        assert!(!is_uuid("9dd8e594fe17434393ca15b29fa04abb"));
        assert!(!is_uuid("not-a-uuid"));
    }
}
