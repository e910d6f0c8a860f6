//! `loop clean [-n | -f] [--keep N]`: removes what finished loops left in the state
//! directories of this user's loops ([`super::loops`]), as `git clean` does: without `-f` it
//! only says what it would remove. What goes, in each state directory: the archives `loop
//! start` made (`M1.<time>.md`) beyond the newest `--keep` of each loop file, and of the loops
//! that are neither a loop file there nor a kept archive, their task directories, their task
//! ledger, what their steps at once left (`parallel/<LOOP_ID>/`) and their commits' notes.
//!
//! What never goes: a loop file itself (running, waiting or finished: the latest loop is kept
//! whole), the kept archives and everything of their loops, a task that still runs, a task of
//! no loop (`loop fire`), a git worktree (it may hold work; git says how to remove it), and
//! anything that is not one of the loop's own files: the project's files are not looked at.

use std::path::{Path, PathBuf};

use crate::exit::Status;
use crate::layout::Layout;

/// Archived loops kept whole per loop file, the newest, unless `--keep` says otherwise.
pub(super) const KEEP: usize = 3;

/// One thing to remove, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Removal {
    path: PathBuf,
    what: String,
    bytes: u64,
}

/// What `loop clean` would do.
#[derive(Debug, Default)]
struct Plan {
    remove: Vec<Removal>,
    /// Left where it is, with why.
    keep: Vec<(PathBuf, String)>,
    /// Loops noted whose files are no longer there.
    forget: Vec<PathBuf>,
}

/// `loop clean`. `here`: the loop of `--file`, cleaned too when it is there.
///
/// # Errors
/// When something to remove cannot be removed (what was removed before is said).
pub(crate) fn clean(
    here: &Path,
    force: bool,
    keep: usize,
    all_projects: bool,
) -> crate::error::Result<Status> {
    let (files, gone) = super::loops::gather(here);
    // One project's clean-up never touches another's: the loops of this project (the one
    // `--file` finds here, else those under the current directory), unless asked for all.
    let scope = (!all_projects).then(|| super::loops::project_of(here));
    let (files, gone) = match &scope {
        Some(project) => (
            super::loops::within(files, project),
            super::loops::within(gone, project),
        ),
        None => (files, gone),
    };
    if let Some(project) = &scope {
        crate::outln!(
            "the loops of {} (`loop clean --all-projects`: every loop of yours)",
            super::loops::shown(project)
        );
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for f in &files {
        // A step's own loop is cleaned with its parent's.
        if super::loops::see(f, false).is_none() {
            continue;
        }
        let d = Layout::of(f).state_dir().to_path_buf();
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let mut plan = Plan {
        forget: gone,
        ..Plan::default()
    };
    for d in &dirs {
        plan_dir(d, &files, keep, &mut plan);
    }
    let verb = if force { "Removing" } else { "Would remove" };
    let mut freed = 0;
    for r in &plan.remove {
        crate::outln!("{verb} {} ({})", super::loops::shown(&r.path), r.what);
        if force {
            remove(&r.path)
                .map_err(|e| anyhow::anyhow!("while removing {}: {e}", r.path.display()))?;
        }
        freed += r.bytes;
    }
    for (p, why) in &plan.keep {
        crate::outln!(
            "{} {} ({why})",
            if force { "Keeping" } else { "Would keep" },
            super::loops::shown(p)
        );
    }
    for p in &plan.forget {
        crate::outln!(
            "{} {} (its M1.md is no longer there)",
            if force { "Forgetting" } else { "Would forget" },
            super::loops::shown(p)
        );
    }
    if force && !plan.forget.is_empty() {
        crate::runner::known::forget(&plan.forget)?;
    }
    let n = plan.remove.len();
    let said = match (n, force) {
        (0, _) => format!(
            "nothing to remove: {} loop director{} looked at; each keeps its loop and its {keep} \
             newest archive(s)",
            dirs.len(),
            if dirs.len() == 1 { "y" } else { "ies" }
        ),
        (_, true) => format!("removed {n} path(s), {}", approx(freed)),
        (_, false) => format!(
            "{n} path(s), {}; `loop clean -f` removes them",
            approx(freed)
        ),
    };
    crate::outln!("{said}");
    Ok(Status::Ok)
}

/// A size as a person reads it: `812 bytes`, `43.3 KiB`, `12.3 MiB`.
#[expect(
    clippy::cast_precision_loss,
    reason = "a size to read, to a tenth of its unit"
)]
fn approx(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    match bytes {
        0..KIB => format!("{bytes} bytes"),
        KIB..MIB => format!("{:.1} KiB", bytes as f64 / KIB as f64),
        _ => format!("{:.1} MiB", bytes as f64 / MIB as f64),
    }
}

