//! Turning results into text for people and machines.

pub mod filefrag;
pub mod scan;
pub mod watch;
