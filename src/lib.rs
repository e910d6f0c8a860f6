//! m1loop drives Claude Code autonomously toward a goal, one verified step at a time,
//! keeping all of its state in one human-editable Markdown file, `M1.md`.
//!
//! The binary `loop` is a thin wrapper around [`cli::main`].

// Output goes through `outln!`, `out!` and `errln!` (see [`output`]): `println!` panics when a
// pipe reader goes away, and a runner must outlive `loop start | head -1`.
#![warn(clippy::print_stdout, clippy::print_stderr)]
// What the library exports is what the binary, the tests, the benches and the soak use;
// everything else is pub(crate), so a reader knows that an item's users are in this crate.
#![warn(unreachable_pub)]

// Foundations: they use one another (paths come from `layout`, messages from `text`) and
// nothing above them; `architecture.rs` checks every layer's imports.
mod decision_log;
mod dirs;
mod duration;
mod error;
mod exit;
mod full_disk;
mod git;
pub mod layout;
mod lease;
mod lockfile;
pub mod loopback;
mod named_file;
mod output;
mod text;

// The state file: M1.md, lossless, typed, edited line by line, saved by compare-and-swap.
pub mod m1;

// The outside world: the agent CLIs (Claude Code first), supervised processes, the sandbox
// they run in, VERIFY, Telegram, the collector traces go to.
pub mod agent;
pub mod bridge;
pub mod notifier;
mod sandbox;
mod telemetry;
mod verify;

// Every decision of the loop, as pure functions over M1.md's typed view.
pub mod engine;

// The one owner of a loop's state: gathers facts, asks the engine, carries transitions out.
pub mod runner;

// Loops started at a time (`loop schedule`, `loop start --at`), each due time once.
pub mod schedule;

// What a loop did (`loop report`): a read-only view of its records, beside the runner, whose
// ledger it reads and which writes it when a loop ends.
mod report;

// The command line and the other front ends (`status`, the exec bridge, `notify`, the chat
// bot, `demo`).
pub mod cli;

#[cfg(test)]
mod architecture;
