//! Reading msMemScope inputs into rows: the dump's CSV records (`records`) and columns (`csv`,
//! parsed on every core by `csv::parallel`), SQLite dumps (`db`), the Attr cell and the owner
//! string (`attr`, `owner`), the row builder of `events` batches (`events`), the counts of
//! `event_counts` taken as rows are parsed (`counts`) and an output folder's companion files
//! (`companions`). What is read goes to the source's staging ([`crate::staging`]).

pub mod attr;
pub mod companions;
pub mod counts;
pub mod csv;
pub mod db;
pub mod events;
pub mod owner;
pub mod records;
