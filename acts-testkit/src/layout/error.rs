//! What can stop the layout check from reading a crate.
//!
//! May use: nothing of the room.

use std::path::PathBuf;

/// A crate whose sources cannot be read as Rust.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A source file (or a module's file) could not be read.
    #[error("{}: cannot read it: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A source file is not valid Rust.
    #[error("{}:{line}: not valid Rust: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped.
        line: usize,
        /// What it said.
        message: String,
    },
    /// The folder has no `lib.rs` or `main.rs`.
    #[error("{}: no lib.rs or main.rs", .0.display())]
    NoRoot(PathBuf),
}
