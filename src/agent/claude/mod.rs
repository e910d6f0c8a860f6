//! Claude Code (`claude -p … --output-format stream-json --verbose`): how it is called, how its
//! stream-json is read, and how a run's end is classified.

pub(super) mod classify;
pub(super) mod invocation;
pub(crate) mod permission;
pub(super) mod reset_time;
pub(super) mod stream;

use std::path::{Path, PathBuf};

use super::backend::{
    About, Backend, ContractCheck, Missing, ModeOption, OwnRules, OwnState, Refused, Steers,
};
use super::output::Dialect;
use super::{AgentConfig, Invocation, Session, StreamSummary};

/// What in `~/.claude` would run or steer a later session of the person's, made as nothing
/// when missing: settings (hooks, permissions, the status line's command, `apiKeyHelper`),
/// instructions, hook scripts, slash commands, subagents and their memory, skills, plugins
/// (their hooks and MCP servers), output styles, rules, and a local installation of the CLI
/// itself (`local/`, run as `claude`). An empty `{}` settings file, an empty `CLAUDE.md` and
/// an empty directory are read as none (a local installation is one only with its
/// `node_modules/.bin/claude`).
const STEERS: Steers = Steers {
    files: &[
        ("settings.json", "{}"),
        ("settings.local.json", "{}"),
        ("CLAUDE.md", ""),
    ],
    dirs: &[
        "hooks",
        "commands",
        "agents",
        "agent-memory",
        "skills",
        "plugins",
        "output-styles",
        "rules",
        "local",
    ],
};

/// Claude Code, the loop's first backend.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClaudeCode;

