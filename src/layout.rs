//! Where a loop keeps its files: the path rules of a state directory. The files inside a
//! task directory are the exec bridge's to name (`bridge::records`: spec, output, exit and
//! pid records) and the task ledger's (`judged.json`, `retried.json`); the rest are here.
//!
//! A loop is its `M1.md`; the directory that holds it is the loop's state directory:
//!
//! ```text
//! state/
//!   M1.md                   the loop's state (any name: --file)
//!   M1.md.lock              the runner's lock, with its pid
//!   M1.md.decide.lock       taken by whoever writes a gate's decision
//!   M1.md.versions          the versions of M1.md runners have known (to tell a stale save)
//!   .M1.md.displaced        the text a runner's write replaced, watched for a late save
//!   M1.md.late-<time>       a late save found after a newer one, kept instead of applied
//!   STOP                    stops this loop only
//!   loop.yaml               defaults for new loops
//!   loop.log                every decision, with its reason
//!   outbox.jsonl            notifications, until Telegram took them
//!   outbox.lock             the outbox's lock for writing, .send.lock for sending (with the
//!                           sender's pid), .next.lock for the sender next in line
//!   revivals.log            when a revived runner took the loop over, and who revived it
//!   runner.out              the output of this loop's detached runners
//!   claude-settings.json    the settings (hooks) every agent run of the loop gets
//!   handoff/step-N.md       the note an agent leaves for a fresh session of step N (the one
//!                           place of the state directory a confined step writes, besides
//!                           its task directory)
//!   .gitignore              `*`, so that git leaves the state directory alone
//!   tasks/<id>/             one per agent run: prompt, stdin, stdout, stderr, records, and
//!                           hooks/hooks.log, what the loop's hooks in the run hand back
//!                           (hooks/ is the one place of it the run may write)
//!   tasks/<id>.verify/      one per VERIFY run of task <id>
//!   tasks/<id>.tree-before.json  the work tree as a review began
//!   tasks/.ledger/          which tasks each loop started, one file per loop (a rebuildable
//!                           index of the task directories, see runner::ledger)
//!   commits/<LOOP_ID>/      step-N.tree.json: the work tree as step N began (which paths
//!                           held uncommitted changes then, and what), so that the step's
//!                           commit takes only its own work; step-N.work.json: each path the
//!                           agent's runs of step N changed, as the last of them left it (a
//!                           blob in git's store), so that the commit takes nothing VERIFY or
//!                           a review wrote after; `index`, the index a commit is built in
//!   telegram.*              the chat bot's offset, lock and command output
//!   parallel/<LOOP_ID>/     the steps of a loop that runs them at once, under its own id
//!     step-N/               step N's git worktree
//!     step-N.loop/M1.md     step N's own loop (and its state directory), with `merged`,
//!                           the note of the integration commit it was merged as
//!     merge/                the worktree the merge queue merges and verifies in
//! ```
//!
//! `fire`, `check`, `kill` and `notify` outside a loop use the same layout in the per-user
//! state directory (`crate::dirs`).

use std::path::{Path, PathBuf};

/// The files of one state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    dir: PathBuf,
}

impl Layout {
    /// The layout of the loop whose state file is `m1`: the directory it is in.
    #[must_use]
    pub fn of(m1: &Path) -> Self {
        let dir = match m1.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Self { dir }
    }

