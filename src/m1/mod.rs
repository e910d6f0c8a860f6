//! M1.md: the lossless state document, its typed view, edits, validation and saving.

pub mod commands;
