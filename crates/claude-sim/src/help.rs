//! What the simulation says about itself: `--version`, and the `--help` of each CLI it stands
//! for, in the real CLIs' forms (Commander's for Claude Code, clap's for Codex, yargs' for
//! Gemini CLI), listing the flags it takes and the permission modes, sandboxes and approval
//! modes it knows. `loop doctor` reads them as it reads the real CLIs'. Claude Code and Gemini
//! CLI are both asked `--help`: the answer holds both, Gemini's after Claude's.

/// The versions it behaves as.
const VERSION: &str = concat!(
    "claude-sim ",
    env!("CARGO_PKG_VERSION"),
    " (simulates Claude Code 2.1.330, codex-cli 0.169.0 and Gemini CLI 0.61.0)"
);

/// Claude Code's `--help`, for the headless mode the simulation knows.
const CLAUDE_HELP: &str = r#"Usage: claude [options] [command] [prompt]

Claude Code - starts an interactive session by default, use -p/--print for non-interactive
output (simulated by claude-sim: the headless mode only)

Arguments:
  prompt                                      Your prompt

Options:
  -p, --print                                 Print response and exit (useful for pipes)
  --output-format <format>                    Output format (only works with --print) (choices: "text", "json", "stream-json")
  --verbose                                   Override verbose mode setting from config
  --mcp-config <configs...>                   Load MCP servers from JSON files or strings
  --permission-prompt-tool <tool>             MCP tool to use for permission prompts (only works with --print)
  --settings <file-or-json>                   Path to a settings JSON file or a JSON string to load additional settings from
  --allowedTools, --allowed-tools <tools...>  Comma or space-separated list of tool names to allow (e.g. "Bash(git:*) Edit")
  --tools <tools...>                          Specify the list of available tools from the built-in set
  --session-id <uuid>                         Use a specific session ID for the conversation (must be a valid UUID)
  -r, --resume [value]                        Resume a conversation by session ID
  --permission-mode <mode>                    Permission mode to use for the session (choices: "acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan")
  --max-turns <turns>                         Maximum number of agentic turns (only works with --print)
  --max-budget-usd <amount>                   Maximum dollar amount to spend on API calls (only works with --print)
  --model <model>                             Model for the current session
  --dangerously-skip-permissions              Bypass all permission checks
  -v, --version                               Output the version number
  -h, --help                                  Display help for command
"#;

/// Gemini CLI's `--help` (yargs'), for the headless flags the simulation takes.
const GEMINI_HELP: &str = r#"
Usage: gemini [options] [command]

Gemini CLI (simulated by claude-sim: the headless mode only)

Options:
  -m, --model                     Model  [string]
  -p, --prompt                    Run in non-interactive (headless) mode with the given prompt. Appended to input on stdin (if any).  [string]
      --skip-trust                Trust the current workspace for this session.  [boolean] [default: false]
  -y, --yolo                      Automatically accept all actions  [boolean] [default: false]
      --approval-mode             Set the approval mode: default (prompt for approval), auto_edit (auto-approve edit tools), yolo (auto-approve all tools), plan (read-only mode)  [string] [choices: "default", "auto_edit", "yolo", "plan"]
      --policy                    Additional policy files or directories to load (comma-separated or multiple --policy)  [array]
  -r, --resume                    Resume a previous session. Use "latest" for most recent or index number (e.g. --resume 5)  [string]
      --session-id                Start a new session with a manually provided UUID.  [string]
  -o, --output-format             The format of the CLI output.  [string] [choices: "text", "json", "stream-json"]
  -v, --version                   Show version number  [boolean]
  -h, --help                      Show help  [boolean]
"#;

/// `codex exec --help` (and `codex exec resume --help`), for the flags the simulation takes.
const CODEX_EXEC_HELP: &str = r"Run Codex non-interactively (simulated by claude-sim)

Usage: codex exec [OPTIONS] [PROMPT] [COMMAND]

Commands:
  resume  Resume a previous session by id

Arguments:
  [PROMPT]  Initial instructions for the agent; `-` reads them from stdin

Options:
  -c, --config <key=value>
          Override a configuration value
  -m, --model <MODEL>
          Model the agent should use
  -s, --sandbox <SANDBOX_MODE>
          Select the sandbox policy to use when executing model-generated shell commands

          [possible values: read-only, workspace-write, danger-full-access]
      --dangerously-bypass-approvals-and-sandbox
          Skip all confirmation prompts and execute commands without sandboxing
      --skip-git-repo-check
          Allow running Codex outside a Git repository
      --ephemeral
          Run without persisting session files to disk
      --json
          Print events to stdout as JSONL
  -h, --help
          Print help
";

/// What `argv` asks of the simulation about itself (`--version`, `--help`, `exec --help`,
/// `exec resume --help`), if that is all it asks.
#[must_use]
pub(crate) fn asked(argv: &[String]) -> Option<String> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    let text = match words.as_slice() {
        ["-v" | "--version"] => VERSION.to_owned(),
        ["-h" | "--help"] => format!("{CLAUDE_HELP}{GEMINI_HELP}"),
        ["exec", "-h" | "--help"] | ["exec", "resume", "-h" | "--help"] => {
            CODEX_EXEC_HELP.to_owned()
        }
        _ => return None,
    };
    Some(text)
}
