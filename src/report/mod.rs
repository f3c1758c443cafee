//! Turning results into text for people and machines.

pub mod filefrag;
pub mod free;
pub mod scan;
