//! The text of an msMemScope dump into rows: [`records`] splits a CSV into records the way
//! the tool writes them, [`attr`] and [`owner`] read the Attr cell and the owner string,
//! [`events`] builds `events` rows and batches, and [`counts`] counts them into
//! `event_counts` as they are parsed. Nothing here reads a file or writes one.

pub mod attr;
pub mod counts;
pub mod events;
pub mod owner;
pub mod records;