impl Backend for ClaudeCode {
    fn about(&self) -> &'static About {
        &About {
            name: "claude",
            provider: "anthropic",
            default_program: "claude",
            install: "install Claude Code (`npm install -g @anthropic-ai/claude-code`)",
            login: "log in to Claude Code (`claude /login`) or fix ANTHROPIC_API_KEY",
            help_args: &[&["--help"]],
            mode_option: ModeOption {
                what: "permission modes",
                flags: &["--permission-mode"],
            },
        }
    }

    /// Claude Code honours every setting a loop has: nothing is refused.
    fn invocation(
        &self,
        cfg: &AgentConfig,
        prompt: &str,
        session: &Session,
    ) -> Result<Invocation, Refused> {
        Ok(invocation::invocation(cfg, prompt, session))
    }

    fn with_hooks(&self, inv: Invocation, settings_file: &str, exe: &Path) -> Invocation {
        invocation::with_permission_host(invocation::with_settings(inv, settings_file), exe)
    }

    fn hook_settings(&self, exe: &Path) -> Option<serde_json::Value> {
        Some(invocation::hook_settings(exe))
    }

    fn dialect(&self) -> Box<dyn Dialect> {
        Box::new(stream::ClaudeStream::default())
    }

    fn own_rules(&self) -> OwnRules {
        classify::own
    }

    fn answered_marker(&self) -> &'static str {
        RESULT_MARKER
    }

    fn default_allowed_tools(&self) -> Option<&'static [&'static str]> {
        Some(crate::m1::settings::DEFAULTS.allowed_tools)
    }

    /// `~/.claude` writable (sessions and transcripts in `projects/`, todos, history, file
    /// snapshots, `.credentials.json` as the CLI refreshes its token; it writes them by
    /// renaming a file of the same directory, so the directory is bound whole), and read-only
    /// over it what the person's next session would run or follow ([`STEERS`]).
    /// `CLAUDE_CONFIG_DIR` moves `~/.claude`, and the configuration file with it.
    fn own_state(&self, home: &Path) -> OwnState {
        let (dir, config) = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                let config = dir.join(".claude.json");
                (dir, config)
            }
            None => (home.join(".claude"), home.join(".claude.json")),
        };
        let mut own = OwnState::of(dir, &STEERS);
        // `.claude.json` holds the MCP servers (the user's, and each project's), which the next
        // session starts as the person, beside what the CLI rewrites on every run (startups,
        // tips, migrations, each project's trust and last session). Read-only: a run's
        // rewrite fails and the CLI goes on without keeping it ("continuing without
        // persisting" in its debug log, 2.1.330), which a headless run does not need: the
        // real-CLI tests (2.1.330, 2.1.197) run, stop at gates and resume so.
        own.steers.push((config, Missing::File("{}")));
        own
    }

    fn own_env(&self) -> &'static [&'static str] {
        &[
            "ANTHROPIC_*",
            "CLAUDE_*",
            "DISABLE_*",
            "MCP_*",
            "MAX_THINKING_TOKENS",
            "BASH_DEFAULT_TIMEOUT_MS",
            "BASH_MAX_TIMEOUT_MS",
        ]
    }

    /// Claude Code on Amazon Bedrock, Google Vertex AI or Microsoft Foundry
    /// (`CLAUDE_CODE_USE_BEDROCK`, `…_VERTEX`, `…_FOUNDRY`): the cloud's variables, and the
    /// credential files they name or the cloud's tools keep (read-only, and only these files,
    /// even where they lie in a place the sandbox otherwise hides).
    fn mode(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<crate::agent::backend::Mode> {
        use crate::agent::backend::Mode;
        let on = |k: &str| var(k).is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
        let home = var("HOME").map(PathBuf::from);
        let file = |named: &str, default: &str| {
            var(named)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(default)))
                .filter(|p| p.is_file())
        };
        if on("CLAUDE_CODE_USE_BEDROCK") {
            return Some(Mode {
                name: "Bedrock",
                env: &["AWS_*"],
                files: [
                    file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
                    file("AWS_CONFIG_FILE", ".aws/config"),
                ]
                .into_iter()
                .flatten()
                .collect(),
            });
        }
        if on("CLAUDE_CODE_USE_VERTEX") {
            return Some(Mode {
                name: "Vertex AI",
                env: &[
                    "GOOGLE_*",
                    "CLOUD_ML_REGION",
                    "VERTEX_REGION_*",
                    "GCLOUD_PROJECT",
                ],
                files: file(
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    ".config/gcloud/application_default_credentials.json",
                )
                .into_iter()
                .collect(),
            });
        }
        on("CLAUDE_CODE_USE_FOUNDRY").then(|| Mode {
            name: "Foundry",
            env: &["AZURE_*"],
            files: Vec::new(),
        })
    }

    fn transcript(&self, session_id: &str, workdir: &Path, home: &Path) -> Option<PathBuf> {
        // Every character but an ASCII letter or digit becomes `-`, one per UTF-16 unit, as
        // the CLI (JavaScript) writes the directory's name: `/tmp/my_proj.v2 x` is
        // `-tmp-my-proj-v2-x` (seen with 2.1.197 and 2.1.330).
        let dir: String = workdir
            .display()
            .to_string()
            .chars()
            .flat_map(|c| {
                let n = if c.is_ascii_alphanumeric() {
                    0
                } else {
                    c.len_utf16()
                };
                std::iter::repeat_n('-', n).chain((n == 0).then_some(c))
            })
            .collect();
        let path = home
            .join(".claude")
            .join("projects")
            .join(dir)
            .join(format!("{session_id}.jsonl"));
        path.exists().then_some(path)
    }

    /// Only with `--tools` naming nothing but tools that read: no allow rule, permission mode
    /// or `--allowedTools` gives a removed tool back (captures `reviewer-tools-read-only*`).
    /// An MCP server's tools (`--mcp-config`) are not counted on to be removed.
    fn reads_only(&self, args: &[String]) -> Option<String> {
        let tools = invocation::offered_tools(args)?;
        let writes = tools
            .iter()
            .any(|t| !crate::agent::READ_ONLY_TOOLS.contains(&t.as_str()));
        let mcp = args
            .iter()
            .any(|a| a == "--mcp-config" || a.starts_with("--mcp-config="));
        (!writes && !mcp).then(|| {
            format!(
                "had only read-only tools (--tools {})",
                if tools.is_empty() {
                    "none".to_owned()
                } else {
                    tools.join(",")
                }
            )
        })
    }

    /// Its cost, and the `SessionStart` hook of `--settings`.
    fn contract_checks(&self, s: &StreamSummary, hook_fired: bool) -> Vec<ContractCheck> {
        vec![
            ContractCheck {
                holds: s.cost_usd.is_some(),
                held: "its cost",
                missing: "no cost in the result (the loop's dollar cap counts it)",
            },
            ContractCheck {
                holds: hook_fired,
                held: "the SessionStart hook fired",
                missing: "the SessionStart hook of --settings did not run (the loop's hooks \
                          would not)",
            },
        ]
    }

    fn point_at(
        &self,
        _home: &Path,
        base_url: &str,
    ) -> std::io::Result<Vec<(String, Option<String>)>> {
        let set = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        Ok(vec![
            set("ANTHROPIC_BASE_URL", base_url),
            set("ANTHROPIC_API_KEY", "dummy"),
            ("ANTHROPIC_AUTH_TOKEN".to_owned(), None),
            ("CLAUDE_CODE_OAUTH_TOKEN".to_owned(), None),
            set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            set("DISABLE_AUTOUPDATER", "1"),
        ])
    }
}

