//! memq on a Ballista cluster.
