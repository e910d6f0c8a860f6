//! Claude Code (`claude -p … --output-format stream-json --verbose`): how it is called, how its
//! stream-json is read, and how a run's end is classified.

pub(super) mod classify;
pub(super) mod invocation;
pub(crate) mod permission;
pub(super) mod reset_time;
pub(super) mod stream;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::backend::{Backend, Follow, Refused};
use super::{AgentConfig, Class, ExitInfo, Invocation, Session, StreamSummary};

/// Claude Code, the loop's first backend.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClaudeCode;

impl Follow for stream::StreamFollower {
    fn poll(&mut self) -> bool {
        stream::StreamFollower::poll(self)
    }

    fn summary(&self) -> &StreamSummary {
        stream::StreamFollower::summary(self)
    }
}

impl Backend for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn default_program(&self) -> &'static str {
        "claude"
    }

    fn install(&self) -> &'static str {
        "install Claude Code (`npm install -g @anthropic-ai/claude-code`)"
    }

    fn login(&self) -> &'static str {
        "log in to Claude Code (`claude /login`) or fix ANTHROPIC_API_KEY"
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
        inv.with_settings(settings_file).with_permission_host(exe)
    }

    fn hook_settings(&self, exe: &Path) -> Option<serde_json::Value> {
        Some(invocation::hook_settings(exe))
    }

    fn read_output(&self, path: &Path) -> std::io::Result<StreamSummary> {
        stream::read_stream_file(path)
    }

    fn classify(
        &self,
        exit: &ExitInfo,
        stderr: &str,
        output: &StreamSummary,
        now: DateTime<Utc>,
    ) -> Class {
        classify::classify(exit, stderr, output, now)
    }

    fn answered_marker(&self) -> &'static str {
        super::RESULT_MARKER
    }

    /// `~/.claude/projects/<the work directory, each `/` and `.` a `-`>/<session>.jsonl`.
    fn own_state(&self, home: &Path) -> Vec<(PathBuf, bool)> {
        // `CLAUDE_CONFIG_DIR` moves `~/.claude` (and the configuration file with it).
        match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => vec![(PathBuf::from(dir), true)],
            None => vec![
                (home.join(".claude"), true),
                (home.join(".claude.json"), false),
            ],
        }
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
            .any(|t| !super::READ_ONLY_TOOLS.contains(&t.as_str()));
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
}

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
