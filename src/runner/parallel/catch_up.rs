//! A step's loop goes on from what the loop that runs it has merged so far. A step whose
//! VERIFY checks the whole project failed on its stale base (another step's fix not there yet)
//! and retried on that same base; now each attempt of a step's loop first takes the
//! integration head into its worktree: its own work so far committed on its branch, then the
//! integration head merged in. A conflict is left to the merge queue, as before: the merge is
//! undone, and the step goes on from its own base. And a step's loop whose runner ends
//! revives the loop that runs it, should that loop's runner have died meanwhile.

use std::path::Path;

use super::at_once::AtOnce;
use super::git;
use crate::m1::M1;
use crate::runner::revive;
use crate::runner::voice::Voice;

impl AtOnce {
    /// Before an attempt of step `step` of this loop, when it runs one step of another loop
    /// (`PARENT`): that loop's integration head, merged into this worktree where it is not
    /// there yet. What it did is said; what it could not do is said and goes no further.
    pub(in crate::runner) fn catch_up_with_parent(&self, m: &M1, step: u32, voice: &Voice) {
        let Some(parent) = m.parent.as_deref() else {
            return;
        };
        let Some(integration) = crate::m1::load(Path::new(parent))
            .ok()
            .and_then(|d| d.view().parallel.branch)
        else {
            return;
        };
        let wt = self.workdir.as_path();
        let (Some(head), Some(merged)) = (
            git::commit_of(wt, "HEAD"),
            git::commit_of(wt, &format!("refs/heads/{integration}")),
        ) else {
            return;
        };
        // A merge under way is the agent's to finish: the merge queue sent the step back with
        // its conflicts in the files.
        if git::run(wt, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).is_ok() {
            return;
        }
        if git::is_ancestor(wt, &merged, &head) {
            return;
        }
        let n = m.parent_step.unwrap_or(step);
        if let Err(why) = git::commit_all(
            wt,
            &format!("loop: step {n}: its work so far, before what the loop has merged"),
        ) {
            voice.say(&format!(
                "parallel: step {n} goes on from its own base: its work so far could not be \
                 committed before the loop's merged work is taken in ({why})"
            ));
            return;
        }
        match git::run_as_author(wt, &["merge", "--no-ff", "--no-edit", "-q", &integration]) {
            Ok(_) => voice.say(&format!(
                "parallel: step {n} goes on from what the loop has merged so far ({} at {}), \
                 its own work kept",
                integration,
                git::short(&merged)
            )),
            Err(why) => {
                let _ = git::run(wt, &["merge", "--abort"]);
                voice.say(&format!(
                    "parallel: step {n} goes on from its own base: what the loop has merged so \
                     far ({integration}) conflicts with its work, which the merge queue meets \
                     when the step is done ({})",
                    crate::text::one_line(&why.to_string(), 200)
                ));
            }
        }
    }

    /// This loop runs one step of a parallel loop (`PARENT`, in `m`) and its runner is about
    /// to end: the parallel loop, should its runner have died meanwhile, comes back to merge
    /// this step (as a step's supervisor revives a runner that died while it ran).
    pub(in crate::runner) fn revive_parent(&self, m: &M1, voice: &Voice) {
        let Some(parent) = m.parent.clone() else {
            return;
        };
        if !revive::by_steps() {
            return;
        }
        let by = format!("the loop of one of its steps ({})", self.file.display());
        if let Err(e) = revive::revive(Path::new(&parent), &by) {
            voice.say(&format!(
                "revive: the parallel loop {parent} could not be revived: {e}"
            ));
        }
    }
}
