//! The readers of msMemScope inputs: a dump CSV (`csv`, parsed on every core by
//! `csv::parallel`), a SQLite dump (`db`) and an output folder's companion files
//! (`companions`). Each turns its input into rows with [`crate::parse`] and hands them to the
//! source's staging ([`crate::staging`]).

pub mod companions;
pub mod csv;
pub mod db;
