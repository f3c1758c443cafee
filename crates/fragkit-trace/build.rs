//! Compiles the eBPF programs in src/bpf/ with clang and generates their libbpf-rs
//! skeletons into OUT_DIR (included by src/loader.rs and src/block.rs).

// Without the `bpf` feature the attaching code is compiled out; the imports and helpers
// only it uses stay, unused, rather than being cfg-gated one by one.
#![cfg_attr(not(feature = "bpf"), allow(unused_imports, dead_code))]

use std::env;
use std::path::PathBuf;

#[cfg(feature = "bpf")]
use libbpf_cargo::SkeletonBuilder;

/// (source, skeleton file): the file-I/O tracer and the block-request tracer.
#[cfg(feature = "bpf")]
const PROGRAMS: [(&str, &str); 2] = [
    ("src/bpf/fileio.bpf.c", "fileio.skel.rs"),
    ("src/bpf/blockio.bpf.c", "blockio.skel.rs"),
];

#[cfg(not(feature = "bpf"))]
fn main() {}

#[cfg(feature = "bpf")]
fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    for (src, skel) in PROGRAMS {
        SkeletonBuilder::new()
            .source(src)
            // -mcpu=v3: atomic OR on map values (fileio's pid bitmap); kernel 5.12 or later.
            .clang_args(["-O2", "-g", "-Wall", "-mcpu=v3", "-Isrc/bpf"])
            .build_and_generate(out.join(skel))
            .unwrap_or_else(|e| {
                panic!("building {src} (needs clang; run scripts/install-deps): {e:#}")
            });
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/kernel.h");
}
