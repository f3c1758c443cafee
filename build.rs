//! Compiles the eBPF program src/trace/bpf/fileio.bpf.c with clang and generates its
//! libbpf-rs skeleton into OUT_DIR (included by src/trace/loader.rs).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/trace/bpf/fileio.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-O2", "-g", "-Wall", "-Isrc/trace/bpf"])
        .build_and_generate(out.join("fileio.skel.rs"))
        .unwrap_or_else(|e| {
            panic!("building {SRC} (needs clang; run scripts/install-deps): {e:#}")
        });
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=src/trace/bpf/kernel.h");
}
