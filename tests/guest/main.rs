//! F2FS for real in a qemu guest (scripts/f2fs-guest); needs root to build and boot the guest.
//! One test binary per kind of test (each module was its own binary before): Cargo
//! links three binaries instead of one per file.

#[path = "../shared/mod.rs"]
mod common;

mod f2fs_guest;
