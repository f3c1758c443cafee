//! A trace-driven SSD model: why fragmentation costs time on flash.
//!
//! FAST'24 ("We Ain't Afraid of No File Fragmentation") showed that on modern SSDs the
//! cost of a fragmented file is mostly die-level collisions: a conventional FTL stripes
//! writes across dies in write order (g bytes per die, stripe S = g × dies), so a file
//! written between other data can have consecutive chunks on one die, and reading it
//! serialises on that die. This module replays a recorded block trace (`trace`) on such a
//! device (`params`, `model`): writes build the mapping, reads are timed.
//!
//! Not modelled: garbage collection, write-buffer capacity, read caching, read disturb,
//! wear, multi-plane operations, LSB/MSB latency spread (the mean is used).

pub mod layout;
pub mod model;
pub mod params;
pub(crate) mod replay;
pub mod trace;

pub use model::{Placement, Report, Ssd};
pub use params::Params;
pub use trace::{BlockTrace, Op, Request};
