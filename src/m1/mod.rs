//! M1.md: the lossless state document, its typed view, edits, validation and saving.
//!
//! The file is people's as much as the runner's, so it is kept as its lines: parsing then
//! rendering gives the same bytes, and an edit rewrites only the lines it is about.

/// An enum of upper-case words, as M1.md writes them: `as_str`, `ALL`, `FromStr` (an unknown
/// word says which were expected) and `Display`.
macro_rules! upper_enum {
    ($ty:ident, $what:literal, $($v:ident = $s:literal),+) => {
        impl $ty {
            /// The name as written in M1.md.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
            /// Every value, in the order the file's comment lists them.
            pub const ALL: &'static [$ty] = &[$($ty::$v),+];
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($ty::$v),)+
                    _ => Err(format!(
                        concat!("unknown ", $what, " `{}`: expected one of {}"),
                        s,
                        [$($s),+].join(", ")
                    )),
                }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod document;
mod edit;
mod error;
pub(crate) mod gates;
mod hidden;
mod journal;
pub mod keys;
mod line;
mod merge;
pub(crate) mod settings;
mod source;
pub(crate) mod steps;
mod store;
mod stored;
mod swap;
mod syntax;
pub(crate) mod typed;
mod validate;
pub mod value;
mod view;

pub use document::Document;
pub use edit::{Edit, KeyPath};
pub use error::{Error, Errors};
pub use gates::{Gate, GateKind, GateOption, GateState};
pub use keys::Review;
pub(crate) use merge::changes;
pub use settings::reference as settings_reference;
pub use settings::{AgentKind, PermissionMode, Reference as SettingReference, SandboxMode};
pub use source::WriterWait;
pub(crate) use source::{MAX_BYTES, load};
pub use store::{Store, StoreError};
pub(crate) use stored::StoredEdit;
pub(crate) use swap::temporary_writer;
pub(crate) use view::Step;
pub use view::{M1, Parallel, ParallelRun, Status, StepResult, StepState};
