//! Tests that need neither root nor a device: the parsers under fuzzing and the Debian package.
//! One test binary per kind of test (each module was its own binary before): Cargo
//! links three binaries instead of one per file.

mod fuzz;
mod fuzz_commands;
mod package;
