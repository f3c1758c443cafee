//! The process's standard error as a diagnostic channel that never panics.
//!
//! `eprintln!` panics when stderr is closed (`fragkit scan x 2>&- `, or a pipe whose reader
//! went away): a warning must never end a command half-way through a defrag or leave a
//! scratch file system behind. [`stderr_line!`] writes the line if it can and otherwise
//! drops it; the command goes on and ends with its own status.

/// `eprintln!` without the panic: one line to stderr, lost if stderr is closed.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
