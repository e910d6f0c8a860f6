//! What the simulation says about itself: `--version`, and the `--help` of each CLI it stands
//! for, in the real CLIs' forms (Commander's for Claude Code, clap's for Codex), listing the
//! flags it takes and the permission modes and sandboxes it knows. `loop doctor` reads both,
//! as it reads the real CLIs'.

/// The versions it behaves as.
const VERSION: &str = concat!(
    "claude-sim ",
    env!("CARGO_PKG_VERSION"),
    " (simulates Claude Code 2.1.330 and codex-cli 0.169.0)"
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
pub(crate) fn asked(argv: &[String]) -> Option<&'static str> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["-v" | "--version"] => Some(VERSION),
        ["-h" | "--help"] => Some(CLAUDE_HELP),
        ["exec", "-h" | "--help"] | ["exec", "resume", "-h" | "--help"] => Some(CODEX_EXEC_HELP),
        _ => None,
    }
}