/// The `LOOP_ID` of the loop file `p`: from the file as read, else from its `LOOP_ID:` line
/// (a file a person is editing may not read whole). `Err` when it says neither: whose tasks are
/// whose cannot be told then.
fn loop_id_in(p: &Path) -> Result<Option<String>, ()> {
    if let Ok(d) = crate::m1::load(p) {
        return Ok(d.view().loop_id);
    }
    let text = std::fs::read_to_string(p).map_err(drop)?;
    text.lines()
        .find_map(|l| l.strip_prefix("LOOP_ID:"))
        .and_then(|v| v.split_whitespace().next())
        .map(|id| Some(id.to_owned()))
        .ok_or(())
}

/// The loops of the state directory `dir`: every `.md` there that is no archive of another,
/// and every loop `files` names there (whatever its name). The ids of those and of the newest
/// `keep` archives of each, which are kept whole; the archives beyond them. `Err` with the
/// file whose loop cannot be told (then nothing of `dir` is removed).
fn loops_in(
    dir: &Path,
    files: &[PathBuf],
    keep: usize,
) -> Result<(Vec<String>, Vec<PathBuf>), PathBuf> {
    let names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let is_archive = |n: &str| {
        names
            .iter()
            .any(|o| o != n && crate::layout::is_archive_of(o, n))
    };
    let known: Vec<&PathBuf> = files
        .iter()
        .filter(|f| Layout::of(f).state_dir() == dir)
        .collect();
    let mut current: Vec<PathBuf> = known.iter().map(|f| (*f).clone()).collect();
    for n in &names {
        let p = dir.join(n);
        if Path::new(n).extension().is_some_and(|x| x == "md")
            && !is_archive(n)
            && !current.contains(&p)
        {
            current.push(p);
        }
    }
    let mut kept: Vec<String> = Vec::new();
    let mut old: Vec<PathBuf> = Vec::new();
    for c in &current {
        match loop_id_in(c) {
            Ok(id) => kept.extend(id),
            // A `.md` of the project's, not a loop: no archive, no task is its.
            Err(()) if !known.contains(&c) => continue,
            Err(()) => return Err(c.clone()),
        }
        for (i, a) in super::loops::archives_of(c).into_iter().enumerate() {
            if i < keep {
                kept.extend(loop_id_in(&a).map_err(|()| a.clone())?);
            } else {
                old.push(a);
            }
        }
    }
    Ok((kept, old))
}

/// What to remove in the state directory `dir`: archives beyond the kept ones, then what the
/// loops that are not kept left.
fn plan_dir(dir: &Path, files: &[PathBuf], keep: usize, plan: &mut Plan) {
    let (kept, old) = match loops_in(dir, files, keep) {
        Ok(found) => found,
        Err(unread) => {
            plan.keep.push((
                dir.to_path_buf(),
                format!(
                    "which loop its files are of cannot be told: {} cannot be read; fix it, \
                     then `loop clean` again",
                    super::loops::shown(&unread)
                ),
            ));
            return;
        }
    };
    for a in old {
        let what = crate::m1::load(&a).map_or_else(
            |_| "an archived loop".into(),
            |d| {
                let m = d.view();
                format!(
                    "an archived loop, {}: {}",
                    m.status.as_str(),
                    crate::text::one_line(&m.goal, 60)
                )
            },
        );
        plan.remove.push(Removal {
            bytes: size(&a),
            path: a,
            what,
        });
    }
    let busy = plan_tasks(dir, &kept, plan);
    plan_leftovers(dir, &kept, &busy, plan);
    plan_temporaries(dir, plan);
}

/// The temporary copies of a loop file or of its journal (`.M1.md.PID.N.tmp`,
/// `.M1.md.versions.PID.tmp`) whose writer died before it renamed them (a `kill -9` mid-write): whole or not, never read again. A file
/// of a process still alive is being written now, and is left.
fn plan_temporaries(dir: &Path, plan: &mut Plan) {
    for name in read_names(dir) {
        let Some(pid) = crate::m1::temporary_writer(&name) else {
            continue;
        };
        let alive = i32::try_from(pid)
            .ok()
            .and_then(crate::bridge::procfs::stat)
            .is_some_and(|s| s.is_running());
        if alive {
            continue;
        }
        let path = dir.join(&name);
        plan.remove.push(Removal {
            bytes: size(&path),
            what: format!(
                "a temporary copy of a loop file or of its journal, left by process {pid}, \
                 which died before it renamed it"
            ),
            path,
        });
    }
}

