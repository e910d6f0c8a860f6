//! m1loop drives Claude Code autonomously toward a goal, one verified step at a time,
//! keeping all of its state in one human-editable Markdown file, `M1.md`.
//!
//! The binary `loop` is a thin wrapper around [`cli::main`].

pub mod agent;
pub mod bridge;
pub mod cli;
pub mod decision_log;
pub mod demo;
pub mod duration;
pub mod engine;
pub mod exit;
pub mod git;
pub mod lock;
pub mod m1;
pub mod notifier;
pub mod plan_import;
pub mod prompt;
pub mod runner;
pub mod settings;
pub mod stopfile;
pub mod verify;
pub mod watch;