/// What marks the CLI's final `result` event in stream-json output (its keys come in no fixed
/// order, and inside a string the quotes would be escaped): once a step's stdout holds it, the
/// agent has answered, and the runner lifts the idle timeout.
pub(crate) const RESULT_MARKER: &str = r#""type":"result""#;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn a_run_reads_only_when_its_tools_only_read_whatever_follows() {
        let reviewer = "-p --output-format stream-json --verbose --tools Read,Grep,Glob \
                        --allowedTools Read Grep Glob --permission-mode plan";
        assert_eq!(
            ClaudeCode.reads_only(&args(reviewer)).as_deref(),
            Some("had only read-only tools (--tools Read,Grep,Glob)")
        );
        // Extra arguments that give a tool back, or every tool, or an MCP server's.
        for wider in [
            format!("{reviewer} --tools Bash"),
            format!("{reviewer} --tools=Read,Edit"),
            format!("{reviewer} --mcp-config x.json"),
            "-p --output-format stream-json --verbose --permission-mode plan".to_owned(),
        ] {
            assert_eq!(ClaudeCode.reads_only(&args(&wider)), None, "{wider}");
        }
    }

    #[test]
    fn a_transcript_is_found_where_claude_code_keeps_it() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".claude/projects/-home-user-my-project");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-1.jsonl"), "{}\n").unwrap();
        let work = Path::new("/home/user/my.project");
        assert_eq!(
            ClaudeCode.transcript("s-1", work, home.path()),
            Some(dir.join("s-1.jsonl"))
        );
        assert_eq!(ClaudeCode.transcript("s-2", work, home.path()), None);
    }

    #[test]
    fn a_transcript_directory_names_every_character_but_letters_and_digits_with_a_dash() {
        // As the real CLI named it for `/tmp/tx/my_proj.v2 x`.
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".claude/projects/-tmp-tx-my-proj-v2-x");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-1.jsonl"), "{}\n").unwrap();
        let found = ClaudeCode.transcript("s-1", Path::new("/tmp/tx/my_proj.v2 x"), home.path());
        assert_eq!(found, Some(dir.join("s-1.jsonl")));
        // A character outside the BMP is two UTF-16 units, so two dashes.
        let dir = home.path().join(".claude/projects/-p-a--b");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-2.jsonl"), "{}\n").unwrap();
        let found = ClaudeCode.transcript("s-2", Path::new("/p/a\u{1F600}b"), home.path());
        assert_eq!(found, Some(dir.join("s-2.jsonl")));
    }
}
