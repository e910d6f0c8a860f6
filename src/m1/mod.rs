//! M1.md: the lossless state document, its typed view, edits, validation and saving.
//!
//! The file is people's as much as the runner's, so it is kept as its lines: parsing then
//! rendering gives the same bytes, and an edit rewrites only the lines it is about.

mod document;
mod edit;
mod error;
mod hidden;
mod journal;
pub mod keys;
mod line;
mod merge;
pub mod setting;
pub mod settings;
mod source;
mod steps;
mod store;
mod swap;
mod syntax;
mod validate;
pub mod value;
mod view;

pub use document::Document;
pub use edit::Edit;
pub use error::{Error, Errors};
pub use merge::{Restored, changes};
pub use source::{MAX_BYTES, load};
pub use store::{ConflictMerged, Store, StoreError};
pub use view::{AgentKeys, Current, Limits, M1, Plan, Status, Step, StepResult, StepState};
