//! msMemScope dumps: CSV and SQLite dumps, output folders and their companion files.

pub mod companions;
pub mod csv_dump;
pub mod db_dump;
pub mod derive;
pub mod events;
pub mod output;
pub mod records;
pub mod rejects;
pub mod schema;
