//! M1.md: the lossless state document, its typed view, edits, validation and saving.
//!
//! The file is people's as much as the runner's, so it is kept as its lines: parsing then
//! rendering gives the same bytes, and an edit rewrites only the lines it is about.

mod document;
mod edit;
mod error;
pub(crate) mod gates;
mod hidden;
mod journal;
pub(crate) mod keys;
mod line;
mod merge;
pub(crate) mod settings;
mod source;
mod steps;
mod store;
mod swap;
mod syntax;
pub(crate) mod typed;
mod validate;
pub mod value;
mod view;

pub use document::Document;
pub use edit::Edit;
pub use error::{Error, Errors};
pub use gates::{Gate, GateKind, GateState};
pub use keys::Review;
pub(crate) use merge::changes;
pub use settings::PermissionMode;
pub(crate) use source::{MAX_BYTES, load};
pub use store::{Store, StoreError};
pub(crate) use view::Step;
pub use view::{M1, Status, StepResult, StepState};
