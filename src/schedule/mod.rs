//! Loops started at a time: the schedules a person adds (`loop schedule add`), the starts
//! queued with `loop start --at`, and how `loop daemon` starts each due time once and only
//! once.
//!
//! The schedules file and its edits are in [`file`], the cron arithmetic in [`cron`], what is
//! due in [`due`] (pure), what became of each due time in [`ledger`], and the daemon's part,
//! which starts the loops, in [`daemon`].

pub mod at;
pub mod cron;
pub mod daemon;
pub mod due;
pub mod file;
pub mod ledger;
mod store;

pub use store::{Loaded, edit, ledger_path, load, lock_path, path};
