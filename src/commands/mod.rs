//! The commands whose work is more than a call of the library API (`crate::cli` parses the
//! arguments and dispatches here).

pub mod export;
pub mod report;
pub mod sql;
