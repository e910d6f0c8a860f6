//! m1loop drives Claude Code autonomously toward a goal, one verified step at a time,
//! keeping all of its state in one human-editable Markdown file, `M1.md`.
//!
//! The binary `loop` is a thin wrapper around [`cli::main`].

// Output goes through `outln!`, `out!` and `errln!` (see [`output`]): `println!` panics when a
// pipe reader goes away, and a runner must outlive `loop start | head -1`.
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod bridge;
pub mod cli;
pub mod decision_log;
pub mod demo;
pub mod dirs;
pub mod duration;
pub mod engine;
pub mod exit;
pub mod git;
pub mod layout;
pub mod lock;
pub mod lockfile;
pub mod m1;
pub mod notifier;
pub mod output;
pub mod plan_import;
pub mod prompt;
pub mod registry;
pub mod runner;
pub mod settings;
pub mod stopfile;
pub mod verify;
pub mod watch;
