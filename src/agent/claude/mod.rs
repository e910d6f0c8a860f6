//! Claude Code (`claude -p … --output-format stream-json --verbose`): how it is called, how its
//! stream-json is read, and how a run's end is classified.

pub(super) mod classify;
pub(super) mod invocation;
pub(super) mod reset_time;
pub(super) mod stream;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::backend::{Backend, Follow, Refused};
use super::{AgentConfig, Class, ExitInfo, Invocation, Session, StreamSummary};

/// Claude Code, the loop's first backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeCode;

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

    /// Claude Code honours every setting a loop has: nothing is refused.
    fn invocation(
        &self,
        cfg: &AgentConfig,
        prompt: &str,
        session: &Session,
    ) -> Result<Invocation, Refused> {
        Ok(invocation::invocation(cfg, prompt, session))
    }

    fn with_hooks(&self, inv: Invocation, settings_file: &str) -> Invocation {
        inv.with_settings(settings_file)
    }

    fn hook_settings(&self, exe: &Path) -> Option<serde_json::Value> {
        Some(invocation::hook_settings(exe))
    }

    fn read_output(&self, path: &Path) -> std::io::Result<StreamSummary> {
        stream::read_stream_file(path)
    }

    fn follow(&self, path: &Path) -> Box<dyn Follow> {
        Box::new(stream::StreamFollower::new(path))
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
    fn transcript(&self, session_id: &str, workdir: &Path, home: &Path) -> Option<PathBuf> {
        let dir: String = workdir
            .display()
            .to_string()
            .chars()
            .map(|c| if c == '/' || c == '.' { '-' } else { c })
            .collect();
        let path = home
            .join(".claude")
            .join("projects")
            .join(dir)
            .join(format!("{session_id}.jsonl"));
        path.exists().then_some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
