//! One error type for the whole program. Every error that comes from input names the file, the
//! place in it (line or byte offset) and the reason, in the style of ripgrep's messages.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in an input file something went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Line(u64),
    ByteOffset(u64),
    None,
}

#[derive(Debug)]
pub enum MemqError {
    /// Unreadable or malformed input: exit code 2.
    Input {
        path: PathBuf,
        location: Location,
        reason: String,
    },
    /// Bad command-line usage: exit code 2.
    Usage(String),
    /// A query or runtime failure: exit code 1.
    Query(String),
}

pub type Result<T, E = MemqError> = std::result::Result<T, E>;

impl MemqError {
    pub fn input(path: &Path, location: Location, reason: impl Into<String>) -> Self {
        MemqError::Input {
            path: path.to_path_buf(),
            location,
            reason: reason.into(),
        }
    }

    pub fn io(path: &Path, err: std::io::Error) -> Self {
        MemqError::input(path, Location::None, err.to_string())
    }

    pub fn query(reason: impl fmt::Display) -> Self {
        MemqError::Query(reason.to_string())
    }

    /// The process exit code for this error (README.md, "Commands").
    pub fn exit_code(&self) -> i32 {
        match self {
            MemqError::Input { .. } | MemqError::Usage(_) => 2,
            MemqError::Query(_) => 1,
        }
    }
}

impl fmt::Display for MemqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemqError::Input {
                path,
                location,
                reason,
            } => {
                write!(f, "{}", path.display())?;
                match location {
                    Location::Line(n) => write!(f, ":{n}")?,
                    Location::ByteOffset(n) => write!(f, ": byte offset {n}")?,
                    Location::None => {}
                }
                write!(f, ": {reason}")
            }
            MemqError::Usage(msg) => write!(f, "{msg}"),
            MemqError::Query(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for MemqError {}

impl From<datafusion::error::DataFusionError> for MemqError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        MemqError::Query(e.to_string())
    }
}

impl From<datafusion::arrow::error::ArrowError> for MemqError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        MemqError::Query(e.to_string())
    }
}