/// The task directories (with their `VERIFY` output and review notes) of the loops of `dir`
/// that are not `kept`, but for those that still run. The loops of those, which are busy.
fn plan_tasks(dir: &Path, kept: &[String], plan: &mut Plan) -> Vec<String> {
    let layout = Layout::dir(dir);
    let tasks = layout.tasks();
    let mut busy: Vec<String> = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&tasks)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !name_of(p).starts_with('.') && !name_of(p).ends_with(".verify"))
        .collect();
    entries.sort();
    for task in entries {
        let Some(id) = crate::runner::ledger::loop_of_task(&task) else {
            continue;
        };
        if kept.contains(&id) {
            continue;
        }
        let name = name_of(&task);
        let running = crate::bridge::check(dir, &name)
            .is_ok_and(|r| r.state == crate::bridge::TaskState::Running);
        if running {
            plan.keep
                .push((task, format!("a task of loop {id} that still runs")));
            busy.push(id);
            continue;
        }
        for companion in [
            tasks.join(format!("{name}.verify")),
            layout.review_tree(&name),
        ] {
            if companion.exists() {
                plan.remove.push(Removal {
                    bytes: size(&companion),
                    what: format!("beside a task of loop {id}, which is finished"),
                    path: companion,
                });
            }
        }
        plan.remove.push(Removal {
            bytes: size(&task),
            what: format!("a task of loop {id}, which is finished"),
            path: task,
        });
    }
    busy
}

/// What else the loops of `dir` that are neither `kept` nor `busy` kept under their id: their
/// task ledger, their steps at once, their commits' notes.
fn plan_leftovers(dir: &Path, kept: &[String], busy: &[String], plan: &mut Plan) {
    let finished = |id: &str| !kept.iter().chain(busy).any(|k| k == id);
    let ledger = Layout::dir(dir).tasks().join(".ledger");
    for entry in read_names(&ledger) {
        if let Some(id) = entry.strip_suffix(".jsonl")
            && finished(id)
        {
            let p = ledger.join(&entry);
            plan.remove.push(Removal {
                bytes: size(&p),
                what: format!("the task ledger of loop {id}, which is finished"),
                path: p,
            });
        }
    }
    for (root, what) in [
        (
            dir.join("parallel"),
            "what the steps at once of loop {} left",
        ),
        (dir.join("commits"), "the commit notes of loop {}"),
    ] {
        for id in read_names(&root) {
            if finished(&id) {
                sweep(&root.join(&id), &what.replace("{}", &id), plan);
            }
        }
    }
}

/// Plans the removal of `dir` and all in it, but the git worktrees in it (a directory with a
/// `.git` file), which are kept: one may hold work no branch has.
fn sweep(dir: &Path, what: &str, plan: &mut Plan) {
    if runner_in(dir) {
        plan.keep.push((
            dir.to_path_buf(),
            format!("{what}: a runner drives a loop in it"),
        ));
        return;
    }
    if !holds_worktree(dir) {
        plan.remove.push(Removal {
            bytes: size(dir),
            what: what.to_owned(),
            path: dir.to_path_buf(),
        });
        return;
    }
    if dir.join(".git").is_file() {
        plan.keep.push((
            dir.to_path_buf(),
            format!(
                "a git worktree of {what}: `git worktree remove` it once you know it holds \
                 nothing you need"
            ),
        ));
        return;
    }
    let mut inside: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    inside.sort();
    for p in inside {
        if p.is_dir() && !p.is_symlink() {
            sweep(&p, what, plan);
        } else {
            plan.remove.push(Removal {
                bytes: size(&p),
                what: what.to_owned(),
                path: p,
            });
        }
    }
}

/// Whether a runner holds the lock of a loop in `dir` (a step's own loop, which its parent's
/// runner left running).
fn runner_in(dir: &Path) -> bool {
    any_file_below(dir, &|p| {
        name_of(p).ends_with(".md.lock") && crate::lockfile::is_held(p).unwrap_or(true)
    })
}

/// Whether a git worktree (a directory with a `.git` file) is in `dir`, or is `dir`.
fn holds_worktree(dir: &Path) -> bool {
    any_file_below(dir, &|p| name_of(p) == ".git" && p.is_file())
}

/// Whether `is` holds for anything below `dir` but a directory, which is looked into (not
/// through a link).
fn any_file_below(dir: &Path, is: &dyn Fn(&Path) -> bool) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                any_file_below(&p, is)
            } else {
                is(&p)
            }
        })
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The bytes of `p` and all in it (symbolic links not followed).
fn size(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| size(&e.path()))
        .sum()
}

fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
