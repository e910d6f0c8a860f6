//! The attacks of an untrusted agent on the person it runs for, run from outside against the
//! built `loop` with the simulated agent: for each, a line saying whether it was blocked. The
//! agent follows a poisoned prompt and works inside the sandbox; what is tried is what the
//! loop itself does afterwards, outside the sandbox, with what the agent left behind (git
//! hooks and config, links, planted records, control sequences), and what a confined run
//! can reach as root. docs/09-sandbox.md says how each is met.
//!
//! Run: `cargo build --release && cargo run --release --example redteam`
//! (`--keep` keeps the directories of attacks that were not blocked). Exits 1 when any attack
//! got through; an attack that cannot be tried here (no bubblewrap, not root) says why.

#[path = "redteam/backend_state.rs"]
mod backend_state;
#[path = "common/mod.rs"]
mod common;
#[path = "redteam/lab.rs"]
mod lab;
#[path = "redteam/root.rs"]
mod root;
#[path = "redteam/seams.rs"]
mod seams;
#[path = "redteam/text.rs"]
mod text;

use lab::Verdict;

/// One attack: its name, and how it is tried in a fresh lab.
#[derive(Debug)]
pub struct Attack {
    pub name: &'static str,
    pub run: fn(&lab::Lab) -> Verdict,
}

/// Every attack, a module of `redteam/` per seam.
fn attacks() -> Vec<Attack> {
    let mut all: Vec<Attack> = Vec::new();
    all.extend(seams::attacks());
    all.extend(text::attacks());
    all.extend(root::attacks());
    all.extend(backend_state::attacks());
    all
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keep = args.iter().any(|a| a == "--keep");
    let (mut blocked, mut leaked, mut untried) = (0, 0, 0);
    for a in attacks() {
        let mut lab = lab::Lab::new(a.name);
        let verdict = (a.run)(&lab);
        let line = match &verdict {
            Verdict::Blocked(how) => {
                blocked += 1;
                format!("blocked      {}: {how}", a.name)
            }
            Verdict::Leaked(what) => {
                leaked += 1;
                format!("NOT BLOCKED  {}: {what}", a.name)
            }
            Verdict::Untried(why) => {
                untried += 1;
                format!("not tried    {}: {why}", a.name)
            }
        };
        println!("{line}");
        if keep && matches!(verdict, Verdict::Leaked(_)) {
            println!("             kept: {}", lab.keep().display());
        }
    }
    println!("attacks: {blocked} blocked, {leaked} not blocked, {untried} not tried here");
    if leaked > 0 {
        std::process::exit(1);
    }
}
