//! A rotational (hard-disk) model: what fragmentation costs a disk.
//!
//! On a disk a fragmented file costs a seek and a rotational wait per piece, milliseconds
//! each, against a transfer of a few ms per MiB; and where data sits matters, since the
//! outer tracks move twice the bytes per revolution of the inner ones. This module prices
//! requests on a Seagate Constellation ES.3 4 TB 7200 rpm nearline drive (the
//! ST4000NM0033 class Seagate's Populate-and-Fragment study ran on, behind ClusterStor):
//! parameters and their sources in `params`, the replay of `ssd::Request` traces in
//! `model`, and a file's reads and writes from its FIEMAP in `layout`.
//!
//! Writes are write-through (no write-back cache): a write completes once on the
//! platter, and a sequential write issued after the previous one completed waits most of
//! a revolution for its first sector; reads get the drive's read look-ahead. That is the
//! model's whole reason why writes cost more than reads.
//!
//! Not modelled: command overhead, interface transfer time, NCQ reordering, head and
//! cylinder switches and skew (inside the sustained rate), defects and spare sectors, a
//! write-back cache, buffer segmentation, and the seek curve of this very drive (its shape
//! is Ruemmler & Wilkes' HP 97560, scaled to the ES.3's average seek). See docs/hdd.md.

pub mod layout;
pub mod model;
pub mod params;

pub use layout::ModeledIo;
pub use model::{Hdd, Report};
pub use params::Params;