    /// The layout of a state directory.
    #[must_use]
    pub fn dir(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The state directory.
    #[must_use]
    pub fn state_dir(&self) -> &Path {
        &self.dir
    }

    /// The runner's lock of the loop whose state file is `m1` (`M1.md.lock` beside it).
    #[must_use]
    pub fn runner_lock(m1: &Path) -> PathBuf {
        beside(m1, ".lock")
    }

    /// The lock whoever writes a gate's decision holds (`M1.md.decide.lock` beside `m1`): a
    /// person's decision, a tap, and the runner closing a gate, one at a time, each against
    /// the file as it is then.
    #[must_use]
    pub fn decide_lock(m1: &Path) -> PathBuf {
        beside(m1, ".decide.lock")
    }

    /// The versions of the loop whose state file is `m1` that its runners have known
    /// (`M1.md.versions` beside it): the history that tells a stale save from a hand edit,
    /// shared by every runner of the loop.
    #[must_use]
    pub fn versions(m1: &Path) -> PathBuf {
        beside(m1, ".versions")
    }

    /// Where the file a runner's write of `m1` displaced stays open for a few seconds, for a
    /// save in place still being written into it (`.M1.md.displaced` beside it).
    #[must_use]
    pub fn displaced(m1: &Path) -> PathBuf {
        let name = m1
            .file_name()
            .map_or_else(|| "M1.md".into(), |n| n.to_string_lossy());
        m1.with_file_name(format!(".{name}.displaced"))
    }

    /// The stop file of this loop only.
    #[must_use]
    pub fn stop_file(&self) -> PathBuf {
        self.dir.join("STOP")
    }

    #[must_use]
    pub fn settings(&self) -> PathBuf {
        self.dir.join("loop.yaml")
    }

    #[must_use]
    pub fn log(&self) -> PathBuf {
        self.dir.join("loop.log")
    }

    #[must_use]
    pub fn outbox(&self) -> PathBuf {
        self.dir.join("outbox.jsonl")
    }

    /// The outbox's lock for writing it.
    #[must_use]
    pub fn outbox_lock(&self) -> PathBuf {
        self.dir.join("outbox.lock")
    }

    /// The outbox's lock for sending from it.
    #[must_use]
    pub fn outbox_send_lock(&self) -> PathBuf {
        self.dir.join("outbox.send.lock")
    }

    /// The lock of the process next in line to send from the outbox.
    #[must_use]
    pub fn outbox_next_lock(&self) -> PathBuf {
        self.dir.join("outbox.next.lock")
    }

    /// When a revived runner took the loop over, and who revived it: one line each.
    #[must_use]
    pub fn revivals(&self) -> PathBuf {
        self.dir.join("revivals.log")
    }

    #[must_use]
    pub fn runner_out(&self) -> PathBuf {
        self.dir.join("runner.out")
    }

    #[must_use]
    pub fn tasks(&self) -> PathBuf {
        self.dir.join("tasks")
    }

    /// The directory of task `id`.
    #[must_use]
    pub fn task(&self, id: &str) -> PathBuf {
        self.tasks().join(id)
    }

    /// What the loop's hooks inside run `id` hand back (a compaction starting), one line each
    /// (`<time> compacting <TRIGGER>`, [`HOOK_COMPACTING`]; the runner words the log line
    /// itself): in the run's own task directory, the one place of the loop's a confined run may
    /// write.
    #[must_use]
    pub fn task_hooks_log(&self, id: &str) -> PathBuf {
        self.task_hand_back(id).join("hooks.log")
    }

    /// The one place of task `id`'s directory its run may write (`hooks/`): what the loop's
    /// hooks in it hand back. The runner reads it as the run's, never as its own.
    #[must_use]
    pub fn task_hand_back(&self, id: &str) -> PathBuf {
        self.task(id).join("hooks")
    }

    /// The prompt an agent run was given: its standard input.
    #[must_use]
    pub fn task_prompt(&self, id: &str) -> PathBuf {
        self.task(id).join("stdin")
    }

    /// The handoff note an agent writes for a fresh session of `step` (`STEP_RESTART`).
    #[must_use]
    pub fn handoff(&self, step: u32) -> PathBuf {
        self.handoff_dir().join(format!("step-{step}.md"))
    }

    /// Where the handoff notes are.
    #[must_use]
    pub fn handoff_dir(&self) -> PathBuf {
        self.dir.join("handoff")
    }

    /// The settings every agent run of this loop gets (`claude --settings`): the loop's hooks.
    #[must_use]
    pub fn agent_settings(&self) -> PathBuf {
        self.dir.join("claude-settings.json")
    }

    /// The work tree as review task `id` found it, beside its task directory (written before
    /// the task starts, so before the directory exists).
    #[must_use]
    pub fn review_tree(&self, id: &str) -> PathBuf {
        self.tasks().join(format!("{id}.tree-before.json"))
    }

    /// A file of the chat bot (`offset`, `lock`, `cmd.out`, `stop`: its `/stop` left the
    /// loop's `STOP`).
    #[must_use]
    pub fn telegram(&self, what: &str) -> PathBuf {
        self.dir.join(format!("telegram.{what}"))
    }

    /// Where the loop `loop_id` runs its steps at once: their worktrees and loops, and its
    /// merge worktree. Under the loop's own id, so that no other loop of this directory, before
    /// or after it, ever takes them for its own.
    #[must_use]
    pub fn parallel(&self, loop_id: &str) -> PathBuf {
        self.dir.join("parallel").join(loop_id)
    }

    /// Step `n`'s worktree in loop `loop_id`; `k` above 1 for a later start of the same step
    /// while an earlier one's worktree is still there.
    #[must_use]
    pub fn step_worktree(&self, loop_id: &str, n: u32, k: u32) -> PathBuf {
        self.parallel(loop_id)
            .join(numbered(&format!("step-{n}"), k))
    }

    /// Step `n`'s own loop (its `M1.md`) in loop `loop_id`, as [`Layout::step_worktree`].
    #[must_use]
    pub fn step_loop(&self, loop_id: &str, n: u32, k: u32) -> PathBuf {
        self.parallel(loop_id)
            .join(numbered(&format!("step-{n}.loop"), k))
            .join("M1.md")
    }

    /// The worktree loop `loop_id`'s merge queue merges and verifies in.
    #[must_use]
    pub fn merge_worktree(&self, loop_id: &str) -> PathBuf {
        self.parallel(loop_id).join("merge")
    }

    /// The note a step's loop (whose state file is `m1`) keeps of the integration commit its
    /// step was merged as: what makes a merge happen once, whatever text of the parent's
    /// M1.md is saved over its record.
    #[must_use]
    pub fn merged_note(m1: &Path) -> PathBuf {
        m1.with_file_name("merged")
    }

    /// Where loop `loop_id` keeps what its steps' commits need.
    #[must_use]
    pub fn commits(&self, loop_id: &str) -> PathBuf {
        self.dir.join("commits").join(loop_id)
    }

    /// The work tree as step `n` of loop `loop_id` began (see [`Layout::commits`]).
    #[must_use]
    pub fn step_tree(&self, loop_id: &str, n: u32) -> PathBuf {
        self.commits(loop_id).join(format!("step-{n}.tree.json"))
    }

    /// What the agent's runs of step `n` of loop `loop_id` left (see [`Layout::commits`]).
    #[must_use]
    pub fn step_work(&self, loop_id: &str, n: u32) -> PathBuf {
        self.commits(loop_id).join(format!("step-{n}.work.json"))
    }

    /// The index file a step's commit of loop `loop_id` is built in, never the person's.
    #[must_use]
    pub fn commit_index(&self, loop_id: &str) -> PathBuf {
        self.commits(loop_id).join("index")
    }

    /// Whether `name`, an entry of the state directory of the loop whose state file is named
    /// `m1_name`, is one of the loop's own files: never part of a step's work, even where the
    /// state directory is a directory of the project.
    #[must_use]
    pub fn is_loops_own(m1_name: &str, name: &str) -> bool {
        const OWN: &[&str] = &[
            "STOP",
            "loop.yaml",
            "loop.log",
            "outbox.jsonl",
            "outbox.lock",
            "outbox.send.lock",
            "outbox.next.lock",
            "revivals.log",
            "runner.out",
            "claude-settings.json",
            "handoff",
            "tasks",
            "parallel",
            "commits",
        ];
        OWN.contains(&name)
            || name.starts_with(m1_name)
            || name == format!(".{m1_name}.displaced")
            || name.starts_with("telegram.")
            || is_archive_of(m1_name, name)
    }

    /// The `.gitignore` a state directory the loop creates gets.
    #[must_use]
    pub fn gitignore(&self) -> PathBuf {
        self.dir.join(".gitignore")
    }
}

/// The word of the line the loop's `PreCompact` hook hands back: `compacting <TRIGGER>`.
pub const HOOK_COMPACTING: &str = "compacting";

/// Longest accepted task id; ids become directory names.
pub(crate) const MAX_ID_LEN: usize = 128;

/// Checks that `id` can only name a directory directly under `tasks/`.
///
/// # Errors
/// [`crate::error::Error::BadInput`], quoting the id and saying what is allowed.
pub(crate) fn validate_task_id(id: &str) -> crate::error::Result<()> {
    let fail = |why: &str| {
        Err(crate::error::Error::bad_input(format!(
            "invalid task id {id:?}: {why} (ids look like task_20260217T053000_a1b2c3)"
        )))
    };
    if id.is_empty() {
        return fail("it is empty");
    }
    if id.len() > MAX_ID_LEN {
        return fail(&format!("longer than {MAX_ID_LEN} characters"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return fail(&format!(
            "{c:?} is not allowed; use letters, digits, '_', '-' and '.'"
        ));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail("it must start with a letter or a digit");
    }
    if id.contains("..") {
        return fail("it must not contain \"..\"");
    }
    Ok(())
}

/// Whether `name` is an archive of the state file `m1_name` that `loop start` made:
/// `M1.20260217T053000.md`, or `M1.20260217T053000-2.md` for a second one of the same second.
#[must_use]
pub fn is_archive_of(m1_name: &str, name: &str) -> bool {
    let stem = m1_name.strip_suffix(".md").unwrap_or(m1_name);
    let Some(stamp) = name
        .strip_prefix(stem)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(".md"))
    else {
        return false;
    };
    let (time, nth) = match stamp.split_once('-') {
        Some((time, n)) => (time, Some(n)),
        None => (stamp, None),
    };
    let b = time.as_bytes();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    b.len() == 15
        && b[8] == b'T'
        && digits(&time[..8])
        && digits(&time[9..])
        && nth.is_none_or(digits)
}

/// `name`, or `name.k` for a `k` above 1.
fn numbered(name: &str, k: u32) -> String {
    if k > 1 {
        format!("{name}.{k}")
    } else {
        name.to_owned()
    }
}

/// The file beside `m1` whose name is `m1`'s with `suffix` added (`M1.md.lock`).
fn beside(m1: &Path, suffix: &str) -> PathBuf {
    let mut name = m1
        .file_name()
        .map(std::ffi::OsString::from)
        .unwrap_or_default();
    name.push(suffix);
    m1.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_keeps_its_files_beside_its_m1() {
        let l = Layout::of(Path::new("proj/state/M1.md"));
        assert_eq!(l.state_dir(), Path::new("proj/state"));
        assert_eq!(l.task("task_1"), Path::new("proj/state/tasks/task_1"));
        assert_eq!(l.log(), Path::new("proj/state/loop.log"));
        assert_eq!(
            l.outbox_send_lock(),
            Path::new("proj/state/outbox.send.lock")
        );
        assert_eq!(
            Layout::runner_lock(Path::new("proj/state/M1.md")),
            Path::new("proj/state/M1.md.lock")
        );
        assert_eq!(Layout::of(Path::new("M1.md")).state_dir(), Path::new("."));
    }

    #[test]
    fn a_loops_own_files_are_told_from_a_projects_own() {
        for own in [
            "M1.md",
            "M1.md.lock",
            "M1.md.versions",
            ".M1.md.displaced",
            "M1.20260217T053000.md",
            "M1.20260217T053000-3.md",
            "loop.log",
            "tasks",
            "telegram.offset",
            "commits",
        ] {
            assert!(Layout::is_loops_own("M1.md", own), "{own}");
        }
        for project in [
            "README.md",
            "M1-notes.md",
            "M1.2026.md",
            "M1.20260217T053000-.md",
            "src",
            ".gitignore",
        ] {
            assert!(!Layout::is_loops_own("M1.md", project), "{project}");
        }
        assert!(is_archive_of("plan.md", "plan.20260217T053000.md"));
    }
}
